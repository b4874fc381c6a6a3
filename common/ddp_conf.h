/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The site configuration of slurm-ddp (/etc/slurm/ddp.conf by default),
 * read by the SPANK plugin and by the prolog tooling (ddp-nodectl) alike.
 * The plugin also accepts the keys it alone reads as plugstack.conf
 * arguments (key=value), applied after the file; the keys ddp-nodectl
 * reads too (ports, port key, directories, firewall, drain thresholds:
 * ddp_conf_key_node_side) come from the file alone, so that the Prolog
 * prepares what the plugin uses.
 *
 * File format: one "key = value" per line, '#' starts a comment, blank
 * lines ignored. Unknown keys and bad values are errors that name the key,
 * the value, the line, and what would be accepted.
 *
 * The keys are one table in ddp_conf.c (name, type, bounds, accepted
 * text, default), which parsing, the unknown-key message, `ddp-nodectl
 * show` and the plugin's plugstack hint all read. What each means (defaults
 * in brackets):
 *   port_range       LOW-HIGH rendezvous ports, outside the kernel's
 *                    ephemeral range [29400-29999]
 *   port_key         file of the site's secret that keys the MASTER_PORT
 *                    choice (see port.h: root's, mode 0600, the same on
 *                    every node); "" = the public formula, which any user
 *                    can compute [/etc/slurm/ddp-port.key]
 *   default_bind     none|numa|core [core]
 *   shared_root      directory holding per-job shared dirs, "" = none [""]
 *   shared_fstypes   comma list of accepted file-system types
 *                    [nfs,nfs4,lustre,gpfs,beegfs,cephfs,ceph]
 *   shared_timeout   seconds allowed for the shared-root check [10]
 *   shared_mount     mount point that must be mounted for shared_root to
 *                    count as present (e.g. /shared); "" = any mount of an
 *                    accepted type [""]
 *   scratch_root     node-local root of per-job scratch, below a directory
 *                    only root may write to, so that no user can make it
 *                    first [/var/lib/slurm-ddp/scratch]
 *   retention_days   days a finished job's shared dir is kept [7]
 *   firewall         on|off: per-job nftables openings [on]
 *   firewall_timeout lifetime of a job's firewall elements, a backstop for
 *                    a missing epilog: N[s|m|h|d], 60s-365d [7d]
 *   state_dir        node-local directory of the prolog's lock file
 *                    [/run/slurm-ddp]
 *   nft_path         absolute path of nft(8) [/usr/sbin/nft]
 *   scontrol_path    absolute path of scontrol(1), used to drain the node
 *                    [/usr/bin/scontrol]
 *   nccl_ib_hca      NCCL_IB_HCA for every rank of every --ddp step, passed
 *                    through unchanged: NCCL's list of OpenFabrics devices,
 *                    [^][=]name[:port],... (e.g. =mlx5_0,mlx5_1 to leave a
 *                    storage HCA out); "" = not set, NCCL chooses [""]
 *   nccl_socket_ifname NCCL_SOCKET_IFNAME likewise: [^][=]name,... of network
 *                    interfaces (prefixes unless '='); "" = not set [""]
 *   check            off|warn|fail|requeue: what --ddp steps do without
 *                    --ddp-check[=MODE] (ddp-check(1) before the program)
 *                    [off]
 *   check_requeue_max times a job is requeued by --ddp-check=requeue before
 *                    a failed check ends it as fail does, 0-100 [2]; also
 *                    the bound of --ddp-restart's requeue when no spare
 *                    node is left
 *   restart_max      the most restarts --ddp-restart=N may ask for, the
 *                    site's ceiling on N, 0-100 (0: restarts off) [3]
 *   restart_path     absolute path of ddp-restart, --ddp-restart's
 *                    supervisor [DDP_RESTART_PATH: LIBEXECDIR of the build]
 *   check_drain_jobs distinct jobs that must have named a node within
 *                    check_drain_window before the health check drains it,
 *                    1-1000 [3]
 *   check_drain_users distinct users among those jobs, 1-1000 [2]: the
 *                    verdicts come from user processes, so no single user
 *                    may drain a node (common/verdict.h)
 *   check_drain_window seconds of verdicts the health check counts,
 *                    N[s|m|h|d] between 60s and 365d [86400]
 *   check_min_fraction links below this fraction of the typical link are
 *                    slow, in (0, 1] [0.5]
 *   check_join_limit seconds the check's rendezvous waits for every rank
 *                    to start, 1-3600 [60]
 *   check_time_limit seconds the check may take once joined, 1-3600 [20]
 *   check_path       absolute path of ddp-check [DDP_CHECK_PATH: BINDIR of
 *                    the build]
 *   topology_cache   the node's hwloc topology as XML, written by the
 *                    plugin as root and read by every --ddp step instead
 *                    of rediscovering PCI devices (common/topocache.h);
 *                    "none" = always discover [/run/slurm-ddp/topology.xml]
 *   cpus_per_gpu     the CPUs per GPU a --ddp step started outside an
 *                    allocation asks for when neither the user nor the
 *                    partition's DefCpuPerGPU says: share (each GPU's equal
 *                    share of its node's cores), N (1-1024), or off (Slurm's
 *                    default, one CPU per task) [share]
 *   kill_on_bad_exit yes|no: a task of a --ddp step that exits non-zero or
 *                    is killed ends the whole step at once, as Slurm's
 *                    KillOnBadExit would (users opt out with srun -K0)
 *                    [yes]
 *   stop_before      auto|0|SECS: when a --ddp step's ranks stop, agreed
 *                    and checkpointed, before the job's end time
 *                    (common/stop.h's DDP_STOP_BEFORE; users override it
 *                    with --ddp-stop-before): auto from the measured step
 *                    and checkpoint times, SECS (1-604800) seconds before,
 *                    0 never (and no stop on a signal either) [auto]
 *   stop_requeue_max times srun requeues a batch job after an agreed stop
 *                    (0-100; 0: a stopped job is never requeued by the
 *                    plugin) [2]
 *
 * The NCCL keys are site-wide on purpose: NCCL requires NCCL_IB_HCA to be
 * the same on every rank, and the plugin never derives them per rank or per
 * node. A value the user exported wins.
 *
 * Paths are absolute, without "." or ".." components, control characters
 * or '#' (which starts a comment); trailing slashes are dropped. The
 * per-job directories are named by ddp_conf_shared_dir() and
 * ddp_conf_scratch_dir(), used by both the plugin and the prolog:
 *   shared  = <shared_root>/<user name>/<jobid>
 *   scratch = <scratch_root>/<jobid>
 *
 * Thread safety: the functions touch only the struct they are given.
 */
