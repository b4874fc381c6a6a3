/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The NCCL backend on a machine without a GPU: DDP_BACKEND=nccl fails
 * with "no usable GPU" (never a crash or hang) and auto picks TCP. With a
 * GPU it only checks that the backend is chosen; device buffers are the
 * GPU tier's (tests/gpu). A GPU device on which the backend fails is a
 * failure.
 */
#include <dlfcn.h>
#include <math.h>

#include "tap.h"
#include "test-worker-util.h"

#ifndef HAVE_NCCL_BUILD
#define HAVE_NCCL_BUILD 0
#endif

static int
nccl_rank(int rank, int size, int port, FILE *out, void *arg)
{
	struct ddp_config cfg;
	struct ddp_comm *c = NULL;
	enum ddp_status st;

	(void)arg;
	tw_cfg(&cfg, rank, size, port, 20);
	cfg.backend = DDP_BACKEND_NCCL;
	st = ddp_comm_init(&cfg, &c);
	fprintf(out, "STATUS %d %s\n", (int)st, st ? ddp_last_error() : "");
	ddp_comm_destroy(c);
	return 0;
}

int
main(void)
{
	struct ddp_config cfg;
	struct ddp_comm *c = NULL;
	struct tw_rank rk[2];
	enum ddp_status st;
	char reason[1024];
	int i, ok;

	signal(SIGPIPE, SIG_IGN);
	tap_diag("libddp-nccl.so %s", HAVE_NCCL_BUILD ? "built" : "not built");
	tw_cfg(&cfg, 0, 1, 0, 30);
	cfg.backend = DDP_BACKEND_NCCL;
	st = ddp_comm_init(&cfg, &c);
	snprintf(reason, sizeof(reason), "%s", ddp_last_error());
	if (st == DDP_OK) {
		/* Device buffers, several ranks, the fence and the
		 * failures are the GPU tier's (tests/gpu). */
		tap_ok(ddp_comm_backend(c) == DDP_BACKEND_NCCL,
		       "DDP_BACKEND=nccl: NCCL backend in use");
		ddp_comm_destroy(c);
		return tap_done();
	}
	/* Without a GPU device the backend must fail cleanly; with one, a
	 * failure is the machine's or libddp's fault, never a skip. */
	if (tw_gpu_device_present()) {
		tap_ok(0, "DDP_BACKEND=nccl on a machine with a GPU device: %s",
		       reason);
		return tap_done();
	}
	if (!tap_ok(HAVE_NCCL_BUILD ? st == DDP_ERR_NO_GPU &&
					      strstr(reason, "no usable GPU")
				    : st == DDP_ERR_BACKEND,
		    "DDP_BACKEND=nccl without a GPU fails cleanly: %s", reason))
		tap_diag("status %d", (int)st);

	tw_cfg(&cfg, 0, 1, 0, 30);
	cfg.backend = DDP_BACKEND_AUTO;
	st = ddp_comm_init(&cfg, &c);
	tap_ok(st == DDP_OK && ddp_comm_backend(c) == DDP_BACKEND_TCP,
	       "DDP_BACKEND=auto picks TCP without a GPU");
	ddp_comm_destroy(c);

	/* Two ranks: both fail the same way, neither waits for the other. */
	tw_run_job(2, nccl_rank, NULL, 30, rk);
	ok = 1;
	for (i = 0; i < 2; i++)
		ok &= strstr(rk[i].out, "STATUS 0") == NULL &&
		      tw_exit(&rk[i]) == 0;
	if (!tap_ok(ok, "2 ranks with DDP_BACKEND=nccl and no GPU both fail "
			"cleanly"))
		for (i = 0; i < 2; i++)
			tw_diag_output(i, &rk[i]);
	tw_free_job(2, rk);
	printf("ok %d # SKIP no GPU device on this machine (no /dev/nvidia0, "
	       "nvidia-smi -L fails): device-buffer allreduce, broadcast and "
	       "gradient sync are the GPU tier's (%s)\n",
	       ++tap_count, reason);
	return tap_done();
}
