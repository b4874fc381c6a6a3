/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ddp_set_join_progress (ddp_tools.h): while rank 0 waits in
 * ddp_comm_init for a rank that starts late, it is told every interval
 * who has joined (the host of each rank that has, NULL for the late
 * one), and no more once every rank is there; a job whose ranks all
 * join within the first interval tells nothing; the other ranks are
 * never told.
 */
#include "ddp_tools.h"
#include "test-worker-rdv.h"

/* The late rank starts this long after the others; the interval. */
#define LATE_S 1.3
#define EVERY_S 0.4

static FILE *told_to;

static void
tell(void *arg, int world, const char *const *host)
{
	int r;

	(void)arg;
	fprintf(told_to, "TOLD world=%d", world);
	for (r = 0; r < world; r++)
		fprintf(told_to, " %s", host[r] ? host[r] : "-");
	fprintf(told_to, "\n");
}

/* arg: the rank that starts LATE_S late, or NULL for none. */
static int
late_rank(int rank, int size, int port, FILE *out, void *arg)
{
	struct ddp_config cfg;
	struct ddp_comm *c = NULL;
	enum ddp_status st;

	told_to = out;
	ddp_set_join_progress(tell, NULL, EVERY_S);
	if (arg && rank == *(const int *)arg)
		usleep((useconds_t)(LATE_S * 1e6));
	tw_cfg(&cfg, rank, size, port, 20);
	st = ddp_comm_init(&cfg, &c);
	fprintf(out, "STATUS %d\n", (int)st);
	ddp_set_join_progress(NULL, NULL, 0);
	ddp_comm_destroy(c);
	return st ? 3 : 0;
}

static int
count_lines(const char *out, const char *prefix)
{
	const char *p = out;
	int n = 0;

	while (p && (p = strstr(p, prefix)) != NULL) {
		n++;
		p++;
	}
	return n;
}

int
main(void)
{
	struct tw_rank rk[3];
	int late = 2, told, r, ok = 1;
	const char *last;

	if (tw_run_job(3, late_rank, &late, 30, rk) < 0)
		return tap_ok(0, "cannot start the job"), tap_done();
	for (r = 0; r < 3; r++)
		ok &= tw_exit(&rk[r]) == 0;
	tap_ok(ok, "the job with a late rank 2 joins");
	told = count_lines(rk[0].out, "TOLD ");
	tap_diag("rank 0: %s", rk[0].out);
	tap_ok(told >= 2 && told <= 8,
	       "rank 0 is told every %.1f s while rank 2 is %.1f s late: %d "
	       "times",
	       EVERY_S, LATE_S, told);
	last = strstr(rk[0].out, "TOLD ");
	tap_ok(last && strncmp(last, "TOLD world=3 ", 13) == 0 &&
		       strncmp(strchr(last, '\n') - 2, " -", 2) == 0 &&
		       !strstr(last, "TOLD world=3 - "),
	       "with the world, rank 0's and 1's hosts and none for rank 2");
	tap_ok(count_lines(rk[0].out, " -\n") == told,
	       "never once rank 2 has joined");
	tap_ok(!strstr(rk[1].out, "TOLD") && !strstr(rk[2].out, "TOLD"),
	       "the other ranks are never told");
	tw_free_job(3, rk);

	if (tw_run_job(3, late_rank, NULL, 30, rk) < 0)
		return tap_ok(0, "cannot start the job"), tap_done();
	tap_ok(tw_exit(&rk[0]) == 0 && !strstr(rk[0].out, "TOLD"),
	       "every rank joins within the interval: nothing is told");
	tw_free_job(3, rk);
	return tap_done();
}
