/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Slurm-free parsing for the SPANK plugin: the --ddp-* option values, the
 * plugstack.conf arguments, and the scan of srun's own command line that
 * decides between node mode and task mode. Kept apart from spank_ddp.c so
 * the unit tests and the fuzzers run it without Slurm.
 *
 * Thread safety: reentrant; the functions touch only their arguments.
 */
#ifndef DDP_ARGS_H
#define DDP_ARGS_H

#include <stddef.h>

#include "ddp_conf.h"
#include "ddp_util.h"
#include "failure.h"

/* What the user asked for with the --ddp* options. */
struct ddp_opts {
	int enabled;  /* --ddp */
	long port;    /* --ddp-port, 0 = not given */
	int bind;     /* --ddp-bind as enum ddp_bind, -1 = not given */
	int verbose;  /* --ddp-verbose */
	int check;    /* --ddp-check as enum ddp_check, -1 = not given */
	long restart; /* --ddp-restart=N: restarts allowed, 0 = none */
	/* --ddp-restart-on: the causes restarted, a bit each */
	unsigned restart_on;
	/* --ddp-stop-before as given ("auto", "0" or seconds, checked by
	 * ddp_stop_before_parse), "" = not given: ddp.conf's stop_before */
	char stop_before[DDP_CONF_STOP_BEFORE_LEN];
};

/* --ddp-restart-on's words, a bit each (1 << enum ddp_failure_cause). */
#define DDP_RESTART_ON_NODE (1u << DDP_CAUSE_NODE)
#define DDP_RESTART_ON_ALL                                  \
	((1u << DDP_CAUSE_EXIT) | (1u << DDP_CAUSE_CRASH) | \
	 (1u << DDP_CAUSE_OOM) | (1u << DDP_CAUSE_HANG) | DDP_RESTART_ON_NODE)

/*
 * Parses --ddp-restart-on's value, a comma list of exit, crash, oom,
 * hang, node and all (node is always on), into *mask. Returns 0, or -1
 * with err naming the word and the words that would work.
 */
int ddp_restart_on_parse(const char *value, unsigned *mask, char *err,
			 size_t errlen);

/* The words of mask as --ddp-restart-on takes them ("crash,hang"; "node"
 * for node alone) into buf. Returns 0, or -1 when it does not fit. */
int ddp_restart_on_format(unsigned mask, char *buf, size_t len);

/*
 * Applies one option callback. name is the option without dashes ("ddp",
 * "ddp-port", "ddp-bind", "ddp-verbose", "ddp-check", "ddp-restart",
 * "ddp-restart-on", "ddp-stop-before"), arg its value or NULL. --ddp-restart
 * takes a whole number from 0 to DDP_RESTART_LIMIT here; the site's own ceiling
 * is checked by ddp_opts_restart_allowed once ddp.conf is known. --ddp-check
 * alone means fail; fail and warn imply --ddp, off only overrides the site's
 * default. Repeating an option is harmless; a later value replaces an earlier
 * one (srun runs the environment's copy first, then the command line's).
 * Returns 0, or -1 with err naming the option and the values that would work.
 */
int ddp_opts_apply(struct ddp_opts *o, const char *name, const char *arg,
		   char *err, size_t errlen);

/*
 * Whether o's --ddp-restart stays within the site's ceiling restart_max
 * (ddp.conf). Returns 0, or -1 with err naming the option, the ceiling and
 * the values that would work.
 */
int ddp_opts_restart_allowed(const struct ddp_opts *o, unsigned restart_max,
			     char *err, size_t errlen);

/*
 * Parses plugstack.conf arguments into conf: "config=PATH" is read first
 * (default DDP_CONF_DEFAULT, missing file allowed only when not given
 * explicitly), then every other key=value on top, through ddp_conf_set.
 * "topology=PATH" (absolute) is the plugin's own: an hwloc XML file that
 * slurmstepd reads instead of the running machine (test clusters, or
 * sites whose I/O discovery hangs); it is copied into topology (empty when
 * not given). Unknown keys and bad values fail with err naming the
 * argument, and so do the keys ddp-nodectl reads too
 * (ddp_conf_key_node_side: ports, port key, directories, firewall, drain
 * thresholds), which err says to set in ddp.conf: the Prolog never sees
 * plugstack.conf. conf is filled with defaults first.
 */
int ddp_plugstack_parse(struct ddp_conf *conf, char *topology, size_t toplen,
			int ac, char **av, char *err, size_t errlen);

