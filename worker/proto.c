/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Wire formats of libddp: rendezvous messages and collective frame headers.
 * Pure functions over byte buffers, little endian, bounds-checked (fuzzed).
 */
#include <stdlib.h>
#include <string.h>

#include "ddp_util.h"
#include "proto.h"
#include "sha256.h"

static void
put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void
put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)v);
	put16(p + 2, (uint16_t)(v >> 16));
}

static void
put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

static uint16_t
get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t
get32(const uint8_t *p)
{
	return (uint32_t)get16(p) | ((uint32_t)get16(p + 2) << 16);
}

static uint64_t
get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | ((uint64_t)get32(p + 4) << 32);
}

void
wk_buf_free(struct wk_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

void
wk_buf_wipe(struct wk_buf *b)
{
	if (b->p)
		explicit_bzero(b->p, b->cap);
	wk_buf_free(b);
}

static uint8_t *
buf_grow(struct wk_buf *b, size_t n)
{
	uint8_t *np;
	size_t ncap;

	if (b->bad)
		return NULL;
	if (b->len + n > b->cap) {
		ncap = b->cap ? b->cap : 256;
		while (ncap < b->len + n)
			ncap *= 2;
		np = realloc(b->p, ncap);
		if (!np) {
			b->bad = 1;
			return NULL;
		}
		b->p = np;
		b->cap = ncap;
	}
	np = b->p + b->len;
	b->len += n;
	return np;
}

static void
buf_put(struct wk_buf *b, const void *src, size_t n)
{
	uint8_t *p = buf_grow(b, n);

	if (p && n)
		memcpy(p, src, n);
}

static void
buf_u8(struct wk_buf *b, uint8_t v)
{
	buf_put(b, &v, 1);
}

static void
buf_u16(struct wk_buf *b, uint16_t v)
{
	uint8_t *p = buf_grow(b, 2);

	if (p)
		put16(p, v);
}

static void
buf_u32(struct wk_buf *b, uint32_t v)
{
	uint8_t *p = buf_grow(b, 4);

	if (p)
		put32(p, v);
}

/* Starts a message; returns the offset of its header for msg_end(). */
static size_t
msg_begin_as(struct wk_buf *b, enum rdv_type type, uint16_t version)
{
	size_t off = b->len;

	buf_u32(b, RDV_MAGIC);
	buf_u16(b, version);
	buf_u16(b, (uint16_t)type);
	buf_u32(b, 0);
	return off;
}

static size_t
msg_begin(struct wk_buf *b, enum rdv_type type)
{
	return msg_begin_as(b, type, RDV_VERSION);
}

static int
msg_end(struct wk_buf *b, size_t off)
{
	size_t body;

	if (b->bad)
		return -1;
	body = b->len - off - RDV_HDR_LEN;
	if (body > (get16(b->p + off + 6) == RDV_ROSTER ? RDV_MAX_ROSTER
							: RDV_MAX_BODY)) {
		b->len = off;
		return -1;
	}
	put32(b->p + off + 8, (uint32_t)body);
	return 0;
}

/* A length-prefixed string of at most max bytes. */
static void
buf_str16(struct wk_buf *b, const char *str, size_t max)
{
	size_t n = strnlen(str, max);

	buf_u16(b, (uint16_t)n);
	buf_put(b, str, n);
}

int
proto_encode_open(struct wk_buf *b, const struct rdv_open *o)
{
	size_t off = msg_begin(b, RDV_OPEN);

	buf_u32(b, o->rank);
	buf_u32(b, o->world);
	buf_str16(b, o->job, sizeof(o->job) - 1);
	buf_str16(b, o->step, sizeof(o->step) - 1);
	buf_put(b, o->nonce, RDV_NONCE_LEN);
	buf_u32(b, o->flags);
	buf_u32(b, o->relay);
	return msg_end(b, off);
}

int
proto_encode_proof(struct wk_buf *b, const struct rdv_proof *p)
{
	size_t off = msg_begin(b, RDV_PROOF);
	size_t cl = strnlen(p->cred, sizeof(p->cred) - 1);

	buf_u32(b, p->rank);
	buf_put(b, p->nonce, RDV_NONCE_LEN);
	buf_u32(b, (uint32_t)cl);
	buf_put(b, p->cred, cl);
	return msg_end(b, off);
}

int
proto_encode_hello(struct wk_buf *b, const struct rdv_hello *h)
{
	size_t off = msg_begin(b, RDV_HELLO);
	size_t hl = strnlen(h->host, sizeof(h->host));
	size_t cl = strnlen(h->cred, sizeof(h->cred));

	buf_u32(b, h->rank);
	buf_u32(b, h->world);
	buf_u16(b, h->data_port);
	buf_u16(b, (uint16_t)hl);
	buf_put(b, h->host, hl);
	buf_u32(b, (uint32_t)cl);
	buf_put(b, h->cred, cl);
	return msg_end(b, off);
}

int
proto_encode_text(struct wk_buf *b, enum rdv_type type, const char *text)
{
	size_t off = msg_begin(b, type);
	size_t tl = strnlen(text, 4096);

	buf_u32(b, (uint32_t)tl);
	buf_put(b, text, tl);
	return msg_end(b, off);
}

int
proto_encode_refuse_as(struct wk_buf *b, uint16_t version, const char *text)
{
	size_t off = msg_begin_as(b, RDV_REFUSE, version);
	size_t tl = strnlen(text, 4096);

	buf_u32(b, (uint32_t)tl);
	buf_put(b, text, tl);
	return msg_end(b, off);
}

int
proto_encode_roster(struct wk_buf *b, uint32_t world,
		    const uint8_t token[WK_TOKEN_LEN],
		    const struct rdv_roster_entry *ents)
{
	size_t off = msg_begin(b, RDV_ROSTER);
	size_t al, hl;
	uint32_t i;

	buf_u32(b, world);
	buf_put(b, token, WK_TOKEN_LEN);
	for (i = 0; i < world; i++) {
		al = strnlen(ents[i].addr, sizeof(ents[i].addr) - 1);
		hl = strnlen(ents[i].host, 255);
		buf_u16(b, ents[i].port);
		buf_u8(b, (uint8_t)al);
		buf_put(b, ents[i].addr, al);
		buf_u8(b, (uint8_t)hl);
		buf_put(b, ents[i].host, hl);
	}
	return msg_end(b, off);
}

int
proto_encode_welcome(struct wk_buf *b, const uint8_t token[WK_TOKEN_LEN])
{
	size_t off = msg_begin(b, RDV_WELCOME);

	buf_put(b, token, WK_TOKEN_LEN);
	return msg_end(b, off);
}

int
proto_encode_relay(struct wk_buf *b, uint32_t n,
		   const struct rdv_relay_entry *ents)
{
	size_t off = msg_begin(b, RDV_RELAY);
	uint32_t i;

	buf_u32(b, n);
	for (i = 0; i < n; i++) {
		buf_u32(b, ents[i].rank);
		buf_u16(b, ents[i].data_port);
	}
	return msg_end(b, off);
}

static int
encode_peer_as(struct wk_buf *b, enum rdv_type type,
	       const struct rdv_peer_hello *p)
{
	size_t off = msg_begin(b, type);

	buf_u32(b, p->rank);
	buf_put(b, p->nonce, RDV_NONCE_LEN);
	return msg_end(b, off);
}

int
proto_encode_peer(struct wk_buf *b, const struct rdv_peer_hello *p)
{
	return encode_peer_as(b, RDV_PEER, p);
}

int
proto_encode_challenge(struct wk_buf *b, const struct rdv_peer_hello *p)
{
	return encode_peer_as(b, RDV_CHALLENGE, p);
}

int
proto_encode_peer_mac(struct wk_buf *b, const uint8_t mac[RDV_MAC_LEN])
{
	size_t off = msg_begin(b, RDV_PEER_MAC);

	buf_put(b, mac, RDV_MAC_LEN);
	return msg_end(b, off);
}

/* Versioned: a new construction gets a new label, never a changed one. */
#define PEER_MAC_LABEL "slurm-ddp peer hello 1"

void
proto_peer_mac(const uint8_t token[WK_TOKEN_LEN], int listener,
	       uint32_t dialer_rank, uint32_t listener_rank,
	       const uint8_t dialer_nonce[RDV_NONCE_LEN],
	       const uint8_t listener_nonce[RDV_NONCE_LEN],
	       uint8_t mac[RDV_MAC_LEN])
{
	uint8_t msg[sizeof(PEER_MAC_LABEL) + 1 + 8 + 2 * RDV_NONCE_LEN];
	size_t n = sizeof(PEER_MAC_LABEL); /* its NUL included */
	int k;

	memcpy(msg, PEER_MAC_LABEL, n);
	msg[n++] = listener ? 'L' : 'D';
	for (k = 0; k < 4; k++)
		msg[n++] = (uint8_t)(dialer_rank >> (8 * k));
	for (k = 0; k < 4; k++)
		msg[n++] = (uint8_t)(listener_rank >> (8 * k));
	memcpy(msg + n, dialer_nonce, RDV_NONCE_LEN);
	n += RDV_NONCE_LEN;
	memcpy(msg + n, listener_nonce, RDV_NONCE_LEN);
	n += RDV_NONCE_LEN;
	ddp_hmac_sha256(token, WK_TOKEN_LEN, msg, n, mac);
}

int
proto_parse_header(const uint8_t *buf, size_t len, uint16_t *type,
		   uint32_t *body_len, char *err, size_t errlen)
{
	uint16_t t;
	uint32_t bl;

	if (len < RDV_HDR_LEN) {
		ddp_fmt(err, errlen, "short header (%zu bytes)", len);
		return -1;
	}
	if (get32(buf) != RDV_MAGIC) {
		ddp_fmt(err, errlen,
			"not a slurm-ddp rendezvous message "
			"(bad magic)");
		return -1;
	}
	if (get16(buf + 4) != RDV_VERSION) {
		ddp_fmt(err, errlen,
			"rendezvous protocol version %u, this libddp speaks "
			"%u: every rank of a job must run the same slurm-ddp "
			"release",
			get16(buf + 4), RDV_VERSION);
		return -1;
	}
	t = get16(buf + 6);
	bl = get32(buf + 8);
	if (t < RDV_HELLO || t > RDV_TYPE_MAX) {
		ddp_fmt(err, errlen, "unknown message type %u", t);
		return -1;
	}
	if (bl > (t == RDV_ROSTER ? RDV_MAX_ROSTER : RDV_MAX_BODY)) {
		ddp_fmt(err, errlen, "message body of %u bytes is too long",
			bl);
		return -1;
	}
	*type = t;
	*body_len = bl;
	return 0;
}

uint16_t
proto_header_version(const uint8_t *buf, size_t len)
{
	if (len < RDV_HDR_LEN || get32(buf) != RDV_MAGIC)
		return 0;
	return get16(buf + 4);
}

/* A bounds-checked reader over one message body. */
struct rd {
	const uint8_t *p;
	size_t len;
	size_t off;
	int bad;
};

static const uint8_t *
rd_take(struct rd *r, size_t n)
{
	const uint8_t *p;

	if (r->bad || n > r->len - r->off) {
		r->bad = 1;
		return NULL;
	}
	p = r->p + r->off;
	r->off += n;
	return p;
}

static uint32_t
rd_u32(struct rd *r)
{
	const uint8_t *p = rd_take(r, 4);

	return p ? get32(p) : 0;
}

static uint16_t
rd_u16(struct rd *r)
{
	const uint8_t *p = rd_take(r, 2);

	return p ? get16(p) : 0;
}

static uint8_t
rd_u8(struct rd *r)
{
	const uint8_t *p = rd_take(r, 1);

	return p ? p[0] : 0;
}

/*
 * Copies a length-prefixed string into out (size outlen, NUL-terminated).
 * Refuses strings that do not fit or contain NUL or control characters, so
 * peer-supplied names are safe to print.
 */
static void
rd_str(struct rd *r, size_t n, char *out, size_t outlen)
{
	const uint8_t *p = rd_take(r, n);
	size_t i;

	if (!p)
		return;
	if (n >= outlen) {
		r->bad = 1;
		return;
	}
	for (i = 0; i < n; i++) {
		if (p[i] < 0x20 || p[i] > 0x7e) {
			r->bad = 1;
			return;
		}
	}
	memcpy(out, p, n);
	out[n] = '\0';
}

static int
rd_done(struct rd *r, const char *what, char *err, size_t errlen)
{
	if (r->bad) {
		ddp_fmt(err, errlen, "malformed %s message", what);
		return -1;
	}
	if (r->off != r->len) {
		ddp_fmt(err, errlen, "%zu trailing bytes after %s message",
			r->len - r->off, what);
		return -1;
	}
	return 0;
}

int
proto_parse_open(const uint8_t *body, size_t len, struct rdv_open *o, char *err,
		 size_t errlen)
{
	struct rd r = {body, len, 0, 0};
	const uint8_t *t;
	size_t n;

	memset(o, 0, sizeof(*o));
	o->rank = rd_u32(&r);
	o->world = rd_u32(&r);
	n = rd_u16(&r);
	rd_str(&r, n, o->job, sizeof(o->job));
	n = rd_u16(&r);
	rd_str(&r, n, o->step, sizeof(o->step));
	t = rd_take(&r, RDV_NONCE_LEN);
	if (t)
		memcpy(o->nonce, t, RDV_NONCE_LEN);
	o->flags = rd_u32(&r);
	o->relay = rd_u32(&r);
	if (rd_done(&r, "open", err, errlen) < 0)
		return -1;
	if (o->world < 1 || o->world > WK_MAX_WORLD || o->rank >= o->world) {
		ddp_fmt(err, errlen, "open claims rank %u of world size %u",
			o->rank, o->world);
		return -1;
	}
	if ((o->flags & ~RDV_OPEN_LEADER) != 0 || o->relay >= o->world) {
		ddp_fmt(err, errlen,
			"open with flags %#x relays %u of %u ranks", o->flags,
			o->relay, o->world);
		return -1;
	}
	return 0;
}

int
proto_parse_proof(const uint8_t *body, size_t len, struct rdv_proof *p,
		  char *err, size_t errlen)
{
	struct rd r = {body, len, 0, 0};
	const uint8_t *t;
	size_t n;

	memset(p, 0, sizeof(*p));
	p->rank = rd_u32(&r);
	t = rd_take(&r, RDV_NONCE_LEN);
	if (t)
		memcpy(p->nonce, t, RDV_NONCE_LEN);
	n = rd_u32(&r);
	rd_str(&r, n, p->cred, sizeof(p->cred));
	return rd_done(&r, "proof", err, errlen);
}

int
proto_parse_hello(const uint8_t *body, size_t len, struct rdv_hello *h,
		  char *err, size_t errlen)
{
	struct rd r = {body, len, 0, 0};
	size_t n;

	memset(h, 0, sizeof(*h));
	h->rank = rd_u32(&r);
	h->world = rd_u32(&r);
	h->data_port = rd_u16(&r);
	n = rd_u16(&r);
	rd_str(&r, n, h->host, sizeof(h->host));
	n = rd_u32(&r);
	rd_str(&r, n, h->cred, sizeof(h->cred));
	if (rd_done(&r, "hello", err, errlen) < 0)
		return -1;
	if (h->world < 1 || h->world > WK_MAX_WORLD || h->rank >= h->world) {
		ddp_fmt(err, errlen, "hello claims rank %u of world size %u",
			h->rank, h->world);
		return -1;
	}
	return 0;
}

int
proto_parse_text(const uint8_t *body, size_t len, char *text, size_t textlen,
		 char *err, size_t errlen)
{
	struct rd r = {body, len, 0, 0};
	size_t n = rd_u32(&r);

	rd_str(&r, n, text, textlen);
	return rd_done(&r, "text", err, errlen);
}

int
proto_parse_roster(const uint8_t *body, size_t len, uint32_t max_world,
		   uint32_t *world, uint8_t token[WK_TOKEN_LEN],
		   struct rdv_roster_entry *ents, char *err, size_t errlen)
{
	struct rd r = {body, len, 0, 0};
	const uint8_t *t;
	uint32_t i, w;
	size_t n;

	w = rd_u32(&r);
	if (!r.bad && (w < 1 || w > max_world)) {
		ddp_fmt(err, errlen, "roster of %u ranks, expected at most %u",
			w, max_world);
		return -1;
	}
	t = rd_take(&r, WK_TOKEN_LEN);
	if (t)
		memcpy(token, t, WK_TOKEN_LEN);
	for (i = 0; i < w && !r.bad; i++) {
		memset(&ents[i], 0, sizeof(ents[i]));
		ents[i].port = rd_u16(&r);
		n = rd_u8(&r);
		rd_str(&r, n, ents[i].addr, sizeof(ents[i].addr));
		n = rd_u8(&r);
		rd_str(&r, n, ents[i].host, sizeof(ents[i].host));
	}
	if (rd_done(&r, "roster", err, errlen) < 0)
		return -1;
	*world = w;
	return 0;
}

int
proto_parse_peer(const uint8_t *body, size_t len, struct rdv_peer_hello *p,
		 char *err, size_t errlen)
{
	struct rd r = {body, len, 0, 0};
	const uint8_t *t;

	p->rank = rd_u32(&r);
	t = rd_take(&r, RDV_NONCE_LEN);
	if (t)
		memcpy(p->nonce, t, RDV_NONCE_LEN);
	return rd_done(&r, "peer hello", err, errlen);
}

int
proto_parse_peer_mac(const uint8_t *body, size_t len, uint8_t mac[RDV_MAC_LEN],
		     char *err, size_t errlen)
{
	struct rd r = {body, len, 0, 0};
	const uint8_t *t;

	t = rd_take(&r, RDV_MAC_LEN);
	if (t)
		memcpy(mac, t, RDV_MAC_LEN);
	return rd_done(&r, "peer hello's MAC", err, errlen);
}

int
proto_parse_welcome(const uint8_t *body, size_t len,
		    uint8_t token[WK_TOKEN_LEN], char *err, size_t errlen)
{
	struct rd r = {body, len, 0, 0};
	const uint8_t *t = rd_take(&r, WK_TOKEN_LEN);

	if (t)
		memcpy(token, t, WK_TOKEN_LEN);
	return rd_done(&r, "welcome", err, errlen);
}

int
proto_parse_relay(const uint8_t *body, size_t len, uint32_t n,
		  struct rdv_relay_entry *ents, char *err, size_t errlen)
{
	struct rd r = {body, len, 0, 0};
	uint32_t i, got = rd_u32(&r);

	if (!r.bad && got != n) {
		ddp_fmt(err, errlen, "relay of %u ranks, the open said %u", got,
			n);
		return -1;
	}
	for (i = 0; i < n && !r.bad; i++) {
		ents[i].rank = rd_u32(&r);
		ents[i].data_port = rd_u16(&r);
	}
	return rd_done(&r, "relay", err, errlen);
}

int
proto_conn_binding(char *buf, size_t size, const char *addr,
		   const uint8_t rank_nonce[RDV_NONCE_LEN])
{
	char nx[2 * RDV_NONCE_LEN + 1];

	ddp_hex(nx, sizeof(nx), rank_nonce, RDV_NONCE_LEN);
	return ddp_fmt(buf, size, "%s rn=%s", addr, nx);
}

int
proto_cred_payload(char *buf, size_t size, const char *kind, const char *job,
		   const char *step, int rank, int world,
		   const uint8_t nonce[RDV_NONCE_LEN], const char *addr)
{
	char nx[2 * RDV_NONCE_LEN + 1];

	ddp_hex(nx, sizeof(nx), nonce, RDV_NONCE_LEN);
	return ddp_fmt(buf, size,
		       "slurm-ddp/%d %s job=%s step=%s rank=%d world=%d "
		       "nonce=%s addr=%s",
		       RDV_VERSION, kind, job, step, rank, world, nx, addr);
}

void
wk_frame_encode(uint8_t out[WK_FRAME_LEN], const struct wk_frame *f)
{
	put32(out, WK_FRAME_MAGIC);
	out[4] = f->type;
	out[5] = f->coll;
	out[6] = f->dtype;
	out[7] = f->op;
	put32(out + 8, f->seq);
	put32(out + 12, f->unit);
	put64(out + 16, f->count);
	put32(out + 24, f->len);
	put32(out + 28, f->aux);
}

int
wk_frame_decode(const uint8_t in[WK_FRAME_LEN], struct wk_frame *f)
{
	if (get32(in) != WK_FRAME_MAGIC)
		return -1;
	f->type = in[4];
	f->coll = in[5];
	f->dtype = in[6];
	f->op = in[7];
	f->seq = get32(in + 8);
	f->unit = get32(in + 12);
	f->count = get64(in + 16);
	f->len = get32(in + 24);
	f->aux = get32(in + 28);
	if (f->type < WK_F_DATA || f->type > WK_F_STALL)
		return -1;
	return 0;
}

const char *
wk_why_name(int why)
{
	switch (why) {
	case WK_WHY_LOST:
		return "lost";
	case WK_WHY_HANG:
		return "hang";
	case WK_WHY_BEHIND:
		return "behind";
	case WK_WHY_UNREACHABLE:
		return "unreachable";
	default:
		return NULL;
	}
}

/* 1 when a's fields have the form of an ABORT's (proto.h). */
static int
abort_ok(const struct wk_abort *a, size_t hlen)
{
	if (a->why > WK_WHY_MAX)
		return 0;
	if (a->why == WK_WHY_NONE)
		return a->blamed == -1 && hlen == 0;
	return a->blamed >= 0 && a->blamed < WK_MAX_WORLD && hlen > 0 &&
	       hlen < DDP_HOST_MAX;
}

int
wk_abort_encode(uint8_t *out, size_t size, const struct wk_abort *a)
{
	size_t hlen = strnlen(a->host, sizeof(a->host));
	size_t tlen = strnlen(a->text, WK_ABORT_TEXT_MAX);

	if (!abort_ok(a, hlen) || size < WK_ABORT_FIXED + hlen + tlen)
		return -1;
	out[0] = a->why;
	out[1] = a->coll;
	put16(out + 2, (uint16_t)hlen);
	put32(out + 4,
	      a->why == WK_WHY_NONE ? UINT32_MAX : (uint32_t)a->blamed);
	put32(out + 8, a->seq);
	memcpy(out + WK_ABORT_FIXED, a->host, hlen);
	memcpy(out + WK_ABORT_FIXED + hlen, a->text, tlen);
	return (int)(WK_ABORT_FIXED + hlen + tlen);
}

int
wk_abort_decode(const uint8_t *in, size_t len, struct wk_abort *a, char *err,
		size_t errlen)
{
	uint32_t blamed;
	size_t hlen, tlen;

	if (len < WK_ABORT_FIXED)
		return ddp_errf(err, errlen, "an abort of %zu bytes", len);
	hlen = get16(in + 2);
	if (hlen >= DDP_HOST_MAX || hlen > len - WK_ABORT_FIXED)
		return ddp_errf(err, errlen,
				"an abort's host of %zu bytes (of %zu)", hlen,
				len);
	tlen = len - WK_ABORT_FIXED - hlen;
	if (tlen > WK_ABORT_TEXT_MAX)
		return ddp_errf(err, errlen, "an abort's text of %zu bytes",
				tlen);
	memset(a, 0, sizeof(*a));
	a->why = in[0];
	a->coll = in[1];
	blamed = get32(in + 4);
	a->blamed = blamed == UINT32_MAX || blamed >= WK_MAX_WORLD
			    ? (blamed == UINT32_MAX ? -1 : -2)
			    : (int32_t)blamed;
	a->seq = get32(in + 8);
	memcpy(a->host, in + WK_ABORT_FIXED, hlen);
	memcpy(a->text, in + WK_ABORT_FIXED + hlen, tlen);
	if (!abort_ok(a, hlen) || strlen(a->host) != hlen ||
	    strlen(a->text) != tlen)
		return ddp_errf(err, errlen,
				"an abort whose cause is not why, rank and "
				"host (why %u)",
				(unsigned)a->why);
	return 0;
}

const char *
wk_dtype_name(int dtype)
{
	switch (dtype) {
	case DDP_UINT8:
		return "uint8";
	case DDP_FLOAT16:
		return "float16";
	case DDP_FLOAT32:
		return "float32";
	case DDP_FLOAT64:
		return "float64";
	case DDP_BFLOAT16:
		return "bfloat16";
	default:
		return "unknown-type";
	}
}

const char *
wk_op_name(int op)
{
	switch (op) {
	case DDP_SUM:
		return "sum";
	case DDP_MAX:
		return "max";
	case DDP_MIN:
		return "min";
	case DDP_AVG:
		return "avg";
	default:
		return "unknown-op";
	}
}

static const char *
algo_name(uint32_t a)
{
	switch (a) {
	case WK_ALGO_RD:
		return "recursive doubling";
	case WK_ALGO_RING:
		return "ring";
	case WK_ALGO_TREE:
		return "tree";
	case WK_ALGO_CHAIN:
		return "chain";
	case WK_ALGO_NCCL:
		return "NCCL";
	case WK_ALGO_HIER:
		return "hierarchical";
	default:
		return "unknown algorithm";
	}
}

void
wk_frame_describe(const struct wk_frame *f, char *buf, size_t size)
{
	/* Truncation only shortens a diagnostic; ignore it. */
	switch (f->coll) {
	case WK_C_ALLREDUCE:
		(void)ddp_fmt(
			buf, size, "allreduce #%u (%s %s, %llu elements, %s)",
			f->seq, wk_dtype_name(f->dtype), wk_op_name(f->op),
			(unsigned long long)f->count, algo_name(f->aux & 0xff));
		break;
	case WK_C_BCAST:
		(void)ddp_fmt(buf, size,
			      "broadcast #%u (%s, %llu elements, root %u)",
			      f->seq, wk_dtype_name(f->dtype),
			      (unsigned long long)f->count, f->aux >> 8);
		break;
	case WK_C_BARRIER:
		(void)ddp_fmt(buf, size, "barrier #%u", f->seq);
		break;
	case WK_C_HIER_SETUP:
		(void)ddp_fmt(buf, size, "shared-memory setup #%u", f->seq);
		break;
	case 0:
		(void)ddp_fmt(buf, size, "a GPU (NCCL) collective");
		break;
	default:
		(void)ddp_fmt(buf, size, "unknown collective %u #%u", f->coll,
			      f->seq);
		break;
	}
}
