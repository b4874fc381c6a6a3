/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for libddp's wire formats: rendezvous messages (header,
 * open, proof, hello, text, roster, the data-port hello's messages), the
 * credential payloads
 * built from what they carry, and collective frame headers.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Re-encodes what was parsed and parses it again: must round-trip. */
static void
roundtrip_hello(const struct rdv_hello *h)
{
	struct rdv_hello *h2 = malloc(sizeof(*h2));
	struct wk_buf b = {0};
	uint16_t type;
	uint32_t blen;
	char err[256];

	if (!h2)
		return;
	if (proto_encode_hello(&b, h) == 0 &&
	    proto_parse_header(b.p, b.len, &type, &blen, err, sizeof(err)) ==
		    0) {
		if (proto_parse_hello(b.p + RDV_HDR_LEN, blen, h2, err,
				      sizeof(err)) != 0 ||
		    h2->rank != h->rank || strcmp(h2->cred, h->cred) != 0 ||
		    strcmp(h2->host, h->host) != 0)
			abort();
	}
	wk_buf_free(&b);
	free(h2);
}

static void
roundtrip_open(const struct rdv_open *o)
{
	struct rdv_open o2;
	struct wk_buf b = {0};
	uint16_t type;
	uint32_t blen;
	char err[256], payload[512];

	if (proto_encode_open(&b, o) == 0 &&
	    proto_parse_header(b.p, b.len, &type, &blen, err, sizeof(err)) ==
		    0) {
		if (type != RDV_OPEN ||
		    proto_parse_open(b.p + RDV_HDR_LEN, blen, &o2, err,
				     sizeof(err)) != 0 ||
		    o2.rank != o->rank || o2.world != o->world ||
		    memcmp(o2.nonce, o->nonce, RDV_NONCE_LEN) != 0 ||
		    strcmp(o2.job, o->job) != 0 ||
		    strcmp(o2.step, o->step) != 0)
			abort();
	}
	/* The payload built from peer-supplied ids fits or says so. */
	(void)proto_cred_payload(payload, sizeof(payload), "hello", o->job,
				 o->step, (int)o->rank, (int)o->world,
				 (const uint8_t *)o->job, "127.0.0.1:1");
	wk_buf_free(&b);
}

static void
roundtrip_proof(const struct rdv_proof *p)
{
	struct rdv_proof *p2 = malloc(sizeof(*p2));
	struct wk_buf b = {0};
	uint16_t type;
	uint32_t blen;
	char err[256];

	if (!p2)
		return;
	if (proto_encode_proof(&b, p) == 0 &&
	    proto_parse_header(b.p, b.len, &type, &blen, err, sizeof(err)) ==
		    0) {
		if (type != RDV_PROOF ||
		    proto_parse_proof(b.p + RDV_HDR_LEN, blen, p2, err,
				      sizeof(err)) != 0 ||
		    memcmp(p2->nonce, p->nonce, RDV_NONCE_LEN) != 0 ||
		    strcmp(p2->cred, p->cred) != 0)
			abort();
	}
	wk_buf_free(&b);
	free(p2);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct rdv_roster_entry ents[64];
	static struct rdv_relay_entry relay[64];
	struct rdv_hello *h;
	struct rdv_proof *pr;
	struct rdv_open o;
	struct rdv_peer_hello ph;
	struct wk_frame f;
	uint8_t token[WK_TOKEN_LEN], hdr[WK_FRAME_LEN];
	char err[256], text[1024], desc[200];
	uint16_t type;
	uint32_t blen, world;
	const uint8_t *body;

	if (size >= WK_FRAME_LEN && wk_frame_decode(data, &f) == 0) {
		wk_frame_describe(&f, desc, sizeof(desc));
		wk_frame_encode(hdr, &f);
		if (memcmp(hdr, data, WK_FRAME_LEN) != 0)
			abort();
	}
	if (proto_parse_header(data, size, &type, &blen, err, sizeof(err)) <
	    0) {
		/* Another version of the protocol: answered in its own. */
		(void)proto_header_version(data, size);
		return 0;
	}
	body = data + RDV_HDR_LEN;
	if (blen > size - RDV_HDR_LEN)
		blen = (uint32_t)(size - RDV_HDR_LEN);
	h = malloc(sizeof(*h));
	pr = malloc(sizeof(*pr));
	if (!h || !pr) {
		free(h);
		free(pr);
		return 0;
	}
	switch (type) {
	case RDV_OPEN:
		if (proto_parse_open(body, blen, &o, err, sizeof(err)) == 0)
			roundtrip_open(&o);
		break;
	case RDV_PROOF:
		if (proto_parse_proof(body, blen, pr, err, sizeof(err)) == 0)
			roundtrip_proof(pr);
		break;
	case RDV_HELLO:
		if (proto_parse_hello(body, blen, h, err, sizeof(err)) == 0)
			roundtrip_hello(h);
		break;
	case RDV_WELCOME:
		(void)proto_parse_welcome(body, blen, token, err, sizeof(err));
		break;
	case RDV_REFUSE:
		(void)proto_parse_text(body, blen, text, sizeof(text), err,
				       sizeof(err));
		break;
	case RDV_ROSTER:
		(void)proto_parse_roster(body, blen, 64, &world, token, ents,
					 err, sizeof(err));
		break;
	case RDV_RELAY:
		/* The count the open announced: the body's own, up to 64. */
		(void)proto_parse_relay(body, blen,
					blen >= 4 && body[0] <= 64 &&
							!body[1] && !body[2] &&
							!body[3]
						? body[0]
						: 64,
					relay, err, sizeof(err));
		break;
	case RDV_PEER:
	case RDV_CHALLENGE:
		(void)proto_parse_peer(body, blen, &ph, err, sizeof(err));
		break;
	case RDV_PEER_MAC:
		(void)proto_parse_peer_mac(body, blen, token, err, sizeof(err));
		break;
	}
	free(pr);
	free(h);
	return 0;
}
