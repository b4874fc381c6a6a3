/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libddp's credentials for the rendezvous (auth.h): munge, with a context
 * each to encode and to decode, credentials bound to the connection and
 * to this uid, libmunge loaded when first used; or an HMAC under the
 * step's key.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>

#include "auth.h"
#include "ddp_util.h"
#include "status.h"

/*
 * The part of libmunge's ABI (munge.h, unchanged since MUNGE 0.5) that
 * libddp uses, declared here so that libddp neither links libmunge nor
 * needs its header to build: the library's name, the option numbers
 * (munge_opt_t) and the success code (munge_err_t, an int-sized enum).
 */
#define MUNGE_LIBRARY "libmunge.so.2"
enum {
	MUNGE_SUCCESS = 0,	       /* EMUNGE_SUCCESS */
	MUNGE_OPT_SOCKET = 8,	       /* char *: munged's socket */
	MUNGE_OPT_UID_RESTRICTION = 9, /* uid_t: who may decode */
};

/* libmunge's functions, once loaded (munge_ prefix dropped). */
static struct {
	struct munge_ctx *(*ctx_create)(void);
	void (*ctx_destroy)(struct munge_ctx *ctx);
	int (*ctx_set)(struct munge_ctx *ctx, int opt, ...);
	int (*ctx_get)(struct munge_ctx *ctx, int opt, ...);
	const char *(*ctx_strerror)(struct munge_ctx *ctx);
	const char *(*strerror)(int e);
	int (*encode)(char **cred, struct munge_ctx *ctx, const void *buf,
		      int len);
	int (*decode)(const char *cred, struct munge_ctx *ctx, void **buf,
		      int *len, uid_t *uid, gid_t *gid);
} munge;
static pthread_once_t munge_once = PTHREAD_ONCE_INIT;
static char munge_load_error[256]; /* "" once loaded */

/* Loads libmunge for the process's life (never unloaded: contexts of
 * other rendezvous may be in use). */
static void
munge_load(void)
{
	static const char *const names[] = {
		"munge_ctx_create", "munge_ctx_destroy",  "munge_ctx_set",
		"munge_ctx_get",    "munge_ctx_strerror", "munge_strerror",
		"munge_encode",	    "munge_decode"};
	void **slot[] = {
		(void **)&munge.ctx_create,   (void **)&munge.ctx_destroy,
		(void **)&munge.ctx_set,      (void **)&munge.ctx_get,
		(void **)&munge.ctx_strerror, (void **)&munge.strerror,
		(void **)&munge.encode,	      (void **)&munge.decode};
	const char *dl_error;
	void *h;
	size_t i;

	h = dlopen(MUNGE_LIBRARY, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		dl_error = dlerror();
		ddp_fmt(munge_load_error, sizeof(munge_load_error), "%s",
			dl_error ? dl_error : "not found");
		return;
	}
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		*slot[i] = dlsym(h, names[i]);
		if (!*slot[i]) {
			ddp_fmt(munge_load_error, sizeof(munge_load_error),
				"%s has no %s", MUNGE_LIBRARY, names[i]);
			memset(&munge, 0, sizeof(munge));
			dlclose(h);
			return;
		}
	}
	munge_load_error[0] = '\0';
}

/* DDP_OK once libmunge is loaded; else DDP_ERR_AUTH naming the library
 * and the package that has it. */
