/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The TCP collectives: recursive doubling for small messages, a pipelined
 * ring (reduce-scatter + allgather) for large ones, tree and chain
 * broadcasts, and the dissemination agreement under barriers. They move
 * frames with tcp.c's engine (tcp_internal.h), whose every wait is bounded
 * and watches all peers, so a dead peer is named at once.
 */
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "ddp_util.h"
#include "reduce.h"
#include "status.h"
#include "tcp.h"
#include "tcp_internal.h"

static enum ddp_status
scratch(struct wk_mesh *c, size_t bytes)
{
	uint8_t *p;

	if (c->scratch_len >= bytes)
		return DDP_OK;
	p = realloc(c->scratch, bytes);
	if (!p)
		return wk_err(DDP_ERR_NOMEM,
			      "out of memory for a %zu-byte scratch buffer",
			      bytes);
	c->scratch = p;
	c->scratch_len = bytes;
	return DDP_OK;
}

/* Recursive doubling; non-powers of two fold the extra ranks first. */
static enum ddp_status
allreduce_rd(struct wk_mesh *c, uint8_t *buf, size_t count,
	     enum ddp_dtype dtype, enum ddp_op op, const struct wk_frame *t,
	     double deadline)
{
	size_t bytes = count * ddp_dtype_size(dtype);
	struct tcp_xop x[2];
	enum ddp_status st;
	int pof2 = 1, rem, r = c->rank, nr, mask, step, nd, dst;

	st = scratch(c, bytes ? bytes : 1);
	if (st)
		return st;
	while (pof2 * 2 <= c->size)
		pof2 *= 2;
	rem = c->size - pof2;
	nr = r - rem;
	if (r < 2 * rem) {
		if (r % 2 == 0) {
			tcp_xop_init(&x[0], r + 1, t, 0, buf, bytes);
			st = tcp_run_xops(c, x, 1, 0, deadline);
			nr = -1;
		} else {
			tcp_xop_init(&x[0], r - 1, t, 0, c->scratch, bytes);
			st = tcp_run_xops(c, x, 0, 1, deadline);
			if (!st)
				wk_reduce(buf, c->scratch, count, dtype, op);
			nr = r / 2;
		}
		if (st)
			return st;
	}
	for (mask = 1, step = 1; nr >= 0 && mask < pof2; mask <<= 1, step++) {
		nd = nr ^ mask;
		dst = nd < rem ? nd * 2 + 1 : nd + rem;
		tcp_xop_init(&x[0], dst, t, (uint32_t)step, buf, bytes);
		tcp_xop_init(&x[1], dst, t, (uint32_t)step, c->scratch, bytes);
		st = tcp_run_xops(c, x, 1, 1, deadline);
		if (st)
			return st;
		wk_reduce(buf, c->scratch, count, dtype, op);
	}
	if (r < 2 * rem) {
		if (r % 2) {
			tcp_xop_init(&x[0], r - 1, t, 99, buf, bytes);
			st = tcp_run_xops(c, x, 1, 0, deadline);
		} else {
			tcp_xop_init(&x[0], r + 1, t, 99, buf, bytes);
			st = tcp_run_xops(c, x, 0, 1, deadline);
		}
	}
	return st;
}

/*
 * A pipelined stream of segments from left to right. Ring: 2(P-1) steps
 * of one chunk each (reduce-scatter then allgather); send unit u needs
 * receive unit u - nseg done. Chain (broadcast): send unit u needs receive
 * unit u done.
 */
struct stream {
	struct wk_mesh *c;
	uint8_t *buf;
	size_t count;
	size_t esize;
	enum ddp_dtype dtype;
	enum ddp_op op;
	int ring;
	int left;
	int right;
	int P;	     /* ring members (the world, or a group) */
	int r;	     /* this rank's place among them */
	size_t seg;  /* elements per segment */
	size_t nseg; /* segments per chunk (ring) or buffer (chain) */
	size_t units;
};

static void
chunk_of(const struct stream *s, int chunk, size_t *start, size_t *len)
{
	size_t P = (size_t)s->P, base = s->count / P, extra = s->count % P,
	       k = (size_t)chunk;

	*start = k * base + (k < extra ? k : extra);
	*len = base + (k < extra);
}

