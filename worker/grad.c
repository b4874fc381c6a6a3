/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Gradient synchronisation (a DDP reducer): buckets in reverse registration
 * order, each allreduced on a background thread as soon as it is complete.
 * The step's last bucket carries one element more, this rank's wish to
 * stop (wish.h): averaged with the gradients, so every rank learns the
 * same answer from the same step at no extra round trip.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cause.h"
#include "comm.h"
#include "ddp_util.h"
#include "reduce.h"
#include "shrink.h"
#include "straggler.h"
#include "wish.h"

/* Mixed into the layout fingerprint: the last bucket's stop flag, so a
 * rank whose libddp sends none is refused rather than misaligned. */
#define LAYOUT_STOP_FLAG 0x73746f70u

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
	/* DDP_ON_FAILURE=shrink: this rank's own gradients, kept before
	 * the reduction (kept: this step's are in), so that a step whose
	 * reduction lost a rank is reduced again over the survivors. */
	void *saved;
	int kept;
	/* 1 for the step's last bucket: flat holds one element more after
	 * bytes, the stop flag (never a gradient, never a view). */
	int flag;
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
	int busy;	/* the thread is reducing a bucket */
	int next;	/* next bucket the thread reduces */
	int launched;	/* buckets handed to the network this step */
	int overlapped; /* launched before the last wait() */
	enum ddp_status err;
	char errmsg[DDP_ERR_LEN];
	double first_wait; /* this step's wait in the first bucket (s) */
	struct wk_late late;
	int shrink;   /* DDP_ON_FAILURE=shrink */
	double steps; /* steps synchronised so far */
	struct wk_wish wish;
	enum ddp_stop_why wished; /* this rank's wish in this step's flag */
	int agreed;		  /* the ranks agreed to stop (sticky) */
	enum ddp_stop_why why;	  /* this rank's reason then, or AGREED */
	double agreed_at;	  /* when (ddp_now) */
	long long agreed_step;	  /* gs->steps then */
	int agreed_rank;	  /* this rank then */
};

/* DDP_ON_FAILURE: abort (unset, the default) or shrink. */
static enum ddp_status
env_on_failure(int *shrink)
{
	const char *v = getenv("DDP_ON_FAILURE");

	*shrink = 0;
	if (!v || !*v || strcmp(v, "abort") == 0)
		return DDP_OK;
	if (strcmp(v, "shrink") == 0) {
		*shrink = 1;
		return DDP_OK;
	}
	return wk_err(DDP_ERR_ENV,
		      "DDP_ON_FAILURE='%.64s': use abort (the default: a "
		      "lost rank fails the gradient sync) or shrink (go on "
		      "with the survivors, ddp_comm_shrink)",
		      v);
}

enum ddp_status
ddp_grad_sync_create(struct ddp_comm *comm,
		     const struct ddp_grad_sync_opts *opts,
		     struct ddp_grad_sync **out)
{
	struct ddp_grad_sync *gs;
	struct wk_wish wish;
	enum ddp_status st;
	int shrink;

	if (!comm || !out)
		return wk_err(DDP_ERR_INVALID, "ddp_grad_sync_create: NULL");
	*out = NULL;
	st = env_on_failure(&shrink);
	if (!st && shrink)
		st = wk_comm_shrink_check(comm);
	if (!st)
		st = wk_wish_init(&wish);
	if (st)
		return st;
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
	gs->shrink = shrink;
	gs->wish = wish;
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
	gs->b[gs->nb - 1].flag = 1;
	for (i = 0; i < gs->nb; i++) {
		gs->b[i].pending = gs->b[i].nparams;
		gs->b[i].flat = ddp_mem_alloc(
			gs->comm,
			gs->b[i].bytes +
				(gs->b[i].flag ? ddp_dtype_size(gs->b[i].dtype)
					       : 0));
		/* Host memory: only the TCP backend shrinks. */
		if (gs->shrink)
			gs->b[i].saved =
				malloc(gs->b[i].bytes ? gs->b[i].bytes : 1);
		if (!gs->b[i].flat || (gs->shrink && !gs->b[i].saved))
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
			     b->bytes / ddp_dtype_size(b->dtype) +
				     (size_t)b->flag,
			     b->dtype, b->pieces, b->npieces);
}

/* One value in a bucket's dtype (a float one: wk_dtype_ok). */
union flag_value {
	double f64;
	float f32;
	uint16_t f16;
};

/*
 * This rank's wish into the last bucket's flag, 1.0 to stop, else 0.0,
 * with the backend's copy (device memory under NCCL). Called before the
 * step's first bucket is queued, when no reduction of the step runs yet.
 */
