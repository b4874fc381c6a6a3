/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Gradient synchronisation (a DDP reducer): buckets in reverse registration
 * order, each allreduced on a background thread as soon as it is complete.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "ddp_util.h"
#include "reduce.h"
#include "straggler.h"

struct gs_param {
	void *param;
	void *grad;
	size_t count;
	enum ddp_dtype dtype;
	int bucket;
	size_t offset; /* bytes into the bucket's flat buffer */
	int ready;
};

struct gs_bucket {
	size_t bytes;
	enum ddp_dtype dtype;
	int nparams;
	/* The gradients that live outside the bucket and are copied: npieces
	 * entries of gs->pieces (gradient views need none). */
	struct wk_piece *pieces;
	int npieces;
	int pending;
	void *flat;
	void *fence; /* the backend's "gradients final" mark, or NULL */
};

struct ddp_grad_sync {
	struct ddp_comm *comm;
	struct ddp_grad_sync_opts opts;
	struct gs_param *p;
	int np;
	int cap;
	struct gs_bucket *b;
	int nb;
	struct wk_piece *pieces; /* copied gradients, in bucket order */
	int npieces;
	int started; /* start() done */
	int no_sync;
	pthread_t thread;
	int thread_on;
	pthread_mutex_t m;
	pthread_cond_t work;
	pthread_cond_t done;
	int stop;
	int next;	/* next bucket the thread reduces */
	int launched;	/* buckets handed to the network this step */
	int overlapped; /* launched before the last wait() */
	enum ddp_status err;
	char errmsg[DDP_ERR_LEN];
	double first_wait; /* this step's wait in the first bucket (s) */
	struct wk_late late;
};

enum ddp_status
ddp_grad_sync_create(struct ddp_comm *comm,
		     const struct ddp_grad_sync_opts *opts,
		     struct ddp_grad_sync **out)
{
	struct ddp_grad_sync *gs;
	enum ddp_status st;

	if (!comm || !out)
		return wk_err(DDP_ERR_INVALID, "ddp_grad_sync_create: NULL");
	*out = NULL;
	gs = calloc(1, sizeof(*gs));
	if (!gs)
		return wk_err(DDP_ERR_NOMEM, "ddp_grad_sync_create: no memory");
	st = wk_late_init(&gs->late);
	if (st) {
		wk_late_free(&gs->late);
		free(gs);
		return st;
	}
	gs->comm = comm;
	gs->opts.first_bucket_bytes = 1 << 20;
	gs->opts.bucket_cap_bytes = 25 << 20;
	if (opts && opts->first_bucket_bytes)
		gs->opts.first_bucket_bytes = opts->first_bucket_bytes;
	if (opts && opts->bucket_cap_bytes)
		gs->opts.bucket_cap_bytes = opts->bucket_cap_bytes;
	pthread_mutex_init(&gs->m, NULL);
	pthread_cond_init(&gs->work, NULL);
	pthread_cond_init(&gs->done, NULL);
	*out = gs;
	return DDP_OK;
}

int
ddp_grad_sync_add(struct ddp_grad_sync *gs, void *param, void *grad,
		  size_t count, enum ddp_dtype dtype)
{
	struct gs_param *np;

	if (!gs || gs->started || !param || !count || !wk_dtype_ok(dtype)) {
		wk_err(DDP_ERR_INVALID,
		       "ddp_grad_sync_add: bad argument or called after "
		       "ddp_grad_sync_start");
		return -1;
	}
	if (gs->np == gs->cap) {
		np = realloc(gs->p, (size_t)(gs->cap ? gs->cap * 2 : 16) *
					    sizeof(*np));
		if (!np) {
			wk_err(DDP_ERR_NOMEM, "ddp_grad_sync_add: no memory");
			return -1;
		}
		gs->p = np;
		gs->cap = gs->cap ? gs->cap * 2 : 16;
	}
	memset(&gs->p[gs->np], 0, sizeof(gs->p[0]));
	gs->p[gs->np].param = param;
	gs->p[gs->np].grad = grad;
	gs->p[gs->np].count = count;
	gs->p[gs->np].dtype = dtype;
	return gs->np++;
}

