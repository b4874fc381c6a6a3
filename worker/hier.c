/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The hierarchical allreduce for several ranks per node: within a node
 * through shared memory (shm.c), across nodes over the TCP mesh between
 * one rank per node and stripe.
 *
 * The buffer goes in chunks. Every local rank copies a chunk into its slot
 * of the node's segment; the node's G "owners" (local ranks 0..G-1, G the
 * fewest ranks any node has) each reduce one stripe of the chunk over all
 * slots, run a ring allreduce of that stripe with the owners of the same
 * stripe on the other nodes, and write it to the chunk's result area;
 * every local rank copies the result out. Chunks are pipelined: a rank
 * copies chunk k+1 in before it reduces and exchanges its stripe of chunk
 * k, and copies chunk k-1 out after; the segment holds DEPTH chunks per
 * slot, so the owners never wait for each other's network time and one
 * rank's copying overlaps another's exchange.
 *
 * Progress is published through monotonic per-rank counters (chunks in,
 * stripes reduced, chunks out) and a futex doorbell; a rank waiting on
 * another local rank watches the TCP mesh meanwhile, so a local rank's
 * death (its sockets close) or abort is seen at once and named.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ddp_util.h"
#include "hier.h"
#include "peers.h"
#include "proto.h"
#include "reduce.h"
#include "shm.h"
#include "status.h"
#include "tcp.h"

#define HIER_MAGIC 0x48504444u /* "DDPH" */
#define DEPTH 2
#define CHUNK_DEFAULT (1u << 20)
#define PAGE 4096

enum { C_IN = 0, C_RED = 1, C_OUT = 2 };

struct hier_hdr {
	uint32_t magic;
	uint32_t nlocal;
	uint64_t chunk;
	uint32_t depth;
	uint32_t stripes;
	uint8_t pad[40];
	struct wk_bell bell;
};

/* One local rank's progress and current call, on a cache line. */
struct hier_ctl {
	uint64_t cnt[3]; /* C_IN, C_RED, C_OUT: chunks, ever */
	uint64_t count;
	uint32_t seq;
	uint8_t dtype;
	uint8_t op;
	uint8_t pad[26];
} __attribute__((aligned(64)));

struct wk_hier {
	struct wk_shm shm;
	int nodes, node;  /* node count, this rank's node */
	int nlocal, lidx; /* ranks on this node, this rank's place */
	int stripes;	  /* G: the fewest ranks on any node */
	int *locals;	  /* ranks of this node by local index */
	int *grp;	  /* owners of this rank's stripe, by node */
	size_t chunk;	  /* bytes per chunk */
	uint64_t done;	  /* chunks finished so far (counter base) */
	struct hier_hdr *hdr;
	struct hier_ctl *ctl;
	uint8_t *slots;	 /* nlocal x DEPTH chunks */
	uint8_t *result; /* DEPTH chunks */
};

static size_t
seg_bytes(int nlocal, size_t chunk)
{
	size_t head = sizeof(struct hier_hdr) +
		      (size_t)nlocal * sizeof(struct hier_ctl);

	head = (head + PAGE - 1) / PAGE * PAGE;
	return head + (size_t)(nlocal + 1) * DEPTH * chunk;
}

static void
carve(struct wk_hier *h)
{
	uint8_t *b = h->shm.base;
	size_t head = sizeof(struct hier_hdr) +
		      (size_t)h->nlocal * sizeof(struct hier_ctl);

	head = (head + PAGE - 1) / PAGE * PAGE;
	h->hdr = (struct hier_hdr *)b;
	h->ctl = (struct hier_ctl *)(b + sizeof(struct hier_hdr));
	h->slots = b + head;
	h->result = h->slots + (size_t)h->nlocal * DEPTH * h->chunk;
}

static inline uint64_t
ld(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_SEQ_CST);
}

static inline void
post(struct wk_hier *h, int which, uint64_t v)
{
	__atomic_store_n(&h->ctl[h->lidx].cnt[which], v, __ATOMIC_SEQ_CST);
	wk_bell_ring(&h->hdr->bell);
}

