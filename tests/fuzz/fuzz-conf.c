/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for the ddp.conf reader: the input is a whole file
 * (through a memfd) and, split at its first NUL, one key=value setting.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ddp_conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ddp_conf conf;
	char err[DDP_ERR_LEN], path[64], key[256], value[4096];
	const uint8_t *nul;
	size_t klen;
	int fd;

	ddp_conf_defaults(&conf);
	fd = memfd_create("fuzz-conf", MFD_CLOEXEC);
	if (fd < 0)
		return 0;
	if (write(fd, data, size) == (ssize_t)size &&
	    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd) <
		    (int)sizeof(path)) {
		if (ddp_conf_load(&conf, path, 0, err, sizeof(err)) < 0 &&
		    !memchr(err, '\0', sizeof(err)))
			__builtin_trap();
	}
	close(fd);

	nul = memchr(data, '\0', size);
	klen = nul ? (size_t)(nul - data) : size;
	if (klen < sizeof(key) && size - klen - (nul ? 1 : 0) < sizeof(value)) {
		memcpy(key, data, klen);
		key[klen] = '\0';
		memcpy(value, data + klen + (nul ? 1 : 0),
		       size - klen - (nul ? 1 : 0));
		value[size - klen - (nul ? 1 : 0)] = '\0';
		ddp_conf_defaults(&conf);
		if (ddp_conf_set(&conf, key, value, err, sizeof(err)) == 0 &&
		    (conf.port_min > conf.port_max ||
		     conf.n_shared_fstypes > DDP_CONF_MAX_FSTYPES))
			__builtin_trap();
	}
	return 0;
}
