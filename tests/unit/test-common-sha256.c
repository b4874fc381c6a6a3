/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of SHA-256 and HMAC-SHA256 (common/sha256.h): the test
 * vectors of FIPS 180-2 (appendix B) and RFC 4231 (section 4), messages
 * fed in pieces that straddle the 64-byte blocks and the padding
 * boundary, and the constant-time comparison. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sha256.h"
#include "tap.h"

/* The lower-case hex of a digest of n bytes (n <= 32). */
static const char *
hex(const unsigned char *d, size_t n)
{
	static char s[2 * DDP_SHA256_LEN + 1];
	size_t i;

	for (i = 0; i < n && i < DDP_SHA256_LEN; i++)
		snprintf(s + 2 * i, 3, "%02x", d[i]);
	s[2 * i] = '\0';
	return s;
}

static void
test_sha256_vectors(void)
{
	static const struct {
		const char *msg;
		const char *digest;
	} v[] = {
		{"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff"
			"61f20015ad"},
		{"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7"
		     "852b855"},
		{"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
		 "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db0"
		 "6c1"},
		{"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijkl"
		 "mnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
		 "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee"
		 "9d1"},
	};
	unsigned char d[DDP_SHA256_LEN];
	struct ddp_sha256 s;
	char *a;
	size_t i;

	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		ddp_sha256(v[i].msg, strlen(v[i].msg), d);
		TAP_STREQ(hex(d, sizeof(d)), v[i].digest,
			  "FIPS 180 SHA-256 vector");
	}
	/* One million 'a', fed in pieces of 997 bytes (not a multiple of
	 * the block). */
	a = malloc(1000000);
	if (!a) {
		tap_ok(0, "malloc");
		return;
	}
	memset(a, 'a', 1000000);
	ddp_sha256_init(&s);
	for (i = 0; i < 1000000; i += 997)
		ddp_sha256_update(&s, a + i,
				  1000000 - i < 997 ? 1000000 - i : 997);
	ddp_sha256_final(&s, d);
	TAP_STREQ(hex(d, sizeof(d)),
		  "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7"
		  "112cd0",
		  "FIPS 180 SHA-256 of one million 'a', in 997-byte pieces");
	free(a);
}

/* Every message length around the padding boundary (55, 56, 63, 64
 * bytes) hashes the same whole and byte by byte. */
static void
test_sha256_pieces(void)
{
	unsigned char m[130], whole[DDP_SHA256_LEN], bytewise[DDP_SHA256_LEN];
	struct ddp_sha256 s;
	size_t len, i;
	int same = 1;

	for (i = 0; i < sizeof(m); i++)
		m[i] = (unsigned char)(i * 7 + 3);
	for (len = 0; len <= sizeof(m); len++) {
		ddp_sha256(m, len, whole);
		ddp_sha256_init(&s);
		for (i = 0; i < len; i++)
			ddp_sha256_update(&s, m + i, 1);
		ddp_sha256_final(&s, bytewise);
		same &= memcmp(whole, bytewise, sizeof(whole)) == 0;
	}
	tap_ok(same, "SHA-256 of 0..130 bytes: whole and byte by byte agree");
	ddp_sha256(m, 55, whole);
	ddp_sha256(m, 56, bytewise);
	tap_ok(memcmp(whole, bytewise, sizeof(whole)) != 0,
	       "55 and 56 bytes (one and two padding blocks) differ");
}

static void
test_hmac_vectors(void)
{
	unsigned char k20[20], k25[25], k131[131], d50[50], c50[50];
	unsigned char k0c[20], mac[DDP_SHA256_LEN];
	static const char *const big_key_msg =
		"Test Using Larger Than Block-Size Key - Hash Key First";
	static const char *const big_both_msg =
		"This is a test using a larger than block-size key and a "
		"larger than block-size data. The key needs to be hashed "
		"before being used by the HMAC algorithm.";
	size_t i;

	memset(k20, 0x0b, sizeof(k20));
	ddp_hmac_sha256(k20, sizeof(k20), "Hi There", 8, mac);
	TAP_STREQ(hex(mac, sizeof(mac)),
		  "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e"
		  "32cff7",
		  "RFC 4231 test case 1");
	ddp_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, mac);
	TAP_STREQ(hex(mac, sizeof(mac)),
		  "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964"
		  "ec3843",
		  "RFC 4231 test case 2 (a key shorter than the output)");
	memset(k20, 0xaa, sizeof(k20));
	memset(d50, 0xdd, sizeof(d50));
	ddp_hmac_sha256(k20, sizeof(k20), d50, sizeof(d50), mac);
	TAP_STREQ(hex(mac, sizeof(mac)),
		  "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d963551"
		  "4ced565fe",
		  "RFC 4231 test case 3");
	for (i = 0; i < sizeof(k25); i++)
		k25[i] = (unsigned char)(i + 1);
	memset(c50, 0xcd, sizeof(c50));
	ddp_hmac_sha256(k25, sizeof(k25), c50, sizeof(c50), mac);
	TAP_STREQ(hex(mac, sizeof(mac)),
		  "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff467"
		  "29665b",
		  "RFC 4231 test case 4");
	memset(k0c, 0x0c, sizeof(k0c));
	ddp_hmac_sha256(k0c, sizeof(k0c), "Test With Truncation", 20, mac);
	TAP_STREQ(hex(mac, 16), "a3b6167473100ee06e0c796c2955552b",
		  "RFC 4231 test case 5 (truncated to 128 bits)");
	memset(k131, 0xaa, sizeof(k131));
	ddp_hmac_sha256(k131, sizeof(k131), big_key_msg, strlen(big_key_msg),
			mac);
	TAP_STREQ(hex(mac, sizeof(mac)),
		  "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0e"
		  "e37f54",
		  "RFC 4231 test case 6 (a key longer than the block)");
	ddp_hmac_sha256(k131, sizeof(k131), big_both_msg, strlen(big_both_msg),
			mac);
	TAP_STREQ(hex(mac, sizeof(mac)),
		  "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c"
		  "3a35e2",
		  "RFC 4231 test case 7 (key and data longer than the block)");
}

static void
test_ct_equal(void)
{
	unsigned char a[32], b[32];
	size_t i;
	int all = 1;

	for (i = 0; i < sizeof(a); i++)
		a[i] = b[i] = (unsigned char)i;
	tap_ok(ddp_ct_equal(a, b, sizeof(a)), "equal buffers compare equal");
	tap_ok(ddp_ct_equal(a, b, 0), "empty buffers compare equal");
	for (i = 0; i < sizeof(a); i++) {
		b[i] ^= 0x80;
		all &= !ddp_ct_equal(a, b, sizeof(a));
		b[i] ^= 0x80;
	}
	tap_ok(all, "a one-bit difference at any of the 32 places is seen");
}

int
main(void)
{
	test_sha256_vectors();
	test_sha256_pieces();
	test_hmac_vectors();
	test_ct_equal();
	return tap_done();
}
