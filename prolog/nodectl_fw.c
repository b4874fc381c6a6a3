/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ddp-nodectl core, firewall part: the nftables table definition, the
 * job's peer elements, parsing "nft list set" output and the sync script
 * that makes the sets match the live jobs' needs (their state files are
 * nodectl_state.c's); then running nft on them, under the lock that
 * serialises the updates of concurrent prologs, epilogs and reconciles.
 */
#include "nodectl.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ddp_log.h"
#include "ddp_net.h"
#include "ddp_util.h"

static int
key_cmp(const struct nc_elem *a, const struct nc_elem *b)
{
	int c;

	if (a->family != b->family)
		return a->family < b->family ? -1 : 1;
	c = strcmp(a->addr, b->addr);
	if (c)
		return c;
	if (a->lo != b->lo)
		return a->lo < b->lo ? -1 : 1;
	if (a->hi != b->hi)
		return a->hi < b->hi ? -1 : 1;
	return 0;
}

static int
elem_cmp(const void *pa, const void *pb)
{
	const struct nc_elem *a = pa, *b = pb;
	int c = key_cmp(a, b);

	if (c)
		return c;
	if (a->jobid != b->jobid)
		return a->jobid < b->jobid ? -1 : 1;
	return 0;
}

void
nc_elems_sort(struct nc_elems *e)
{
	if (e->n > 1)
		qsort(e->v, e->n, sizeof(e->v[0]), elem_cmp);
}

/* The two guarded port ranges, merged when they overlap or touch. A
 * job's peers get all of port_range, which holds every port srun --ddp
 * chooses for it: each step's MASTER_PORT and ddp-check's port
 * (ddp_port_choose_check) alike, opened and closed with the job. */
static size_t
guarded_ranges(const struct ddp_conf *conf, unsigned eph_lo, unsigned eph_hi,
	       unsigned lo[2], unsigned hi[2])
{
	lo[0] = conf->port_min;
	hi[0] = conf->port_max;
	lo[1] = eph_lo;
	hi[1] = eph_hi;
	if (lo[1] < lo[0]) {
		lo[0] = eph_lo;
		hi[0] = eph_hi;
		lo[1] = conf->port_min;
		hi[1] = conf->port_max;
	}
	if (lo[1] <= hi[0] + 1) {
		if (hi[1] > hi[0])
			hi[0] = hi[1];
		return 1;
	}
	return 2;
}

static int
print_range(struct ddp_buf *b, unsigned lo, unsigned hi)
{
	if (lo == hi)
		return ddp_buf_printf(b, "%u", lo);
	return ddp_buf_printf(b, "%u-%u", lo, hi);
}

int
nc_fw_install_script(const struct ddp_conf *conf, unsigned eph_lo,
		     unsigned eph_hi, struct ddp_buf *out)
{
	unsigned lo[2], hi[2];
	size_t n = guarded_ranges(conf, eph_lo, eph_hi, lo, hi), i;

	/* "table; delete table; table {...}" in one transaction recreates
	 * the table whether or not it existed (nft 1.0.6 has no destroy). */
	if (ddp_buf_printf(out, "table inet " NC_TABLE "\n"
				"delete table inet " NC_TABLE "\n"
				"table inet " NC_TABLE " {\n"
				"\tset " NC_SET4 " {\n"
				"\t\ttype ipv4_addr . inet_service\n"
				"\t\tflags interval,timeout\n"
				"\t}\n"
				"\tset " NC_SET6 " {\n"
				"\t\ttype ipv6_addr . inet_service\n"
				"\t\tflags interval,timeout\n"
				"\t}\n"
				"\tset ports {\n"
				"\t\ttype inet_service\n"
				"\t\tflags interval\n"
				"\t\telements = { ") < 0)
		return -1;
	for (i = 0; i < n; i++) {
		if ((i && ddp_buf_printf(out, ", ") < 0) ||
		    print_range(out, lo[i], hi[i]) < 0)
			return -1;
	}
	/* Established traffic first: replies to the node's own outgoing
	 * connections arrive on ephemeral ports. Reject, not drop, so a
	 * stranger fails fast instead of hanging. */
	return ddp_buf_printf(
		out, " }\n"
		     "\t}\n"
		     "\tchain input {\n"
		     "\t\ttype filter hook input priority filter - 10; "
		     "policy accept;\n"
		     "\t\tct state established,related accept\n"
		     "\t\tiif \"lo\" accept\n"
		     "\t\tmeta l4proto tcp ip saddr . tcp dport @" NC_SET4
		     " accept\n"
		     "\t\tmeta l4proto tcp ip6 saddr . tcp dport @" NC_SET6
		     " accept\n"
		     "\t\ttcp dport @ports reject with tcp reset\n"
		     "\t}\n"
		     "}\n");
}

