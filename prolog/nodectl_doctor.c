/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ddp-nodectl doctor: a node's whole slurm-ddp setup checked in one
 * command, one line per check, "ok|FAIL|warn WHAT: DETAIL; fix: WHAT TO
 * DO". It reads slurm.conf (the plugstack line, Prolog, Epilog,
 * PrologFlags) and ddp.conf (the port key, shared_root, the nft table,
 * state_dir and that it keeps POSIX ACLs, scratch_root) and changes
 * nothing: a missing directory is reported, never made, and the ACL probe
 * file is removed at once.
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
#include "stepkey.h"

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
/* Include files nested deeper than this are not read. */
#define MAX_DEPTH 8
/* What doctor reads of a tree of configuration files. slurmd reads the
 * same files as it starts, so a file doctor will not read (a FIFO, a
 * device, a giant) would hang or swamp slurmd as well. */
#define CONF_FILES_MAX 256
#define PLUGSTACK_FILE_MAX (1024 * 1024)
#define PLUGSTACK_LINE_MAX 4096
/* slurm.conf may hold a large cluster's node lines: only its size is
 * bounded. */
#define SLURM_CONF_FILE_MAX (16 * 1024 * 1024)
/* Problems of one tree told one per line (a loop, a file or line
 * skipped); the rest are counted in one more. */
#define TROUBLE_TOLD 8
/* How much of a Prolog wrapper is read to find the script it runs. */
#define WRAPPER_MAX 65536

struct doctor {
	int failed;   /* a check failed: exit 1 */
	int unusable; /* slurm.conf or ddp.conf unreadable: exit 2 */
};

__attribute__((format(printf, 4, 0))) static void
vsay(struct doctor *d, const char *verdict, const char *what, const char *fmt,
     va_list ap)
{
	if (strcmp(verdict, "FAIL") == 0)
		d->failed = 1;
	printf("%s %s: ", verdict, what);
	vprintf(fmt, ap);
	putchar('\n');
}

