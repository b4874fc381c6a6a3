/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ddp-nodectl doctor: a node's whole slurm-ddp setup checked in one
 * command, one line per check, "ok|FAIL|warn WHAT: DETAIL; fix: WHAT TO
 * DO". It reads slurm.conf (the plugstack line, Prolog, Epilog,
 * PrologFlags) and ddp.conf (the port key, shared_root, the nft table,
 * state_dir, scratch_root) and changes nothing: a missing directory is
 * reported, never made.
 */
#include "nodectl_cmd.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <glob.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ddp_util.h"
#include "port.h"
#include "sitekey.h"

/* Where make install put the Prolog and Epilog scripts, for the fix. */
#ifndef DDP_LIBEXECDIR
#define DDP_LIBEXECDIR "/usr/local/libexec/slurm-ddp"
#endif
/* Where a relative plugstack path is looked for when slurm.conf names no
 * PluginDir: the directory make install put the plugin in. */
#ifndef DDP_SLURM_PLUGINDIR
#define DDP_SLURM_PLUGINDIR "/usr/local/lib/slurm"
#endif
#define SLURM_CONF_DEFAULT "/etc/slurm/slurm.conf"
#define PLUGIN_NAME "spank_ddp.so"
/* Include files nested deeper than this are a loop. */
#define MAX_DEPTH 8
/* How much of a Prolog wrapper is read to find the script it runs. */
#define WRAPPER_MAX 65536

struct doctor {
	int failed;   /* a check failed: exit 1 */
	int unusable; /* slurm.conf or ddp.conf unreadable: exit 2 */
};