static int
add_peer(struct nc_elems *out, int family, const char *addr, unsigned n,
	 const unsigned *lo, const unsigned *hi, unsigned long jobid)
{
	struct nc_elem el;
	size_t i, j;

	memset(&el, 0, sizeof(el));
	el.family = family;
	el.jobid = jobid;
	if (ddp_fmt(el.addr, sizeof(el.addr), "%s", addr) < 0)
		return -1;
	for (i = 0; i < n; i++) {
		el.lo = lo[i];
		el.hi = hi[i];
		/* One host may have several names or resolve twice. */
		for (j = 0; j < out->n; j++)
			if (key_cmp(&out->v[j], &el) == 0 &&
			    out->v[j].jobid == jobid)
				break;
		if (j == out->n && nc_elems_add(out, &el) < 0)
			return -1;
	}
	return 0;
}

int
nc_fw_peer_elems(const struct ddp_conf *conf, char *const *hosts, size_t nhosts,
		 const char *self, unsigned eph_lo, unsigned eph_hi,
		 unsigned long jobid, struct nc_elems *out, char *err,
		 size_t errlen)
{
	unsigned lo[2], hi[2];
	size_t n = guarded_ranges(conf, eph_lo, eph_hi, lo, hi), i;
	int rv = 0;

	err[0] = '\0';
	for (i = 0; i < nhosts; i++) {
		struct addrinfo hints, *res = NULL, *ai;
		int rc;

		if (self && strcmp(hosts[i], self) == 0)
			continue;
		memset(&hints, 0, sizeof(hints));
		hints.ai_family = AF_UNSPEC;
		hints.ai_socktype = SOCK_STREAM;
		rc = getaddrinfo(hosts[i], NULL, &hints, &res);
		if (rc != 0) {
			(void)ddp_fmt_cat(err, errlen, "%s%s",
					  err[0] ? "," : "", hosts[i]);
			rv = 1;
			continue;
		}
		for (ai = res; ai; ai = ai->ai_next) {
			char addr[INET6_ADDRSTRLEN];
			const void *bin;

			if (ai->ai_family == AF_INET)
				bin = &((struct sockaddr_in *)(void *)
						ai->ai_addr)
					       ->sin_addr;
			else if (ai->ai_family == AF_INET6)
				bin = &((struct sockaddr_in6 *)(void *)
						ai->ai_addr)
					       ->sin6_addr;
			else
				continue;
			if (ddp_net_addr_format(ai->ai_family, bin, addr,
						sizeof(addr)) < 0)
				continue;
			if (add_peer(out, ai->ai_family, addr, (unsigned)n, lo,
				     hi, jobid) < 0) {
				freeaddrinfo(res);
				return -1;
			}
		}
		freeaddrinfo(res);
	}
	return rv;
}

/* Parses "LO" or "LO-HI" ports. */
static int
parse_ports(const char *s, unsigned *lo, unsigned *hi)
{
	const char *end = NULL;
	long a, b;

	if (ddp_parse_long_prefix(s, 0, 65535, &a, &end) < 0 || *s == '-' ||
	    *s == '+')
		return -1;
	b = a;
	if (*end == '-' && (ddp_parse_long(end + 1, 0, 65535, &b) < 0 ||
			    end[1] == '-' || end[1] == '+' || b < a))
		return -1;
	else if (*end != '-' && *end != '\0')
		return -1;
	*lo = (unsigned)a;
	*hi = (unsigned)b;
	return 0;
}

/* Parses one element's text, "ADDR . PORTS [timeout T] [expires E]
 * [comment "job=N"]". */