/* ---- the node map ---- */

/*
 * The nodes (peers.c: ordered by their lowest rank, local ranks by rank,
 * the same on every rank) and this rank's stripe group. *maxl: most
 * ranks on a node.
 */
static enum ddp_status
node_map(struct wk_mesh *c, struct wk_hier *h, int *maxl)
{
	struct wk_nodes nodes;
	const struct wk_node *me;
	enum ddp_status st = DDP_ERR_NOMEM;
	int i;

	if (wk_nodes_build(c, &nodes) < 0)
		return wk_err(st, "rank %d: out of memory for the node map",
			      c->rank);
	h->nodes = nodes.n;
	h->stripes = nodes.minlen;
	*maxl = nodes.maxlen;
	h->node = nodes.me;
	me = &nodes.node[nodes.me];
	h->nlocal = me->len;
	h->lidx = nodes.lidx;
	h->locals = calloc((size_t)h->nlocal, sizeof(int));
	h->grp = calloc((size_t)nodes.n, sizeof(int));
	if (!h->locals || !h->grp)
		goto out;
	for (i = 0; i < h->nlocal; i++)
		h->locals[i] = nodes.idx[me->start + i];
	if (h->lidx < h->stripes)
		for (i = 0; i < nodes.n; i++)
			h->grp[i] = nodes.idx[nodes.node[i].start + h->lidx];
	st = DDP_OK;
out:
	if (st)
		st = wk_err(st, "rank %d: out of memory for the node map",
			    c->rank);
	wk_nodes_free(&nodes);
	return st;
}

/* ---- setup ---- */

static size_t
chunk_from_env(void)
{
	const char *v = getenv("DDP_HIER_CHUNK");
	long n;

	if (v && *v && ddp_parse_long(v, 64L << 10, 256L << 20, &n) == 0)
		return (size_t)n / PAGE * PAGE;
	return CHUNK_DEFAULT;
}

/* Leader: make the segment, hand its name to the local ranks, collect
 * their verdicts, remove the name. *ok = 0 (with why) when any failed. */
static enum ddp_status
setup_leader(struct wk_mesh *c, struct wk_hier *h, const struct wk_frame *t,
	     double deadline, int *ok, char *why, size_t whylen)
{
	char name[WK_SHM_NAME_MAX];
	enum ddp_status st;
	uint8_t ack;
	int i;

	memset(name, 0, sizeof(name));
	if (wk_shm_create(&h->shm, seg_bytes(h->nlocal, h->chunk),
			  getenv("SLURM_JOB_ID"),
			  getenv("SLURM_STEP_ID")) == DDP_OK) {
		carve(h);
		h->hdr->magic = HIER_MAGIC;
		h->hdr->nlocal = (uint32_t)h->nlocal;
		h->hdr->chunk = h->chunk;
		h->hdr->depth = DEPTH;
		h->hdr->stripes = (uint32_t)h->stripes;
		ddp_fmt(name, sizeof(name), "%s", h->shm.name);
	} else {
		*ok = 0;
		ddp_fmt(why, whylen, "%s", wk_errbuf());
	}
	for (i = 1; i < h->nlocal; i++) {
		st = tcp_xfer(c, t, h->locals[i], name, sizeof(name), -1, NULL,
			      0, deadline);
		if (st)
			return st;
	}
	for (i = 1; i < h->nlocal; i++) {
		st = tcp_xfer(c, t, -1, NULL, 0, h->locals[i], &ack, 1,
			      deadline);
		if (st)
			return st;
		if (!ack && *ok) {
			*ok = 0;
			ddp_fmt(why, whylen,
				"rank %d on the same host could not map the "
				"segment",
				h->locals[i]);
		}
	}
	/* Everyone has it mapped (or gave up): the name goes now. */
	wk_shm_unlink(&h->shm);
	return DDP_OK;
}