#ifndef DDP_CONF_H
#define DDP_CONF_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

#include "ddp_util.h"

#ifndef DDP_CONF_DEFAULT
#define DDP_CONF_DEFAULT "/etc/slurm/ddp.conf"
#endif

/* Where the build installs ddp-check (the Makefile passes $(BINDIR)). */
#ifndef DDP_CHECK_PATH
#define DDP_CHECK_PATH "/usr/local/bin/ddp-check"
#endif

/* Where the build installs ddp-restart (the Makefile passes
 * $(LIBEXECDIR)). */
#ifndef DDP_RESTART_PATH
#define DDP_RESTART_PATH "/usr/local/libexec/slurm-ddp/ddp-restart"
#endif

/* The most restarts restart_max may allow: a bound on what one failure
 * loop may cost the allocation. */
#define DDP_RESTART_LIMIT 100

#define DDP_CONF_MAX_FSTYPES 16
/* Longest nccl_ib_hca / nccl_socket_ifname value, NUL included. */
#define DDP_CONF_NCCL_LEN 256
/* Room for stop_before ("auto", "0" or up to 604800), NUL included. */
#define DDP_CONF_STOP_BEFORE_LEN 16

/* How each rank's CPUs and memory are bound. */
enum ddp_bind {
	DDP_BIND_NONE = 0,
	DDP_BIND_NUMA = 1,
	DDP_BIND_CORE = 2,
};
/* Their names, in enum order, as users and admins write them (--ddp-bind,
 * default_bind, ddp-plan --bind), and the same list spelled for option
 * help and for messages (test-common-conf checks that the three agree). */