static enum ddp_status
munge_loaded(void)
{
	int rc = pthread_once(&munge_once, munge_load);

	if (rc == 0 && munge.decode)
		return DDP_OK;
	return wk_err(DDP_ERR_AUTH,
		      "munge authentication (DDP_AUTH=munge, or auto without "
		      "a step key) "
		      "needs %s, which cannot be loaded: %s (install the MUNGE "
		      "library: libmunge2 on Debian and Ubuntu, munge-libs on "
		      "RHEL-like systems)",
		      MUNGE_LIBRARY, rc ? strerror(rc) : munge_load_error);
}

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

	if (munge.ctx_get(a->enc, MUNGE_OPT_SOCKET, &path) != MUNGE_SUCCESS ||
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

int
auth_resolve(int auth)
{
	const char *path;

	if (auth != DDP_AUTH_AUTO)
		return auth;
	path = getenv(DDP_STEP_KEY_VAR);
	return path && *path ? DDP_AUTH_KEY : DDP_AUTH_MUNGE;
}

const char *
auth_name(int auth)
{
	static const char *const names[] = {"none", "munge", "key", "auto"};

	return auth >= 0 && auth < 4 ? names[auth] : "?";
}

/* Reads the step key from the file DDP_STEP_KEY_FILE names, as
 * ddp_step_key_read checks it. The path is named in errors, never what
 * the file holds. */
static enum ddp_status
key_load(struct wk_auth *a)
{
	const char *path = getenv(DDP_STEP_KEY_VAR);
	struct ddp_step_key key;
	char err[512];

	if (!path || !*path)
		return wk_err(DDP_ERR_AUTH,
			      "DDP_AUTH=key needs the step key that srun --ddp "
			      "hands to the tasks, but %s is not set (run the "
			      "program under srun --ddp on a site whose "
			      "ddp.conf has a port_key, or use DDP_AUTH=munge)",
			      DDP_STEP_KEY_VAR);
	if (ddp_step_key_read(path, &key, err, sizeof(err)) < 0)
		return wk_err(
			DDP_ERR_AUTH,
			"%s (%s names the key srun --ddp makes for the "
			"step's tasks, on every node while the step runs)",
			err, DDP_STEP_KEY_VAR);
	memcpy(a->key, key.k, sizeof(a->key));
	ddp_step_key_wipe(&key);
	return DDP_OK;
}

enum ddp_status
auth_init(struct wk_auth *a, const struct ddp_config *cfg)
{
	enum ddp_status st;
	int e;

	memset(a, 0, sizeof(*a));
	a->mode = auth_resolve(cfg->auth);
	a->job = cfg->job_id;
	a->step = cfg->step_id;
	a->world = cfg->world_size;
	ddp_fmt(a->socket, sizeof(a->socket), "%s",
		cfg->munge_socket[0] ? cfg->munge_socket
				     : "munge's default socket");
	if (a->mode == DDP_AUTH_NONE)
		return DDP_OK;
	if (a->mode == DDP_AUTH_KEY)
		return key_load(a);
	if (a->mode != DDP_AUTH_MUNGE)
		return wk_err(DDP_ERR_INVALID,
			      "ddp_config.auth is %d: use DDP_AUTH_AUTO, "
			      "DDP_AUTH_KEY, DDP_AUTH_MUNGE or DDP_AUTH_NONE",
			      cfg->auth);
	st = munge_loaded();
	if (st)
		return st;
	a->enc = munge.ctx_create();
	a->dec = munge.ctx_create();
	if (!a->enc || !a->dec)
		return wk_err(DDP_ERR_NOMEM, "munge_ctx_create failed");
	/* Rank 0's proof goes to whoever connects: only the job's uid may
	 * read it back (munged refuses every other, root included). */
	e = munge.ctx_set(a->enc, MUNGE_OPT_UID_RESTRICTION, geteuid());
	if (e != MUNGE_SUCCESS)
		return wk_err(
			DDP_ERR_AUTH,
			"munge: cannot restrict credentials to uid %u: %s",
			(unsigned)geteuid(), munge.strerror(e));
	if (cfg->munge_socket[0]) {
		e = munge.ctx_set(a->enc, MUNGE_OPT_SOCKET, cfg->munge_socket);
		if (e == MUNGE_SUCCESS)
			e = munge.ctx_set(a->dec, MUNGE_OPT_SOCKET,
					  cfg->munge_socket);
		if (e != MUNGE_SUCCESS)
			return wk_err(DDP_ERR_AUTH,
				      "munge: cannot use socket %s: %s",
				      cfg->munge_socket, munge.strerror(e));
	}
	return auth_probe(a);
}

void
auth_fini(struct wk_auth *a)
{
	if (a->enc)
		munge.ctx_destroy(a->enc);
	if (a->dec)
		munge.ctx_destroy(a->dec);
	a->enc = a->dec = NULL;
	explicit_bzero(a->key, sizeof(a->key));
}

/* "DDPK1:" and the hex of HMAC-SHA256(step key, payload), into out
 * (AUTH_KEY_CRED_LEN + 1 bytes). */
static void
key_cred(const struct wk_auth *a, const char *payload,
	 char out[AUTH_KEY_CRED_LEN + 1])
{
	unsigned char mac[DDP_SHA256_LEN];
	size_t o = sizeof(AUTH_KEY_PREFIX) - 1;

	ddp_hmac_sha256(a->key, sizeof(a->key), payload, strlen(payload), mac);
	memcpy(out, AUTH_KEY_PREFIX, o);
	ddp_hex(out + o, AUTH_KEY_CRED_LEN + 1 - o, mac, sizeof(mac));
}

enum ddp_status
auth_encode(struct wk_auth *a, const char *kind, int rank,
	    const uint8_t nonce[RDV_NONCE_LEN], const char *addr, char *out,
	    size_t outlen)
{
	char payload[512];
	char *cred = NULL;
	int e;
	char mine[AUTH_KEY_CRED_LEN + 1];
	enum ddp_status st = DDP_OK;

	if (a->mode == DDP_AUTH_NONE) {
		ddp_fmt(out, outlen, "none");
		return DDP_OK;
	}
	if (proto_cred_payload(payload, sizeof(payload), kind, a->job, a->step,
			       rank, a->world, nonce, addr) < 0)
		return wk_err(DDP_ERR_INVALID, "job or step id too long");
	if (a->mode == DDP_AUTH_KEY) {
		key_cred(a, payload, mine);
		if (ddp_fmt(out, outlen, "%s", mine) < 0)
			return wk_err(DDP_ERR_INVALID,
				      "no room for a step-key credential");
		return DDP_OK;
	}
	e = munge.encode(&cred, a->enc, payload, (int)strlen(payload));
	if (e != MUNGE_SUCCESS) {
		st = wk_err(DDP_ERR_AUTH,
			    "munge cannot encode a credential: %s (is munged "
			    "running on this node? socket: %s; set "
			    "DDP_MUNGE_SOCKET to use another)",
			    munge.ctx_strerror(a->enc), a->socket);
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

/* What kind of credential cred looks like, for messages. */
static const char *
cred_mode(const char *cred)
{
	if (strncmp(cred, AUTH_KEY_PREFIX, sizeof(AUTH_KEY_PREFIX) - 1) == 0)
		return "step-key";
	if (strcmp(cred, "none") == 0)
		return "DDP_AUTH=none";
	return strncmp(cred, "MUNGE:", 6) == 0 ? "munge" : "unknown";
}

/* The step-key half of auth_verify: cred must be exactly the HMAC of
 * want under the key, compared in constant time. */
static int
key_verify(const struct wk_auth *a, const char *cred, const char *want,
	   char *why, size_t whylen)
{
	char mine[AUTH_KEY_CRED_LEN + 1];
	size_t len = strlen(cred);
	int ok;

	if (strcmp(cred_mode(cred), "step-key") != 0) {
		ddp_fmt(why, whylen,
			"the peer sent a %s credential, but this rank uses "
			"the step key (DDP_AUTH=key, or auto with %s set): "
			"every rank of a job must use the same DDP_AUTH",
			cred_mode(cred), DDP_STEP_KEY_VAR);
		return -1;
	}
	key_cred(a, want, mine);
	ok = len == AUTH_KEY_CRED_LEN && ddp_ct_equal(cred, mine, len);
	explicit_bzero(mine, sizeof(mine));
	if (ok)
		return 0;
	ddp_fmt(why, whylen,
		"step-key credential does not prove '%s' (made with another "
		"step's key, of another job, step or user, or for another "
		"connection, rank or nonce)",
		want);
	return -1;
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
	int e;

	if (a->mode == DDP_AUTH_NONE) {
		if (strcmp(cred, "none") == 0)
			return 0;
		ddp_fmt(why, whylen,
			"DDP_AUTH=none here, but the peer sent a %s credential",
			cred_mode(cred));
		return -1;
	}
	if (proto_cred_payload(want, sizeof(want), kind, a->job, a->step, rank,
			       a->world, nonce, addr) < 0) {
		ddp_fmt(why, whylen, "job or step id too long");
		return -1;
	}
	if (a->mode == DDP_AUTH_KEY)
		return key_verify(a, cred, want, why, whylen);
	if (strcmp(cred_mode(cred), "munge") != 0) {
		ddp_fmt(why, whylen,
			"the peer sent a %s credential, but this rank uses "
			"munge (DDP_AUTH=%s): every rank of a job must use "
			"the same DDP_AUTH",
			cred_mode(cred), auth_name(a->mode));
		return -1;
	}
	e = munge.decode(cred, a->dec, &buf, &len, &uid, &gid);
	if (e != MUNGE_SUCCESS) {
		ddp_fmt(why, whylen, "invalid munge credential: %s",
			munge.ctx_strerror(a->dec));
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
