/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of the host facts: the kernel's CPU list format, and the
 * cgroup reader on whatever host runs the test. */
#include <unistd.h>

#include "ddp_host.h"
#include "tap.h"

int
main(void)
{
	static const struct {
		const char *list;
		long want;
	} cases[] = {
		{"0", 1},    {"0-3", 4},     {"0-3,8,10-11", 7},
		{"5-5", 1},  {"0,2,4,6", 4}, {"0-1023", 1024},
		{"", -1},    {"0-3,x", -1},  {"3-1", -1},
		{"0-", -1},  {"a", -1},	     {"0,,1", -1},
		{"0 1", -1}, {"-1", -1},     {"0-3,", 4},
	};
	size_t k;
	long n, online;

	for (k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		n = ddp_cpu_list_count(cases[k].list);
		tap_ok(n == cases[k].want, "cpu list \"%s\": %ld (want %ld)",
		       cases[k].list, n, cases[k].want);
	}
	tap_ok(ddp_cpu_list_count("0-3,8\n") == 5 &&
		       ddp_cpu_list_count("\n") == -1,
	       "a newline ends a cpu list, as the kernel writes it");
	n = ddp_cgroup_cpus();
	online = sysconf(_SC_NPROCESSORS_ONLN);
	tap_ok(n == -1 || (n >= 1 && n <= (online > 0 ? online : n)),
	       "this process's cpuset cgroup: %ld CPUs (%ld online; -1: "
	       "unknown)",
	       n, online);
	return tap_done();
}
