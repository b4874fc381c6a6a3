/* SPDX-License-Identifier: BSD-3-Clause */
/* The kernel's counts of OOM kills and memory errors (kevents.h). */
#include "kevents.h"

#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ddp_util.h"

/* The longest counter file read: memory.events and /proc/vmstat are a few
 * lines each up to this; a longer one is read in part. */
#define COUNTS_MAX 16384

/* The number after "key " at the start of a line of text. Returns 0, or
 * -1 when no line has it. */
static int
keyed_count(const char *text, const char *key, unsigned long long *v)
{
	size_t klen = strlen(key);
	const char *p = text;
	char num[24];
	long n;

	for (; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		size_t len;

		if (strncmp(p, key, klen) || p[klen] != ' ')
			continue;
		len = strspn(p + klen + 1, "0123456789");
		if (len == 0 || len >= sizeof(num))
			return -1;
		memcpy(num, p + klen + 1, len);
		num[len] = '\0';
		if (ddp_parse_long(num, 0, LONG_MAX, &n) < 0)
			return -1;
		*v = (unsigned long long)n;
		return 0;
	}
	return -1;
}

/* The number that is all of path's text. Returns 0, or -1. */
static int
file_count(const char *path, unsigned long long *v)
{
	char text[64];
	long n;

	if (ddp_read_text(path, text, sizeof(text)) < 0)
		return -1;
	text[strcspn(text, "\n")] = '\0';
	if (ddp_parse_long(text, 0, LONG_MAX, &n) < 0)
		return -1;
	*v = (unsigned long long)n;
	return 0;
}

/* The cgroup v2 path of this process, from root's /proc/self/cgroup. */
static int
own_cgroup(const char *root, char *out, size_t len)
{
	char path[PATH_MAX], text[4096];
	const char *line;

	if (ddp_fmt(path, sizeof(path), "%s/proc/self/cgroup", root) < 0 ||
	    ddp_read_text(path, text, sizeof(text)) < 0)
		return -1;
	for (line = text; line;
	     line = strchr(line, '\n'), line = line ? line + 1 : NULL)
		if (!strncmp(line, "0::", 3)) {
			size_t n = strcspn(line + 3, "\n");

			if (n == 0 || n >= len)
				return -1;
			memcpy(out, line + 3, n);
			out[n] = '\0';
			return 0;
		}
	return -1;
}

static void
read_oom(const char *root, const char *cgroup, struct ddp_kevents *k)
{
	char own[PATH_MAX], path[PATH_MAX], text[COUNTS_MAX], *slash;

	if (!cgroup && own_cgroup(root, own, sizeof(own)) == 0)
		cgroup = own;
	if (cgroup && cgroup[0] == '/' &&
	    ddp_fmt(path, sizeof(path), "%s/sys/fs/cgroup%s", root, cgroup) ==
		    0) {
		/* The step's cgroup: slurmstepd's own sits beside its
		 * tasks'. */
		slash = strrchr(path, '/');
		if (slash && strcmp(cgroup, "/"))
			*slash = '\0';
		if (ddp_fmt_cat(path, sizeof(path), "/memory.events") == 0 &&
		    ddp_read_text(path, text, sizeof(text)) >= 0 &&
		    keyed_count(text, "oom_kill", &k->oom_kills) == 0) {
			k->have_oom = 1;
			return;
		}
	}
	if (ddp_fmt(path, sizeof(path), "%s/proc/vmstat", root) == 0 &&
	    ddp_read_text(path, text, sizeof(text)) >= 0 &&
	    keyed_count(text, "oom_kill", &k->oom_kills) == 0)
		k->have_oom = 1;
}

/* Adds the counts named file of every entry of dir whose name starts with
 * prefix. */
static void
sum_counts(const char *root, const char *dir, const char *prefix,
	   const char *const *files, struct ddp_kevents *k)
{
	char path[PATH_MAX];
	struct dirent *e;
	unsigned long long v;
	size_t i;
	DIR *d;

	if (ddp_fmt(path, sizeof(path), "%s%s", root, dir) < 0)
		return;
	d = opendir(path);
	if (!d)
		return;
	while ((e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, prefix, strlen(prefix)))
			continue;
		for (i = 0; files[i]; i++)
			if (ddp_fmt(path, sizeof(path), "%s%s/%s/%s", root, dir,
				    e->d_name, files[i]) == 0 &&
			    file_count(path, &v) == 0) {
				k->memory_errors += v;
				k->have_memory_errors = 1;
			}
	}
	closedir(d);
}

void
ddp_kevents_read(const char *root, const char *cgroup, struct ddp_kevents *k)
{
	static const char *const edac[] = {"ue_count", "ce_count", NULL};
	static const char *const numa[] = {"memory_failure/total", NULL};

	memset(k, 0, sizeof(*k));
	if (!strcmp(root, "/"))
		root = "";
	read_oom(root, cgroup, k);
	sum_counts(root, "/sys/devices/system/edac/mc", "mc", edac, k);
	sum_counts(root, "/sys/devices/system/node", "node", numa, k);
}

enum ddp_failure_kernel
ddp_kevents_verdict(const struct ddp_kevents *before,
		    const struct ddp_kevents *after, int signal)
{
	if (signal == SIGKILL && before->have_oom && after->have_oom &&
	    after->oom_kills > before->oom_kills)
		return DDP_KERNEL_OOM;
	if (signal == SIGBUS && before->have_memory_errors &&
	    after->have_memory_errors &&
	    after->memory_errors > before->memory_errors)
		return DDP_KERNEL_MEMORY_ERROR;
	return DDP_KERNEL_NONE;
}