static enum ddp_status
setup_member(struct wk_mesh *c, struct wk_hier *h, const struct wk_frame *t,
	     double deadline, int *ok, char *why, size_t whylen)
{
	char name[WK_SHM_NAME_MAX];
	uint8_t ack = 0;
	enum ddp_status st;

	st = tcp_xfer(c, t, -1, NULL, 0, h->locals[0], name, sizeof(name),
		      deadline);
	if (st)
		return st;
	name[sizeof(name) - 1] = '\0';
	if (!name[0]) {
		ddp_fmt(why, whylen,
			"rank %d (the node's leader) made no segment",
			h->locals[0]);
	} else if (wk_shm_open(&h->shm, name, seg_bytes(h->nlocal, h->chunk))) {
		ddp_fmt(why, whylen, "%s", wk_errbuf());
	} else {
		carve(h);
		if (h->hdr->magic != HIER_MAGIC ||
		    h->hdr->nlocal != (uint32_t)h->nlocal ||
		    h->hdr->chunk != h->chunk || h->hdr->depth != DEPTH ||
		    h->hdr->stripes != (uint32_t)h->stripes)
			ddp_fmt(why, whylen,
				"the segment's layout differs from this "
				"rank's (DDP_HIER_CHUNK must be equal on all "
				"ranks)");
		else
			ack = 1;
	}
	*ok = ack;
	return tcp_xfer(c, t, h->locals[0], &ack, 1, -1, NULL, 0, deadline);
}

static void
hier_destroy(struct wk_hier *h)
{
	if (!h)
		return;
	wk_shm_close(&h->shm);
	free(h->locals);
	free(h->grp);
	free(h);
}

/* Like a collective: every rank takes a sequence number, and the setup's
 * frames carry it. */
static void
setup_begin(struct wk_mesh *c, struct wk_frame *t)
{
	c->seq++;
	memset(t, 0, sizeof(*t));
	t->type = WK_F_DATA;
	t->coll = WK_C_HIER_SETUP;
	t->seq = c->seq;
	t->aux = WK_ALGO_HIER;
	tcp_op_start(c);
}

enum ddp_status
wk_hier_setup(struct wk_mesh *c, struct wk_hier **out)
{
	struct wk_hier *h = NULL;
	struct wk_frame t;
	enum ddp_status st;
	char why[DDP_ERR_LEN] = "";
	const char *v = getenv("DDP_HIER_STRIPES");
	int maxl = 0, ok = 1;
	long stripes;
	float all;

	*out = NULL;
	if (c->algo != WK_ALGO_AUTO && c->algo != WK_ALGO_HIER)
		return DDP_OK;
	h = calloc(1, sizeof(*h));
	if (!h)
		return wk_err(DDP_ERR_NOMEM, "rank %d: out of memory", c->rank);
	st = node_map(c, h, &maxl);
	if (st)
		goto out;
	if (c->algo == WK_ALGO_AUTO &&
	    (h->nodes < 2 || maxl < 2 || maxl > WK_HIER_LOCAL_MAX)) {
		st = DDP_OK;
		goto out;
	}
	if (maxl > WK_HIER_LOCAL_MAX) {
		st = wk_err(DDP_ERR_INVALID,
			    "DDP_TCP_ALGO=hier: a node has %d ranks, more "
			    "than the %d the hierarchical allreduce serves "
			    "(its ranks would all connect to each other); "
			    "use DDP_TCP_ALGO=auto",
			    maxl, WK_HIER_LOCAL_MAX);
		goto out;
	}
	h->chunk = chunk_from_env();
	/* Fewer stripes than the fewest ranks on a node: the owners' groups
	 * (node_map) stay valid. */
	if (v && *v && ddp_parse_long(v, 1, 4096, &stripes) == 0 &&
	    stripes < h->stripes)
		h->stripes = (int)stripes;
	setup_begin(c, &t);
	if (h->nlocal > 1)
		st = h->lidx == 0
			     ? setup_leader(c, h, &t, ddp_now() + c->timeout_s,
					    &ok, why, sizeof(why))
			     : setup_member(c, h, &t, ddp_now() + c->timeout_s,
					    &ok, why, sizeof(why));
	if (st)
		goto out;
	all = ok ? 1.0f : 0.0f;
	st = tcp_allreduce(c, &all, &all, 1, DDP_FLOAT32, DDP_MIN);
	if (st)
		goto out;
	if (all < 0.5f) {
		if (!ok)
			wk_log(1,
			       "rank %d (%s): no shared memory with the other "
			       "ranks of this host (%s); the allreduce stays "
			       "flat on every rank",
			       c->rank, c->myhost, why);
		goto out;
	}
	wk_log(2,
	       "rank %d (%s): hierarchical allreduce: %d nodes, %d ranks on "
	       "this one (local %d), %d stripes, %zu-byte chunks",
	       c->rank, c->myhost, h->nodes, h->nlocal, h->lidx, h->stripes,
	       h->chunk);
	*out = h;
	h = NULL;
out:
	hier_destroy(h);
	return st;
}