__attribute__((format(printf, 4, 5))) static void
say(struct doctor *d, const char *verdict, const char *what, const char *fmt,
    ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsay(d, verdict, what, fmt, ap);
	va_end(ap);
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

/* A file of a tree, by identity: a link and its target are one. */
struct conf_id {
	dev_t dev;
	ino_t ino;
};

/* How a file of a tree went (conf_walk). */
enum conf_rc {
	CONF_OK = 0,
	CONF_UNREADABLE = -1,  /* missing, no permission: why is errno's */
	CONF_NOT_REGULAR = -2, /* a FIFO, a device, too large: never read */
	CONF_LOOP = -3,	       /* it includes itself, directly or not */
	CONF_LIMIT = -4,       /* too deep or too many files */
	CONF_STOP = -5,	       /* the line callback stopped the walk */
};

struct conf_walk;

/* What a walk does with a line (comment cut, NUL-terminated, words may
 * be cut in place) of the file path, at depth in the tree (an include
 * it follows is depth + 1); 0, or -1 to stop the walk (why in w->err). */
typedef int conf_line_fn(struct conf_walk *w, const char *path, unsigned lineno,
			 int depth, char *line, void *arg);

/*
 * One walk over a tree of configuration files (slurm.conf and its
 * Include lines, or a plugstack file and its include lines): each file
 * read once, only regular files, within file_max bytes and lines within
 * line_max, and the chain of includes that led to the file being read,
 * which names a loop. Zero it, then set file_max, line_max, fn and arg.
 */
struct conf_walk {
	size_t file_max, line_max;
	conf_line_fn *fn;
	void *arg;
	/* Where its problems are said (under what); NULL: nowhere. */
	struct doctor *d;
	const char *what;
	int told;	 /* problems said */
	int untold;	 /* more, counted */
	int untold_fail; /* one of them a FAIL */
	struct conf_id seen[CONF_FILES_MAX];
	int nseen;
	struct {
		struct conf_id id;
		const char *path;
		unsigned line; /* the line being handled */
	} chain[MAX_DEPTH + 1];
	char why[PATH_MAX * (MAX_DEPTH + 2)]; /* the last file's trouble */
	char err[DDP_ERR_LEN];		      /* a callback's, CONF_STOP */
};

/* Says a problem of w's tree, one of the first TROUBLE_TOLD, else
 * counts it for conf_tell_rest. */
__attribute__((format(printf, 3, 4))) static void
conf_tell(struct conf_walk *w, const char *verdict, const char *fmt, ...)
{
	va_list ap;

	if (!w->d)
		return;
	if (w->told == TROUBLE_TOLD) {
		w->untold++;
		w->untold_fail |= strcmp(verdict, "FAIL") == 0;
		return;
	}
	w->told++;
	va_start(ap, fmt);
	vsay(w->d, verdict, w->what, fmt, ap);
	va_end(ap);
}

/* Says how many problems conf_tell counted without saying them. */
static void
conf_tell_rest(struct conf_walk *w)
{
	if (w->d && w->untold)
		say(w->d, w->untold_fail ? "FAIL" : "warn", w->what,
		    "%d more problems like those above in these files (the "
		    "first %d are named); fix: as above",
		    w->untold, TROUBLE_TOLD);
}

static const char *
file_kind(mode_t mode, const char **effect)
{
	*effect = "slurmd cannot read it";
	if (S_ISFIFO(mode)) {
		*effect = "slurmd would block reading it";
		return "a FIFO";
	}
	if (S_ISCHR(mode) || S_ISBLK(mode)) {
		*effect = "slurmd would read it without end";
		return S_ISCHR(mode) ? "a character device" : "a block device";
	}
	if (S_ISDIR(mode))
		return "a directory";
	if (S_ISSOCK(mode))
		return "a socket";
	return "not a plain file";
}

/*
 * The text of the regular file path (through links), into *text
 * (NUL-terminated, the caller frees it), at most max bytes; its identity
 * in *st. Anything but a regular file is never opened: a FIFO would
 * block, a device be read without end. Returns CONF_OK, or an error with
 * w->why.
 */
static enum conf_rc
conf_read(struct conf_walk *w, const char *path, const struct stat *st,
	  char **text)
{
	const char *kind, *effect;
	struct stat fst;
	enum conf_rc rc = CONF_UNREADABLE;
	size_t n = 0;
	ssize_t got;
	char *buf = NULL;
	int fd;

	*text = NULL;
	if (!S_ISREG(st->st_mode)) {
		kind = file_kind(st->st_mode, &effect);
		ddp_fmt(w->why, sizeof(w->why),
			"is %s, not a regular file: skipped (%s)", kind,
			effect);
		return CONF_NOT_REGULAR;
	}
	/* O_NONBLOCK: were it swapped for a FIFO since the stat, the open
	 * does not wait for a writer, and the fstat below refuses it. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		ddp_fmt(w->why, sizeof(w->why), "%s", strerror(errno));
		return CONF_UNREADABLE;
	}
	if (fstat(fd, &fst) < 0 || !S_ISREG(fst.st_mode) ||
	    fst.st_dev != st->st_dev || fst.st_ino != st->st_ino) {
		ddp_fmt(w->why, sizeof(w->why),
			"changed while doctor read it: skipped");
		rc = CONF_NOT_REGULAR;
		goto out;
	}
	if ((size_t)fst.st_size > w->file_max) {
		ddp_fmt(w->why, sizeof(w->why),
			"is %lld bytes, more than doctor reads (%zu): skipped",
			(long long)fst.st_size, w->file_max);
		rc = CONF_NOT_REGULAR;
		goto out;
	}
	buf = malloc(w->file_max + 1);
	if (!buf) {
		ddp_fmt(w->why, sizeof(w->why), "out of memory");
		goto out;
	}
	/* A file that grows while it is read stops at the bound too. */
	while (n <= w->file_max) {
		got = read(fd, buf + n, w->file_max + 1 - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			ddp_fmt(w->why, sizeof(w->why), "%s", strerror(errno));
			goto out;
		}
		if (got == 0)
			break;
		n += (size_t)got;
	}
	if (n > w->file_max) {
		ddp_fmt(w->why, sizeof(w->why),
			"grew past %zu bytes while doctor read it: skipped",
			w->file_max);
		rc = CONF_NOT_REGULAR;
		goto out;
	}
	buf[n] = '\0';
	*text = buf;
	buf = NULL;
	rc = CONF_OK;
out:
	free(buf);
	ddp_close(&fd);
	return rc;
}

/* w->why: the include loop that the file at chain[top] closes by
 * including path, at chain[from]. */
static void
name_loop(struct conf_walk *w, int from, int top, const char *path)
{
	int k;

	w->why[0] = '\0';
	for (k = from; k <= top; k++)
		ddp_fmt_cat(w->why, sizeof(w->why), "%s -> ", w->chain[k].path);
	ddp_fmt_cat(w->why, sizeof(w->why), "%s (%s:%u includes %s again)",
		    path, w->chain[top].path, w->chain[top].line, path);
}

/*
 * Reads path and hands each of its lines to w->fn, once in the walk: a
 * file read already (included twice) is CONF_OK at once, one on the
 * chain of includes that led here is CONF_LOOP. depth is path's in the
 * tree (0: the first file). Returns CONF_OK, or an error with w->why
 * (w->err for CONF_STOP).
 */
static enum conf_rc
conf_walk(struct conf_walk *w, const char *path, int depth)
{
	struct stat st;
	enum conf_rc rc;
	char *text = NULL, *line, *next;
	unsigned lineno = 0;
	size_t len;
	int k;

	if (stat(path, &st) < 0) {
		ddp_fmt(w->why, sizeof(w->why), "%s", strerror(errno));
		return CONF_UNREADABLE;
	}
	for (k = 0; k < depth; k++)
		if (w->chain[k].id.dev == st.st_dev &&
		    w->chain[k].id.ino == st.st_ino) {
			name_loop(w, k, depth - 1, path);
			return CONF_LOOP;
		}
	for (k = 0; k < w->nseen; k++)
		if (w->seen[k].dev == st.st_dev && w->seen[k].ino == st.st_ino)
			return CONF_OK;
	if (depth > MAX_DEPTH) {
		ddp_fmt(w->why, sizeof(w->why),
			"is nested deeper than %d includes: skipped",
			MAX_DEPTH);
		return CONF_LIMIT;
	}
	if (w->nseen == CONF_FILES_MAX) {
		ddp_fmt(w->why, sizeof(w->why),
			"is past the %d files doctor reads: skipped",
			CONF_FILES_MAX);
		return CONF_LIMIT;
	}
	rc = conf_read(w, path, &st, &text);
	if (rc)
		return rc;
	w->seen[w->nseen].dev = st.st_dev;
	w->seen[w->nseen].ino = st.st_ino;
	w->nseen++;
	w->chain[depth].id = w->seen[w->nseen - 1];
	w->chain[depth].path = path;
	for (line = text; *line; line = next) {
		len = strcspn(line, "\n");
		next = line + len + (line[len] == '\n');
		line[len] = '\0';
		lineno++;
		if (len > w->line_max) {
			conf_tell(w, "warn",
				  "%s:%u is longer than %zu bytes: skipped; "
				  "fix: shorten it",
				  path, lineno, w->line_max);
			continue;
		}
		drop_comment(line);
		w->chain[depth].line = lineno;
		if (w->fn(w, path, lineno, depth, line, w->arg) < 0) {
			rc = CONF_STOP;
			break;
		}
	}
	free(text);
	return rc;
}

/*
 * A line of slurm.conf or a file it includes (a conf_line_fn, arg the
 * struct slurm_conf): an Include is followed (relative to the first
 * file's directory, as slurmctld does; any trouble with it stops the
 * walk), a key doctor needs is kept. Keys are case-insensitive; the last
 * setting wins.
 */
static int
slurm_conf_line(struct conf_walk *w, const char *path, unsigned lineno,
		int depth, char *line, void *arg)
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
	struct slurm_conf *sc = arg;
	char *rest = line, *word, *eq, *inc;
	size_t i;
	enum conf_rc rc;

	word = next_word(&rest);
	if (word && strcasecmp(word, "Include") == 0) {
		word = next_word(&rest);
		if (!word)
			return ddp_errf(w->err, sizeof(w->err),
					"%s:%u: Include without a file", path,
					lineno);
		inc = malloc(PATH_MAX);
		if (!inc)
			return ddp_errf(w->err, sizeof(w->err),
					"%s:%u: out of memory", path, lineno);
		if (relative_to(sc->path, word, inc, PATH_MAX) < 0) {
			free(inc);
			return ddp_errf(w->err, sizeof(w->err),
					"%s:%u: Include: path too long", path,
					lineno);
		}
		rc = conf_walk(w, inc, depth + 1);
		if (rc == CONF_LOOP)
			ddp_errf(w->err, sizeof(w->err), "Include loop: %s",
				 w->why);
		else if (rc == CONF_UNREADABLE)
			ddp_errf(w->err, sizeof(w->err),
				 "cannot read %s (included by %s:%u): %s", inc,
				 path, lineno, w->why);
		else if (rc && rc != CONF_STOP)
			ddp_errf(w->err, sizeof(w->err),
				 "%s (included by %s:%u) %s", inc, path, lineno,
				 w->why);
		free(inc);
		return rc ? -1 : 0;
	}
	for (; word; word = next_word(&rest)) {
		eq = strchr(word, '=');
		if (!eq)
			continue;
		*eq = '\0';
		for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
			if (strcasecmp(word, keys[i].key) == 0 &&
			    set_value((char *)sc + keys[i].off, keys[i].len,
				      eq + 1) < 0)
				return ddp_errf(w->err, sizeof(w->err),
						"%s:%u: %s: value too long",
						path, lineno, keys[i].key);
	}
	return 0;
}