static enum ddp_status
set_flag(struct ddp_grad_sync *gs)
{
	struct gs_bucket *b = &gs->b[gs->nb - 1];
	union flag_value v;
	float one;

	gs->wished = wk_wish_now(&gs->wish);
	one = gs->wished != DDP_STOP_NONE ? 1.0f : 0.0f;
	memset(&v, 0, sizeof(v));
	if (b->dtype == DDP_FLOAT64)
		v.f64 = one;
	else if (b->dtype == DDP_FLOAT32)
		v.f32 = one;
	else if (b->dtype == DDP_FLOAT16)
		v.f16 = wk_float_to_half(one);
	else
		v.f16 = wk_float_to_bf16(one);
	return ddp_mem_copy(gs->comm, (uint8_t *)b->flat + b->bytes, &v,
			    ddp_dtype_size(b->dtype), DDP_COPY_TO_BUFFER);
}

/* The reduced flag, after the step's last bucket: > 0 when any rank
 * wished to stop (an average of 0s and 1s), the same on every rank. */
static enum ddp_status
get_flag(struct ddp_grad_sync *gs, int *stop)
{
	struct gs_bucket *b = &gs->b[gs->nb - 1];
	union flag_value v;
	enum ddp_status st;
	double got;

	memset(&v, 0, sizeof(v));
	st = ddp_mem_copy(gs->comm, &v, (uint8_t *)b->flat + b->bytes,
			  ddp_dtype_size(b->dtype), DDP_COPY_TO_HOST);
	if (st)
		return st;
	if (b->dtype == DDP_FLOAT64)
		got = v.f64;
	else if (b->dtype == DDP_FLOAT32)
		got = v.f32;
	else if (b->dtype == DDP_FLOAT16)
		got = wk_half_to_float(v.f16);
	else
		got = wk_bf16_to_float(v.f16);
	*stop = got > 0;
	return DDP_OK;
}