__attribute__((format(printf, 4, 5))) static void
say(struct doctor *d, const char *verdict, const char *what, const char *fmt,
    ...)
{
	va_list ap;

	if (strcmp(verdict, "FAIL") == 0)
		d->failed = 1;
	printf("%s %s: ", verdict, what);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

/* The settings of slurm.conf doctor looks at ("" when not set). */
struct slurm_conf {
	char path[PATH_MAX];
	char plugstack[PATH_MAX];
	char plugin_dir[PATH_MAX];
	char prolog[PATH_MAX];
	char epilog[PATH_MAX];
	char prolog_flags[256];
};

/* The next whitespace-separated word of *s (NUL-terminated in place), or
 * NULL at the end of the line. */
static char *
next_word(char **s)
{
	char *w = *s + strspn(*s, " \t\r\n");

	if (!*w)
		return NULL;
	*s = w + strcspn(w, " \t\r\n");
	if (**s)
		*(*s)++ = '\0';
	return w;
}

/* Cuts line at its comment: '#' outside quotes. */
static void
drop_comment(char *line)
{
	int quoted = 0;

	for (; *line; line++) {
		if (*line == '"')
			quoted = !quoted;
		else if (*line == '#' && !quoted) {
			*line = '\0';
			return;
		}
	}
}

/* path as given, or relative to the directory of base. */
static int
relative_to(const char *base, const char *path, char *out, size_t len)
{
	const char *slash = strrchr(base, '/');

	if (path[0] == '/' || !slash)
		return ddp_fmt(out, len, "%s", path);
	return ddp_fmt(out, len, "%.*s/%s", (int)(slash - base), base, path);
}

static int
set_value(char *dst, size_t len, const char *value)
{
	size_t n = strlen(value);

	if (n >= 2 && value[0] == '"' && value[n - 1] == '"')
		return ddp_fmt(dst, len, "%.*s", (int)(n - 2), value + 1);
	return ddp_fmt(dst, len, "%s", value);
}

/*
 * Reads the keys doctor needs from slurm.conf at path, following its
 * Include lines (relative to the first file's directory, as slurmctld
 * does). Keys are case-insensitive; the last setting wins. Returns 0, or
 * -1 with err.
 */
static int
read_slurm_conf(const char *path, struct slurm_conf *sc, int depth, char *err,
		size_t errlen)
{
	static const struct {
		const char *key;
		size_t off, len;
	} keys[] = {
		{"PlugStackConfig", offsetof(struct slurm_conf, plugstack),
		 PATH_MAX},
		{"PluginDir", offsetof(struct slurm_conf, plugin_dir),
		 PATH_MAX},
		{"Prolog", offsetof(struct slurm_conf, prolog), PATH_MAX},
		{"Epilog", offsetof(struct slurm_conf, epilog), PATH_MAX},
		{"PrologFlags", offsetof(struct slurm_conf, prolog_flags), 256},
	};
	char *line = NULL, *rest, *word, *eq, inc[PATH_MAX];
	size_t cap = 0, i;
	unsigned lineno = 0;
	FILE *f;
	int rv = -1;

	if (depth > MAX_DEPTH)
		return ddp_errf(err, errlen,
				"%s: Include nested deeper than %d", path,
				MAX_DEPTH);
	f = fopen(path, "re");
	if (!f)
		return ddp_errf(err, errlen, "cannot read %s: %s", path,
				strerror(errno));
	while (getline(&line, &cap, f) >= 0) {
		lineno++;
		drop_comment(line);
		rest = line;
		word = next_word(&rest);
		if (word && strcasecmp(word, "Include") == 0) {
			word = next_word(&rest);
			if (!word) {
				ddp_errf(err, errlen,
					 "%s:%u: Include without a file", path,
					 lineno);
				goto out;
			}
			if (relative_to(sc->path, word, inc, sizeof(inc)) < 0) {
				ddp_errf(err, errlen,
					 "%s:%u: Include: path too long", path,
					 lineno);
				goto out;
			}
			if (read_slurm_conf(inc, sc, depth + 1, err, errlen) <
			    0)
				goto out;
			continue;
		}
		for (; word; word = next_word(&rest)) {
			eq = strchr(word, '=');
			if (!eq)
				continue;
			*eq = '\0';
			for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
				if (strcasecmp(word, keys[i].key) == 0 &&
				    set_value((char *)sc + keys[i].off,
					      keys[i].len, eq + 1) < 0) {
					ddp_errf(err, errlen,
						 "%s:%u: %s: value too long",
						 path, lineno, keys[i].key);
					goto out;
				}
		}
	}
	rv = 0;
out:
	free(line);
	fclose(f);
	return rv;
}

/* The plugstack line that names the plugin, once found. */
struct plug_hit {
	char file[PATH_MAX];
	unsigned line;
	char so[PATH_MAX]; /* the plugin's path, resolved */
	int exists;
	int lines; /* lines naming the plugin */
};

/* A plugstack path: absolute, or found in one of slurm.conf's
 * PluginDir directories (colon-separated). */
static void
resolve_plugin(const struct slurm_conf *sc, const char *name,
	       struct plug_hit *hit)
{
	const char *dirs =
		sc->plugin_dir[0] ? sc->plugin_dir : DDP_SLURM_PLUGINDIR;
	char cand[PATH_MAX];
	size_t n;

	if (name[0] == '/') {
		ddp_fmt(hit->so, sizeof(hit->so), "%s", name);
		hit->exists = access(name, R_OK) == 0;
		return;
	}
	while (*dirs) {
		n = strcspn(dirs, ":");
		if (ddp_fmt(cand, sizeof(cand), "%.*s/%s", (int)n, dirs,
			    name) == 0 &&
		    access(cand, R_OK) == 0) {
			ddp_fmt(hit->so, sizeof(hit->so), "%s", cand);
			hit->exists = 1;
			return;
		}
		dirs += n + (dirs[n] == ':');
	}
	ddp_fmt(hit->so, sizeof(hit->so), "%s (in %s)", name,
		sc->plugin_dir[0] ? sc->plugin_dir : DDP_SLURM_PLUGINDIR);
}

static int
is_plugin(const char *path)
{
	const char *base = strrchr(path, '/');

	return strcmp(base ? base + 1 : path, PLUGIN_NAME) == 0;
}

/*
 * Looks for a live "required|optional .../spank_ddp.so" line in the
 * plugstack file path and the files its include lines name (globs,
 * relative to its directory). The first line whose plugin exists wins.
 * Returns 0, or -1 with err when path cannot be read.
 */
static int
scan_plugstack(const struct slurm_conf *sc, const char *path, int depth,
	       struct plug_hit *hit, char *err, size_t errlen)
{
	char *line = NULL, *rest, *word, pattern[PATH_MAX];
	size_t cap = 0, i;
	unsigned lineno = 0;
	glob_t g;
	FILE *f;

	if (depth > MAX_DEPTH)
		return ddp_errf(err, errlen,
				"%s: include nested deeper than %d", path,
				MAX_DEPTH);
	f = fopen(path, "re");
	if (!f)
		return ddp_errf(err, errlen, "cannot read %s: %s", path,
				strerror(errno));
	while (getline(&line, &cap, f) >= 0) {
		lineno++;
		drop_comment(line);
		rest = line;
		word = next_word(&rest);
		if (!word)
			continue;
		if (strcmp(word, "include") == 0) {
			word = next_word(&rest);
			if (!word ||
			    relative_to(path, word, pattern, sizeof(pattern)) <
				    0 ||
			    glob(pattern, 0, NULL, &g) != 0)
				continue;
			/* An unreadable included file is only not a hit. */
			for (i = 0; i < g.gl_pathc; i++)
				scan_plugstack(sc, g.gl_pathv[i], depth + 1,
					       hit, err, errlen);
			globfree(&g);
			continue;
		}
		if (strcmp(word, "required") != 0 &&
		    strcmp(word, "optional") != 0)
			continue;
		word = next_word(&rest);
		if (!word || !is_plugin(word))
			continue;
		hit->lines++;
		if (hit->exists)
			continue;
		ddp_fmt(hit->file, sizeof(hit->file), "%s", path);
		hit->line = lineno;
		resolve_plugin(sc, word, hit);
	}
	free(line);
	fclose(f);
	return 0;
}

static void
check_plugstack(struct doctor *d, const struct slurm_conf *sc)
{
	struct plug_hit hit = {0};
	char path[PATH_MAX], err[DDP_ERR_LEN];

	if (sc->plugstack[0])
		ddp_fmt(path, sizeof(path), "%s", sc->plugstack);
	else if (relative_to(sc->path, "plugstack.conf", path, sizeof(path)) <
		 0)
		path[0] = '\0';
	if (scan_plugstack(sc, path, 0, &hit, err, sizeof(err)) < 0) {
		say(d, "FAIL", "plugstack",
		    "%s; fix: create it with the line "
		    "'required /PATH/TO/" PLUGIN_NAME "', or set "
		    "PlugStackConfig= in slurm.conf",
		    err);
		return;
	}
	if (!hit.lines) {
		say(d, "FAIL", "plugstack",
		    "no required or optional line names " PLUGIN_NAME
		    " in %s or the files it includes; fix: add 'required "
		    "/PATH/TO/" PLUGIN_NAME "' there (or in an included "
		    "plugstack.conf.d file) and restart slurmd",
		    path);
		return;
	}
	if (!hit.exists) {
		say(d, "FAIL", "plugstack",
		    "%s:%u names %s, which is not there; fix: install the "
		    "plugin or correct the path",
		    hit.file, hit.line, hit.so);
		return;
	}
	if (hit.lines > 1)
		say(d, "warn", "plugstack",
		    "%d lines name " PLUGIN_NAME " (the first is %s:%u); fix: "
		    "keep one, Slurm loads the plugin once",
		    hit.lines, hit.file, hit.line);
	else
		say(d, "ok", "plugstack", "%s:%u loads %s", hit.file, hit.line,
		    hit.so);
}

/* 2 when path is script itself (by name or through links), 1 when it
 * is a wrapper whose text names script, 0 when neither. */
static int
runs_script(const char *path, const char *script)
{
	char real[PATH_MAX], *text = NULL;
	const char *base;
	ssize_t n;
	int fd, rv = 0;

	base = strrchr(path, '/');
	if (strcmp(base ? base + 1 : path, script) == 0)
		return 2;
	if (realpath(path, real)) {
		base = strrchr(real, '/');
		if (strcmp(base ? base + 1 : real, script) == 0)
			return 2;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return 0;
	text = malloc(WRAPPER_MAX + 1);
	if (!text)
		goto out;
	n = read(fd, text, WRAPPER_MAX);
	if (n > 0) {
		text[n] = '\0';
		rv = strstr(text, script) != NULL;
	}
out:
	free(text);
	close(fd);
	return rv;
}

/* Whether one program of Prolog=/Epilog= (a path or a glob) runs script:
 * 2 directly, 1 through a wrapper; *glob_used says it took a glob;
 * unusable names one that would but is missing or not executable, and
 * *missing says which. */
static int
entry_runs(const char *entry, const char *script, int *glob_used,
	   char *unusable, size_t len, int *missing)
{
	glob_t g;
	size_t i;
	int best = 0, r;

	if (!strpbrk(entry, "*?[")) {
		r = runs_script(entry, script);
		if (r && access(entry, X_OK) < 0) {
			*missing = errno == ENOENT;
			ddp_fmt(unusable, len, "%s", entry);
			return 0;
		}
		return r;
	}
	if (glob(entry, 0, NULL, &g) != 0)
		return 0;
	for (i = 0; i < g.gl_pathc; i++) {
		r = runs_script(g.gl_pathv[i], script);
		if (r && access(g.gl_pathv[i], X_OK) < 0) {
			*missing = errno == ENOENT;
			ddp_fmt(unusable, len, "%s", g.gl_pathv[i]);
		} else if (r > best)
			best = r;
	}
	globfree(&g);
	if (best)
		*glob_used = 1;
	return best;
}

/* Prolog= or Epilog= (key) runs script ("ddp-prolog"). */
static void
check_script(struct doctor *d, const char *key, const char *value,
	     const char *script)
{
	char list[PATH_MAX], unusable[PATH_MAX] = "", *rest = list, *entry;
	int glob_used = 0, missing = 0, r = 0;

	if (!value[0]) {
		say(d, "FAIL", key,
		    "not set in slurm.conf; fix: %s=" DDP_LIBEXECDIR
		    "/%s in slurm.conf, then scontrol reconfigure",
		    key, script);
		return;
	}
	ddp_fmt(list, sizeof(list), "%s", value);
	/* Slurm takes a comma-separated list of programs. */
	while (!r && (entry = strsep(&rest, ",")))
		if (entry[0])
			r = entry_runs(entry, script, &glob_used, unusable,
				       sizeof(unusable), &missing);
	if (!r && unusable[0] && missing) {
		say(d, "FAIL", key,
		    "%s is missing; fix: install slurm-ddp's %s there or "
		    "set %s=" DDP_LIBEXECDIR "/%s in slurm.conf",
		    unusable, script, key, script);
	} else if (!r && unusable[0]) {
		say(d, "FAIL", key, "%s is not executable; fix: chmod 0755 %s",
		    unusable, unusable);
	} else if (!r) {
		say(d, "FAIL", key,
		    "%s=%s does not run %s; fix: %s=" DDP_LIBEXECDIR
		    "/%s in slurm.conf (or make your %s run it)",
		    key, value, script, key, script, key);
	} else if (glob_used) {
		say(d, "warn", key,
		    "%s=%s reaches %s through a glob; fix: point %s= at the "
		    "script itself: on Slurm 22.05 a glob that matches "
		    "nothing drains every node",
		    key, value, script, key);
	} else {
		say(d, "ok", key, "%s runs %s%s", value, script,
		    r == 1 ? " (a wrapper)" : "");
	}
}

static void
check_prolog_flags(struct doctor *d, const char *value)
{
	char list[256], *rest = list, *flag;

	ddp_fmt(list, sizeof(list), "%s", value);
	/* Contain implies Alloc. */
	while ((flag = strsep(&rest, ",")))
		if (strcasecmp(flag, "Alloc") == 0 ||
		    strcasecmp(flag, "Contain") == 0) {
			say(d, "ok", "PrologFlags", "%s", value);
			return;
		}
	say(d, "FAIL", "PrologFlags",
	    "%s%s: without Alloc a node runs the Prolog only when its first "
	    "step starts, so its peers can find the firewall closed; fix: "
	    "PrologFlags=Alloc in slurm.conf",
	    value[0] ? value : "not set", value[0] ? " lacks Alloc" : "");
}

static void
check_slurm(struct doctor *d, const char *path)
{
	struct slurm_conf *sc = calloc(1, sizeof(*sc));
	char err[DDP_ERR_LEN];

	if (!sc) {
		say(d, "FAIL", "slurm.conf", "out of memory; fix: retry");
		d->unusable = 1;
		return;
	}
	ddp_fmt(sc->path, sizeof(sc->path), "%s", path);
	if (read_slurm_conf(path, sc, 0, err, sizeof(err)) < 0) {
		say(d, "FAIL", "slurm.conf",
		    "%s; fix: give --slurm-conf FILE or set SLURM_CONF", err);
		d->unusable = 1;
		goto out;
	}
	say(d, "ok", "slurm.conf", "%s read", path);
	check_plugstack(d, sc);
	check_script(d, "Prolog", sc->prolog, "ddp-prolog");
	check_script(d, "Epilog", sc->epilog, "ddp-epilog");
	check_prolog_flags(d, sc->prolog_flags);
out:
	free(sc);
}

static void
check_port_key(struct doctor *d, const struct ddp_conf *conf)
{
	struct ddp_site_key key;
	char err[1024];

	if (!conf->port_key[0]) {
		say(d, "warn", "port_key",
		    "empty: MASTER_PORT follows the public formula, so any "
		    "user can compute a step's port and bind it first; fix: "
		    "(umask 077; head -c 32 /dev/urandom "
		    ">/etc/slurm/ddp-port.key) on every node and set port_key");
		return;
	}
	if (ddp_site_key_load(conf->port_key, 0, &key, err, sizeof(err)) < 0) {
		say(d, "FAIL", "port_key",
		    "%s; fix: chown root:root %s && chmod 0600 %s", err,
		    conf->port_key, conf->port_key);
		return;
	}
	ddp_site_key_wipe(&key);
	say(d, "ok", "port_key", "%s is root's and only root's",
	    conf->port_key);
}

static void
check_shared_root(struct doctor *d, const struct ddp_conf *conf)
{
	char err[DDP_ERR_LEN];

	if (!conf->shared_root[0]) {
		say(d, "ok", "shared_root", "not set (no shared directories)");
		return;
	}
	if (nc_check_shared_root(conf, err, sizeof(err)) < 0) {
		say(d, "FAIL", "shared_root",
		    "%s; fix: mount it (the Prolog drains the node for this), "
		    "or list its type in shared_fstypes",
		    err);
		return;
	}
	say(d, "ok", "shared_root", "%s mounted, of an accepted type",
	    conf->shared_root);
}

static void
check_firewall(struct doctor *d, const struct ddp_conf *conf)
{
	if (!conf->firewall) {
		say(d, "ok", "firewall", "off (no per-job openings)");
		return;
	}
	if (access(conf->nft_path, X_OK) < 0) {
		say(d, "FAIL", "firewall",
		    "nft_path %s: %s; fix: install nftables or set nft_path "
		    "(or firewall = off)",
		    conf->nft_path, strerror(errno));
		return;
	}
	if (!nc_fw_table_exists(conf)) {
		say(d, "FAIL", "firewall",
		    "table inet " NC_TABLE " missing; fix: run 'ddp-nodectl "
		    "install' (at boot: systemctl enable "
		    "ddp-nodectl-install)");
		return;
	}
	say(d, "ok", "firewall", "table inet " NC_TABLE " present");
}

/* state_dir or scratch_root (key): root's, not writable by group or
 * others. A missing one is reported, not made: install makes it. */
static void
check_root_dir(struct doctor *d, const char *key, const char *what,
	       const char *path)
{
	char err[DDP_ERR_LEN];
	struct stat st;
	int fd, squatted;

	if (!path[0]) {
		say(d, "ok", key, "not set");
		return;
	}
	if (lstat(path, &st) < 0) {
		if (errno == ENOENT)
			say(d, "warn", key,
			    "%s missing; fix: run 'ddp-nodectl install' (at "
			    "boot: systemctl enable ddp-nodectl-install)",
			    path);
		else
			say(d, "FAIL", key,
			    "%s: %s; fix: make it a directory "
			    "only root can write",
			    path, strerror(errno));
		return;
	}
	fd = ddp_jobdir_open_root(path, what, &squatted, err, sizeof(err));
	if (fd < 0) {
		say(d, "FAIL", key, "%s; fix: %s", err,
		    squatted ? "remove it, then run 'ddp-nodectl install'"
			     : "chown root:root it and chmod go-w it");
		return;
	}
	close(fd);
	say(d, "ok", key, "%s is root's, not writable by group or others",
	    path);
}

int
cmd_doctor(const struct ddp_conf *conf, int argc, char **argv)
{
	static const struct option opts[] = {
		{"slurm-conf", required_argument, NULL, 's'},
		{NULL, 0, NULL, 0},
	};
	const char *slurm_conf = getenv("SLURM_CONF");
	struct doctor d = {0};
	int c;

	if (!slurm_conf || !slurm_conf[0])
		slurm_conf = SLURM_CONF_DEFAULT;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c != 's')
			return NC_EX_SHOW_USAGE;
		slurm_conf = optarg;
	}
	if (optind != argc)
		return NC_EX_SHOW_USAGE;
	/* Every check runs, so one pass names everything to fix. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	check_slurm(&d, slurm_conf);
	if (nc_conf_error[0]) {
		say(&d, "FAIL", "ddp.conf",
		    "%s (so its settings were not checked); fix: correct "
		    "that line and run doctor again",
		    nc_conf_error);
		return NC_EX_USAGE;
	}
	say(&d, "ok", "ddp.conf", "%s%s", nc_conf_path,
	    access(nc_conf_path, F_OK) == 0 ? " loads"
					    : " missing, the defaults hold");
	check_port_key(&d, conf);
	check_shared_root(&d, conf);
	check_firewall(&d, conf);
	check_root_dir(&d, "state_dir", "state dir", conf->state_dir);
	check_root_dir(&d, "scratch_root", "scratch root", conf->scratch_root);
	if (d.unusable)
		return NC_EX_USAGE;
	return d.failed ? NC_EX_NODE : NC_EX_OK;
}
