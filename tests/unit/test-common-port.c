/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of the MASTER_PORT choice: range, determinism and the absence
 * of collisions between concurrent steps and nearby jobs. */
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "port.h"
#include "tap.h"

int
main(void)
{
	static unsigned char used[65536];
	unsigned long job, step;
	int ok = 1, collide = 0;
	long p;

	tap_ok(ddp_port_choose(1234, 0, 29400, 29999) ==
		       ddp_port_choose(1234, 0, 29400, 29999),
	       "deterministic");
	for (job = 0; job < 5000 && ok; job += 7)
		for (step = 0; step < 40; step++) {
			p = ddp_port_choose(job, step, 29400, 29999);
			if (p < 29400 || p > 29999)
				ok = 0;
		}
	tap_ok(ok, "always inside the range");
	p = ddp_port_choose(0xffffffffUL, 0xfffffffbUL, 29400, 29999);
	tap_ok(p >= 29400 && p <= 29999, "huge ids do not overflow");
	/* 37 consecutive jobs with 16 concurrent steps each: all distinct. */
	memset(used, 0, sizeof(used));
	for (job = 1000; job < 1037; job++)
		for (step = 0; step < DDP_PORT_STRIDE; step++) {
			p = ddp_port_choose(job, step, 29400, 29999);
			if (used[p])
				collide = 1;
			used[p] = 1;
		}
	tap_ok(!collide, "nearby jobs and concurrent steps get distinct ports");
	tap_ok(ddp_port_choose(5, 0, 29400, 29400) == 29400,
	       "one-port range works");
	tap_ok(ddp_port_choose(5, 1, 100, 110) !=
		       ddp_port_choose(5, 0, 100, 110),
	       "small range still separates steps");
	tap_ok(ddp_port_choose(1, 0, 0, 10) < 0, "port 0 refused");
	tap_ok(ddp_port_choose(1, 0, 10, 9) < 0, "empty range refused");
	tap_ok(ddp_port_choose(1, 0, 65000, 65536) < 0, "beyond 65535 refused");
	tap_ok(ddp_port_parse("29500") == 29500, "port parses");
	tap_ok(ddp_port_parse("99999") < 0, "99999 refused");
	tap_ok(ddp_port_parse("0") < 0, "0 refused");
	tap_ok(ddp_port_parse("+80") < 0 && ddp_port_parse("-1") < 0,
	       "signs refused");
	tap_ok(ddp_port_parse("80x") < 0 && ddp_port_parse("") < 0 &&
		       ddp_port_parse(NULL) < 0,
	       "garbage refused");
	tap_ok(ddp_port_overlaps(29400, 29999, 32768, 60999) == 0,
	       "default range is outside Linux's ephemeral range");
	tap_ok(ddp_port_overlaps(40000, 40100, 32768, 60999) == 1,
	       "range inside the ephemeral range detected");
	tap_ok(ddp_port_overlaps(30000, 32768, 32768, 60999) == 1,
	       "touching the ephemeral range detected");
	{
		struct sockaddr_in sa = {.sin_family = AF_INET};
		socklen_t len = sizeof(sa);
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		if (fd >= 0 &&
		    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
		    listen(fd, 1) == 0 &&
		    getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
			tap_ok(ddp_port_probe(ntohs(sa.sin_port)) == 0,
			       "probe sees a listening port as in use");
		else
			tap_ok(1, "# skip no socket to probe against");
		if (fd >= 0)
			close(fd);
	}
	return tap_done();
}