#define DDP_BIND_NAMES                 \
	{                              \
		"none", "numa", "core" \
	}
#define DDP_BIND_USAGE "none|numa|core"
#define DDP_BIND_ACCEPTED "none, numa or core"

/* The name of a binding mode ("?" for a value outside the enum), and the
 * mode a name means: 0, or -1 for NULL or anything else. */
const char *ddp_bind_name(enum ddp_bind b);
int ddp_bind_parse(const char *s, enum ddp_bind *out);

/* What ddp-check's findings do to a --ddp step (--ddp-check, check). */
enum ddp_check {
	DDP_CHECK_OFF = 0,  /* no check */
	DDP_CHECK_WARN = 1, /* print the problems, start the program */
	DDP_CHECK_FAIL = 2, /* end the step without starting the program */
	/* as fail, and a requeueable batch job is requeued without the
	 * named nodes (at most check_requeue_max times) */
	DDP_CHECK_REQUEUE = 3,
};
/* Their names in enum order, as users and admins write them, and the same
 * list for option help and for messages (test-common-conf checks them). */
#define DDP_CHECK_NAMES                          \
	{                                        \
		"off", "warn", "fail", "requeue" \
	}
#define DDP_CHECK_USAGE "fail|requeue|warn|off"
#define DDP_CHECK_ACCEPTED "fail, requeue, warn or off"

/* The name of a check mode ("?" outside the enum), and the mode a name
 * means: 0, or -1 for NULL or anything else. */
const char *ddp_check_name(enum ddp_check m);
int ddp_check_parse(const char *s, enum ddp_check *out);

/* cpus_per_gpu's two words: each GPU's equal share of its node, or
 * nothing asked (Slurm's default). */
#define DDP_CPUS_PER_GPU_SHARE 0
#define DDP_CPUS_PER_GPU_OFF (-1)
#define DDP_CPUS_PER_GPU_MAX 1024

struct ddp_conf {
	unsigned port_min;
	unsigned port_max;
	char port_key[PATH_MAX]; /* "" = public port formula */
	enum ddp_bind default_bind;
	char shared_root[PATH_MAX];
	char shared_fstypes[DDP_CONF_MAX_FSTYPES][32];
	unsigned n_shared_fstypes;
	unsigned shared_timeout;
	char shared_mount[PATH_MAX];
	char scratch_root[PATH_MAX];
	unsigned retention_days;
	int firewall;
	unsigned firewall_timeout; /* seconds */
	char state_dir[PATH_MAX];
	char nft_path[PATH_MAX];
	char scontrol_path[PATH_MAX];
	char nccl_ib_hca[DDP_CONF_NCCL_LEN];	    /* "" = leave unset */
	char nccl_socket_ifname[DDP_CONF_NCCL_LEN]; /* "" = leave unset */
	enum ddp_check check;
	double check_min_fraction; /* in (0, 1] */
	unsigned check_join_limit; /* seconds */
	unsigned check_time_limit; /* seconds */
	char check_path[PATH_MAX];
	unsigned check_requeue_max; /* requeues per job, 0-100 */
	unsigned restart_max;	    /* --ddp-restart's ceiling, 0-100 */
	char restart_path[PATH_MAX];
	unsigned check_drain_jobs;     /* distinct jobs, 1-1000 */
	unsigned check_drain_users;    /* distinct users, 1-1000 */
	unsigned check_drain_window;   /* seconds */
	char topology_cache[PATH_MAX]; /* "" = none */
	int cpus_per_gpu;     /* N >= 1, or DDP_CPUS_PER_GPU_SHARE / _OFF */
	int kill_on_bad_exit; /* 1: a failed task ends its --ddp step */
	/* DDP_STOP_BEFORE as ddp.conf spells it: "auto", "0" or seconds
	 * (checked by ddp_stop_before_parse) */
	char stop_before[DDP_CONF_STOP_BEFORE_LEN];
	unsigned stop_requeue_max; /* requeues after a stop, 0-100 */
};

