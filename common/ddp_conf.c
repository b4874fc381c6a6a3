/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Strict reader of the site configuration (ddp.conf) shared by the plugin
 * and the prolog helper, and the checks of its settings against the node.
 */
#include "ddp_conf.h"

#include <ctype.h>
#include <stddef.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "ddp_util.h"
#include "port.h"
#include "stop.h"

/* Longest configured path: leaves room for "/<user>/<jobid>" below it. */
#define CONF_PATH_MAX 1024
/* Longest line of the file; longer lines are refused. */
#define CONF_LINE_MAX 4096
/* Names in an NCCL device list: IFNAMSIZ - 1 for network interfaces,
 * IB_DEVICE_NAME_MAX - 1 for OpenFabrics devices; at most 32 of them. */
#define NCCL_IFNAME_MAX 15
#define NCCL_HCA_NAME_MAX 63
#define NCCL_LIST_MAX 32

/*
 * Copies value into out for an error message: at most 48 characters, with
 * non-printable bytes shown as '?', so a hostile value cannot forge log
 * lines or terminal escapes.
 */
static void
show_value(const char *value, char *out, size_t len)
{
	size_t i, n = 0;

	for (i = 0; value[i] && n + 4 < len && i < 48; i++)
		out[n++] = isprint((unsigned char)value[i]) ? value[i] : '?';
	if (value[i] && n + 4 < len) {
		memcpy(out + n, "...", 3);
		n += 3;
	}
	out[n] = '\0';
}

static int
bad_value(const char *key, const char *value, const char *accepted, char *err,
	  size_t errlen)
{
	char shown[64];

	show_value(value, shown, sizeof(shown));
	/* The message is advice: a truncated one is still useful. */
	return ddp_errf(err, errlen, "%s: invalid value '%s': expected %s", key,
			shown, accepted);
}

/*
 * Validates an absolute path and copies it without trailing slashes. An
 * empty value is allowed only when empty_ok.
 */
static int
parse_path(const char *value, int empty_ok, char *out, size_t outlen)
{
	size_t len = strlen(value), i;
	const char *p;

	if (len == 0) {
		if (!empty_ok)
			return -1;
		out[0] = '\0';
		return 0;
	}
	if (value[0] != '/' || len >= CONF_PATH_MAX || len >= outlen)
		return -1;
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)value[i];

		if (c < 0x20 || c == 0x7f || c == '#')
			return -1;
	}
	/* Refuse "." and ".." components: the path must name one place. */
	for (p = value; *p; p++) {
		if (p[0] != '/' || p[1] != '.')
			continue;
		if (p[2] == '/' || p[2] == '\0')
			return -1;
		if (p[2] == '.' && (p[3] == '/' || p[3] == '\0'))
			return -1;
	}
	while (len > 1 && value[len - 1] == '/')
		len--;
	if (len == 1)
		return -1; /* "/" itself is never a sensible root */
	memcpy(out, value, len);
	out[len] = '\0';
	return 0;
}

static int
parse_port_range(const char *value, long min, long max, unsigned *lo,
		 unsigned *hi)
{
	const char *end = NULL;
	long a, b;

	if (ddp_parse_long_prefix(value, min, max, &a, &end) < 0 ||
	    value[0] == '+' || value[0] == '-')
		return -1;
	if (*end == '\0') {
		b = a;
	} else {
		if (*end != '-' || end[1] == '+' || end[1] == '-' ||
		    ddp_parse_long(end + 1, min, max, &b) < 0 || b < a)
			return -1;
	}
	*lo = (unsigned)a;
	*hi = (unsigned)b;
	return 0;
}

static int
parse_uint(const char *value, long min, long max, unsigned *out)
{
	long v;

	if (value[0] == '+' || value[0] == '-' ||
	    ddp_parse_long(value, min, max, &v) < 0)
		return -1;
	*out = (unsigned)v;
	return 0;
}

/* N[s|m|h|d] in seconds, within [min, max]. */
static int
parse_duration(const char *value, long min, long max, unsigned *out)
{
	const char *end = NULL;
	long v, mult = 1;

	if (value[0] == '+' || value[0] == '-' ||
	    ddp_parse_long_prefix(value, 0, max, &v, &end) < 0)
		return -1;
	if (*end != '\0') {
		if (end[1] != '\0')
			return -1;
		switch (*end) {
		case 's':
			mult = 1;
			break;
		case 'm':
			mult = 60;
			break;
		case 'h':
			mult = 3600;
			break;
		case 'd':
			mult = 86400;
			break;
		default:
			return -1;
		}
	}
	if (v > max / mult || v * mult < min)
		return -1;
	*out = (unsigned)(v * mult);
	return 0;
}

