/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The kernel's counts of OOM kills and memory errors (common/kevents.c),
 * read from a tree of the shape of /proc and /sys made by the test, and
 * the verdict on a task's signal death between two readings. The node's
 * own /proc is read once too: whatever it exposes, a reading equals
 * itself and proves nothing.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kevents.h"
#include "tap.h"

static char root[] = "/tmp/test-kevents.XXXXXX";

/* Writes text to root/rel, making its directories. */
static void
put(const char *rel, const char *text)
{
	char path[512], *slash;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (slash = strchr(path + strlen(root) + 1, '/'); slash;
	     slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		if (mkdir(path, 0700) < 0 && errno != EEXIST)
			tap_diag("mkdir %s: %s", path, strerror(errno));
		*slash = '/';
	}
	f = fopen(path, "w");
	if (!f) {
		tap_diag("%s: %s", path, strerror(errno));
		return;
	}
	fputs(text, f);
	fclose(f);
}

int
main(void)
{
	struct ddp_kevents before, after, self;
	char cmd[600];

	if (!mkdtemp(root))
		return tap_ok(0, "mkdtemp"), tap_done();

	ddp_kevents_read(root, "/", &before);
	tap_ok(!before.have_oom && !before.have_memory_errors,
	       "an empty tree: both counts absent, not zero");

	put("proc/vmstat", "nr_free_pages 5\noom_kill 3\npgfault 9\n");
	put("sys/devices/system/edac/mc/mc0/ue_count", "1\n");
	put("sys/devices/system/edac/mc/mc0/ce_count", "4\n");
	put("sys/devices/system/edac/mc/mc1/ce_count", "2\n");
	put("sys/devices/system/node/node0/memory_failure/total", "0\n");
	ddp_kevents_read(root, "/", &before);
	tap_ok(before.have_oom && before.oom_kills == 3,
	       "no cgroup memory.events: /proc/vmstat's oom_kill (%llu)",
	       before.oom_kills);
	tap_ok(before.have_memory_errors && before.memory_errors == 7,
	       "memory errors: every controller's ue and ce counts and every "
	       "NUMA node's memory_failure (%llu)",
	       before.memory_errors);

	put("sys/fs/cgroup/job_7/step_0/memory.events",
	    "low 0\nhigh 0\nmax 2\noom 1\noom_kill 1\noom_group_kill 0\n");
	ddp_kevents_read(root, "/job_7/step_0/slurm", &before);
	tap_ok(before.have_oom && before.oom_kills == 1,
	       "the step's cgroup (slurmstepd's own one's parent) is read "
	       "before the node's count (%llu)",
	       before.oom_kills);

	after = before;
	tap_ok(ddp_kevents_verdict(&before, &after, SIGKILL) ==
			       DDP_KERNEL_NONE &&
		       ddp_kevents_verdict(&before, &after, SIGBUS) ==
			       DDP_KERNEL_NONE,
	       "no count rose: no word from the kernel");
	put("sys/fs/cgroup/job_7/step_0/memory.events",
	    "low 0\nhigh 0\nmax 9\noom 2\noom_kill 2\noom_group_kill 0\n");
	ddp_kevents_read(root, "/job_7/step_0/slurm", &after);
	tap_ok(ddp_kevents_verdict(&before, &after, SIGKILL) == DDP_KERNEL_OOM,
	       "SIGKILL while the step's OOM kills rose: oom");
	tap_ok(ddp_kevents_verdict(&before, &after, SIGSEGV) ==
			       DDP_KERNEL_NONE &&
		       ddp_kevents_verdict(&before, &after, SIGBUS) ==
			       DDP_KERNEL_NONE,
	       "an OOM kill explains SIGKILL alone");
	put("sys/devices/system/node/node0/memory_failure/total", "1\n");
	ddp_kevents_read(root, "/job_7/step_0/slurm", &after);
	tap_ok(ddp_kevents_verdict(&before, &after, SIGBUS) ==
		       DDP_KERNEL_MEMORY_ERROR,
	       "SIGBUS while memory errors rose: memory-error");
	tap_ok(ddp_kevents_verdict(&before, &after, SIGABRT) == DDP_KERNEL_NONE,
	       "a memory error explains SIGBUS alone");
	after.have_memory_errors = 0;
	before.have_memory_errors = 0;
	tap_ok(ddp_kevents_verdict(&before, &after, SIGBUS) == DDP_KERNEL_NONE,
	       "absent counts prove nothing");

	put("proc/self/cgroup", "0::/job_7/step_0/slurm\n");
	ddp_kevents_read(root, NULL, &before);
	tap_ok(before.have_oom && before.oom_kills == 2,
	       "the reader's own cgroup from proc/self/cgroup (%llu)",
	       before.oom_kills);

	ddp_kevents_read("/", NULL, &self);
	ddp_kevents_read("/", NULL, &after);
	tap_ok(ddp_kevents_verdict(&self, &self, SIGKILL) == DDP_KERNEL_NONE &&
		       ddp_kevents_verdict(&self, &self, SIGBUS) ==
			       DDP_KERNEL_NONE,
	       "this node's own counts read (oom %s, memory errors %s)",
	       self.have_oom ? "present" : "absent",
	       self.have_memory_errors ? "present" : "absent");

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	if (system(cmd) != 0)
		tap_diag("could not remove %s", root);
	return tap_done();
}