/* Fills conf with the defaults listed above. Cannot fail. */
void ddp_conf_defaults(struct ddp_conf *conf);

/*
 * Applies one key=value setting (as from a plugstack argument or one file
 * line). Returns 0, or -1 with a message in err (always NUL-terminated)
 * naming the key and the accepted values; conf is unchanged on error.
 */
int ddp_conf_set(struct ddp_conf *conf, const char *key, const char *value,
		 char *err, size_t errlen);

/*
 * The keys, in table order (the order `ddp-nodectl show` prints): the name
 * and the default (as ddp.conf would spell it) of key i, or NULL past the
 * last key. Static strings.
 */
const char *ddp_conf_key_name(size_t i);
const char *ddp_conf_key_default(size_t i);

/*
 * Writes every key name into buf, separated by ", " and the last one by
 * last_sep (" or " for a message). Returns 0, or -1 when buf is too small
 * (it then holds a cut list).
 */
int ddp_conf_key_names(char *buf, size_t len, const char *last_sep);

/*
 * The same for the keys the plugin alone reads (those a plugstack argument
 * may set), for the plugin's plugstack hint.
 */
int ddp_conf_plugin_key_names(char *buf, size_t len, const char *last_sep);

/*
 * Whether ddp-nodectl reads key too (the Prolog, Epilog, health check,
 * reconcile, sweep, port): 1; 0 for a key the plugin alone reads; -1 for
 * an unknown key or NULL. Keys of 1 are set in ddp.conf only: the node
 * side never sees plugstack.conf.
 */
int ddp_conf_key_node_side(const char *key);

/*
 * Writes the value of key in conf as ddp.conf accepts it back (ports as
 * LOW-HIGH, firewall_timeout in seconds with 's', "" for an empty path).
 * Returns 0, or -1 for an unknown key or when buf is too small.
 */
int ddp_conf_format(const struct ddp_conf *conf, const char *key, char *buf,
		    size_t len);

/*
 * Reads path on top of the current contents of conf (call
 * ddp_conf_defaults first). A missing file is not an error when
 * missing_ok is non-zero. Returns 0, or -1 with err naming the file and
 * line. conf may be partly updated on error.
 */
int ddp_conf_load(struct ddp_conf *conf, const char *path, int missing_ok,
		  char *err, size_t errlen);

/*
 * Checks settings that depend on the running kernel: port_range must not
 * overlap ip_local_port_range (eph_low..eph_high). Returns 0 or -1 with err.
 */
int ddp_conf_check_ports(const struct ddp_conf *conf, unsigned eph_low,
			 unsigned eph_high, char *err, size_t errlen);

/*
 * 1 when interface name is selected by filter, a valid nccl_socket_ifname
 * value, as NCCL reads NCCL_SOCKET_IFNAME: each item is a prefix (an exact
 * name after a leading '='), and a leading '^' selects the names that
 * match no item. 0 otherwise.
 */
int ddp_nccl_ifname_match(const char *filter, const char *name);

/*
 * Checks the site's nccl_socket_ifname against this node: it must select
 * at least one interface that is up and has an IPv4 or IPv6 address (not
 * IPv6 link-local), else NCCL's bootstrap fails or hangs on this node.
 * Returns 0 (also when the site names none), or -1 with err naming the
 * value and the interfaces that are up with an address.
 */
int ddp_conf_check_socket_ifname(const struct ddp_conf *conf, char *err,
				 size_t errlen);

/*
 * Reads /proc/sys/net/ipv4/ip_local_port_range. Returns 0, or -1 when it
 * cannot be read (then *low and *high are set to Linux's defaults,
 * 32768-60999).
 */
int ddp_read_ephemeral_range(unsigned *low, unsigned *high);

#endif