static int
parse_onoff(const char *value, int *out)
{
	if (strcmp(value, "on") == 0)
		*out = 1;
	else if (strcmp(value, "off") == 0)
		*out = 0;
	else
		return -1;
	return 0;
}

/* A fraction in (0, 1] of at most 8 characters (so 6 decimals, which
 * ddp_conf_format gives back exactly): digits and a '.', no sign,
 * exponent or "nan", which ddp-check's --min-fraction would also take. */
static int
parse_fraction(const char *value, double *out)
{
	char *end = NULL;
	double v;
	size_t i;

	for (i = 0; value[i]; i++)
		if (!isdigit((unsigned char)value[i]) && value[i] != '.')
			return -1;
	if (i == 0 || i > 8)
		return -1;
	errno = 0;
	v = strtod(value, &end);
	if (errno || *end != '\0' || !(v > 0) || v > 1)
		return -1;
	*out = v;
	return 0;
}

static int
parse_fstypes(const char *value, unsigned max, struct ddp_conf *conf)
{
	char types[DDP_CONF_MAX_FSTYPES][32];
	unsigned n = 0;
	const char *p = value;

	memset(types, 0, sizeof(types));
	for (;;) {
		size_t len = 0;

		while (*p == ' ' || *p == '\t')
			p++;
		while (p[len] && (islower((unsigned char)p[len]) ||
				  isdigit((unsigned char)p[len]) ||
				  p[len] == '_' || p[len] == '.'))
			len++;
		if (len == 0 || len >= sizeof(types[0]) || n >= max ||
		    n >= DDP_CONF_MAX_FSTYPES)
			return -1;
		memcpy(types[n], p, len);
		types[n][len] = '\0';
		n++;
		p += len;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '\0')
			break;
		if (*p != ',')
			return -1;
		p++;
	}
	memcpy(conf->shared_fstypes, types, sizeof(types));
	conf->n_shared_fstypes = n;
	return 0;
}

/*
 * NCCL's device filter, as NCCL_IB_HCA and NCCL_SOCKET_IFNAME read it: an
 * optional '^' (exclude), an optional '=' (exact names, else prefixes),
 * then a comma list of names, each optionally ":PORT" when with_port. The
 * value reaches every rank's environment unchanged, so nothing else
 * (spaces, quotes, empty items) is let through: NCCL would not trim it.
 */
static int
parse_nccl_list(const char *value, int with_port, size_t name_max, char *out,
		size_t outlen)
{
	size_t len = strlen(value);
	const char *p = value;
	unsigned n = 0;

	if (len >= outlen)
		return -1;
	if (len == 0) {
		out[0] = '\0';
		return 0;
	}
	if (*p == '^')
		p++;
	if (*p == '=')
		p++;
	for (;;) {
		size_t k = 0;

		while (isalnum((unsigned char)p[k]) || p[k] == '_' ||
		       p[k] == '.' || p[k] == '-')
			k++;
		if (k == 0 || k > name_max || ++n > NCCL_LIST_MAX)
			return -1;
		p += k;
		if (with_port && *p == ':') {
			const char *end = NULL;
			long port;

			if (p[1] == '+' || p[1] == '-' ||
			    ddp_parse_long_prefix(p + 1, 1, 255, &port, &end) <
				    0)
				return -1;
			p = end;
		}
		if (*p == '\0')
			break;
		if (*p != ',')
			return -1;
		p++;
	}
	memcpy(out, value, len + 1);
	return 0;
}

/* How a key's value is read and shown. */
enum key_type {
	KEY_PORTS,	 /* LOW-HIGH ports in [min, max]: port_min, port_max */
	KEY_BIND,	 /* a binding mode name: enum ddp_bind */
	KEY_PATH,	 /* absolute path, "" allowed when min is 0: char[] */
	KEY_PATH_NONE,	 /* absolute path, or "none" (stored as ""): char[] */
	KEY_FSTYPES,	 /* 1..max file-system type names: shared_fstypes */
	KEY_UINT,	 /* whole number in [min, max]: unsigned */
	KEY_ONOFF,	 /* on or off: int */
	KEY_YESNO,	 /* yes or no: int */
	KEY_DURATION,	 /* N[s|m|h|d], seconds in [min, max]: unsigned */
	KEY_NCCL_HCA,	 /* NCCL device list, names of 1..max: char[] */
	KEY_NCCL_IFNAME, /* NCCL interface list, names of 1..max: char[] */
	KEY_CHECK,	 /* a check mode name: enum ddp_check */
	KEY_FRACTION,	 /* a number in (0, 1]: double */
	KEY_CPU_SHARE,	 /* share, off or N in [min, max]: int */
	KEY_STOP_BEFORE, /* auto, 0 or seconds (stop.h): char[] */
};