/* Element offset and count of unit u; *reduce for reduce-scatter recvs. */
static void
unit_of(const struct stream *s, size_t u, int sending, size_t *off, size_t *n,
	int *reduce)
{
	int P = s->P, r = s->r, g, chunk;
	size_t j = u % s->nseg, start, len;

	*reduce = 0;
	if (!s->ring) {
		start = 0;
		len = s->count;
		j = u;
	} else {
		g = (int)(u / s->nseg);
		if (g < P - 1) {
			chunk = sending ? r - g : r - g - 1;
			*reduce = !sending;
		} else {
			chunk = sending ? r + 1 - (g - (P - 1))
					: r - (g - (P - 1));
		}
		chunk = ((chunk % P) + P) % P;
		chunk_of(s, chunk, &start, &len);
	}
	if (j * s->seg >= len) {
		*off = start;
		*n = 0;
		return;
	}
	*off = start + j * s->seg;
	*n = len - j * s->seg < s->seg ? len - j * s->seg : s->seg;
}

/* Neither side can move: wait for the left peer's data (receiving) or
 * room towards the right one (sending). */
static enum ddp_status
stream_wait(const struct stream *s, int receiving, int sending,
	    const struct wk_frame *t, double deadline)
{
	struct tcp_want w[2];
	int nw = 0;

	if (receiving) {
		w[nw].peer = s->left;
		w[nw++].events = POLLIN;
	}
	if (sending) {
		w[nw].peer = s->right;
		w[nw++].events = POLLOUT;
	}
	return tcp_poll_wait(s->c, w, nw, deadline, t);
}

static enum ddp_status
run_stream(struct stream *s, const struct wk_frame *t, double deadline)
{
	struct wk_mesh *c = s->c;
	size_t su = 0, ru = 0, off, n, lag = s->ring ? s->nseg : 0;
	struct tcp_xop sx, rx;
	int have_s = 0, have_r = 0, red_r = 0, red, rc, progress;
	size_t roff = 0, rn = 0;
	enum ddp_status st = DDP_OK;

	if (s->left < 0)
		ru = s->units;
	if (s->right < 0)
		su = s->units;
	while (su < s->units || ru < s->units) {
		progress = 0;
		while (ru < s->units) {
			if (!have_r) {
				unit_of(s, ru, 0, &roff, &rn, &red_r);
				if (!rn) {
					ru++;
					progress = 1;
					continue;
				}
				tcp_xop_init(&rx, s->left, t, (uint32_t)ru,
					     red_r ? c->scratch
						   : s->buf + roff * s->esize,
					     rn * s->esize);
				have_r = 1;
			}
			rc = tcp_recv_progress(c, &rx, &st);
			if (rc < 0)
				return st;
			if (!rc)
				break;
			if (red_r)
				wk_reduce(s->buf + roff * s->esize, c->scratch,
					  rn, s->dtype, s->op);
			have_r = 0;
			ru++;
			progress = 1;
		}
		while (su < s->units) {
			if (!have_s) {
				/* Wait until the data this unit forwards
				 * has arrived. */
				if (s->left >= 0 && su >= lag && ru <= su - lag)
					break;
				unit_of(s, su, 1, &off, &n, &red);
				if (!n) {
					su++;
					progress = 1;
					continue;
				}
				tcp_xop_init(&sx, s->right, t, (uint32_t)su,
					     s->buf + off * s->esize,
					     n * s->esize);
				have_s = 1;
			}
			rc = tcp_send_progress(c, &sx, &st);
			if (rc < 0)
				return st;
			if (!rc)
				break;
			have_s = 0;
			su++;
			progress = 1;
		}
		if (progress)
			continue;
		st = stream_wait(s, ru < s->units, have_s, t, deadline);
		if (st)
			return st;
	}
	return DDP_OK;
}

static void
stream_setup(struct stream *s, struct wk_mesh *c, uint8_t *buf, size_t count,
	     enum ddp_dtype dtype, int ring, int group_size)
{
	size_t maxlen;

	memset(s, 0, sizeof(*s));
	s->ring = ring;
	s->c = c;
	s->P = group_size ? group_size : c->size;
	s->r = c->rank;
	s->buf = buf;
	s->count = count;
	s->dtype = dtype;
	s->esize = ddp_dtype_size(dtype);
	s->seg = c->seg_bytes / s->esize;
	if (!s->seg)
		s->seg = 1;
	maxlen = count / (size_t)s->P + (count % (size_t)s->P != 0);
	if (!s->ring)
		maxlen = count;
	s->nseg = (maxlen + s->seg - 1) / s->seg;
	if (!s->nseg)
		s->nseg = 1;
}