void
wk_hier_free(struct wk_hier *h)
{
	hier_destroy(h);
}

int
wk_hier_nodes(const struct wk_hier *h)
{
	return h->nodes;
}

/* ---- the allreduce ---- */

struct waitarg {
	struct wk_hier *h;
	int which;
	int n; /* ranks 0..n-1 of the node, not this one */
	uint64_t target;
	int lag; /* the first one short of target */
};

static int
ready(void *a)
{
	struct waitarg *w = a;
	int i;

	for (i = 0; i < w->n; i++) {
		if (i == w->h->lidx)
			continue;
		if (ld(&w->h->ctl[i].cnt[w->which]) < w->target) {
			w->lag = i;
			return 0;
		}
	}
	return 1;
}

struct watcharg {
	struct wk_mesh *c;
	const struct wk_frame *t;
	const struct waitarg *wait; /* whom the wait is for: its lag */
	double deadline;
	int hang; /* the survey named the ranks (its error is set) */
};

/* The mesh's peers, and the hang survey of the wait (tcp.h). */
static enum ddp_status
watch(void *a)
{
	struct watcharg *w = a;
	enum ddp_status st;

	st = tcp_hang_watch(w->c, w->t, w->wait->h->locals[w->wait->lag],
			    w->deadline);
	w->hang = st == DDP_ERR_TIMEOUT;
	return st;
}

static enum ddp_status
hwait(struct wk_mesh *c, struct wk_hier *h, int which, int n, uint64_t target,
      const struct wk_frame *t, double deadline)
{
	struct waitarg w = {h, which, n, target, 0};
	struct watcharg wa = {c, t, &w, deadline, 0};
	enum ddp_status st;
	char d[160];
	int p;

	st = wk_bell_wait(&h->hdr->bell, ready, &w, deadline, watch, &wa);
	if (st != DDP_ERR_TIMEOUT || wa.hang)
		return st;
	/* Say whom we wait for, and give the other ranks' timeouts a
	 * moment to hear it (as the TCP engine does). */
	p = h->locals[w.lag];
	tcp_stall(c, p);
	st = wk_bell_wait(
		&h->hdr->bell, ready, &w,
		ddp_now() + (c->timeout_s / 4 < 0.5 ? c->timeout_s / 4 : 0.5),
		watch, &wa);
	if (st != DDP_ERR_TIMEOUT || wa.hang)
		return st;
	wk_frame_describe(t, d, sizeof(d));
	p = h->locals[w.lag];
	return wk_err(DDP_ERR_TIMEOUT,
		      "rank %d (%s) timed out after %g s in %s waiting for "
		      "rank %d (%s, same host) to %s; that rank may be hung, "
		      "stopped or far behind (DDP_TIMEOUT=%g)",
		      c->rank, c->myhost, c->timeout_s, d, p, c->peers[p].host,
		      which == C_IN    ? "hand in its data"
		      : which == C_RED ? "reduce its share"
				       : "take the result",
		      c->timeout_s);
}

