/* SPDX-License-Identifier: BSD-3-Clause */
/* libFuzzer target: --ddp-* option values, plugstack key=value arguments
 * (config= excluded: it reads files) and srun command lines. The input is
 * split into words at NUL bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *
no_env(const char *name)
{
	(void)name;
	return NULL;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const names[] = {
		"ddp",	       "ddp-port",	 "ddp-bind",
		"ddp-verbose", "ddp-restart-on", "ddp-stop-before"};
	struct ddp_opts o = {0, 0, -1, 0, -1, 0, 0, ""};
	struct ddp_srun_req req;
	struct ddp_conf conf;
	char *buf, *argv[65], err[DDP_ERR_LEN], topo[256];
	int argc = 0, i, nkv = 0;
	char *kv[64];
	size_t p = 0;
	long per;

	if (size > 8192)
		return 0;
	buf = malloc(size + 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';
	while (p <= size && argc < 64) {
		argv[argc++] = buf + p;
		p += strlen(buf + p) + 1;
	}
	argv[argc] = NULL;
	for (i = 0; i < argc; i++) {
		ddp_opts_apply(&o, names[i % 6], argv[i], err, sizeof(err));
		if (strncmp(argv[i], "config=", 7) != 0)
			kv[nkv++] = argv[i];
	}
	ddp_plugstack_parse(&conf, topo, sizeof(topo), nkv, kv, err,
			    sizeof(err));
	if (ddp_srun_scan(argc, argv, no_env, &req, err, sizeof(err)) == 0)
		ddp_srun_decide(&req, &per, err, sizeof(err));
	if (o.port < 0 || o.port > 65535)
		abort();
	free(buf);
	return 0;
}