static int
parse_element(char *text, struct nc_elem *el)
{
	char *tok[16];
	size_t n = 0, i;
	char *save = NULL, *t;

	for (t = strtok_r(text, " \t\n", &save); t && n < 16;
	     t = strtok_r(NULL, " \t\n", &save))
		tok[n++] = t;
	if (n < 3 || strcmp(tok[1], ".") != 0)
		return -1;
	memset(el, 0, sizeof(*el));
	if (nc_canon_addr(tok[0], &el->family, el->addr, sizeof(el->addr)) <
		    0 ||
	    parse_ports(tok[2], &el->lo, &el->hi) < 0)
		return -1;
	for (i = 3; i + 1 < n; i++) {
		unsigned long id;
		size_t len;

		if (strcmp(tok[i], "comment") != 0)
			continue;
		len = strlen(tok[i + 1]);
		if (len > 6 && strncmp(tok[i + 1], "\"job=", 5) == 0 &&
		    tok[i + 1][len - 1] == '"') {
			tok[i + 1][len - 1] = '\0';
			if (nc_parse_jobid(tok[i + 1] + 5, &id) == 0)
				el->jobid = id;
		}
	}
	return 0;
}

int
nc_fw_parse_listing(const char *text, struct nc_elems *out, char *err,
		    size_t errlen)
{
	const char *p, *end;
	char *copy = NULL, *save = NULL, *item;
	int family = 0, rv = -1;

	err[0] = '\0';
	if (strstr(text, "type ipv4_addr . inet_service"))
		family = AF_INET;
	else if (strstr(text, "type ipv6_addr . inet_service"))
		family = AF_INET6;
	if (!family) {
		ddp_errf(err, errlen, "set listing without a known type");
		goto out;
	}
	p = strstr(text, "elements = {");
	if (!p) {
		rv = 0; /* an empty set */
		goto out;
	}
	p += strlen("elements = {");
	end = strchr(p, '}');
	if (!end) {
		ddp_errf(err, errlen, "set listing: unterminated elements");
		goto out;
	}
	copy = strndup(p, (size_t)(end - p));
	if (!copy) {
		ddp_errf(err, errlen, "out of memory");
		goto out;
	}
	/* Our comments are "job=N" and hold no comma. */
	for (item = strtok_r(copy, ",", &save); item;
	     item = strtok_r(NULL, ",", &save)) {
		struct nc_elem el;

		if (parse_element(item, &el) < 0 || el.family != family) {
			ddp_errf(err, errlen,
				 "set listing: cannot parse '%.80s'", item);
			goto out;
		}
		if (nc_elems_add(out, &el) < 0) {
			ddp_errf(err, errlen, "out of memory");
			goto out;
		}
	}
	rv = 0;
out:
	free(copy);
	return rv;
}

static int
print_elem(struct ddp_buf *b, const char *verb, const struct nc_elem *el,
	   unsigned timeout_s, unsigned long tag)
{
	if (ddp_buf_printf(b, "%s element inet " NC_TABLE " %s { %s . ", verb,
			   el->family == AF_INET ? NC_SET4 : NC_SET6,
			   el->addr) < 0 ||
	    print_range(b, el->lo, el->hi) < 0)
		return -1;
	if (tag && ddp_buf_printf(b, " timeout %us comment \"job=%lu\"",
				  timeout_s, tag) < 0)
		return -1;
	return ddp_buf_printf(b, " }\n");
}

/* Desired elements by key, each key's owner first: the job whose opening
 * expires last, the highest job id on a tie. */
static int
owner_cmp(const void *pa, const void *pb)
{
	const struct nc_elem *a = pa, *b = pb;
	int c = key_cmp(a, b);

	if (c)
		return c;
	if (a->expires != b->expires)
		return a->expires > b->expires ? -1 : 1;
	if (a->jobid != b->jobid)
		return a->jobid > b->jobid ? -1 : 1;
	return 0;
}

/* Index of the first element of d with a's key, or d->n. */
static size_t
find_key(const struct nc_elems *d, const struct nc_elem *a)
{
	size_t i;

	for (i = 0; i < d->n; i++)
		if (key_cmp(&d->v[i], a) == 0)
			return i;
	return d->n;
}

static int
same_addr(const struct nc_elem *a, const struct nc_elem *b)
{
	return a->family == b->family && strcmp(a->addr, b->addr) == 0;
}

/* Sorted by address then lowest port, for merge_overlaps. */
static int
range_cmp(const void *pa, const void *pb)
{
	const struct nc_elem *a = pa, *b = pb;
	int c;

	if (a->family != b->family)
		return a->family < b->family ? -1 : 1;
	c = strcmp(a->addr, b->addr);
	if (c)
		return c;
	if (a->lo != b->lo)
		return a->lo < b->lo ? -1 : 1;
	return 0;
}