struct conf_key {
	const char *name;
	enum key_type type;
	long min, max;	      /* bounds, as the type reads them */
	const char *accepted; /* what a refusal says would work */
	const char *def;      /* the default, as ddp.conf would spell it */
	size_t offset;	      /* the field of struct ddp_conf */
	size_t size;
	/* NODE_SIDE: ddp-nodectl reads it too (the Prolog, Epilog, health
	 * check, reconcile, sweep and port), from ddp.conf alone; a
	 * plugstack argument may not set it, or the plugin would use ports,
	 * directories or limits the node side never prepared. */
	int node_side;
};

#define FIELD(f) offsetof(struct ddp_conf, f), sizeof(((struct ddp_conf *)0)->f)
#define NODE_SIDE 1
#define PLUGIN_ONLY 0
#define PATH_TEXT                                                            \
	"an absolute path other than '/' without '.', '..', '#' or control " \
	"characters"

/*
 * The keys of ddp.conf: this table is the one list. It drives
 * ddp_conf_defaults, ddp_conf_set and its unknown-key message, and what
 * ddp_conf_key_name/ddp_conf_format give `ddp-nodectl show` and the
 * plugin's plugstack hint, and which keys ddp-nodectl reads too
 * (node_side: ddp.conf alone may set them). The header's key list and
 * doc/admin-guide.md explain each; test-common-conf checks that every
 * default parses.
 */
