/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of ddp-nodectl's firewall core: input validation, the table
 * script, peer elements (which open ddp-check's port too), set-listing
 * parsing, the sync script and the per-job state files, written even on
 * a full file system through the reserve.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nodectl.h"
#include "port.h"
#include "tap.h"

static struct nc_elem
elem(int family, const char *addr, unsigned lo, unsigned hi, unsigned long job)
{
	struct nc_elem e;

	memset(&e, 0, sizeof(e));
	e.family = family;
	snprintf(e.addr, sizeof(e.addr), "%s", addr);
	e.lo = lo;
	e.hi = hi;
	e.jobid = job;
	return e;
}

static void
test_validation(void)
{
	unsigned long v = 0;
	char state[32];

	tap_ok(nc_parse_jobid("123", &v) == 0 && v == 123, "job id parses");
	tap_ok(nc_parse_jobid("4294967294", &v) == 0, "largest job id");
	tap_ok(nc_parse_jobid("4294967295", &v) < 0, "NO_VAL refused");
	tap_ok(nc_parse_jobid("0", &v) < 0 && nc_parse_jobid("", &v) < 0 &&
		       nc_parse_jobid(NULL, &v) < 0 &&
		       nc_parse_jobid("12a", &v) < 0 &&
		       nc_parse_jobid("-1", &v) < 0 &&
		       nc_parse_jobid("+1", &v) < 0 &&
		       nc_parse_jobid(" 1", &v) < 0 &&
		       nc_parse_jobid("1;rm", &v) < 0 &&
		       nc_parse_jobid("12345678901", &v) < 0,
	       "bad job ids refused");
	tap_ok(nc_parse_id("0", &v) == 0 && v == 0, "uid 0 parses");
	tap_ok(nc_valid_nodename("gpu-01.rack2") && !nc_valid_nodename("-x") &&
		       !nc_valid_nodename("a b") && !nc_valid_nodename("a/b") &&
		       !nc_valid_nodename(""),
	       "node-name rule");
	tap_ok(nc_node_draining("NodeName=node2 Arch=x86_64 CoresPerSocket=1 "
				"State=IDLE+DRAIN ThreadsPerCore=1 "
				"Reason=ddp-check: gpu [root@2025-01-01]\n",
				state, sizeof(state)) == 1 &&
		       !strcmp(state, "IDLE+DRAIN"),
	       "IDLE+DRAIN is a drained node");
	tap_ok(nc_node_draining("NodeName=n State=MIXED+DRAIN Reason=x", state,
				sizeof(state)) == 1 &&
		       nc_node_draining("NodeName=n State=DRAINED", state,
					sizeof(state)) == 1,
	       "DRAINED and MIXED+DRAIN are drained");
	tap_ok(nc_node_draining("NodeName=n State=IDLE Reason=x State=DRAIN",
				state, sizeof(state)) == 0 &&
		       !strcmp(state, "IDLE"),
	       "an IDLE node is not drained, whatever its reason text says");
	tap_ok(nc_node_draining("NodeName=n OldState=DRAIN State=ALLOCATED",
				state, sizeof(state)) == 0 &&
		       !strcmp(state, "ALLOCATED"),
	       "only the State field counts");
	tap_ok(nc_node_draining("Node n not found", state, sizeof(state)) < 0 &&
		       nc_node_draining("State=IDLE+DRAIN", state, 4) < 0,
	       "no State field, or no room for it, is an error");
}

static void
test_install_script(void)
{
	struct ddp_conf c;
	struct ddp_buf b = {0};

	ddp_conf_defaults(&c);
	tap_ok(nc_fw_install_script(&c, 32768, 60999, &b) == 0, "script made");
	tap_ok(strstr(b.s, "table inet ddp\ndelete table inet ddp\n") == b.s,
	       "script recreates the table atomically");
	tap_ok(strstr(b.s, "elements = { 29400-29999, 32768-60999 }") != NULL,
	       "guarded ports: port_range and ephemeral range");
	tap_ok(strstr(b.s, "flags interval,timeout") != NULL,
	       "peer sets carry timeouts");
	tap_ok(strstr(b.s, "ct state established,related accept") <
			       strstr(b.s, "reject with tcp reset") &&
		       strstr(b.s, "@peers4 accept") <
			       strstr(b.s, "reject with tcp reset"),
	       "peers accepted before the reject");
	ddp_buf_free(&b);
	c.port_min = c.port_max = 40000;
	nc_fw_install_script(&c, 39000, 40000, &b);
	tap_ok(strstr(b.s, "elements = { 39000-40000 }") != NULL,
	       "overlapping ranges merged");
	ddp_buf_free(&b);
	nc_fw_install_script(&c, 50000, 50010, &b);
	tap_ok(strstr(b.s, "elements = { 40000, 50000-50010 }") != NULL,
	       "single port printed alone");
	ddp_buf_free(&b);
}

/* Whether an element of job's lets 127.0.0.1 reach port. */
static int
opened(const struct nc_elems *e, unsigned long job, long port)
{
	size_t i;

	for (i = 0; i < e->n; i++)
		if (e->v[i].jobid == job && e->v[i].family == AF_INET &&
		    strcmp(e->v[i].addr, "127.0.0.1") == 0 &&
		    port >= (long)e->v[i].lo && port <= (long)e->v[i].hi)
			return 1;
	return 0;
}

static void
test_peers(void)
{
	struct ddp_conf c;
	struct nc_elems e = {0};
	char *hosts[] = {"self-node", "localhost", "no-such-host.invalid"};
	char err[DDP_ERR_LEN];
	const struct ddp_site_key key = {{7, 1, 9, 3}};
	unsigned long step;
	long master, check;
	size_t i;
	int rc, v4 = 0, open_both = 0;

	ddp_conf_defaults(&c);
	rc = nc_fw_peer_elems(&c, hosts, 3, "self-node", 32768, 60999, 77, &e,
			      err, sizeof(err));
	tap_ok(rc == 1 && strstr(err, "no-such-host.invalid") &&
		       !strstr(err, "self-node"),
	       "unresolvable peer named, self skipped");
	for (i = 0; i < e.n; i++) {
		if (e.v[i].family == AF_INET &&
		    strcmp(e.v[i].addr, "127.0.0.1") == 0 && e.v[i].jobid == 77)
			v4++;
	}
	tap_ok(v4 == 2, "localhost gives one element per port range");
	tap_diag("%zu elements", e.n);
	/* srun --ddp-check's rendezvous runs on a port of its own: the
	 * job's opening must let the peers reach it as well. */
	for (step = 0; step < 200; step++) {
		master = ddp_port_choose_keyed(&key, 77, step, c.port_min,
					       c.port_max);
		check = ddp_port_choose_check(&key, 77, step, c.port_min,
					      c.port_max, master);
		open_both += opened(&e, 77, master) && opened(&e, 77, check);
	}
	tap_ok(open_both == 200,
	       "the job's opening covers MASTER_PORT and ddp-check's port "
	       "(%d of 200 steps)",
	       open_both);
	nc_elems_free(&e);
}

static const char listing4[] =
	"table inet ddp {\n"
	"\tset peers4 {\n"
	"\t\ttype ipv4_addr . inet_service\n"
	"\t\tflags interval,timeout\n"
	"\t\telements = { 10.9.0.2 . 29400-29999 timeout 1h expires "
	"59m59s988ms comment \"job=12\",\n"
	"\t\t\t     10.9.0.3 . 32768-60999 timeout 7d expires 6d23h "
	"comment \"job=13\",\n"
	"\t\t\t     10.9.0.4 . 29500 }\n"
	"\t}\n"
	"}\n";

static void
test_listing(void)
{
	struct nc_elems e = {0};
	char err[DDP_ERR_LEN];

	tap_ok(nc_fw_parse_listing(listing4, &e, err, sizeof(err)) == 0 &&
		       e.n == 3,
	       "listing parsed");
	tap_ok(e.n == 3 && e.v[0].family == AF_INET &&
		       strcmp(e.v[0].addr, "10.9.0.2") == 0 &&
		       e.v[0].lo == 29400 && e.v[0].hi == 29999 &&
		       e.v[0].jobid == 12 && e.v[1].jobid == 13 &&
		       e.v[2].jobid == 0 && e.v[2].lo == 29500 &&
		       e.v[2].hi == 29500,
	       "elements, ports and job tags");
	nc_elems_free(&e);
	tap_ok(nc_fw_parse_listing("table inet ddp {\n set peers6 {\n type "
				   "ipv6_addr . inet_service\n elements = { "
				   "fd00::3 . 29400-29999 comment \"job=5\" "
				   "}\n}\n}\n",
				   &e, err, sizeof(err)) == 0 &&
		       e.n == 1 && e.v[0].family == AF_INET6 &&
		       strcmp(e.v[0].addr, "fd00::3") == 0 && e.v[0].jobid == 5,
	       "IPv6 listing parsed");
	nc_elems_free(&e);
	tap_ok(nc_fw_parse_listing("set peers4 {\n type ipv4_addr . "
				   "inet_service\n flags interval,timeout\n}\n",
				   &e, err, sizeof(err)) == 0 &&
		       e.n == 0,
	       "empty set parsed");
	tap_ok(nc_fw_parse_listing("type ipv4_addr . inet_service\n"
				   "elements = { 10.0.0.1 : 5 }",
				   &e, err, sizeof(err)) < 0,
	       "garbage refused");
	tap_ok(nc_fw_parse_listing("type ipv4_addr . inet_service\n"
				   "elements = { fd00::1 . 5 }",
				   &e, err, sizeof(err)) < 0,
	       "wrong family refused");
	tap_ok(nc_fw_parse_listing("nothing", &e, err, sizeof(err)) < 0,
	       "unknown set type refused");
	nc_elems_free(&e);
}

static void
test_sync(void)
{
	struct nc_elems actual = {0}, desired = {0}, mine = {0};
	struct nc_elem a = elem(AF_INET, "10.0.0.2", 29400, 29999, 12);
	struct nc_elem b = elem(AF_INET, "10.0.0.3", 29400, 29999, 12);
	struct nc_elem c = elem(AF_INET, "10.0.0.4", 29400, 29999, 0);
	struct nc_elem d = elem(AF_INET6, "fd00::5", 100, 200, 14);
	struct nc_elem a13 = a, a20 = a;
	struct ddp_buf s = {0};
	time_t now = 1000000;
	unsigned long with[2];
	size_t nwith;

	a13.jobid = 13;
	a13.expires = now + 3000;
	a20.jobid = 20;
	a20.expires = now + 2000;
	d.expires = now + 3600;
	nc_elems_add(&actual, &a);
	nc_elems_add(&actual, &b);
	nc_elems_add(&actual, &c);
	nc_elems_add(&desired, &a20);
	nc_elems_add(&desired, &a13);
	nc_elems_add(&desired, &d);
	tap_ok(nc_fw_sync_script(&actual, &desired, now, &s) == 0, "sync");
	tap_ok(strstr(s.s, "add element inet ddp peers4 { 10.0.0.3 . "
			   "29400-29999 }\ndelete element inet ddp peers4 { "
			   "10.0.0.3 . 29400-29999 }\n") != NULL,
	       "element no job needs: idempotent delete");
	tap_ok(strstr(s.s, "delete element inet ddp peers4 { 10.0.0.2 . "
			   "29400-29999 }\nadd element inet ddp peers4 { "
			   "10.0.0.2 . 29400-29999 timeout 3000s comment "
			   "\"job=13\" }\n") != NULL,
	       "element still needed re-tagged with the job expiring last, "
	       "for its remaining time");
	tap_ok(strstr(s.s, "add element inet ddp peers6 { fd00::5 . 100-200 "
			   "timeout 3600s comment \"job=14\" }\n") != NULL,
	       "missing element added");
	tap_ok(strstr(s.s, "10.0.0.4") == NULL, "untagged element untouched");
	ddp_buf_free(&s);

	/* Job 13 holds the element; job 21 starts later on the same peer:
	 * nft keeps one element, which must now last as long as job 21's
	 * opening, and carry its comment. */
	actual.n = 0;
	nc_elems_add(&actual, &a13);
	desired.n = 0;
	nc_elems_add(&desired, &a13);
	a20.jobid = 21;
	a20.expires = now + 7200;
	nc_elems_add(&desired, &a20);
	tap_ok(nc_fw_sync_script(&actual, &desired, now, &s) == 0 && s.s &&
		       strcmp(s.s, "delete element inet ddp peers4 { "
				   "10.0.0.2 . 29400-29999 }\nadd element "
				   "inet ddp peers4 { 10.0.0.2 . 29400-29999 "
				   "timeout 7200s comment \"job=21\" }\n") == 0,
	       "a later job sharing the element extends it, re-tagged");
	ddp_buf_free(&s);
	actual.n = 0;
	nc_elems_add(&actual, &a20);
	tap_ok(nc_fw_sync_script(&actual, &desired, now, &s) == 0 && s.len == 0,
	       "owned by the job expiring last: nothing to do");
	/* Job 21 ends first (its epilog): job 13 still needs it. */
	desired.n = 0;
	nc_elems_add(&desired, &a13);
	tap_ok(nc_fw_sync_script(&actual, &desired, now, &s) == 0 && s.s &&
		       strstr(s.s, "comment \"job=13\"") &&
		       strstr(s.s, "timeout 3000s") &&
		       strstr(s.s, "delete element") == s.s,
	       "the first job to end leaves the element to the other");
	ddp_buf_free(&s);
	/* Same expiry: the highest job id owns it. */
	a20.expires = a13.expires;
	nc_elems_add(&desired, &a20);
	actual.n = 0;
	nc_elems_add(&actual, &a13);
	tap_ok(nc_fw_sync_script(&actual, &desired, now, &s) == 0 && s.s &&
		       strstr(s.s, "comment \"job=21\"") != NULL,
	       "same expiry: the highest job id owns the element");
	ddp_buf_free(&s);
	/* An owner past its expiry still gets a positive timeout. */
	desired.n = 0;
	a13.expires = now - 5;
	nc_elems_add(&desired, &a13);
	actual.n = 0;
	tap_ok(nc_fw_sync_script(&actual, &desired, now, &s) == 0 && s.s &&
		       strstr(s.s, "timeout 1s") != NULL,
	       "timeout at least 1 s");
	ddp_buf_free(&s);

	/* Overlapping ranges of one address (port_range changed while job
	 * 13 runs): nft refuses the second, so they merge into one. */
	desired.n = 0;
	a13.expires = now + 3000;
	nc_elems_add(&desired, &a13);
	a20 = elem(AF_INET, "10.0.0.2", 29500, 30999, 21);
	a20.expires = now + 7200;
	nc_elems_add(&desired, &a20);
	a20 = elem(AF_INET, "10.0.0.2", 31000, 31000, 22);
	a20.expires = now + 10;
	nc_elems_add(&desired, &a20);
	a20 = elem(AF_INET, "10.0.0.9", 29500, 30999, 23);
	a20.expires = now + 10;
	nc_elems_add(&desired, &a20);
	actual.n = 0;
	nc_elems_add(&actual, &a13);
	tap_ok(nc_fw_sync_script(&actual, &desired, now, &s) == 0 && s.s &&
		       strstr(s.s, "add element inet ddp peers4 { 10.0.0.2 . "
				   "29400-29999 }\ndelete element") == s.s &&
		       strstr(s.s, "add element inet ddp peers4 { 10.0.0.2 . "
				   "29400-31000 timeout 7200s comment "
				   "\"job=21\" }\n") &&
		       strstr(s.s, "10.0.0.9 . 29500-30999 timeout 10s") &&
		       !strstr(s.s, "29500-30999 timeout 7200s"),
	       "overlapping or touching ranges of one address merge into one "
	       "element, owned by the job expiring last");
	ddp_buf_free(&s);
	mine.n = 0;
	nc_elems_add(&mine, &a13);
	tap_ok(nc_fw_shared(&mine, &desired, 13, with, 2, &nwith) == 1 &&
		       nwith == 1 && with[0] == 21,
	       "shared: overlapping ranges count");
	mine.n = 0;
	a20 = a13;
	a20.jobid = 21;

	/* Which of a job's elements others share, and with whom. */
	desired.n = 0;
	a13.expires = now + 3000;
	nc_elems_add(&desired, &a13);
	nc_elems_add(&desired, &a20);
	a20.jobid = 7;
	nc_elems_add(&desired, &a20);
	a20.jobid = 30;
	nc_elems_add(&desired, &a20);
	nc_elems_add(&desired, &d);
	nc_elems_add(&mine, &a13);
	b.jobid = 13;
	nc_elems_add(&mine, &b);
	tap_ok(nc_fw_shared(&mine, &desired, 13, with, 2, &nwith) == 1 &&
		       nwith == 2 && with[0] == 7 && with[1] == 21,
	       "shared: one element, the lowest other jobs listed");
	tap_ok(nc_fw_shared(&mine, &desired, 99, with, 2, &nwith) == 1 &&
		       nwith == 2 && with[0] == 7 && with[1] == 13,
	       "shared: an element of the job itself counts for others");
	desired.n = 0;
	nc_elems_add(&desired, &d);
	tap_ok(nc_fw_shared(&mine, &desired, 13, with, 2, &nwith) == 0 &&
		       nwith == 0,
	       "shared: none");
	nc_elems_free(&actual);
	nc_elems_free(&desired);
	nc_elems_free(&mine);
}

static void
test_state(void)
{
	char dir[] = "/tmp/test-prolog-fw.XXXXXX", err[DDP_ERR_LEN];
	struct nc_elems e = {0}, got = {0};
	struct nc_elem x = elem(AF_INET, "10.0.0.2", 29400, 29999, 5);
	struct nc_elem y = elem(AF_INET6, "fd00::2", 32768, 60999, 5);
	unsigned long live[] = {6};
	time_t now = time(NULL);
	int dfd, fd;

	if (!mkdtemp(dir) ||
	    (dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		tap_ok(0, "temporary directory");
		return;
	}
	nc_elems_add(&e, &x);
	nc_elems_add(&e, &y);
	tap_ok(nc_state_write(dfd, 5, now + 100, &e, err, sizeof(err)) == 0 &&
		       nc_state_write(dfd, 6, now + 100, &e, err,
				      sizeof(err)) == 0 &&
		       nc_state_write(dfd, 7, now - 1, &e, err, sizeof(err)) ==
			       0,
	       "state files written");
	tap_ok(nc_state_read_all(dfd, now, NULL, 0, &got, err, sizeof(err)) ==
			       0 &&
		       got.n == 4,
	       "expired job's state ignored");
	tap_ok(faccessat(dfd, "job.7", F_OK, 0) < 0,
	       "expired state file removed");
	nc_elems_sort(&got);
	tap_ok(got.n == 4 && got.v[0].expires == now + 100,
	       "elements carry their job's expiry");
	tap_ok(got.n == 4 && got.v[0].jobid == 5 && got.v[1].jobid == 6 &&
		       strcmp(got.v[2].addr, "fd00::2") == 0 &&
		       got.v[2].lo == 32768,
	       "elements read back with their job");
	got.n = 0;
	tap_ok(nc_state_read_all(dfd, now, live, 1, &got, err, sizeof(err)) ==
			       0 &&
		       got.n == 2 && got.v[0].jobid == 6 &&
		       faccessat(dfd, "job.5", F_OK, 0) < 0,
	       "state of jobs not live removed");
	fd = openat(dfd, "job.9", O_WRONLY | O_CREAT, 0600);
	if (fd >= 0) {
		(void)!write(fd, "junk\n", 5);
		close(fd);
	}
	got.n = 0;
	tap_ok(nc_state_read_all(dfd, now, NULL, 0, &got, err, sizeof(err)) ==
			       1 &&
		       strstr(err, "job.9") && got.n == 2 &&
		       faccessat(dfd, "job.9", F_OK, 0) < 0,
	       "malformed state reported and removed");
	got.n = 0;
	tap_ok(nc_state_read(dfd, 6, &got) == 0 && got.n == 2 &&
		       got.v[0].jobid == 6 && got.v[0].expires == now + 100,
	       "one job's state read");
	tap_ok(nc_state_read(dfd, 5, &got) < 0 && got.n == 2,
	       "a missing job's state: -1, nothing appended");
	tap_ok(nc_state_remove(dfd, 6, err, sizeof(err)) == 0 &&
		       nc_state_remove(dfd, 6, err, sizeof(err)) == 0,
	       "state removal idempotent");
	nc_elems_free(&e);
	nc_elems_free(&got);
	close(dfd);
	rmdir(dir);
}

/* Writes to dir/name until the file system is full; 0 when it filled. */
static int
fill(int dfd, const char *name)
{
	static char buf[65536];
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ssize_t n;

	if (fd < 0)
		return -1;
	do
		n = write(fd, buf, sizeof(buf));
	while (n > 0);
	close(fd);
	return n < 0 && errno == ENOSPC ? 0 : -1;
}

/* The state files on a 2 MiB tmpfs (state_dir's /run) that something
 * filled: the reserve gives the Prolog's write its room, once. */
static void
test_state_full(void)
{
	char dir[] = "/tmp/test-prolog-fw-full.XXXXXX", err[DDP_ERR_LEN];
	char tmp[64];
	struct nc_elems e = {0}, got = {0};
	struct nc_elem x = elem(AF_INET, "10.0.0.2", 29400, 29999, 5);
	struct stat st;
	int dfd = -1, rc;

	if (!mkdtemp(dir))
		return (void)tap_ok(0, "temporary directory");
	if (geteuid() != 0 || unshare(CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("ddp-test", dir, "tmpfs", 0, "size=2m,mode=0755") < 0) {
		tap_ok(1, "# SKIP a tmpfs cannot be mounted here (%s)",
		       geteuid() ? "not root" : strerror(errno));
		rmdir(dir);
		return;
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	nc_elems_add(&e, &x);
	rc = nc_state_reserve(dfd, err, sizeof(err));
	tap_ok(rc == 0 && fstatat(dfd, NC_STATE_RESERVE, &st, 0) == 0 &&
		       st.st_size == NC_STATE_RESERVE_BYTES &&
		       st.st_blocks * 512 >= NC_STATE_RESERVE_BYTES &&
		       st.st_uid == 0 && (st.st_mode & 07777) == 0600,
	       "the reserve: 1 MiB of allocated blocks, root's, 0600: %s", err);
	tap_ok(nc_state_reserve(dfd, err, sizeof(err)) == 0,
	       "keeping it when it is there is a no-op");
	tap_ok(fill(dfd, "filler") == 0, "something fills the file system");
	rc = nc_state_write(dfd, 5, time(NULL) + 100, &e, err, sizeof(err));
	tap_ok(rc == 1 && nc_state_read(dfd, 5, &got) == 0 && got.n == 1 &&
		       faccessat(dfd, NC_STATE_RESERVE, F_OK, 0) < 0,
	       "the job's state is written on the full file system, taking "
	       "the reserve (rc %d: %s)",
	       rc, err);
	rc = nc_state_reserve(dfd, err, sizeof(err));
	snprintf(tmp, sizeof(tmp), ".%s.%ld", NC_STATE_RESERVE, (long)getpid());
	tap_ok(rc < 0 && strstr(err, "No space left") &&
		       faccessat(dfd, tmp, F_OK, 0) < 0,
	       "while it is full no new reserve can be made: %s", err);
	unlinkat(dfd, "filler", 0);
	tap_ok(nc_state_reserve(dfd, err, sizeof(err)) == 0,
	       "with room again the reserve is made anew: %s", err);
	/* Without the reserve the same write fails: what it is for. */
	unlinkat(dfd, NC_STATE_RESERVE, 0);
	fill(dfd, "filler");
	rc = nc_state_write(dfd, 6, time(NULL) + 100, &e, err, sizeof(err));
	tap_ok(rc < 0 && strstr(err, "No space left"),
	       "without a reserve the write fails on a full file system: %s",
	       err);
	nc_elems_free(&e);
	nc_elems_free(&got);
	close(dfd);
	umount(dir);
	rmdir(dir);
}

int
main(void)
{
	test_validation();
	test_install_script();
	test_peers();
	test_listing();
	test_sync();
	test_state();
	test_state_full();
	return tap_done();
}
