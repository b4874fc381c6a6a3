/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Strict reader of the site configuration (ddp.conf) shared by the plugin
 * and the prolog helper, and the per-job directory naming rules.
 */
#include "ddp_conf.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "ddp_util.h"

/* Longest configured path: leaves room for "/<user>/<jobid>" below it. */
#define CONF_PATH_MAX 1024
/* Longest line of the file; longer lines are refused. */
#define CONF_LINE_MAX 4096

void
ddp_conf_defaults(struct ddp_conf *conf)
{
	static const char *const fstypes[] = {
		"nfs", "nfs4", "lustre", "gpfs", "beegfs", "cephfs", "ceph",
	};
	size_t i;

	memset(conf, 0, sizeof(*conf));
	conf->port_min = 29400;
	conf->port_max = 29999;
	conf->default_bind = DDP_BIND_CORE;
	for (i = 0; i < sizeof(fstypes) / sizeof(fstypes[0]); i++)
		ddp_fmt(conf->shared_fstypes[i],
			sizeof(conf->shared_fstypes[i]), "%s", fstypes[i]);
	conf->n_shared_fstypes = (unsigned)i;
	conf->shared_timeout = 10;
	ddp_fmt(conf->scratch_root, sizeof(conf->scratch_root), "%s",
		"/var/tmp/ddp");
	conf->retention_days = 7;
	conf->firewall = 1;
	conf->firewall_timeout = 7 * 86400;
	ddp_fmt(conf->state_dir, sizeof(conf->state_dir), "%s",
		"/run/slurm-ddp");
	ddp_fmt(conf->nft_path, sizeof(conf->nft_path), "%s", "/usr/sbin/nft");
	ddp_fmt(conf->scontrol_path, sizeof(conf->scontrol_path), "%s",
		"/usr/bin/scontrol");
}

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
	snprintf(err, errlen, "%s: invalid value '%s': expected %s", key, shown,
		 accepted);
	return -1;
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
parse_port_range(const char *value, unsigned *lo, unsigned *hi)
{
	const char *end = NULL;
	long a, b;

	if (ddp_parse_long_prefix(value, 1024, 65535, &a, &end) < 0 ||
	    value[0] == '+' || value[0] == '-')
		return -1;
	if (*end == '\0') {
		b = a;
	} else {
		if (*end != '-' || end[1] == '+' || end[1] == '-' ||
		    ddp_parse_long(end + 1, 1024, 65535, &b) < 0 || b < a)
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

static int
parse_fstypes(const char *value, struct ddp_conf *conf)
{
	char types[DDP_CONF_MAX_FSTYPES][32];
	unsigned n = 0;
	const char *p = value;

	for (;;) {
		size_t len = 0;

		while (*p == ' ' || *p == '\t')
			p++;
		while (p[len] && (islower((unsigned char)p[len]) ||
				  isdigit((unsigned char)p[len]) ||
				  p[len] == '_' || p[len] == '.'))
			len++;
		if (len == 0 || len >= sizeof(types[0]) ||
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

int
ddp_conf_set(struct ddp_conf *conf, const char *key, const char *value,
	     char *err, size_t errlen)
{
	char path[PATH_MAX];
	unsigned a, b;
	int on;

	if (errlen)
		err[0] = '\0';
	if (!key || !value)
		return bad_value(key ? key : "(null)", "", "a key and a value",
				 err, errlen);
	if (strcmp(key, "port_range") == 0) {
		if (parse_port_range(value, &a, &b) < 0)
			return bad_value(key, value,
					 "LOW-HIGH with 1024 <= LOW <= HIGH "
					 "<= 65535",
					 err, errlen);
		conf->port_min = a;
		conf->port_max = b;
	} else if (strcmp(key, "default_bind") == 0) {
		if (strcmp(value, "none") == 0)
			conf->default_bind = DDP_BIND_NONE;
		else if (strcmp(value, "numa") == 0)
			conf->default_bind = DDP_BIND_NUMA;
		else if (strcmp(value, "core") == 0)
			conf->default_bind = DDP_BIND_CORE;
		else
			return bad_value(key, value, "none, numa or core", err,
					 errlen);
	} else if (strcmp(key, "shared_root") == 0 ||
		   strcmp(key, "scratch_root") == 0 ||
		   strcmp(key, "shared_mount") == 0) {
		if (parse_path(value, 1, path, sizeof(path)) < 0)
			return bad_value(key, value,
					 "an absolute path other than '/' "
					 "without '.', '..', '#' or control "
					 "characters, or \"\" for none",
					 err, errlen);
		if (strcmp(key, "shared_root") == 0)
			memcpy(conf->shared_root, path, strlen(path) + 1);
		else if (strcmp(key, "shared_mount") == 0)
			memcpy(conf->shared_mount, path, strlen(path) + 1);
		else
			memcpy(conf->scratch_root, path, strlen(path) + 1);
	} else if (strcmp(key, "state_dir") == 0 ||
		   strcmp(key, "nft_path") == 0 ||
		   strcmp(key, "scontrol_path") == 0) {
		if (parse_path(value, 0, path, sizeof(path)) < 0)
			return bad_value(key, value,
					 "an absolute path other than '/' "
					 "without '.', '..', '#' or control "
					 "characters",
					 err, errlen);
		if (strcmp(key, "state_dir") == 0)
			memcpy(conf->state_dir, path, strlen(path) + 1);
		else if (strcmp(key, "nft_path") == 0)
			memcpy(conf->nft_path, path, strlen(path) + 1);
		else
			memcpy(conf->scontrol_path, path, strlen(path) + 1);
	} else if (strcmp(key, "shared_fstypes") == 0) {
		if (parse_fstypes(value, conf) < 0)
			return bad_value(key, value,
					 "a comma list of 1-16 file-system "
					 "type names of [a-z0-9_.], as in "
					 "/proc/mounts (e.g. nfs,nfs4,lustre)",
					 err, errlen);
	} else if (strcmp(key, "shared_timeout") == 0) {
		if (parse_uint(value, 1, 600, &a) < 0)
			return bad_value(key, value, "whole seconds, 1-600",
					 err, errlen);
		conf->shared_timeout = a;
	} else if (strcmp(key, "retention_days") == 0) {
		if (parse_uint(value, 0, 3650, &a) < 0)
			return bad_value(key, value, "whole days, 0-3650", err,
					 errlen);
		conf->retention_days = a;
	} else if (strcmp(key, "firewall") == 0) {
		if (parse_onoff(value, &on) < 0)
			return bad_value(key, value, "on or off", err, errlen);
		conf->firewall = on;
	} else if (strcmp(key, "firewall_timeout") == 0) {
		if (parse_duration(value, 60, 365L * 86400, &a) < 0)
			return bad_value(key, value,
					 "N[s|m|h|d] between 60s and 365d", err,
					 errlen);
		conf->firewall_timeout = a;
	} else {
		char shown[64];

		show_value(key, shown, sizeof(shown));
		snprintf(err, errlen,
			 "unknown key '%s': expected port_range, "
			 "default_bind, shared_root, shared_fstypes, "
			 "shared_timeout, shared_mount, scratch_root, "
			 "retention_days, "
			 "firewall, firewall_timeout, state_dir, nft_path or "
			 "scontrol_path",
			 shown);
		return -1;
	}
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
	char msg[DDP_CONF_ERR_LEN];
	char *hash, *eq, *key, *value;

	hash = strchr(line, '#');
	if (hash)
		*hash = '\0';
	key = trim(line);
	if (*key == '\0')
		return 0;
	eq = strchr(key, '=');
	if (!eq) {
		snprintf(err, errlen,
			 "%s:%u: expected 'key = value' (or a '#' comment)",
			 path, lineno);
		return -1;
	}
	*eq = '\0';
	key = trim(key);
	value = unquote(trim(eq + 1));
	if (ddp_conf_set(conf, key, value, msg, sizeof(msg)) < 0) {
		snprintf(err, errlen, "%s:%u: %s", path, lineno, msg);
		return -1;
	}
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
		snprintf(err, errlen, "%s: cannot open: %s", path,
			 strerror(errno));
		goto out;
	}
	errno = 0;
	while ((len = getline(&line, &cap, f)) >= 0) {
		lineno++;
		if (len > CONF_LINE_MAX) {
			snprintf(err, errlen,
				 "%s:%u: line longer than %d bytes", path,
				 lineno, CONF_LINE_MAX);
			goto out;
		}
		/* A NUL would silently cut the line short: refuse it. */
		if (strlen(line) != (size_t)len) {
			snprintf(err, errlen, "%s:%u: NUL byte in line", path,
				 lineno);
			goto out;
		}
		if (load_line(conf, line, path, lineno, err, errlen) < 0)
			goto out;
	}
	if (ferror(f)) {
		snprintf(err, errlen, "%s: read error: %s", path,
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
ddp_conf_valid_user(const char *name)
{
	size_t i;

	if (!name || name[0] == '\0' || name[0] == '-' || name[0] == '.')
		return 0;
	for (i = 0; name[i]; i++) {
		unsigned char c = (unsigned char)name[i];

		if (i >= 64)
			return 0;
		if (!isalnum(c) && c != '.' && c != '_' && c != '-' && c != '@')
			return 0;
	}
	return 1;
}

int
ddp_conf_shared_dir(const struct ddp_conf *conf, const char *user,
		    unsigned long jobid, char *buf, size_t len)
{
	if (conf->shared_root[0] == '\0' || !ddp_conf_valid_user(user) ||
	    jobid == 0)
		return -1;
	return ddp_fmt(buf, len, "%s/%s/%lu", conf->shared_root, user, jobid);
}

int
ddp_conf_scratch_dir(const struct ddp_conf *conf, unsigned long jobid,
		     char *buf, size_t len)
{
	if (conf->scratch_root[0] == '\0' || jobid == 0)
		return -1;
	return ddp_fmt(buf, len, "%s/%lu", conf->scratch_root, jobid);
}

int
ddp_conf_check_ports(const struct ddp_conf *conf, unsigned eph_low,
		     unsigned eph_high, char *err, size_t errlen)
{
	if (errlen)
		err[0] = '\0';
	if (conf->port_max < eph_low || conf->port_min > eph_high)
		return 0;
	snprintf(err, errlen,
		 "port_range %u-%u overlaps the kernel's ephemeral range "
		 "%u-%u (net.ipv4.ip_local_port_range): choose a port_range "
		 "outside it or narrow the ephemeral range",
		 conf->port_min, conf->port_max, eph_low, eph_high);
	return -1;
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
