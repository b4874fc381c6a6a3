/* SPDX-License-Identifier: BSD-3-Clause */
/* Host facts (ddp_host.h): the CPUs of this process's cpuset cgroup. */
#include "ddp_host.h"

#include <stdio.h>
#include <string.h>

#include "ddp_util.h"

long
ddp_cpu_list_count(const char *list)
{
	const char *p = list, *end;
	long lo, hi, n = 0;

	while (*p && *p != '\n') {
		if (ddp_parse_long_prefix(p, 0, 1L << 20, &lo, &end) < 0)
			return -1;
		hi = lo;
		if (*end == '-' &&
		    ddp_parse_long_prefix(end + 1, lo, 1L << 20, &hi, &end) < 0)
			return -1;
		n += hi - lo + 1;
		p = end;
		if (*p == ',')
			p++;
		else if (*p && *p != '\n')
			return -1;
	}
	return n > 0 ? n : -1;
}

/* The CPUs a cpuset file lists; -1 when it cannot be read. */
static long
cpuset_file_cpus(const char *path)
{
	char list[4096];
	FILE *f = fopen(path, "re");
	long n = -1;

	if (!f)
		return -1;
	if (fgets(list, sizeof(list), f))
		n = ddp_cpu_list_count(list);
	fclose(f);
	return n;
}

long
ddp_cgroup_cpus(void)
{
	char line[1024], path[1200], *ctl, *dir;
	FILE *f = fopen("/proc/self/cgroup", "re");
	long n, v1 = -1, v2 = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		/* hierarchy-id:controllers:path */
		ctl = strchr(line, ':');
		dir = ctl ? strchr(ctl + 1, ':') : NULL;
		if (!dir)
			continue;
		*ctl++ = '\0';
		*dir++ = '\0';
		if (strcmp(line, "0") == 0 && ctl[0] == '\0' &&
		    ddp_fmt(path, sizeof(path),
			    "/sys/fs/cgroup%s/cpuset.cpus.effective", dir) == 0)
			v2 = cpuset_file_cpus(path);
		else if (strstr(ctl, "cpuset") &&
			 ddp_fmt(path, sizeof(path),
				 "/sys/fs/cgroup/cpuset%s/"
				 "cpuset.effective_cpus",
				 dir) == 0 &&
			 (n = cpuset_file_cpus(path)) > 0)
			v1 = n;
	}
	fclose(f);
	return v1 > 0 ? v1 : v2;
}
