/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The site configuration of slurm-ddp (/etc/slurm/ddp.conf by default),
 * read by the SPANK plugin and by the prolog tooling so the two never
 * disagree. The plugin also accepts the same keys as plugstack.conf
 * arguments (key=value), applied after the file.
 *
 * File format: one "key = value" per line, '#' starts a comment, blank
 * lines ignored. Unknown keys and bad values are errors that name the key,
 * the value, the line, and what would be accepted.
 *
 * Keys (defaults in brackets):
 *   port_range       LOW-HIGH rendezvous ports, outside the kernel's
 *                    ephemeral range [29400-29999]
 *   default_bind     none|numa|core [core]
 *   shared_root      directory holding per-job shared dirs, "" = none [""]
 *   shared_fstypes   comma list of accepted file-system types
 *                    [nfs,nfs4,lustre,gpfs,beegfs,cephfs,ceph]
 *   shared_timeout   seconds allowed for the shared-root check [10]
 *   shared_mount     mount point that must be mounted for shared_root to
 *                    count as present (e.g. /shared); "" = any mount of an
 *                    accepted type [""]
 *   scratch_root     node-local root of per-job scratch [/var/tmp/ddp]
 *   retention_days   days a finished job's shared dir is kept [7]
 *   firewall         on|off: per-job nftables openings [on]
 *   firewall_timeout lifetime of a job's firewall elements, a backstop for
 *                    a missing epilog: N[s|m|h|d], 60s-365d [7d]
 *   state_dir        node-local directory of the prolog's lock file
 *                    [/run/slurm-ddp]
 *   nft_path         absolute path of nft(8) [/usr/sbin/nft]
 *   scontrol_path    absolute path of scontrol(1), used to drain the node
 *                    [/usr/bin/scontrol]
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

#ifndef DDP_CONF_DEFAULT
#define DDP_CONF_DEFAULT "/etc/slurm/ddp.conf"
#endif

#define DDP_CONF_ERR_LEN 256
#define DDP_CONF_MAX_FSTYPES 16

enum ddp_bind {
	DDP_BIND_NONE = 0,
	DDP_BIND_NUMA = 1,
	DDP_BIND_CORE = 2,
};

struct ddp_conf {
	unsigned port_min;
	unsigned port_max;
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
 * Reads path on top of the current contents of conf (call
 * ddp_conf_defaults first). A missing file is not an error when
 * missing_ok is non-zero. Returns 0, or -1 with err naming the file and
 * line. conf may be partly updated on error.
 */
int ddp_conf_load(struct ddp_conf *conf, const char *path, int missing_ok,
		  char *err, size_t errlen);

/*
 * Names the job's shared directory, <shared_root>/<user>/<jobid>, in buf.
 * Returns 0, or -1 when shared_root is empty, user is not a safe path
 * component (see ddp_conf_valid_user) or the result does not fit.
 */
int ddp_conf_shared_dir(const struct ddp_conf *conf, const char *user,
			unsigned long jobid, char *buf, size_t len);

/*
 * Names the job's node-local scratch directory, <scratch_root>/<jobid>.
 * Returns 0, or -1 when scratch_root is empty or the result does not fit.
 */
int ddp_conf_scratch_dir(const struct ddp_conf *conf, unsigned long jobid,
			 char *buf, size_t len);

/*
 * Returns 1 when name may be used as one path component for a user: 1-64
 * characters of [A-Za-z0-9._@-], not starting with '-' or '.', else 0.
 */
int ddp_conf_valid_user(const char *name);

/*
 * Checks settings that depend on the running kernel: port_range must not
 * overlap ip_local_port_range (eph_low..eph_high). Returns 0 or -1 with err.
 */
int ddp_conf_check_ports(const struct ddp_conf *conf, unsigned eph_low,
			 unsigned eph_high, char *err, size_t errlen);

/*
 * Reads /proc/sys/net/ipv4/ip_local_port_range. Returns 0, or -1 when it
 * cannot be read (then *low and *high are set to Linux's defaults,
 * 32768-60999).
 */
int ddp_read_ephemeral_range(unsigned *low, unsigned *high);

#endif