static const struct conf_key keys[] = {
	{"port_range", KEY_PORTS, 1024, 65535,
	 "LOW-HIGH with 1024 <= LOW <= HIGH <= 65535", "29400-29999",
	 FIELD(port_min), NODE_SIDE},
	{"port_key", KEY_PATH, 0, CONF_PATH_MAX - 1,
	 PATH_TEXT ", or \"\" for ports anyone can compute",
	 DDP_PORT_KEY_DEFAULT, FIELD(port_key), NODE_SIDE},
	{"default_bind", KEY_BIND, 0, 0, DDP_BIND_ACCEPTED, "core",
	 FIELD(default_bind), PLUGIN_ONLY},
	{"shared_root", KEY_PATH, 0, CONF_PATH_MAX - 1,
	 PATH_TEXT ", or \"\" for none", "", FIELD(shared_root), NODE_SIDE},
	{"shared_fstypes", KEY_FSTYPES, 1, DDP_CONF_MAX_FSTYPES,
	 "a comma list of 1-16 file-system type names of [a-z0-9_.], as in "
	 "/proc/mounts (e.g. nfs,nfs4,lustre)",
	 "nfs,nfs4,lustre,gpfs,beegfs,cephfs,ceph", FIELD(shared_fstypes),
	 NODE_SIDE},
	{"shared_timeout", KEY_UINT, 1, 600, "whole seconds, 1-600", "10",
	 FIELD(shared_timeout), NODE_SIDE},
	{"shared_mount", KEY_PATH, 0, CONF_PATH_MAX - 1,
	 PATH_TEXT ", or \"\" for none", "", FIELD(shared_mount), NODE_SIDE},
	{"scratch_root", KEY_PATH, 0, CONF_PATH_MAX - 1,
	 PATH_TEXT ", or \"\" for none", "/var/lib/slurm-ddp/scratch",
	 FIELD(scratch_root), NODE_SIDE},
	{"retention_days", KEY_UINT, 0, 3650, "whole days, 0-3650", "7",
	 FIELD(retention_days), NODE_SIDE},
	{"firewall", KEY_ONOFF, 0, 1, "on or off", "on", FIELD(firewall),
	 NODE_SIDE},
	{"firewall_timeout", KEY_DURATION, 60, 365L * 86400,
	 "N[s|m|h|d] between 60s and 365d", "7d", FIELD(firewall_timeout),
	 NODE_SIDE},
	{"state_dir", KEY_PATH, 1, CONF_PATH_MAX - 1, PATH_TEXT,
	 "/run/slurm-ddp", FIELD(state_dir), NODE_SIDE},
	{"nft_path", KEY_PATH, 1, CONF_PATH_MAX - 1, PATH_TEXT, "/usr/sbin/nft",
	 FIELD(nft_path), NODE_SIDE},
	{"scontrol_path", KEY_PATH, 1, CONF_PATH_MAX - 1, PATH_TEXT,
	 "/usr/bin/scontrol", FIELD(scontrol_path), NODE_SIDE},
	{"nccl_ib_hca", KEY_NCCL_HCA, 1, NCCL_HCA_NAME_MAX,
	 "[^][=]NAME[:PORT],... with 1-32 device names of [A-Za-z0-9_.-] "
	 "(e.g. =mlx5_0,mlx5_1), or \"\" to let NCCL choose",
	 "", FIELD(nccl_ib_hca), PLUGIN_ONLY},
	{"nccl_socket_ifname", KEY_NCCL_IFNAME, 1, NCCL_IFNAME_MAX,
	 "[^][=]NAME,... with 1-32 interface names or prefixes of 1-15 "
	 "characters of [A-Za-z0-9_.-] (e.g. =ib0 or ^docker), or \"\" to let "
	 "NCCL choose",
	 "", FIELD(nccl_socket_ifname), PLUGIN_ONLY},
	{"check", KEY_CHECK, 0, 0, DDP_CHECK_ACCEPTED, "off", FIELD(check),
	 PLUGIN_ONLY},
	{"check_min_fraction", KEY_FRACTION, 0, 1,
	 "a number in (0, 1] of at most 6 decimals, e.g. 0.5", "0.5",
	 FIELD(check_min_fraction), PLUGIN_ONLY},
	{"check_join_limit", KEY_UINT, 1, 3600, "whole seconds, 1-3600", "60",
	 FIELD(check_join_limit), PLUGIN_ONLY},
	{"check_time_limit", KEY_UINT, 1, 3600, "whole seconds, 1-3600", "20",
	 FIELD(check_time_limit), PLUGIN_ONLY},
	{"check_path", KEY_PATH, 1, CONF_PATH_MAX - 1, PATH_TEXT,
	 DDP_CHECK_PATH, FIELD(check_path), PLUGIN_ONLY},
	{"check_requeue_max", KEY_UINT, 0, 100,
	 "whole number of requeues, 0-100", "2", FIELD(check_requeue_max),
	 PLUGIN_ONLY},
	{"restart_max", KEY_UINT, 0, DDP_RESTART_LIMIT,
	 "whole number of restarts, 0-100", "3", FIELD(restart_max),
	 PLUGIN_ONLY},
	{"restart_path", KEY_PATH, 1, CONF_PATH_MAX - 1, PATH_TEXT,
	 DDP_RESTART_PATH, FIELD(restart_path), PLUGIN_ONLY},
	{"check_drain_jobs", KEY_UINT, 1, 1000, "whole number of jobs, 1-1000",
	 "3", FIELD(check_drain_jobs), NODE_SIDE},
	{"check_drain_users", KEY_UINT, 1, 1000,
	 "whole number of users, 1-1000", "2", FIELD(check_drain_users),
	 NODE_SIDE},
	{"check_drain_window", KEY_DURATION, 60, 365L * 86400,
	 "N[s|m|h|d] between 60s and 365d", "86400", FIELD(check_drain_window),
	 NODE_SIDE},
	{"topology_cache", KEY_PATH_NONE, 1, CONF_PATH_MAX - 1,
	 PATH_TEXT ", or none", "/run/slurm-ddp/topology.xml",
	 FIELD(topology_cache), PLUGIN_ONLY},
	{"kill_on_bad_exit", KEY_YESNO, 0, 1, "yes or no", "yes",
	 FIELD(kill_on_bad_exit), PLUGIN_ONLY},
	{"cpus_per_gpu", KEY_CPU_SHARE, 1, DDP_CPUS_PER_GPU_MAX,
	 "share (each GPU's equal share of its node's cores), a whole number "
	 "of CPUs per GPU, 1-1024, or off (Slurm's default)",
	 "share", FIELD(cpus_per_gpu), PLUGIN_ONLY},
	{"stop_before", KEY_STOP_BEFORE, 0, 0,
	 "auto (from the measured step and checkpoint times), 0 (no stop "
	 "before the end time) or whole seconds from 1 to 604800",
	 "auto", FIELD(stop_before), PLUGIN_ONLY},
	{"stop_requeue_max", KEY_UINT, 0, 100,
	 "whole number of requeues, 0-100", "2", FIELD(stop_requeue_max),
	 PLUGIN_ONLY},
};

#undef FIELD
#undef NODE_SIDE
#undef PLUGIN_ONLY
#undef PATH_TEXT

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