/* Gradient views start at zero, like a freshly allocated gradient. */
static enum ddp_status
zero_buckets(struct ddp_grad_sync *gs)
{
	enum ddp_status st = DDP_OK;
	size_t most = 0;
	void *zeros;
	int i;

	for (i = 0; i < gs->nb; i++)
		if (gs->b[i].npieces < gs->b[i].nparams &&
		    gs->b[i].bytes > most)
			most = gs->b[i].bytes;
	if (!most)
		return DDP_OK;
	zeros = calloc(1, most);
	if (!zeros)
		return wk_err(DDP_ERR_NOMEM, "grad sync: no memory");
	for (i = 0; i < gs->nb && !st; i++)
		if (gs->b[i].npieces < gs->b[i].nparams)
			st = ddp_mem_copy(gs->comm, gs->b[i].flat, zeros,
					  gs->b[i].bytes, 0);
	free(zeros);
	return st;
}

/* Reverse registration order; a bucket holds one dtype. */
static enum ddp_status
build_buckets(struct ddp_grad_sync *gs)
{
	struct gs_bucket *b = NULL;
	size_t cap, bytes;
	int i;

	/* ddp_grad_sync_start checked it; said again so that GCC 14 sees
	 * no negative count reach calloc (-Walloc-size-larger-than). */
	if (gs->np <= 0)
		return wk_err(DDP_ERR_INVALID, "grad sync: no parameters");
	gs->b = calloc((size_t)gs->np, sizeof(*gs->b));
	gs->pieces = calloc((size_t)gs->np, sizeof(*gs->pieces));
	if (!gs->b || !gs->pieces)
		return wk_err(DDP_ERR_NOMEM, "grad sync: no memory");
	for (i = gs->np - 1; i >= 0; i--) {
		bytes = gs->p[i].count * ddp_dtype_size(gs->p[i].dtype);
		cap = gs->nb <= 1 ? gs->opts.first_bucket_bytes
				  : gs->opts.bucket_cap_bytes;
		if (!b || b->dtype != gs->p[i].dtype ||
		    (b->bytes && b->bytes + bytes > cap)) {
			b = &gs->b[gs->nb++];
			b->dtype = gs->p[i].dtype;
			b->pieces = &gs->pieces[gs->npieces];
		}
		gs->p[i].bucket = (int)(b - gs->b);
		gs->p[i].offset = b->bytes;
		b->nparams++;
		if (gs->p[i].grad) {
			b->pieces[b->npieces++] =
				(struct wk_piece){.grad = gs->p[i].grad,
						  .offset = b->bytes,
						  .bytes = bytes};
			gs->npieces++;
		}
		b->bytes += bytes;
	}
	for (i = 0; i < gs->nb; i++) {
		gs->b[i].pending = gs->b[i].nparams;
		gs->b[i].flat = ddp_mem_alloc(gs->comm, gs->b[i].bytes);
		if (!gs->b[i].flat)
			return wk_err(DDP_ERR_NOMEM,
				      "grad sync: cannot allocate a %zu-byte "
				      "bucket",
				      gs->b[i].bytes);
	}
	for (i = 0; i < gs->np; i++)
		if (!gs->p[i].grad)
			gs->p[i].grad = (uint8_t *)gs->b[gs->p[i].bucket].flat +
					gs->p[i].offset;
	return zero_buckets(gs);
}

/* Gather, average, scatter: the backend queues it (NCCL) or does it. */
static enum ddp_status
reduce_bucket(struct ddp_grad_sync *gs, struct gs_bucket *b)
{
	return wk_bucket_avg(gs->comm, b->fence, b->flat,
			     b->bytes / ddp_dtype_size(b->dtype), b->dtype,
			     b->pieces, b->npieces);
}

/* The communication thread: reduces buckets strictly in bucket order, so
 * every rank issues the same sequence of allreduces. */
