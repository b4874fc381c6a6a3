/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Naming a late rank (straggler.h): per-step waits in the first gradient
 * bucket, compared across ranks every DDP_STRAGGLER_EVERY steps.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm.h"
#include "ddp_util.h"
#include "straggler.h"

/* Weight of the newest step in the moving average: about the last 20. */
#define EWMA_ALPHA 0.1

static enum ddp_status
env_range(const char *name, long min, long max, long dflt, const char *unit,
	  long *out)
{
	const char *v = getenv(name);

	*out = dflt;
	if (!v || !*v)
		return DDP_OK;
	if (ddp_parse_long(v, min, max, out) < 0)
		return wk_err(DDP_ERR_ENV,
			      "%s='%.64s' is not a number of %s in [%ld, %ld]",
			      name, v, unit, min, max);
	return DDP_OK;
}

enum ddp_status
wk_late_init(struct wk_late *l)
{
	enum ddp_status st;
	long every, ms;

	memset(l, 0, sizeof(*l));
	st = env_range("DDP_STRAGGLER_EVERY", 0, WK_LATE_EVERY_MAX,
		       WK_LATE_EVERY_DEFAULT, "steps (0: off)", &every);
	if (!st)
		st = env_range("DDP_STRAGGLER_MS", 1, WK_LATE_MS_MAX,
			       WK_LATE_MS_DEFAULT, "milliseconds", &ms);
	if (st)
		return st;
	l->every = (int)every;
	l->late_s = (double)ms / 1000.0;
	if (l->every) {
		l->waits = calloc((size_t)l->every, sizeof(*l->waits));
		if (!l->waits)
			return wk_err(DDP_ERR_NOMEM, "grad sync: no memory");
	}
	return DDP_OK;
}

void
wk_late_free(struct wk_late *l)
{
	free(l->waits);
	l->waits = NULL;
}

int
wk_late_step(struct wk_late *l, double wait_s)
{
	if (!l->every)
		return 0;
	l->waits[l->n++] = wait_s;
	l->steps++;
	return l->n == l->every;
}

void
wk_late_tally(const double *mine, const double *longest, int n, double late_s,
	      int *late, double *mean_s)
{
	double sum = 0, d;
	int s;

	*late = 0;
	for (s = 0; s < n; s++) {
		d = longest[s] - mine[s];
		if (d > late_s) {
			(*late)++;
			sum += d;
		}
	}
	*mean_s = *late ? sum / *late : 0;
}

int
wk_late_line(char *buf, size_t size, int rank, const char *host, int gpu,
	     double mean_s, int late, int n)
{
	char where[DDP_HOST_MAX + 32];

	if (gpu >= 0)
		(void)ddp_fmt(where, sizeof(where), "%s, GPU %d", host, gpu);
	else
		(void)ddp_fmt(where, sizeof(where), "%s", host);
	return ddp_fmt(buf, size, "rank %d (%s) late %.0f ms in %d of %d steps",
		       rank, where, mean_s * 1000.0, late, n);
}

/* s as a JSON string's contents (quotes, backslashes, controls escaped). */
static void
json_text(char *out, size_t size, const char *s)
{
	size_t o = 0;

	for (; *s && o + 7 < size; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\') {
			out[o++] = '\\';
			out[o++] = (char)ch;
		} else if (ch < 0x20) {
			(void)ddp_fmt(out + o, size - o, "\\u%04x", ch);
			o += 6;
		} else {
			out[o++] = (char)ch;
		}
	}
	out[o] = '\0';
}

/*
 * Appends rank 0's JSON lines for one report to
 * $DDP_SHARED_DIR/stragglers.jsonl (0600, the job's 0700 directory): one
 * write per line, so lines of several steps never interleave.
 */
static void
write_json(struct wk_late *l, const char *lines, size_t len)
{
	const char *dir = getenv("DDP_SHARED_DIR");
	char path[4096];
	int fd;

	if (!dir || !*dir || !len || l->file_error)
		return;
	if (ddp_fmt(path, sizeof(path), "%s/stragglers.jsonl", dir) < 0) {
		l->file_error = 1;
		return;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW,
		  0600);
	if (fd < 0 || write(fd, lines, len) != (ssize_t)len) {
		wk_log(1, "straggler lines not written to %s: %s", path,
		       strerror(errno));
		l->file_error = 1;
	}
	ddp_close(&fd);
}