/* KEY_PORTS writes both ends through the one offset. */
_Static_assert(offsetof(struct ddp_conf, port_max) ==
		       offsetof(struct ddp_conf, port_min) + sizeof(unsigned),
	       "port_max follows port_min");

static const char *const bind_names[] = DDP_BIND_NAMES;
_Static_assert(sizeof(bind_names) / sizeof(bind_names[0]) == DDP_BIND_CORE + 1,
	       "one name per binding mode");

const char *
ddp_bind_name(enum ddp_bind b)
{
	if ((unsigned)b >= sizeof(bind_names) / sizeof(bind_names[0]))
		return "?";
	return bind_names[b];
}

int
ddp_bind_parse(const char *s, enum ddp_bind *out)
{
	unsigned i;

	for (i = 0; s && i < sizeof(bind_names) / sizeof(bind_names[0]); i++) {
		if (!strcmp(s, bind_names[i])) {
			*out = (enum ddp_bind)i;
			return 0;
		}
	}
	return -1;
}

static const char *const check_names[] = DDP_CHECK_NAMES;
_Static_assert(sizeof(check_names) / sizeof(check_names[0]) ==
		       DDP_CHECK_REQUEUE + 1,
	       "one name per check mode");

const char *
ddp_check_name(enum ddp_check m)
{
	if ((unsigned)m >= sizeof(check_names) / sizeof(check_names[0]))
		return "?";
	return check_names[m];
}

int
ddp_check_parse(const char *s, enum ddp_check *out)
{
	unsigned i;

	for (i = 0; s && i < sizeof(check_names) / sizeof(check_names[0]);
	     i++) {
		if (!strcmp(s, check_names[i])) {
			*out = (enum ddp_check)i;
			return 0;
		}
	}
	return -1;
}

/* A path key's value into its field (k->size bytes); empty_ok as
 * parse_path's. */
static int
set_path(const struct conf_key *k, const char *value, int empty_ok, void *field)
{
	char path[CONF_PATH_MAX];

	if (strlen(value) > (size_t)k->max ||
	    parse_path(value, empty_ok, path, sizeof(path)) < 0 ||
	    strlen(path) >= k->size)
		return -1;
	memcpy(field, path, strlen(path) + 1);
	return 0;
}

/* Parses value as k says and stores it in conf; -1 leaves conf as it was. */
static int
set_key(const struct conf_key *k, const char *value, struct ddp_conf *conf)
{
	void *field = (char *)conf + k->offset;
	unsigned a, b;
	enum ddp_bind bind;
	enum ddp_check check;
	struct ddp_stop_before stop;
	char why[DDP_ERR_LEN];
	double frac;
	int on;

	switch (k->type) {
	case KEY_PORTS:
		if (parse_port_range(value, k->min, k->max, &a, &b) < 0)
			return -1;
		((unsigned *)field)[0] = a;
		((unsigned *)field)[1] = b;
		return 0;
	case KEY_BIND:
		if (ddp_bind_parse(value, &bind) < 0)
			return -1;
		*(enum ddp_bind *)field = bind;
		return 0;
	case KEY_PATH:
		return set_path(k, value, k->min == 0, field);
	case KEY_PATH_NONE:
		if (!strcmp(value, "none")) {
			*(char *)field = '\0';
			return 0;
		}
		return set_path(k, value, 0, field);
	case KEY_FSTYPES:
		return parse_fstypes(value, (unsigned)k->max, conf);
	case KEY_UINT:
		if (parse_uint(value, k->min, k->max, &a) < 0)
			return -1;
		*(unsigned *)field = a;
		return 0;
	case KEY_ONOFF:
		if (parse_onoff(value, &on) < 0)
			return -1;
		*(int *)field = on;
		return 0;
	case KEY_YESNO:
		if (strcmp(value, "yes") && strcmp(value, "no"))
			return -1;
		*(int *)field = !strcmp(value, "yes");
		return 0;
	case KEY_DURATION:
		if (parse_duration(value, k->min, k->max, &a) < 0)
			return -1;
		*(unsigned *)field = a;
		return 0;
	case KEY_NCCL_HCA:
	case KEY_NCCL_IFNAME:
		return parse_nccl_list(value, k->type == KEY_NCCL_HCA,
				       (size_t)k->max, field, k->size);
	case KEY_CHECK:
		if (ddp_check_parse(value, &check) < 0)
			return -1;
		*(enum ddp_check *)field = check;
		return 0;
	case KEY_FRACTION:
		if (parse_fraction(value, &frac) < 0)
			return -1;
		*(double *)field = frac;
		return 0;
	case KEY_CPU_SHARE:
		if (!strcmp(value, "share"))
			*(int *)field = DDP_CPUS_PER_GPU_SHARE;
		else if (!strcmp(value, "off"))
			*(int *)field = DDP_CPUS_PER_GPU_OFF;
		else if (parse_uint(value, k->min, k->max, &a) == 0)
			*(int *)field = (int)a;
		else
			return -1;
		return 0;
	case KEY_STOP_BEFORE:
		/* Kept as written: every task gets it as DDP_STOP_BEFORE. */
		if (ddp_stop_before_parse(value, &stop, why, sizeof(why)) < 0 ||
		    ddp_fmt(field, k->size, "%s", value) < 0)
			return -1;
		return 0;
	}
	return -1;
}