/* Reads the keys doctor needs from slurm.conf at sc->path and the files
 * it includes. Returns 0, or -1 with err. */
static int
read_slurm_conf(struct slurm_conf *sc, char *err, size_t errlen)
{
	struct conf_walk *w = calloc(1, sizeof(*w));
	enum conf_rc rc;

	if (!w)
		return ddp_errf(err, errlen, "out of memory");
	w->file_max = w->line_max = SLURM_CONF_FILE_MAX;
	w->fn = slurm_conf_line;
	w->arg = sc;
	rc = conf_walk(w, sc->path, 0);
	if (rc == CONF_STOP)
		ddp_errf(err, errlen, "%s", w->err);
	else if (rc == CONF_UNREADABLE)
		ddp_errf(err, errlen, "cannot read %s: %s", sc->path, w->why);
	else if (rc)
		ddp_errf(err, errlen, "%s %s", sc->path, w->why);
	free(w);
	return rc ? -1 : 0;
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

/* A walk over plugstack files: what it looks for, what it found. */
struct plug_scan {
	const struct slurm_conf *sc;
	struct plug_hit *hit;
};

/* Says what following the include at by:line to file met (rc, the
 * walk's why). */
static void
plug_trouble(struct conf_walk *w, const char *file, const char *by,
	     unsigned line, enum conf_rc rc)
{
	if (rc == CONF_LOOP)
		conf_tell(w, "FAIL",
			  "include loop: %s, which slurmd would follow "
			  "without end; fix: change the include at %s:%u so "
			  "that it matches none of these files",
			  w->why, by, line);
	else if (rc == CONF_UNREADABLE)
		conf_tell(w, "warn",
			  "%s (included by %s:%u) cannot be read: %s: "
			  "skipped; fix: remove it, or the include line",
			  file, by, line, w->why);
	else if (rc)
		conf_tell(w, "FAIL",
			  "%s (included by %s:%u) %s; fix: remove it, or "
			  "change the include at %s:%u so that it does not "
			  "match it",
			  file, by, line, w->why, by, line);
}

/*
 * A line of a plugstack file (a conf_line_fn, arg a struct plug_scan):
 * an include is followed (globs, relative to the file's directory); a
 * live "required|optional .../spank_ddp.so" line is a hit. The first
 * line whose plugin exists wins.
 */
static int
plug_line(struct conf_walk *w, const char *path, unsigned lineno, int depth,
	  char *line, void *arg)
{
	struct plug_scan *ps = arg;
	struct plug_hit *hit = ps->hit;
	char *rest = line, *word, *pattern;
	glob_t g;
	size_t i;

	word = next_word(&rest);
	if (!word)
		return 0;
	if (strcmp(word, "include") == 0) {
		word = next_word(&rest);
		pattern = word ? malloc(PATH_MAX) : NULL;
		if (!pattern ||
		    relative_to(path, word, pattern, PATH_MAX) < 0 ||
		    glob(pattern, 0, NULL, &g) != 0) {
			free(pattern);
			return 0;
		}
		for (i = 0; i < g.gl_pathc; i++)
			plug_trouble(w, g.gl_pathv[i], path, lineno,
				     conf_walk(w, g.gl_pathv[i], depth + 1));
		globfree(&g);
		free(pattern);
		return 0;
	}
	if (strcmp(word, "required") != 0 && strcmp(word, "optional") != 0)
		return 0;
	word = next_word(&rest);
	if (!word || !is_plugin(word))
		return 0;
	hit->lines++;
	if (hit->exists)
		return 0;
	ddp_fmt(hit->file, sizeof(hit->file), "%s", path);
	hit->line = lineno;
	resolve_plugin(ps->sc, word, hit);
	return 0;
}

/*
 * Looks for the plugin's line in the plugstack files paths (n of them)
 * and the files they include, each file read once. With d, says what it
 * skipped and why (not a regular file, too large, unreadable, too deep,
 * an overlong line) and names each include loop. Returns CONF_OK, or
 * the first file's trouble with err.
 */
static enum conf_rc
scan_plugstack(struct doctor *d, const struct slurm_conf *sc,
	       char *const *paths, size_t n, struct plug_hit *hit, char *err,
	       size_t errlen)
{
	struct plug_scan ps = {.sc = sc, .hit = hit};
	struct conf_walk *w = calloc(1, sizeof(*w));
	enum conf_rc rc, rv = CONF_OK;
	size_t i;

	if (!w) {
		ddp_fmt(err, errlen, "out of memory");
		return CONF_UNREADABLE;
	}
	w->file_max = PLUGSTACK_FILE_MAX;
	w->line_max = PLUGSTACK_LINE_MAX;
	w->fn = plug_line;
	w->arg = &ps;
	w->d = d;
	w->what = "plugstack";
	for (i = 0; i < n; i++) {
		rc = conf_walk(w, paths[i], 0);
		if (i == 0 && rc == CONF_UNREADABLE)
			ddp_fmt(err, errlen, "cannot read %s: %s", paths[i],
				w->why);
		else if (i == 0 && rc)
			ddp_fmt(err, errlen, "%s %s", paths[i], w->why);
		if (i == 0)
			rv = rc;
	}
	conf_tell_rest(w);
	free(w);
	return rv;
}

/*
 * Where no line loads the plugin: whether a plugstack.conf.d beside path
 * has one all the same (the packages link their line in there), which
 * path does not include (SchedMD's and OpenHPC's Slurm ship no
 * plugstack.conf that does). Fills dir with that directory. Says nothing
 * of its files: it only looks.
 */
static int
unincluded_entry(const struct slurm_conf *sc, const char *path, char *dir,
		 size_t dirlen)
{
	struct plug_hit hit = {0};
	char pattern[PATH_MAX], err[DDP_ERR_LEN];
	glob_t g;

	if (relative_to(path, "plugstack.conf.d", dir, dirlen) < 0 ||
	    ddp_fmt(pattern, sizeof(pattern), "%s/*.conf", dir) < 0 ||
	    glob(pattern, 0, NULL, &g) != 0)
		return 0;
	scan_plugstack(NULL, sc, g.gl_pathv, g.gl_pathc, &hit, err,
		       sizeof(err));
	globfree(&g);
	return hit.lines > 0;
}

static void
check_plugstack(struct doctor *d, const struct slurm_conf *sc)
{
	struct plug_hit hit = {0};
	char path[PATH_MAX], dir[PATH_MAX], err[DDP_ERR_LEN];
	char *paths[1] = {path};
	int rc;

	if (sc->plugstack[0])
		ddp_fmt(path, sizeof(path), "%s", sc->plugstack);
	else if (relative_to(sc->path, "plugstack.conf", path, sizeof(path)) <
		 0)
		path[0] = '\0';
	rc = scan_plugstack(d, sc, paths, 1, &hit, err, sizeof(err));
	if (rc < 0 && unincluded_entry(sc, path, dir, sizeof(dir))) {
		say(d, "FAIL", "plugstack",
		    "%s; fix: create it with the line 'include %s/*.conf' "
		    "(on a configless cluster, beside slurmctld's "
		    "slurm.conf) and restart slurmd",
		    err, dir);
		return;
	}
	if (rc < 0 && rc != CONF_UNREADABLE) {
		say(d, "FAIL", "plugstack",
		    "%s; fix: make it a regular file with the line "
		    "'required /PATH/TO/" PLUGIN_NAME "', or set "
		    "PlugStackConfig= in slurm.conf to one",
		    err);
		return;
	}
	if (rc < 0) {
		say(d, "FAIL", "plugstack",
		    "%s; fix: create it with the line "
		    "'required /PATH/TO/" PLUGIN_NAME "', or set "
		    "PlugStackConfig= in slurm.conf",
		    err);
		return;
	}
	if (!hit.lines && unincluded_entry(sc, path, dir, sizeof(dir))) {
		say(d, "FAIL", "plugstack",
		    "%s has a line loading " PLUGIN_NAME ", but %s does not "
		    "include it; fix: add the line 'include %s/*.conf' to %s "
		    "(on a configless cluster, the one beside slurmctld's "
		    "slurm.conf) and restart slurmd",
		    dir, path, dir, path);
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
	if (read_slurm_conf(sc, err, sizeof(err)) < 0) {
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

/* With a port_key every --ddp step gets a key file in state_dir, root's
 * and read by the job's user through a POSIX ACL: its file system must
 * keep ACLs (stepkey.h). Tried with a probe file, removed at once. */
static void
check_step_keys(struct doctor *d, const struct ddp_conf *conf)
{
	char err[DDP_ERR_LEN];

	if (!conf->port_key[0] || !conf->state_dir[0]) {
		say(d, "ok", "step keys",
		    "none (no port_key): libddp uses munge");
		return;
	}
	/* check_root_dir names a missing or unsafe one. */
	if (access(conf->state_dir, F_OK) < 0)
		return;
	if (ddp_step_key_check_acl(conf->state_dir, err, sizeof(err)) < 0) {
		if (errno == EOPNOTSUPP || errno == ENOTSUP)
			say(d, "FAIL", "step keys",
			    "%s keeps no POSIX ACLs, with which each step's "
			    "root-owned key file is given to its job's user "
			    "alone, so every --ddp step fails; fix: put "
			    "state_dir on tmpfs, ext4, xfs or btrfs with ACLs "
			    "on (as /run is), or set port_key = \"\" for munge",
			    conf->state_dir);
		else
			say(d, "FAIL", "step keys",
			    "%s; fix: make state_dir a directory root can "
			    "write in",
			    err);
		return;
	}
	say(d, "ok", "step keys",
	    "%s keeps POSIX ACLs (each step's key is root's, read by its "
	    "job's user alone)",
	    conf->state_dir);
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
	check_step_keys(&d, conf);
	check_root_dir(&d, "scratch_root", "scratch root", conf->scratch_root);
	if (d.unusable)
		return NC_EX_USAGE;
	return d.failed ? NC_EX_NODE : NC_EX_OK;
}