static void *
comm_thread(void *arg)
{
	struct ddp_grad_sync *gs = arg;
	enum ddp_status st;
	double t0, waited = 0;
	int i;

	pthread_mutex_lock(&gs->m);
	for (;;) {
		while (!gs->stop && !(gs->err == DDP_OK && gs->next < gs->nb &&
				      gs->b[gs->next].pending == 0))
			pthread_cond_wait(&gs->work, &gs->m);
		if (gs->stop)
			break;
		i = gs->next;
		gs->launched++;
		pthread_mutex_unlock(&gs->m);
		t0 = ddp_now();
		st = reduce_bucket(gs, &gs->b[i]);
		/* The first bucket's wait is this rank's arrival against the
		 * others' (straggler.h). */
		if (i == 0)
			waited = ddp_now() - t0;
		/* A device backend only queued the bucket: the step is done
		 * when the last one is. */
		if (!st && i == gs->nb - 1)
			st = wk_bucket_sync(gs->comm);
		pthread_mutex_lock(&gs->m);
		if (i == 0)
			gs->first_wait = waited;
		if (st) {
			gs->err = st;
			ddp_fmt(gs->errmsg, sizeof(gs->errmsg), "%s",
				wk_errbuf());
		}
		gs->next++;
		pthread_cond_broadcast(&gs->done);
	}
	pthread_mutex_unlock(&gs->m);
	return NULL;
}

/* Layout fingerprint: every rank must register the same parameters. */
static enum ddp_status
check_layout(struct ddp_grad_sync *gs)
{
	uint64_t h = 1469598103934665603ull;
	double mx[3], mn[3];
	enum ddp_status st;
	int i;

	for (i = 0; i < gs->np; i++) {
		h = (h ^ gs->p[i].count) * 1099511628211ull;
		h = (h ^ (uint64_t)gs->p[i].dtype) * 1099511628211ull;
	}
	mx[0] = mn[0] = gs->np;
	mx[1] = mn[1] = (double)(h >> 32);
	mx[2] = mn[2] = (double)(h & 0xffffffffu);
	/* Host memory: the control plane, whatever the data plane is. */
	st = wk_ctl_allreduce(gs->comm, mx, 3, DDP_FLOAT64, DDP_MAX);
	if (!st)
		st = wk_ctl_allreduce(gs->comm, mn, 3, DDP_FLOAT64, DDP_MIN);
	if (st)
		return st;
	if (memcmp(mx, mn, sizeof(mx)) != 0)
		return wk_err(DDP_ERR_MISMATCH,
			      "ddp_grad_sync_start: ranks registered different "
			      "parameters (rank %d has %d parameters, layout "
			      "hash %016llx; counts range %g..%g across ranks)",
			      ddp_comm_rank(gs->comm), gs->np,
			      (unsigned long long)h, mn[0], mx[0]);
	return DDP_OK;
}

enum ddp_status
ddp_grad_sync_start(struct ddp_grad_sync *gs)
{
	enum ddp_status st;
	int i;

	if (!gs || gs->started || !gs->np)
		return wk_err(DDP_ERR_INVALID,
			      "ddp_grad_sync_start: no parameters, or started "
			      "twice");
	st = check_layout(gs);
	if (st)
		return st;
	for (i = 0; i < gs->np; i++) {
		st = ddp_broadcast(gs->comm, gs->p[i].param, gs->p[i].count,
				   gs->p[i].dtype, 0);
		if (st)
			return st;
	}
	st = build_buckets(gs);
	if (st)
		return st;
	if (pthread_create(&gs->thread, NULL, comm_thread, gs) != 0)
		return wk_err(DDP_ERR_SYSTEM,
			      "ddp_grad_sync_start: cannot start the "
			      "communication thread");
	gs->thread_on = 1;
	gs->started = 1;
	return DDP_OK;
}

enum ddp_status
ddp_grad_sync_ready(struct ddp_grad_sync *gs, int index)
{
	enum ddp_status st = DDP_OK;
	struct gs_bucket *b;

	if (!gs || !gs->started || index < 0 || index >= gs->np)
		return wk_err(
			DDP_ERR_INVALID,
			"ddp_grad_sync_ready: bad index %d or not started",
			index);
	pthread_mutex_lock(&gs->m);
	if (gs->err) {
		st = wk_err(gs->err, "%s", gs->errmsg);
	} else if (gs->no_sync) {
		st = DDP_OK;
	} else if (gs->p[index].ready) {
		st = wk_err(DDP_ERR_INVALID,
			    "ddp_grad_sync_ready: gradient %d marked ready "
			    "twice in one step",
			    index);
	} else {
		gs->p[index].ready = 1;
		b = &gs->b[gs->p[index].bucket];
		if (--b->pending == 0)
			st = wk_fence_record(gs->comm, &b->fence);
		if (st) {
			gs->err = st;
			ddp_fmt(gs->errmsg, sizeof(gs->errmsg), "%s",
				wk_errbuf());
		} else if (b->pending == 0) {
			pthread_cond_signal(&gs->work);
		}
	}
	pthread_mutex_unlock(&gs->m);
	return st;
}