static const struct conf_key *
find_key(const char *name)
{
	size_t i;

	for (i = 0; i < NKEYS; i++)
		if (!strcmp(keys[i].name, name))
			return &keys[i];
	return NULL;
}

void
ddp_conf_defaults(struct ddp_conf *conf)
{
	size_t i;

	memset(conf, 0, sizeof(*conf));
	for (i = 0; i < NKEYS; i++)
		set_key(&keys[i], keys[i].def, conf);
}

const char *
ddp_conf_key_name(size_t i)
{
	return i < NKEYS ? keys[i].name : NULL;
}

const char *
ddp_conf_key_default(size_t i)
{
	return i < NKEYS ? keys[i].def : NULL;
}

/* The names of the keys that pass want (every key when plugin_only is 0,
 * the plugin's own when 1), as ddp_conf_key_names lists them. */
static int
key_names(char *buf, size_t len, const char *last_sep, int plugin_only)
{
	size_t i, n = 0, listed = 0;

	if (len)
		buf[0] = '\0';
	for (i = 0; i < NKEYS; i++)
		n += !(plugin_only && keys[i].node_side);
	for (i = 0; i < NKEYS; i++) {
		const char *sep;

		if (plugin_only && keys[i].node_side)
			continue;
		sep = listed == 0 ? "" : listed + 1 == n ? last_sep : ", ";
		if (ddp_fmt_cat(buf, len, "%s%s", sep, keys[i].name) < 0)
			return -1;
		listed++;
	}
	return 0;
}

int
ddp_conf_key_names(char *buf, size_t len, const char *last_sep)
{
	return key_names(buf, len, last_sep, 0);
}

int
ddp_conf_plugin_key_names(char *buf, size_t len, const char *last_sep)
{
	return key_names(buf, len, last_sep, 1);
}

int
ddp_conf_key_node_side(const char *key)
{
	const struct conf_key *k = key ? find_key(key) : NULL;

	return k ? k->node_side : -1;
}

int
ddp_conf_format(const struct ddp_conf *conf, const char *key, char *buf,
		size_t len)
{
	const struct conf_key *k = find_key(key);
	const void *field;
	size_t i;

	if (!k)
		return -1;
	field = (const char *)conf + k->offset;
	switch (k->type) {
	case KEY_PORTS:
		return ddp_fmt(buf, len, "%u-%u", ((const unsigned *)field)[0],
			       ((const unsigned *)field)[1]);
	case KEY_BIND:
		return ddp_fmt(buf, len, "%s",
			       ddp_bind_name(*(const enum ddp_bind *)field));
	case KEY_PATH:
	case KEY_NCCL_HCA:
	case KEY_NCCL_IFNAME:
		return ddp_fmt(buf, len, "%s", (const char *)field);
	case KEY_PATH_NONE:
		return ddp_fmt(buf, len, "%s",
			       *(const char *)field ? (const char *)field
						    : "none");
	case KEY_FSTYPES:
		if (len)
			buf[0] = '\0';
		for (i = 0; i < conf->n_shared_fstypes; i++) {
			if (ddp_fmt_cat(buf, len, "%s%s", i ? "," : "",
					conf->shared_fstypes[i]) < 0)
				return -1;
		}
		return 0;
	case KEY_UINT:
		return ddp_fmt(buf, len, "%u", *(const unsigned *)field);
	case KEY_ONOFF:
		return ddp_fmt(buf, len, "%s",
			       *(const int *)field ? "on" : "off");
	case KEY_YESNO:
		return ddp_fmt(buf, len, "%s",
			       *(const int *)field ? "yes" : "no");
	case KEY_DURATION:
		return ddp_fmt(buf, len, "%us", *(const unsigned *)field);
	case KEY_CHECK:
		return ddp_fmt(buf, len, "%s",
			       ddp_check_name(*(const enum ddp_check *)field));
	case KEY_FRACTION:
		/* 0.500000 -> 0.5: what an admin would write. */
		if (ddp_fmt(buf, len, "%.6f", *(const double *)field) < 0)
			return -1;
		for (i = strlen(buf); i > 1 && buf[i - 1] == '0'; i--)
			buf[i - 1] = '\0';
		if (i > 1 && buf[i - 1] == '.')
			buf[i - 1] = '\0';
		return 0;
	case KEY_CPU_SHARE:
		if (*(const int *)field == DDP_CPUS_PER_GPU_SHARE)
			return ddp_fmt(buf, len, "share");
		if (*(const int *)field == DDP_CPUS_PER_GPU_OFF)
			return ddp_fmt(buf, len, "off");
		return ddp_fmt(buf, len, "%d", *(const int *)field);
	case KEY_STOP_BEFORE:
		return ddp_fmt(buf, len, "%s", (const char *)field);
	}
	return -1;
}