/* Every local rank's call must be this one (checked once per call). */
static enum ddp_status
check_calls(struct wk_mesh *c, struct wk_hier *h, const struct wk_frame *t)
{
	struct wk_frame f;
	char dw[160], dg[160];
	int i, p;

	for (i = 0; i < h->nlocal; i++) {
		if (i == h->lidx)
			continue;
		f = *t;
		f.seq = h->ctl[i].seq;
		f.count = h->ctl[i].count;
		f.dtype = h->ctl[i].dtype;
		f.op = h->ctl[i].op;
		if (f.seq == t->seq && f.count == t->count &&
		    f.dtype == t->dtype && f.op == t->op)
			continue;
		p = h->locals[i];
		wk_frame_describe(t, dw, sizeof(dw));
		wk_frame_describe(&f, dg, sizeof(dg));
		return wk_err(DDP_ERR_MISMATCH,
			      "mismatched collectives: rank %d (%s) called %s "
			      "but rank %d (%s) called %s",
			      c->rank, c->myhost, dw, p, c->peers[p].host, dg);
	}
	return DDP_OK;
}

/* Elements [*s0, *s1) of an n-element chunk are stripe j of g, split on
 * 64-byte boundaries. */
static void
stripe_of(size_t n, size_t esize, int j, int g, size_t *s0, size_t *s1)
{
	size_t unit = 64 / esize, units = (n + unit - 1) / unit;

	*s0 = units * (size_t)j / (size_t)g * unit;
	*s1 = units * (size_t)(j + 1) / (size_t)g * unit;
	if (*s0 > n)
		*s0 = n;
	if (*s1 > n)
		*s1 = n;
}

/* Copies [a, b) of the chunk except [x0, x1) (empty when x0 == x1). */
static void
copy_but(uint8_t *dst, const uint8_t *src, size_t a, size_t b, size_t x0,
	 size_t x1, size_t es)
{
	if (x0 >= x1) {
		memcpy(dst + a * es, src + a * es, (b - a) * es);
		return;
	}
	if (x0 > a)
		memcpy(dst + a * es, src + a * es, (x0 - a) * es);
	if (b > x1)
		memcpy(dst + x1 * es, src + x1 * es, (b - x1) * es);
}

/* One call's state (wk_hier_allreduce). */
struct call {
	struct wk_mesh *c;
	struct wk_hier *h;
	const struct wk_frame *t;
	uint8_t *buf;
	size_t count;
	size_t es; /* element size */
	size_t ce; /* elements per chunk */
	size_t nk; /* chunks */
	enum ddp_dtype dtype;
	enum ddp_op op;
	uint64_t base; /* counters before this call */
	int owner;     /* this rank owns a stripe */
	double deadline;
};

/* Elements in chunk k, and this rank's stripe of it (empty if none). */
static size_t
chunk_len(const struct call *a, size_t k, size_t *s0, size_t *s1)
{
	size_t n = a->count - k * a->ce < a->ce ? a->count - k * a->ce : a->ce;

	*s0 = *s1 = 0;
	if (a->owner)
		stripe_of(n, a->es, a->h->lidx, a->h->stripes, s0, s1);
	return n;
}

/* Chunk k into this rank's slot (all but its own stripe). */
static enum ddp_status
copy_in(struct call *a, size_t k)
{
	struct wk_hier *h = a->h;
	size_t n, s0, s1;
	enum ddp_status st;

	/* The slot of this depth is free once every owner reduced chunk
	 * k - DEPTH. */
	if (k >= DEPTH) {
		st = hwait(a->c, h, C_RED, h->stripes, a->base + k - DEPTH + 1,
			   a->t, a->deadline);
		if (st)
			return st;
	}
	n = chunk_len(a, k, &s0, &s1);
	copy_but(h->slots + ((size_t)h->lidx * DEPTH + k % DEPTH) * h->chunk,
		 a->buf + k * a->ce * a->es, 0, n, s0, s1, a->es);
	post(h, C_IN, a->base + k + 1);
	return DDP_OK;
}

/* Owner: this rank's stripe of chunk k reduced over the node's slots,
 * then across nodes, then published in the result area. */