enum ddp_status
ddp_grad_sync_wait(struct ddp_grad_sync *gs)
{
	enum ddp_status st = DDP_OK;
	int i, missing = -1, report = 0;

	if (!gs || !gs->started)
		return wk_err(DDP_ERR_INVALID,
			      "ddp_grad_sync_wait: not started");
	pthread_mutex_lock(&gs->m);
	if (gs->no_sync)
		goto out;
	gs->overlapped = gs->launched;
	for (i = 0; i < gs->np && missing < 0; i++)
		if (!gs->p[i].ready)
			missing = i;
	/* Let what is in flight finish; the rest cannot start. */
	while (!gs->err && gs->next < gs->nb && gs->b[gs->next].pending == 0)
		pthread_cond_wait(&gs->done, &gs->m);
	if (gs->err) {
		st = wk_err(gs->err, "%s", gs->errmsg);
	} else if (missing >= 0) {
		gs->err = wk_err(DDP_ERR_INVALID,
				 "ddp_grad_sync_wait: gradient %d (of %d) was "
				 "not marked ready with ddp_grad_sync_ready; "
				 "the gradient sync is now unusable",
				 missing, gs->np);
		ddp_fmt(gs->errmsg, sizeof(gs->errmsg), "%s", wk_errbuf());
		st = gs->err;
	}
	for (i = 0; i < gs->np; i++)
		gs->p[i].ready = 0;
	for (i = 0; i < gs->nb; i++)
		gs->b[i].pending = gs->b[i].nparams;
	gs->next = 0;
	gs->launched = 0;
	if (!st)
		report = wk_late_step(&gs->late, gs->first_wait);
out:
	pthread_mutex_unlock(&gs->m);
	/* Between steps the communicator is this thread's (ddp.h). */
	if (report)
		st = wk_late_report(&gs->late, gs->comm);
	return st;
}

void
ddp_grad_sync_set_no_sync(struct ddp_grad_sync *gs, int on)
{
	if (!gs)
		return;
	pthread_mutex_lock(&gs->m);
	gs->no_sync = on != 0;
	pthread_mutex_unlock(&gs->m);
}

void *
ddp_grad_sync_grad(const struct ddp_grad_sync *gs, int index)
{
	if (!gs || !gs->started || index < 0 || index >= gs->np) {
		wk_err(DDP_ERR_INVALID,
		       "ddp_grad_sync_grad: bad index %d or not started",
		       index);
		return NULL;
	}
	return gs->p[index].grad;
}

int
ddp_grad_sync_num_buckets(const struct ddp_grad_sync *gs)
{
	return gs ? gs->nb : 0;
}

size_t
ddp_grad_sync_bucket_bytes(const struct ddp_grad_sync *gs, int b)
{
	return gs && b >= 0 && b < gs->nb ? gs->b[b].bytes : 0;
}

int
ddp_grad_sync_overlapped(const struct ddp_grad_sync *gs)
{
	return gs ? gs->overlapped : 0;
}

void
ddp_grad_sync_destroy(struct ddp_grad_sync *gs)
{
	int i;

	if (!gs)
		return;
	if (gs->thread_on) {
		pthread_mutex_lock(&gs->m);
		gs->stop = 1;
		pthread_cond_broadcast(&gs->work);
		pthread_mutex_unlock(&gs->m);
		pthread_join(gs->thread, NULL);
	}
	for (i = 0; i < gs->nb; i++) {
		if (gs->b[i].flat)
			ddp_mem_free(gs->comm, gs->b[i].flat);
		wk_fence_free(gs->comm, gs->b[i].fence);
	}
	free(gs->b);
	free(gs->pieces);
	free(gs->p);
	wk_late_free(&gs->late);
	pthread_mutex_destroy(&gs->m);
	pthread_cond_destroy(&gs->work);
	pthread_cond_destroy(&gs->done);
	free(gs);
}