int
ddp_conf_set(struct ddp_conf *conf, const char *key, const char *value,
	     char *err, size_t errlen)
{
	const struct conf_key *k;
	char shown[64], names[512];

	if (errlen)
		err[0] = '\0';
	if (!key || !value)
		return bad_value(key ? key : "(null)", "", "a key and a value",
				 err, errlen);
	k = find_key(key);
	if (!k) {
		show_value(key, shown, sizeof(shown));
		/* Cannot fail: names holds every key (test-common-conf). */
		ddp_conf_key_names(names, sizeof(names), " or ");
		return ddp_errf(err, errlen, "unknown key '%s': expected %s",
				shown, names);
	}
	if (set_key(k, value, conf) < 0)
		return bad_value(key, value, k->accepted, err, errlen);
	return 0;
}

static char *
trim(char *s)
{
	size_t len;

	while (*s == ' ' || *s == '\t')
		s++;
	len = strlen(s);
	while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t' ||
			   s[len - 1] == '\r' || s[len - 1] == '\n'))
		s[--len] = '\0';
	return s;
}

/* Removes one pair of matching double quotes, so key = "" means empty. */
static char *
unquote(char *s)
{
	size_t len = strlen(s);

	if (len >= 2 && s[0] == '"' && s[len - 1] == '"') {
		s[len - 1] = '\0';
		return s + 1;
	}
	return s;
}

static int
load_line(struct ddp_conf *conf, char *line, const char *path, unsigned lineno,
	  char *err, size_t errlen)
{
	char msg[DDP_ERR_LEN];
	char *hash, *eq, *key, *value;

	hash = strchr(line, '#');
	if (hash)
		*hash = '\0';
	key = trim(line);
	if (*key == '\0')
		return 0;
	eq = strchr(key, '=');
	if (!eq)
		return ddp_errf(
			err, errlen,
			"%s:%u: expected 'key = value' (or a '#' comment)",
			path, lineno);
	*eq = '\0';
	key = trim(key);
	value = unquote(trim(eq + 1));
	if (ddp_conf_set(conf, key, value, msg, sizeof(msg)) < 0)
		return ddp_errf(err, errlen, "%s:%u: %s", path, lineno, msg);
	return 0;
}

int
ddp_conf_load(struct ddp_conf *conf, const char *path, int missing_ok,
	      char *err, size_t errlen)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	unsigned lineno = 0;
	FILE *f = NULL;
	int rv = -1;

	if (errlen)
		err[0] = '\0';
	f = fopen(path, "re");
	if (!f) {
		if (errno == ENOENT && missing_ok) {
			rv = 0;
			goto out;
		}
		ddp_errf(err, errlen, "%s: cannot open: %s", path,
			 strerror(errno));
		goto out;
	}
	errno = 0;
	while ((len = getline(&line, &cap, f)) >= 0) {
		lineno++;
		if (len > CONF_LINE_MAX) {
			ddp_errf(err, errlen,
				 "%s:%u: line longer than %d bytes", path,
				 lineno, CONF_LINE_MAX);
			goto out;
		}
		/* A NUL would silently cut the line short: refuse it. */
		if (strlen(line) != (size_t)len) {
			ddp_errf(err, errlen, "%s:%u: NUL byte in line", path,
				 lineno);
			goto out;
		}
		if (load_line(conf, line, path, lineno, err, errlen) < 0)
			goto out;
	}
	if (ferror(f)) {
		ddp_errf(err, errlen, "%s: read error: %s", path,
			 strerror(errno));
		goto out;
	}
	rv = 0;