/* nft refuses an element that overlaps another of the same address
 * ("File exists"), as when port_range or the ephemeral range changed
 * while an earlier job still runs: widens each element of d to the union
 * of the ranges it overlaps or touches, so those jobs share one. */
static void
merge_overlaps(struct nc_elems *d)
{
	size_t i = 0, j, k;

	if (d->n > 1)
		qsort(d->v, d->n, sizeof(d->v[0]), range_cmp);
	while (i < d->n) {
		unsigned hi = d->v[i].hi;

		for (j = i + 1; j < d->n && same_addr(&d->v[i], &d->v[j]) &&
				d->v[j].lo <= hi + 1;
		     j++)
			if (d->v[j].hi > hi)
				hi = d->v[j].hi;
		for (k = i; k < j; k++) {
			d->v[k].lo = d->v[i].lo;
			d->v[k].hi = hi;
		}
		i = j;
	}
}

/* Adds the owner's element with the rest of the owner's time. */
static int
add_owned(struct ddp_buf *out, const struct nc_elem *owner, time_t now)
{
	time_t left = owner->expires - now;

	if (left < 1)
		left = 1;
	if (left > 365L * 86400)
		left = 365L * 86400;
	return print_elem(out, "add", owner, (unsigned)left, owner->jobid);
}

int
nc_fw_sync_script(const struct nc_elems *actual, const struct nc_elems *desired,
		  time_t now, struct ddp_buf *out)
{
	struct nc_elems d = {0};
	size_t i, j;
	int rv = -1;

	for (i = 0; i < desired->n; i++)
		if (nc_elems_add(&d, &desired->v[i]) < 0)
			goto out;
	merge_overlaps(&d);
	if (d.n > 1)
		qsort(d.v, d.n, sizeof(d.v[0]), owner_cmp);
	for (i = 0; i < actual->n; i++) {
		const struct nc_elem *a = &actual->v[i];
		size_t k;

		if (!a->jobid)
			continue;
		k = find_key(&d, a);
		if (k == d.n) {
			if (print_elem(out, "add", a, 0, 0) < 0 ||
			    print_elem(out, "delete", a, 0, 0) < 0)
				goto out;
			continue;
		}
		if (d.v[k].jobid == a->jobid)
			continue;
		/* Needed, owned by another job (a later one sharing it, or
		 * the one left when the tagged job ended): re-add with the
		 * owner's comment and time, atomically. */
		if (print_elem(out, "delete", a, 0, 0) < 0 ||
		    add_owned(out, &d.v[k], now) < 0)
			goto out;
	}
	for (i = 0; i < d.n; i++) {
		if (i && key_cmp(&d.v[i - 1], &d.v[i]) == 0)
			continue;
		for (j = 0; j < actual->n; j++)
			if (key_cmp(&actual->v[j], &d.v[i]) == 0)
				break;
		if (j == actual->n && add_owned(out, &d.v[i], now) < 0)
			goto out;
	}
	rv = 0;
out:
	nc_elems_free(&d);
	return rv;
}

size_t
nc_fw_shared(const struct nc_elems *mine, const struct nc_elems *desired,
	     unsigned long self, unsigned long *with, size_t maxwith,
	     size_t *nwith)
{
	size_t i, j, k, n = 0;

	*nwith = 0;
	for (i = 0; i < mine->n; i++) {
		int shared = 0;

		for (j = 0; j < desired->n; j++) {
			unsigned long id = desired->v[j].jobid;

			/* Overlapping ranges count: they share one element. */
			if (id == self ||
			    !same_addr(&desired->v[j], &mine->v[i]) ||
			    desired->v[j].lo > mine->v[i].hi + 1 ||
			    mine->v[i].lo > desired->v[j].hi + 1)
				continue;
			shared = 1;
			/* Insert id into the sorted with[], keeping the
			 * lowest maxwith. */
			for (k = 0; k < *nwith && with[k] < id; k++)
				;
			if ((k < *nwith && with[k] == id) || k >= maxwith)
				continue;
			if (*nwith < maxwith)
				(*nwith)++;
			memmove(&with[k + 1], &with[k],
				(*nwith - 1 - k) * sizeof(*with));
			with[k] = id;
		}
		n += (size_t)shared;
	}
	return n;
}