static enum ddp_status
allreduce_ring(struct wk_mesh *c, uint8_t *buf, size_t count,
	       enum ddp_dtype dtype, enum ddp_op op, const struct wk_frame *t,
	       double deadline)
{
	struct stream s;
	enum ddp_status st;

	stream_setup(&s, c, buf, count, dtype, 1, 0);
	s.op = op;
	s.left = (c->rank - 1 + c->size) % c->size;
	s.right = (c->rank + 1) % c->size;
	s.units = (size_t)(2 * (c->size - 1)) * s.nseg;
	st = scratch(c, s.seg * s.esize);
	if (st)
		return st;
	return run_stream(&s, t, deadline);
}

enum ddp_status
tcp_ring_group(struct wk_mesh *c, const int *grp, int n, int me, void *buf,
	       size_t count, enum ddp_dtype dtype, enum ddp_op op,
	       const struct wk_frame *t, double deadline)
{
	struct stream s;
	enum ddp_status st;

	if (n < 2)
		return DDP_OK;
	stream_setup(&s, c, buf, count, dtype, 1, n);
	s.r = me;
	s.op = op;
	s.left = grp[(me - 1 + n) % n];
	s.right = grp[(me + 1) % n];
	s.units = (size_t)(2 * (n - 1)) * s.nseg;
	st = scratch(c, s.seg * s.esize);
	if (st)
		return st;
	return run_stream(&s, t, deadline);
}

enum ddp_status
tcp_xfer(struct wk_mesh *c, const struct wk_frame *t, int to, const void *sbuf,
	 size_t slen, int from, void *rbuf, size_t rlen, double deadline)
{
	struct tcp_xop x[2];
	int ns = 0, nr = 0;

	if (to >= 0)
		tcp_xop_init(&x[ns++], to, t, t->unit, (void *)sbuf, slen);
	if (from >= 0)
		tcp_xop_init(&x[ns + nr++], from, t, t->unit, rbuf, rlen);
	return ns + nr ? tcp_run_xops(c, x, ns, nr, deadline) : DDP_OK;
}

int
tcp_ring_pays(const struct wk_mesh *c, size_t bytes, int members)
{
	return bytes >= c->ring_min &&
	       bytes / (size_t)(members > 1 ? members - 1 : 1) >= c->ring_min;
}

int
tcp_flat_algo(const struct wk_mesh *c, size_t count, size_t bytes, int want)
{
	if (want == WK_ALGO_RD || want == WK_ALGO_RING)
		return want;
	return tcp_ring_pays(c, bytes, c->size) && count >= (size_t)c->size
		       ? WK_ALGO_RING
		       : WK_ALGO_RD;
}

void
tcp_call_begin(struct wk_mesh *c, struct wk_frame *t, int coll,
	       enum ddp_dtype dtype, enum ddp_op op, size_t count, uint32_t aux)
{
	c->seq++;
	memset(t, 0, sizeof(*t));
	t->type = WK_F_DATA;
	t->coll = (uint8_t)coll;
	t->dtype = (uint8_t)dtype;
	t->op = (uint8_t)op;
	t->seq = c->seq;
	t->count = count;
	t->aux = aux;
	tcp_op_start(c);
	c->cur = *t;
}

enum ddp_status
tcp_allreduce_with(struct wk_mesh *c, const void *sbuf, void *rbuf,
		   size_t count, enum ddp_dtype dtype, enum ddp_op op, int algo)
{
	size_t bytes = count * ddp_dtype_size(dtype);
	struct wk_frame t;
	enum ddp_status st;

	if (sbuf != rbuf && bytes)
		memmove(rbuf, sbuf, bytes);
	if (c->size == 1) {
		c->seq++;
		return DDP_OK;
	}
	algo = tcp_flat_algo(c, count, bytes, algo);
	/* Frames carry 32-bit lengths. */
	if (algo == WK_ALGO_RD && bytes > (1u << 30))
		algo = WK_ALGO_RING;
	if (algo == WK_ALGO_RING && count == 0)
		algo = WK_ALGO_RD;
	tcp_call_begin(c, &t, WK_C_ALLREDUCE, dtype, op, count, (uint32_t)algo);
	if (algo == WK_ALGO_RING)
		st = allreduce_ring(c, rbuf, count, dtype,
				    op == DDP_AVG ? DDP_SUM : op, &t,
				    ddp_now() + c->timeout_s);
	else
		st = allreduce_rd(c, rbuf, count, dtype,
				  op == DDP_AVG ? DDP_SUM : op, &t,
				  ddp_now() + c->timeout_s);
	if (!st && op == DDP_AVG)
		wk_scale_div(rbuf, count, dtype, c->size);
	return st;
}

