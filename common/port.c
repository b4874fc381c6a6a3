/* SPDX-License-Identifier: BSD-3-Clause */
/* Deterministic rendezvous port choice inside the site's port_range, plus
 * an advisory bind probe for the master node. */
#include "port.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ddp_util.h"

long
ddp_port_choose(unsigned long job_id, unsigned long step_id, unsigned min,
		unsigned max)
{
	unsigned long size, stride, slot;

	if (min == 0 || max > 65535 || min > max)
		return -1;
	size = (unsigned long)max - min + 1;
	stride = size >= 2 * DDP_PORT_STRIDE ? DDP_PORT_STRIDE : 1;
	/* Reduce first: job_id * stride must not wrap around. */
	slot = ((job_id % size) * stride + step_id % size) % size;
	return (long)(min + slot);
}

long
ddp_port_parse(const char *s)
{
	long v;

	if (!s || *s == '+' || *s == '-' || ddp_parse_long(s, 1, 65535, &v) < 0)
		return -1;
	return v;
}

int
ddp_port_overlaps(unsigned min, unsigned max, unsigned eph_lo, unsigned eph_hi)
{
	return min <= eph_hi && eph_lo <= max;
}

int
ddp_port_probe(unsigned port)
{
	struct sockaddr_in sa;
	int fd, one = 1, rc = -1;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((unsigned short)port);
	sa.sin_addr.s_addr = htonl(INADDR_ANY);
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
		goto out;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		rc = 1;
	else if (errno == EADDRINUSE)
		rc = 0;
out:
	close(fd);
	return rc;
}
