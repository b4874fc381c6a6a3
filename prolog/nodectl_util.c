/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ddp-nodectl core: string buffer, input validation, running programs
 * without a shell, and running file-system work in a child with a timeout.
 */
#include "nodectl.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ddp_child.h"
#include "ddp_util.h"

/* Enough for every program the helper runs; never taken from the job. */
#define NC_PATH "PATH=/usr/sbin:/usr/bin:/sbin:/bin"
#define NC_OUT_MAX (4u << 20)

static int
parse_decimal(const char *s, size_t maxdigits, unsigned long min,
	      unsigned long max, unsigned long *out)
{
	unsigned long v = 0;
	size_t i;

	if (!s || !s[0])
		return -1;
	for (i = 0; s[i]; i++) {
		if (i >= maxdigits || !isdigit((unsigned char)s[i]))
			return -1;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int
nc_parse_jobid(const char *s, unsigned long *out)
{
	return parse_decimal(s, 10, 1, 4294967294UL, out);
}

int
nc_parse_id(const char *s, unsigned long *out)
{
	return parse_decimal(s, 10, 0, 4294967294UL, out);
}

int
nc_valid_nodename(const char *s)
{
	size_t i;

	if (!s || !s[0] || s[0] == '-' || s[0] == '.')
		return 0;
	for (i = 0; s[i]; i++) {
		unsigned char c = (unsigned char)s[i];

		if (i >= 64)
			return 0;
		if (!isalnum(c) && c != '.' && c != '_' && c != '-')
			return 0;
	}
	return 1;
}

int
nc_node_draining(const char *show_node, char *state, size_t len)
{
	const char *p = show_node, *end;

	/* "State=" at the start of a field; Reason= comes later and may hold
	 * any text, so the first such field is the state. */
	while ((p = strstr(p, "State=")) != NULL &&
	       !(p == show_node || p[-1] == ' '))
		p++;
	if (!p)
		return -1;
	p += strlen("State=");
	end = p + strcspn(p, " \n");
	if (end == p || (size_t)(end - p) >= len)
		return -1;
	memcpy(state, p, (size_t)(end - p));
	state[end - p] = '\0';
	return strstr(state, "DRAIN") != NULL;
}

/* Waits for pid until deadline (ddp_now() seconds); kills it after that.
 * Returns the wait status, or -1 when it had to be killed. */
static int
wait_until(pid_t pid, double deadline)
{
	/* A child stuck in an uninterruptible NFS wait may not die at once;
	 * do not wait for it. */
	const struct ddp_child_wait w = {.deadline = deadline, .grace = 0.02};
	int status;

	if (ddp_wait_child(pid, &w, &status))
		return -1;
	return status;
}

int
nc_run(char *const argv[], const char *const keep_env[], const char *stdin_text,
       struct ddp_buf *out, unsigned timeout_s, char *err, size_t errlen)
{
	char *envp[16];
	char *envbuf[16] = {NULL};
	int in[2] = {-1, -1}, outp[2] = {-1, -1};
	size_t nenv = 0, i, in_len, in_off = 0;
	double deadline = ddp_now() + timeout_s;
	pid_t pid = -1;
	int status, rv = -1;

	err[0] = '\0';
	envp[nenv++] = NC_PATH;
	for (i = 0; keep_env && keep_env[i] && nenv < 15; i++) {
		const char *v = getenv(keep_env[i]);
		size_t len;

		if (!v)
			continue;
		len = strlen(keep_env[i]) + strlen(v) + 2;
		envbuf[nenv] = malloc(len);
		if (!envbuf[nenv] ||
		    ddp_fmt(envbuf[nenv], len, "%s=%s", keep_env[i], v) < 0)
			goto out;
		envp[nenv] = envbuf[nenv];
		nenv++;
	}
	envp[nenv] = NULL;
	if (pipe2(in, O_CLOEXEC) < 0 || (out && pipe2(outp, O_CLOEXEC) < 0)) {
		ddp_errf(err, errlen, "pipe: %s", strerror(errno));
		goto out;
	}
	pid = fork();
	if (pid < 0) {
		ddp_errf(err, errlen, "fork: %s", strerror(errno));
		goto out;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

		dup2(in[0], 0);
		dup2(out ? outp[1] : null, 1);
		execve(argv[0], argv, envp);
		dprintf(2, "ddp: cannot run %s: %s\n", argv[0],
			strerror(errno));
		_exit(127);
	}
	ddp_close(&in[0]);
	ddp_close(&outp[1]);
	/* Feed stdin and drain stdout together, so neither side blocks. */
	signal(SIGPIPE, SIG_IGN);
	in_len = stdin_text ? strlen(stdin_text) : 0;
	if (in_len == 0)
		ddp_close(&in[1]);
	while (in[1] >= 0 || outp[0] >= 0) {
		struct pollfd pf[2];
		int np = 0, ms = (int)((deadline - ddp_now()) * 1000);

		if (ms <= 0)
			break;
		if (in[1] >= 0)
			pf[np++] =
				(struct pollfd){.fd = in[1], .events = POLLOUT};
		if (outp[0] >= 0)
			pf[np++] = (struct pollfd){.fd = outp[0],
						   .events = POLLIN};
		if (poll(pf, (nfds_t)np, ms) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (i = 0; i < (size_t)np; i++) {
			if (!pf[i].revents)
				continue;
			if (pf[i].fd == in[1]) {
				ssize_t w = write(in[1], stdin_text + in_off,
						  in_len - in_off);

				if (w > 0)
					in_off += (size_t)w;
				if (w < 0 || in_off >= in_len)
					ddp_close(&in[1]);
			} else {
				char chunk[4096];
				ssize_t r = read(outp[0], chunk, sizeof(chunk));

				if (r <= 0) {
					ddp_close(&outp[0]);
				} else if (out->len + (size_t)r <= NC_OUT_MAX) {
					if (ddp_buf_printf(out, "%.*s", (int)r,
							   chunk) < 0) {
						ddp_errf(err, errlen,
							 "out of memory");
						goto out;
					}
				}
			}
		}
	}
	ddp_close(&in[1]);
	ddp_close(&outp[0]);
	status = wait_until(pid, deadline);
	pid = -1;
	if (status < 0) {
		ddp_errf(err, errlen, "%s timed out after %u s", argv[0],
			 timeout_s);
		goto out;
	}
	if (WIFSIGNALED(status)) {
		ddp_errf(err, errlen, "%s killed by signal %d", argv[0],
			 WTERMSIG(status));
		goto out;
	}
	rv = WEXITSTATUS(status);
	if (rv != 0)
		ddp_errf(err, errlen, "%s exited with status %d", argv[0], rv);
out:
	if (pid > 0)
		wait_until(pid, ddp_now());
	ddp_close(&in[0]);
	ddp_close(&in[1]);
	ddp_close(&outp[0]);
	ddp_close(&outp[1]);
	for (i = 0; i < 16; i++)
		free(envbuf[i]);
	return rv;
}

int
nc_call_with_timeout(nc_child_fn *fn, void *arg, unsigned timeout_s, char *err,
		     size_t errlen)
{
	int p[2] = {-1, -1};
	double deadline = ddp_now() + timeout_s;
	size_t got = 0;
	pid_t pid;
	int status, rv = -1;

	err[0] = '\0';
	if (pipe2(p, O_CLOEXEC) < 0) {
		ddp_errf(err, errlen, "pipe: %s", strerror(errno));
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		ddp_errf(err, errlen, "fork: %s", strerror(errno));
		goto out;
	}
	if (pid == 0) {
		char cerr[DDP_ERR_LEN] = "";
		int crv;

		close(p[0]);
		/* The child's own backstop: SIGALRM's default action ends it
		 * even if the parent is gone. */
		alarm(timeout_s + 1);
		crv = fn(arg, cerr, sizeof(cerr));
		if (write(p[1], cerr, strlen(cerr)) < 0)
			crv = -1;
		_exit(crv == 0 ? 0 : 1);
	}
	ddp_close(&p[1]);
	for (;;) {
		struct pollfd pf = {.fd = p[0], .events = POLLIN};
		int ms = (int)((deadline - ddp_now()) * 1000);
		ssize_t r;

		if (ms <= 0)
			break;
		r = poll(&pf, 1, ms);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		r = read(p[0], err + got, errlen - 1 - got);
		if (r <= 0)
			break;
		got += (size_t)r;
		if (got >= errlen - 1)
			break;
	}
	err[got] = '\0';
	status = wait_until(pid, deadline);
	if (status < 0) {
		ddp_errf(err, errlen, "timed out after %u s", timeout_s);
		goto out;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		rv = 0;
	} else if (!err[0]) {
		ddp_errf(err, errlen, "check process failed (status %d)",
			 status);
	}
out:
	ddp_close(&p[0]);
	ddp_close(&p[1]);
	return rv;
}

/* The job id in the name of a segment libddp makes (worker/shm.c):
 * "ddp-" job "." step "-" and 32 lowercase hex digits, job and step being
 * the letters and digits of SLURM_JOB_ID and SLURM_STEP_ID (the step
 * may be empty). Returns 0 and the id, or -1 for any other name. */
static int
shm_segment_job(const char *name, unsigned long *jobid)
{
	char job[16], canon[16];
	const char *p = name + 4, *dot, *dash;
	size_t i;

	if (strncmp(name, "ddp-", 4) != 0 || !(dot = strchr(p, '.')) ||
	    (size_t)(dot - p) >= sizeof(job))
		return -1;
	for (dash = dot + 1; isalnum((unsigned char)*dash); dash++)
		;
	if (*dash != '-' || dash - (dot + 1) > 40 ||
	    strlen(dash + 1) != NC_SHM_RANDOM_HEX)
		return -1;
	for (i = 1; dash[i]; i++)
		if (!isdigit((unsigned char)dash[i]) &&
		    (dash[i] < 'a' || dash[i] > 'f'))
			return -1;
	memcpy(job, p, (size_t)(dot - p));
	job[dot - p] = '\0';
	/* One spelling per job: "012" is no segment of job 12. */
	if (nc_parse_jobid(job, jobid) < 0 ||
	    ddp_fmt(canon, sizeof(canon), "%lu", *jobid) < 0 ||
	    strcmp(canon, job) != 0)
		return -1;
	return 0;
}

int
nc_remove_shm(const char *dir, unsigned long jobid, const unsigned long *live,
	      size_t nlive, long grace, size_t *removed, char *err,
	      size_t errlen)
{
	struct dirent *de;
	struct stat st;
	unsigned long id;
	DIR *d = NULL;
	size_t i;
	int fd, rc = 0, keep;

	*removed = 0;
	if (errlen)
		err[0] = '\0';
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || !(d = fdopendir(fd))) {
		ddp_errf(err, errlen, "%s: %s", dir, strerror(errno));
		ddp_close(&fd);
		return -1;
	}
	while ((de = readdir(d))) {
		if (shm_segment_job(de->d_name, &id) < 0)
			continue;
		keep = jobid ? id != jobid : 0;
		for (i = 0; !jobid && i < nlive && !keep; i++)
			keep = live[i] == id;
		if (keep ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) <
			    0 ||
		    !S_ISREG(st.st_mode) ||
		    (!jobid && st.st_mtime + grace > time(NULL)))
			continue;
		/* unlinkat never follows a link: at worst a name replaced
		 * since the fstatat goes, which is this job's anyway. */
		if (unlinkat(dirfd(d), de->d_name, 0) == 0) {
			(*removed)++;
		} else if (errno != ENOENT && rc == 0) {
			ddp_errf(err, errlen, "%s/%s: %s", dir, de->d_name,
				 strerror(errno));
			rc = -1;
		}
	}
	closedir(d);
	return rc;
}