enum ddp_status
tcp_allreduce(struct wk_mesh *c, const void *sbuf, void *rbuf, size_t count,
	      enum ddp_dtype dtype, enum ddp_op op)
{
	return tcp_allreduce_with(c, sbuf, rbuf, count, dtype, op, c->algo);
}

enum ddp_status
tcp_broadcast(struct wk_mesh *c, void *buf, size_t count, enum ddp_dtype dtype,
	      int root)
{
	size_t bytes = count * ddp_dtype_size(dtype);
	int P = c->size, vr = (c->rank - root + P) % P, mask, nx = 0;
	struct tcp_xop x[32];
	struct wk_frame t;
	struct stream s;
	enum ddp_status st;
	double deadline = ddp_now() + c->timeout_s;
	int algo =
		tcp_ring_pays(c, bytes, c->size) ? WK_ALGO_CHAIN : WK_ALGO_TREE;

	c->seq++;
	if (P == 1)
		return DDP_OK;
	memset(&t, 0, sizeof(t));
	t.type = WK_F_DATA;
	t.coll = WK_C_BCAST;
	t.dtype = (uint8_t)dtype;
	t.seq = c->seq;
	t.count = count;
	t.aux = ((uint32_t)root << 8) | (uint32_t)algo;
	tcp_op_start(c);
	c->cur = t;
	if (algo == WK_ALGO_CHAIN) {
		stream_setup(&s, c, buf, count, dtype, 0, 0);
		s.left = vr > 0 ? (c->rank - 1 + P) % P : -1;
		s.right = vr < P - 1 ? (c->rank + 1) % P : -1;
		s.units = s.nseg;
		return run_stream(&s, &t, deadline);
	}
	/* Binomial tree: receive from the parent, then feed the children
	 * all at once. */
	for (mask = 1; mask < P; mask <<= 1) {
		if (vr & mask) {
			tcp_xop_init(&x[0], (vr - mask + root) % P, &t, 0, buf,
				     bytes);
			st = tcp_run_xops(c, x, 0, 1, deadline);
			if (st)
				return st;
			break;
		}
	}
	for (mask >>= 1; mask > 0; mask >>= 1)
		if (vr + mask < P && nx < 32)
			tcp_xop_init(&x[nx++], (vr + mask + root) % P, &t, 0,
				     buf, bytes);
	return nx ? tcp_run_xops(c, x, nx, 0, deadline) : DDP_OK;
}

enum ddp_status
tcp_agree(struct wk_mesh *c, const struct wk_frame *call)
{
	struct wk_frame t = *call;
	struct tcp_xop x[2];
	enum ddp_status st;
	double deadline = ddp_now() + c->timeout_s;
	int k, step = 0, P = c->size;

	c->seq++;
	if (P == 1)
		return DDP_OK;
	t.type = WK_F_DATA;
	t.seq = c->seq;
	t.unit = 0;
	t.len = 0;
	tcp_op_start(c);
	c->cur = t;
	/* Dissemination: log2(P) rounds of empty frames. Every rank compares
	 * the header of rank - 1 with its own in the first round, so any
	 * difference is seen, and reported naming both calls. */
	for (k = 1; k < P; k <<= 1, step++) {
		tcp_xop_init(&x[0], (c->rank + k) % P, &t, (uint32_t)step, NULL,
			     0);
		tcp_xop_init(&x[1], (c->rank - k + P) % P, &t, (uint32_t)step,
			     NULL, 0);
		st = tcp_run_xops(c, x, 1, 1, deadline);
		if (st)
			return st;
	}
	return DDP_OK;
}

enum ddp_status
tcp_barrier(struct wk_mesh *c)
{
	struct wk_frame t;

	memset(&t, 0, sizeof(t));
	t.coll = WK_C_BARRIER;
	return tcp_agree(c, &t);
}