/* Rank 0: the lines of the ranks late in more than half of n steps. */
static void
name_late(struct wk_late *l, struct ddp_comm *comm, const double *all, int n)
{
	char line[DDP_HOST_MAX + 128], host[2 * DDP_HOST_MAX], gpu[32];
	char job[2 * DDP_ID_MAX], step[2 * DDP_ID_MAX];
	const char *v;
	struct ddp_buf json = {0};
	int r, late, g;
	long now = (long)time(NULL);

	v = getenv("SLURM_JOB_ID");
	json_text(job, sizeof(job), v && *v ? v : "none");
	v = getenv("SLURM_STEP_ID");
	json_text(step, sizeof(step), v && *v ? v : "none");
	for (r = 0; r < comm->mesh.size; r++) {
		late = (int)all[3 * r];
		if (2 * late <= n)
			continue;
		g = comm->gpus ? comm->gpus[r] : -1;
		if (wk_late_line(line, sizeof(line), r,
				 comm->mesh.peers[r].host, g, all[3 * r + 1],
				 late, n) == 0)
			wk_log(1, "%s", line);
		json_text(host, sizeof(host), comm->mesh.peers[r].host);
		gpu[0] = '\0';
		if (g >= 0)
			(void)ddp_fmt(gpu, sizeof(gpu), "\"gpu\":%d,", g);
		if (ddp_buf_printf(
			    &json,
			    "{\"time\":%ld,\"job\":\"%s\",\"step\":\"%s\","
			    "\"rank\":%d,\"host\":\"%s\",%s\"pid\":%d,"
			    "\"late_steps\":%d,\"steps\":%d,\"late_ms\":%.1f,"
			    "\"ewma_ms\":%.1f,\"threshold_ms\":%.0f,"
			    "\"last_step\":%ld}\n",
			    now, job, step, r, host, gpu,
			    comm->mesh.pids ? (int)comm->mesh.pids[r] : 0, late,
			    n, all[3 * r + 1] * 1000.0, all[3 * r + 2] * 1000.0,
			    l->late_s * 1000.0, l->steps) < 0)
			break;
	}
	write_json(l, json.s, json.len);
	ddp_buf_free(&json);
}

enum ddp_status
wk_late_report(struct wk_late *l, struct ddp_comm *comm)
{
	int n = l->n, P = comm->mesh.size, r = comm->mesh.rank, late, s;
	double *longest = malloc((size_t)n * sizeof(*longest));
	double *all = calloc(3 * (size_t)P, sizeof(*all));
	enum ddp_status st;
	double mean;

	if (!longest || !all) {
		st = wk_err(DDP_ERR_NOMEM, "grad sync: no memory");
		goto out;
	}
	memcpy(longest, l->waits, (size_t)n * sizeof(*longest));
	st = wk_ctl_allreduce(comm, longest, (size_t)n, DDP_FLOAT64, DDP_MAX);
	if (st)
		goto out;
	for (s = 0; s < n; s++)
		l->ewma_s = (1 - EWMA_ALPHA) * l->ewma_s +
			    EWMA_ALPHA * (longest[s] - l->waits[s]);
	wk_late_tally(l->waits, longest, n, l->late_s, &late, &mean);
	all[3 * r] = late;
	all[3 * r + 1] = mean;
	all[3 * r + 2] = l->ewma_s;
	st = wk_ctl_allreduce(comm, all, 3 * (size_t)P, DDP_FLOAT64, DDP_MAX);
	if (st)
		goto out;
	if (r == 0) {
		for (s = late = 0; s < P; s++)
			late += 2 * (int)all[3 * s] > n;
		wk_log(2,
		       "straggler report, steps %ld-%ld: %d of %d ranks late "
		       "by more than %g ms in more than half of them",
		       l->steps - n + 1, l->steps, late, P, l->late_s * 1000);
		name_late(l, comm, all, n);
	}
out:
	l->n = 0;
	free(longest);
	free(all);
	return st;
}