out:
	free(line);
	if (f)
		fclose(f);
	return rv;
}

int
ddp_conf_check_ports(const struct ddp_conf *conf, unsigned eph_low,
		     unsigned eph_high, char *err, size_t errlen)
{
	if (errlen)
		err[0] = '\0';
	if (conf->port_max < eph_low || conf->port_min > eph_high)
		return 0;
	return ddp_errf(
		err, errlen,
		"port_range %u-%u overlaps the kernel's ephemeral range "
		"%u-%u (net.ipv4.ip_local_port_range): choose a port_range "
		"outside it or narrow the ephemeral range",
		conf->port_min, conf->port_max, eph_low, eph_high);
}

int
ddp_nccl_ifname_match(const char *filter, const char *name)
{
	const char *p = filter;
	int exclude = 0, exact = 0, hit = 0;

	if (*p == '^') {
		exclude = 1;
		p++;
	}
	if (*p == '=') {
		exact = 1;
		p++;
	}
	while (*p && !hit) {
		size_t len = strcspn(p, ",");

		hit = exact ? strlen(name) == len && !strncmp(name, p, len)
			    : !strncmp(name, p, len);
		p += len;
		if (*p == ',')
			p++;
	}
	return exclude ? !hit : hit;
}

/* 1 when name is an item of the ", " separated list. */
static int
listed(const char *list, const char *name)
{
	size_t len = strlen(name);
	const char *p = list;

	while ((p = strstr(p, name)) != NULL) {
		if ((p == list || p[-1] == ' ') && (p[len] == ',' || !p[len]))
			return 1;
		p += len;
	}
	return 0;
}

int
ddp_conf_check_socket_ifname(const struct ddp_conf *conf, char *err,
			     size_t errlen)
{
	struct ifaddrs *ifs = NULL, *i;
	char seen[256];
	size_t used = 0;
	int rv = -1;

	if (errlen)
		err[0] = '\0';
	seen[0] = '\0';
	if (!conf->nccl_socket_ifname[0])
		return 0;
	if (getifaddrs(&ifs) < 0)
		return ddp_errf(err, errlen,
				"cannot list network interfaces: %s",
				strerror(errno));
	for (i = ifs; i; i = i->ifa_next) {
		int fam = i->ifa_addr ? i->ifa_addr->sa_family : AF_UNSPEC;

		if (!(i->ifa_flags & IFF_UP) ||
		    (fam != AF_INET && fam != AF_INET6))
			continue;
		if (fam == AF_INET6 &&
		    IN6_IS_ADDR_LINKLOCAL(
			    &((struct sockaddr_in6 *)(void *)i->ifa_addr)
				     ->sin6_addr))
			continue;
		if (ddp_nccl_ifname_match(conf->nccl_socket_ifname,
					  i->ifa_name)) {
			rv = 0;
			goto out;
		}
		/* Each name once, for the message; a cut list still helps. */
		if (!listed(seen, i->ifa_name) &&
		    ddp_fmt(seen + used, sizeof(seen) - used, "%s%s",
			    used ? ", " : "", i->ifa_name) == 0)
			used += strlen(seen + used);
	}
	ddp_errf(err, errlen,
		 "nccl_socket_ifname '%s' selects no interface of this node "
		 "that is up with an address (up here: %s), so NCCL could not "
		 "connect: the admin should fix nccl_socket_ifname in ddp.conf "
		 "(or leave it out and let NCCL choose)",
		 conf->nccl_socket_ifname, used ? seen : "none");
out:
	freeifaddrs(ifs);
	return rv;
}

int
ddp_read_ephemeral_range(unsigned *low, unsigned *high)
{
	char buf[64];
	const char *p, *end = NULL;
	long a, b;
	FILE *f = NULL;
	int rv = -1;

	*low = 32768;
	*high = 60999;
	f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");
	if (!f || !fgets(buf, sizeof(buf), f))
		goto out;
	if (ddp_parse_long_prefix(buf, 1, 65535, &a, &end) < 0)
		goto out;
	p = end;
	while (*p == ' ' || *p == '\t')
		p++;
	if (ddp_parse_long_prefix(p, 1, 65535, &b, &end) < 0 || b < a)
		goto out;
	if (*end != '\n' && *end != '\0')
		goto out;
	*low = (unsigned)a;
	*high = (unsigned)b;
	rv = 0;
out:
	if (f)
		fclose(f);
	return rv;
}