static enum ddp_status
reduce_stripe(struct call *a, size_t k)
{
	struct wk_hier *h = a->h;
	enum ddp_op rop = a->op == DDP_AVG ? DDP_SUM : a->op;
	size_t es = a->es, s0, s1;
	uint8_t *cb = a->buf + k * a->ce * es;
	enum ddp_status st;
	int i, shared = h->nlocal > 1;

	chunk_len(a, k, &s0, &s1);
	if (shared) {
		st = hwait(a->c, h, C_IN, h->nlocal, a->base + k + 1, a->t,
			   a->deadline);
		if (!st && k == 0)
			st = check_calls(a->c, h, a->t);
		if (st)
			return st;
		/* In local order: the same additions on every node. */
		for (i = 0; i < h->nlocal && s1 > s0; i++)
			if (i != h->lidx)
				wk_reduce(cb + s0 * es,
					  h->slots +
						  ((size_t)i * DEPTH +
						   k % DEPTH) *
							  h->chunk +
						  s0 * es,
					  s1 - s0, a->dtype, rop);
	}
	st = tcp_ring_group(a->c, h->grp, h->nodes, h->node, cb + s0 * es,
			    s1 - s0, a->dtype, rop, a->t, a->deadline);
	if (st)
		return st;
	if (a->op == DDP_AVG)
		wk_scale_div(cb + s0 * es, s1 - s0, a->dtype, a->c->size);
	if (!shared)
		return DDP_OK;
	/* The result area of this depth is free once every rank took chunk
	 * k - DEPTH out. */
	if (k >= DEPTH) {
		st = hwait(a->c, h, C_OUT, h->nlocal, a->base + k - DEPTH + 1,
			   a->t, a->deadline);
		if (st)
			return st;
	}
	memcpy(h->result + (k % DEPTH) * h->chunk + s0 * es, cb + s0 * es,
	       (s1 - s0) * es);
	post(h, C_RED, a->base + k + 1);
	return DDP_OK;
}

/* Chunk k from the result area (all but this rank's own stripe). */
static enum ddp_status
copy_out(struct call *a, size_t k)
{
	struct wk_hier *h = a->h;
	size_t n, s0, s1;
	enum ddp_status st;

	st = hwait(a->c, h, C_RED, h->stripes, a->base + k + 1, a->t,
		   a->deadline);
	if (st)
		return st;
	n = chunk_len(a, k, &s0, &s1);
	copy_but(a->buf + k * a->ce * a->es, h->result + (k % DEPTH) * h->chunk,
		 0, n, s0, s1, a->es);
	post(h, C_OUT, a->base + k + 1);
	return DDP_OK;
}

enum ddp_status
wk_hier_allreduce(struct wk_mesh *c, struct wk_hier *h, void *buf, size_t count,
		  enum ddp_dtype dtype, enum ddp_op op,
		  const struct wk_frame *t, double deadline)
{
	struct call a;
	enum ddp_status st = DDP_OK;
	int shared = h->nlocal > 1;
	size_t k;

	memset(&a, 0, sizeof(a));
	a.c = c;
	a.h = h;
	a.t = t;
	a.buf = buf;
	a.count = count;
	a.es = ddp_dtype_size(dtype);
	a.ce = h->chunk / a.es;
	a.nk = (count + a.ce - 1) / a.ce;
	a.dtype = dtype;
	a.op = op;
	a.base = h->done;
	a.owner = h->lidx < h->stripes;
	a.deadline = deadline;
	if (shared) {
		h->ctl[h->lidx].seq = t->seq;
		h->ctl[h->lidx].count = count;
		h->ctl[h->lidx].dtype = t->dtype;
		h->ctl[h->lidx].op = t->op;
		st = copy_in(&a, 0);
	}
	/*
	 * Chunk k + 1 goes in before this rank's stripe of chunk k is
	 * reduced and exchanged, and chunk k - 1 comes out after: the other
	 * owners never wait for this rank's network time to get its input.
	 */
	for (k = 0; !st && k <= a.nk; k++) {
		if (shared && k + 1 < a.nk)
			st = copy_in(&a, k + 1);
		if (!st && a.owner && k < a.nk)
			st = reduce_stripe(&a, k);
		if (!st && shared && k >= 1)
			st = copy_out(&a, k - 1);
	}
	if (!st)
		h->done = a.base + a.nk;
	return st;
}