/* ---- the firewall under the state lock ------------------------------- */

#define NFT_TIMEOUT_S 30
/* The lock on the firewall state: a holder gives up once it has held it
 * LOCK_HOLD_S seconds (every nft call under the lock shares that budget,
 * and nothing else under it can block), and a waiter waits longer than
 * that, so an Epilog never times out behind a healthy holder. */
#define LOCK_HOLD_S 90
#define LOCK_WAIT_S (LOCK_HOLD_S + 60)

/* While the state lock is held: when its hold budget runs out. */
static time_t lock_deadline;

static int
nft(const struct ddp_conf *conf, const char *script, struct ddp_buf *out,
    char *const *args, char *err, size_t errlen)
{
	char *argv[12];
	size_t n = 0, i;
	unsigned timeout = NFT_TIMEOUT_S;

	if (lock_deadline) {
		time_t left = lock_deadline - time(NULL);

		if (left <= 0) {
			ddp_errf(err, errlen,
				 "nft not run: the state lock was held %d s, "
				 "its limit",
				 LOCK_HOLD_S);
			return -1;
		}
		if (left < (time_t)timeout)
			timeout = (unsigned)left;
	}
	argv[n++] = (char *)conf->nft_path;
	if (script) {
		argv[n++] = "-f";
		argv[n++] = "-";
	}
	for (i = 0; args && args[i] && n < 11; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	return nc_run(argv, NULL, script, out, timeout, err, errlen);
}

int
nc_fw_table_exists(const struct ddp_conf *conf)
{
	char *args[] = {"list", "tables", "inet", NULL};
	struct ddp_buf out = {0};
	char err[DDP_ERR_LEN];
	int found;

	/* Listing all inet tables succeeds (and prints nothing on stderr)
	 * whether or not ours is there. */
	found = nft(conf, NULL, &out, args, err, sizeof(err)) == 0 && out.s &&
		strstr(out.s, "table inet " NC_TABLE "\n") != NULL;
	ddp_buf_free(&out);
	return found;
}

int
nc_fw_install(const struct ddp_conf *conf, char *err, size_t errlen)
{
	struct ddp_buf script = {0};
	unsigned lo, hi;
	int rv = -1;

	ddp_read_ephemeral_range(&lo, &hi);
	if (ddp_conf_check_ports(conf, lo, hi, err, errlen) < 0)
		ddp_error("%s", err);
	if (nc_fw_install_script(conf, lo, hi, &script) < 0) {
		ddp_errf(err, errlen, "out of memory");
		goto out;
	}
	if (nft(conf, script.s, NULL, NULL, err, errlen) != 0)
		goto out;
	ddp_info("installed table inet %s guarding %u-%u and %u-%u", NC_TABLE,
		 conf->port_min, conf->port_max, lo, hi);
	rv = 0;
out:
	ddp_buf_free(&script);
	return rv;
}

int
nc_fw_state_open(const struct ddp_conf *conf, char *err, size_t errlen)
{
	struct stat st;
	char sub[64];
	int dfd, nfd = -1, squatted;

	dfd = ddp_jobdir_open_root(conf->state_dir, "state dir", &squatted, err,
				   errlen);
	if (dfd < 0)
		return -1;
	/* The firewall state belongs to a network namespace: nodes that
	 * share one (several slurmd on a host) share it, nodes in their own
	 * (containers, the test cluster) must not see each other's. */
	if (stat("/proc/self/ns/net", &st) < 0)
		return dfd;
	ddp_fmt(sub, sizeof(sub), "net-%llu", (unsigned long long)st.st_ino);
	if (mkdirat(dfd, sub, 0700) < 0 && errno != EEXIST) {
		ddp_errf(err, errlen, "state dir %s/%s: %s", conf->state_dir,
			 sub, strerror(errno));
		goto out;
	}
	nfd = openat(dfd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (nfd < 0)
		ddp_errf(err, errlen, "state dir %s/%s: %s", conf->state_dir,
			 sub, strerror(errno));
out:
	close(dfd);
	return nfd;
}

int
nc_fw_lock_take(const struct ddp_conf *conf, int dfd, char *err, size_t errlen)
{
	time_t deadline = time(NULL) + LOCK_WAIT_S;
	int fd;

	fd = openat(dfd, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
		    0600);
	if (fd < 0) {
		ddp_errf(err, errlen, "lock %s/lock: %s", conf->state_dir,
			 strerror(errno));
		return -1;
	}
	/* Prologs of different jobs run at once; a stuck holder gives up
	 * after LOCK_HOLD_S, so this wait ends. */
	while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno != EWOULDBLOCK || time(NULL) >= deadline) {
			ddp_errf(err, errlen, "lock %s/lock: %s",
				 conf->state_dir,
				 errno == EWOULDBLOCK ? "timed out"
						      : strerror(errno));
			close(fd);
			return -1;
		}
		usleep(20000);
	}
	lock_deadline = time(NULL) + LOCK_HOLD_S;
	return fd;
}

