/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libddp's munge credentials for the rendezvous (auth.h): a context each
 * to encode and to decode, credentials bound to the connection.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "auth.h"
#include "ddp_util.h"
#include "status.h"

/*
 * Whether munged answers on its socket, checked before the network is
 * touched: credentials are made only once rank 0 has answered, and a
 * missing munged should not look like a missing rank 0.
 */
static enum ddp_status
auth_probe(struct wk_auth *a)
{
	struct sockaddr_un sun;
	char *path = NULL;
	int fd, rc;

	if (munge_ctx_get(a->enc, MUNGE_OPT_SOCKET, &path) != EMUNGE_SUCCESS ||
	    !path)
		return DDP_OK;
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (ddp_fmt(sun.sun_path, sizeof(sun.sun_path), "%s", path) < 0)
		return DDP_OK;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return DDP_OK;
	rc = connect(fd, (struct sockaddr *)&sun, sizeof(sun));
	close(fd);
	if (rc == 0)
		return DDP_OK;
	return wk_err(DDP_ERR_AUTH,
		      "munged does not answer on %s: %s (is munged running on "
		      "this node? set DDP_MUNGE_SOCKET to use another socket)",
		      path, strerror(errno));
}

enum ddp_status
auth_init(struct wk_auth *a, const struct ddp_config *cfg)
{
	munge_err_t e;

	memset(a, 0, sizeof(*a));
	a->on = cfg->auth;
	a->job = cfg->job_id;
	a->step = cfg->step_id;
	a->world = cfg->world_size;
	ddp_fmt(a->socket, sizeof(a->socket), "%s",
		cfg->munge_socket[0] ? cfg->munge_socket
				     : "munge's default socket");
	if (!a->on)
		return DDP_OK;
	a->enc = munge_ctx_create();
	a->dec = munge_ctx_create();
	if (!a->enc || !a->dec)
		return wk_err(DDP_ERR_NOMEM, "munge_ctx_create failed");
	if (cfg->munge_socket[0]) {
		e = munge_ctx_set(a->enc, MUNGE_OPT_SOCKET, cfg->munge_socket);
		if (e == EMUNGE_SUCCESS)
			e = munge_ctx_set(a->dec, MUNGE_OPT_SOCKET,
					  cfg->munge_socket);
		if (e != EMUNGE_SUCCESS)
			return wk_err(DDP_ERR_AUTH,
				      "munge: cannot use socket %s: %s",
				      cfg->munge_socket, munge_strerror(e));
	}
	return auth_probe(a);
}

void
auth_fini(struct wk_auth *a)
{
	if (a->enc)
		munge_ctx_destroy(a->enc);
	if (a->dec)
		munge_ctx_destroy(a->dec);
	a->enc = a->dec = NULL;
}

enum ddp_status
auth_encode(struct wk_auth *a, const char *kind, int rank,
	    const uint8_t nonce[RDV_NONCE_LEN], const char *addr, char *out,
	    size_t outlen)
{
	char payload[512];
	char *cred = NULL;
	munge_err_t e;
	enum ddp_status st = DDP_OK;

	if (!a->on) {
		ddp_fmt(out, outlen, "none");
		return DDP_OK;
	}
	if (rdv_cred_payload(payload, sizeof(payload), kind, a->job, a->step,
			     rank, a->world, nonce, addr) < 0)
		return wk_err(DDP_ERR_INVALID, "job or step id too long");
	e = munge_encode(&cred, a->enc, payload, (int)strlen(payload));
	if (e != EMUNGE_SUCCESS) {
		st = wk_err(DDP_ERR_AUTH,
			    "munge cannot encode a credential: %s (is munged "
			    "running on this node? socket: %s; set "
			    "DDP_MUNGE_SOCKET to use another)",
			    munge_ctx_strerror(a->enc), a->socket);
	} else if (ddp_fmt(out, outlen, "%s", cred) < 0) {
		st = wk_err(DDP_ERR_AUTH, "munge credential too long");
	}
	free(cred);
	return st;
}

/* Makes a peer-supplied string printable in a log line. */
static void
sanitize(char *dst, size_t dlen, const void *src, size_t slen)
{
	const unsigned char *s = src;
	size_t i, o = 0;

	for (i = 0; i < slen && o + 1 < dlen; i++)
		dst[o++] = (s[i] >= 0x20 && s[i] < 0x7f) ? (char)s[i] : '?';
	dst[o] = '\0';
}

int
auth_verify(struct wk_auth *a, const char *cred, const char *kind, int rank,
	    const uint8_t nonce[RDV_NONCE_LEN], const char *addr, char *why,
	    size_t whylen)
{
	char want[512], got[512];
	void *buf = NULL;
	int len = 0, rv = -1;
	uid_t uid = (uid_t)-1;
	gid_t gid = (gid_t)-1;
	munge_err_t e;

	if (!a->on) {
		if (strcmp(cred, "none") == 0)
			return 0;
		ddp_fmt(why, whylen,
			"DDP_AUTH=none here, but the peer sent "
			"a credential");
		return -1;
	}
	if (rdv_cred_payload(want, sizeof(want), kind, a->job, a->step, rank,
			     a->world, nonce, addr) < 0) {
		ddp_fmt(why, whylen, "job or step id too long");
		return -1;
	}
	e = munge_decode(cred, a->dec, &buf, &len, &uid, &gid);
	if (e != EMUNGE_SUCCESS) {
		ddp_fmt(why, whylen, "invalid munge credential: %s",
			munge_ctx_strerror(a->dec));
		goto out;
	}
	if (uid != geteuid()) {
		ddp_fmt(why, whylen,
			"credential of uid %u, but this job runs as uid %u",
			(unsigned)uid, (unsigned)geteuid());
		goto out;
	}
	if (len < 0 || (size_t)len != strlen(want) || !buf ||
	    memcmp(buf, want, (size_t)len) != 0) {
		sanitize(got, sizeof(got), buf ? buf : "",
			 buf ? (size_t)len : 0);
		ddp_fmt(why, whylen,
			"credential is for '%s', expected '%s' (another job "
			"or step of the same user, or a connection relayed "
			"through another process?)",
			got, want);
		goto out;
	}
	rv = 0;
out:
	free(buf);
	return rv;
}