/* Copies bucket i's gradients into its saved copy (save 1) or back. */
static void
keep_bucket(struct ddp_grad_sync *gs, int i, int save)
{
	struct gs_bucket *b = &gs->b[i];
	size_t bytes;
	uint8_t *at;
	int k;

	for (k = 0; k < gs->np; k++) {
		if (gs->p[k].bucket != i)
			continue;
		bytes = gs->p[k].count * ddp_dtype_size(gs->p[k].dtype);
		at = (uint8_t *)b->saved + gs->p[k].offset;
		if (save)
			memcpy(at, gs->p[k].grad, bytes);
		else
			memcpy(gs->p[k].grad, at, bytes);
	}
	b->kept = 1;
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
		gs->busy = 1;
		pthread_mutex_unlock(&gs->m);
		if (gs->shrink)
			keep_bucket(gs, i, 1);
		/* The flag is set before the step's first bucket, on every
		 * backend when its stream is idle. */
		st = i == 0 ? set_flag(gs) : DDP_OK;
		t0 = ddp_now();
		if (!st)
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
		gs->busy = 0;
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
	h = (h ^ LAYOUT_STOP_FLAG) * 1099511628211ull;
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

/* The step's failure is a lost rank that DDP_ON_FAILURE=shrink handles. */
static int
recoverable(const struct ddp_grad_sync *gs)
{
	return gs->shrink && gs->err == DDP_ERR_PEER;
}

/*
 * DDP_ON_FAILURE=shrink after the step's reduction lost a rank (the
 * thread idle, gs->m not held): the communicator shrinks in place, the
 * survivors check that they are all at this step, and every bucket is
 * reduced again from this rank's own gradients; a rank lost during that
 * is dropped the same way. DDP_OK or the error.
 */
static enum ddp_status
recover(struct ddp_grad_sync *gs)
{
	enum ddp_status st = DDP_ERR_PEER;
	double at[2];
	int i;

	/* The buckets the thread never reached hold this rank's own
	 * gradients still: keep them too, a reduction may fail again. */
	for (i = 0; i < gs->nb; i++)
		if (!gs->b[i].kept)
			keep_bucket(gs, i, 1);
	/* Each shrink drops a rank at least: the loop ends. */
	while (st == DDP_ERR_PEER) {
		st = wk_comm_shrink_in_place(gs->comm);
		if (st)
			return st;
		at[0] = gs->steps;
		at[1] = -gs->steps;
		st = wk_ctl_allreduce(gs->comm, at, 2, DDP_FLOAT64, DDP_MAX);
		if (st)
			return st;
		if (at[0] != gs->steps || -at[1] != gs->steps)
			return wk_err(DDP_ERR_PEER,
				      "grad sync: after the loss of a rank the "
				      "survivors were at different steps (%.0f "
				      "to %.0f): some finished a step before "
				      "the loss that others did not, so the "
				      "model copies differ; restore a "
				      "checkpoint",
				      -at[1], at[0]);
		for (i = 0; i < gs->nb; i++)
			keep_bucket(gs, i, 0);
		/* The failed reduction left the flag half reduced. */
		st = set_flag(gs);
		for (i = 0; i < gs->nb && !st; i++)
			st = reduce_bucket(gs, &gs->b[i]);
		if (!st)
			st = wk_bucket_sync(gs->comm);
	}
	return st;
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
	/* A lost rank under DDP_ON_FAILURE=shrink is ddp_grad_sync_wait's
	 * to handle: backward goes on. */
	if (gs->err && !recoverable(gs)) {
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
		if (--b->pending == 0 && !gs->err)
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

/*
 * After a synchronised step (gs->m held, the thread idle): whether the
 * ranks agreed to stop. Sticky: the first agreement is kept. A flag that
 * cannot be read fails the sync (*st).
 */
static void
agree_stop(struct ddp_grad_sync *gs, enum ddp_status *st)
{
	enum ddp_status fst;
	int stop = 0;

	if (gs->agreed)
		return;
	fst = get_flag(gs, &stop);
	if (fst) {
		gs->err = fst;
		ddp_fmt(gs->errmsg, sizeof(gs->errmsg), "%s", wk_errbuf());
		*st = fst;
		return;
	}
	if (!stop)
		return;
	gs->why = gs->wished != DDP_STOP_NONE ? gs->wished : DDP_STOP_AGREED;
	gs->agreed_at = ddp_now();
	gs->agreed_step = (long long)gs->steps;
	gs->agreed_rank = ddp_comm_rank(gs->comm);
	wk_wish_served();
	__atomic_store_n(&gs->agreed, 1, __ATOMIC_RELEASE);
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
	while ((!gs->err && gs->next < gs->nb &&
		gs->b[gs->next].pending == 0) ||
	       gs->busy)
		pthread_cond_wait(&gs->done, &gs->m);
	if (recoverable(gs) && missing < 0) {
		/* The thread is idle while gs->err is set. */
		pthread_mutex_unlock(&gs->m);
		st = recover(gs);
		pthread_mutex_lock(&gs->m);
		gs->err = st;
		if (st)
			ddp_fmt(gs->errmsg, sizeof(gs->errmsg), "%s",
				wk_errbuf());
		else
			st = wk_err(DDP_SHRUNK,
				    "grad sync: a rank was lost; this step's "
				    "gradients are the average over the %d "
				    "survivors, and this rank is now rank %d",
				    ddp_comm_size(gs->comm),
				    ddp_comm_rank(gs->comm));
	} else if (gs->err) {
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
	for (i = 0; i < gs->nb; i++) {
		gs->b[i].pending = gs->b[i].nparams;
		gs->b[i].kept = 0;
	}
	gs->next = 0;
	gs->launched = 0;
	if (!st || st == DDP_SHRUNK) {
		gs->steps++;
		agree_stop(gs, &st);
		wk_wish_step(&gs->wish);
		if (!gs->err)
			report = wk_late_step(&gs->late, gs->first_wait);
	}
out:
	pthread_mutex_unlock(&gs->m);
	/* Between steps the communicator is this thread's (ddp.h). */
	if (report) {
		enum ddp_status rst = wk_late_report(&gs->late, gs->comm);

		if (rst)
			st = rst;
	}
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

int
ddp_should_stop(const struct ddp_grad_sync *gs)
{
	wk_wish_asked();
	return gs ? __atomic_load_n(&gs->agreed, __ATOMIC_ACQUIRE) : 0;
}

const char *
ddp_should_stop_why(const struct ddp_grad_sync *gs)
{
	if (!gs || !__atomic_load_n(&gs->agreed, __ATOMIC_ACQUIRE))
		return NULL;
	return ddp_stop_why_name(gs->why);
}

void
ddp_grad_sync_destroy(struct ddp_grad_sync *gs)
{
	struct ddp_stop_note note;
	int i;

	if (!gs)
		return;
	/* The stop note: srun's one line, and slurmstepd's sign that the
	 * exit with DDP_EXIT_STOPPED that follows is no failure. */
	if (gs->agreed) {
		note = (struct ddp_stop_note){
			.rank = gs->agreed_rank,
			.step = gs->agreed_step,
			.why = gs->why,
			.ckpt_ms =
				(long long)((ddp_now() - gs->agreed_at) * 1000),
		};
		wk_cause_stop(&note);
	}
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
		free(gs->b[i].saved);
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