/* The task layout srun was asked for, as far as its argv and env say. */
struct ddp_srun_req {
	long ntasks_per_node; /* -1: not given */
	long ntasks;	      /* -1: not given */
	long nodes;	      /* minimum node count, -1: not given */
	long gpus_per_node;   /* -1: unknown */
	long gpus;	      /* total over all nodes (-G/--gpus), -1: not
				 given */
	int per_task_gpus;    /* --gpus-per-task / --ntasks-per-gpu given */
	int help;	      /* --help/--usage/--version/--test-only */
	int ddp;	      /* a literal --ddp (or --ddp-check other than
				 off) before the program */
	int per_node_gpus;    /* --gpus-per-node or --gres=gpu given, not
				 derived from -G */
	/* The option or variable that states the step's CPUs (-c,
	 * --cpus-per-gpu, --tres-per-task=cpu..., --exclusive, or their
	 * SLURM_* / SRUN_CPUS_PER_TASK input variables), a static string;
	 * NULL when nothing does. */
	const char *cpus_by;
	int jobid; /* --jobid: a step of an existing job */
	/* The value of the last -x/--exclude on the command line (srun
	 * keeps the last), borrowed from argv; NULL when none is given. */
	const char *exclude;
	/* The index in argv where srun's options end: the program, "--",
	 * or argc when there is neither. */
	int opts_end;
	/* -K/--kill-on-bad-exit[=0|1] or SLURM_KILL_BAD_EXIT: 1 or 0, -1
	 * when neither says. */
	int kill_bad_exit;
	char partition[128]; /* -p/--partition or SLURM_PARTITION, or "" */
};

/*
 * Scans srun's argv (argv[0] is srun) up to the program to run, filling
 * req from --ntasks-per-node, -n/--ntasks, -N/--nodes, --gpus-per-node,
 * --gres=gpu..., -G/--gpus, --gpus-per-task and --ntasks-per-gpu, then
 * from the matching SLURM_* input variables that getenv_fn returns (srun
 * reads those too; the command line wins). -G/--gpus is a total over the
 * nodes (up to 65535 x DDP_GPU_MAX); with a node count it gives the GPUs
 * per node when it divides evenly. Returns 0, or -1 with err naming the
 * option (or variable) when a value this plugin needs is malformed, or
 * asks for more than DDP_GPU_MAX GPUs on one node (--gpus-per-node,
 * --gres, or -G's rounded-up share of the nodes). -K/--kill-on-bad-exit
 * and SLURM_KILL_BAD_EXIT are read the way srun reads them (no value: 1).
 */
int ddp_srun_scan(int argc, char *const *argv,
		  const char *(*getenv_fn)(const char *),
		  struct ddp_srun_req *req, char *err, size_t errlen);

/*
 * Whether srun must not take SLURM_GPUS_PER_NODE from its environment for
 * the request cmd, scanned from the command line alone (getenv_fn NULL):
 * cmd asks for GPUs as a total (-G/--gpus) or per task (--gpus-per-task,
 * --ntasks-per-gpu) and not per node. salloc and sbatch export the
 * allocation's --gpus-per-node as SLURM_GPUS_PER_NODE, and srun adds it to
 * such a step, which then holds every GPU the allocation has on each node
 * (TresPerNode=gres:gpu:8 beside TresPerTask=gres:gpu:1): per task on
 * 22.05, 24.11 and 26.05, with -G on 22.05. Every rank would see them all.
 * --gpus-per-node or --gres=gpu on the command line replaces the variable
 * in srun itself. Returns 1 or 0.
 */
int ddp_srun_alloc_gpus_conflict(const struct ddp_srun_req *cmd);

/*
 * Decides what --ddp does with req. Returns 1 for node mode with *per_node
 * set to the number of ranks (GPUs) per node; 0 for task mode; -1 with err
 * naming the options and what would work when the request is impossible
 * (node mode without GPUs, more tasks on a node than GPUs).
 */
/*
 * The CPUs per GPU that give every GPU of a node an equal share of its
 * cores: the whole cores per GPU times the threads per core, so that the
 * shares of all GPUs fit when Slurm allocates whole cores. A node with
 * fewer cores than GPUs gets its CPUs per GPU, and one with fewer CPUs
 * than GPUs (or no GPU) 0: nothing to share. cpus, cores and threads are
 * the node's usable ones (specialized cores left out).
 */
long ddp_gpu_cpu_share(long cpus, long cores, long threads, long gpus);

/*
 * The GPUs of a node's gres string as Slurm's node table gives it
 * ("gpu:8", "gpu:h100:8(S:0-1),nic:1", "(null)"), adding up every GPU
 * type. Returns the count (0 without GPUs), or -1 when a GPU count is
 * malformed.
 */
long ddp_gres_gpu_count(const char *gres);

/*
 * DefCpuPerGPU in a partition's job defaults ("DefCpuPerGPU=4,
 * DefMemPerGPU=1024", as scontrol shows JobDefaults), or 0 when the
 * partition sets none (NULL or "(null)" included).
 */
long ddp_def_cpu_per_gpu(const char *defaults);

int ddp_srun_decide(const struct ddp_srun_req *req, long *per_node, char *err,
		    size_t errlen);

#endif