void
nc_fw_lock_drop(int *lockfd)
{
	ddp_close(lockfd);
	lock_deadline = 0;
}

int
nc_fw_state_lock(const struct ddp_conf *conf, int *lockfd, char *err,
		 size_t errlen)
{
	int dfd = nc_fw_state_open(conf, err, errlen);

	*lockfd = -1;
	if (dfd < 0)
		return -1;
	*lockfd = nc_fw_lock_take(conf, dfd, err, errlen);
	if (*lockfd < 0) {
		close(dfd);
		return -1;
	}
	return dfd;
}

static int
list_set(const struct ddp_conf *conf, const char *set, struct nc_elems *out,
	 char *err, size_t errlen)
{
	char *args[] = {"-n",	  "list",      "set", "inet",
			NC_TABLE, (char *)set, NULL};
	struct ddp_buf text = {0};
	int rv = -1;

	if (nft(conf, NULL, &text, args, err, errlen) != 0)
		goto out;
	rv = nc_fw_parse_listing(text.s ? text.s : "", out, err, errlen);
out:
	ddp_buf_free(&text);
	return rv;
}

/* ", kept N shared with job A" (or "jobs A,B,C", "and others" past 4)
 * for the N of mine other jobs in desired need; "" when none. Returns N. */
static size_t
describe_shared(const struct nc_elems *mine, const struct nc_elems *desired,
		unsigned long self, char *buf, size_t len)
{
	unsigned long with[5];
	size_t nwith, n, i;

	buf[0] = '\0';
	n = nc_fw_shared(mine, desired, self, with, 5, &nwith);
	if (n == 0)
		return 0;
	if (ddp_fmt(buf, len, ", kept %zu shared with job%s ", n,
		    nwith > 1 ? "s" : "") < 0)
		return n;
	for (i = 0; i < nwith && i < 4; i++)
		if (ddp_fmt_cat(buf, len, "%s%lu", i ? "," : "", with[i]) < 0)
			return n;
	if (nwith > 4)
		(void)ddp_fmt_cat(buf, len, " and others");
	return n;
}

int
nc_fw_sync(const struct ddp_conf *conf, int statefd, const unsigned long *live,
	   size_t nlive, const struct nc_elems *mine, unsigned long self,
	   size_t *kept, char *shared, size_t sharedlen, char *err,
	   size_t errlen)
{
	struct nc_elems actual = {0}, desired = {0};
	struct ddp_buf script = {0};
	time_t now = time(NULL);
	int rv = -1, rc;

	if (kept)
		*kept = 0;
	if (shared)
		shared[0] = '\0';
	rc = nc_state_read_all(statefd, now, live, nlive, &desired, err,
			       errlen);
	if (rc < 0)
		goto out;
	if (rc > 0)
		ddp_error("state: %s (removed)", err);
	if (mine && kept && shared)
		*kept = describe_shared(mine, &desired, self, shared,
					sharedlen);
	if (!nc_fw_table_exists(conf)) {
		rv = 0; /* nothing to remove; the prolog installs first */
		goto out;
	}
	if (list_set(conf, NC_SET4, &actual, err, errlen) < 0 ||
	    list_set(conf, NC_SET6, &actual, err, errlen) < 0)
		goto out;
	if (nc_fw_sync_script(&actual, &desired, now, &script) < 0) {
		ddp_errf(err, errlen, "out of memory");
		goto out;
	}
	if (script.len) {
		ddp_debug("nft script:\n%s", script.s);
		if (nft(conf, script.s, NULL, NULL, err, errlen) != 0)
			goto out;
	}
	rv = 0;
out:
	nc_elems_free(&actual);
	nc_elems_free(&desired);
	ddp_buf_free(&script);
	return rv;
}
