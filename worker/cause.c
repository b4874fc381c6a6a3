/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rank a failure is blamed on, written once to DDP_FAILURE_FD
 * (cause.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cause.h"
#include "ddp_util.h"
#include "failure.h"
#include "status.h"
#include "stop.h"

#define CAUSE_ENV "DDP_FAILURE_FD"

static int named;
static int noted;

/*
 * The descriptor of DDP_FAILURE_FD ("N", or "N:INODE" as the plugin sets
 * it) when it is a pipe (that pipe, with INODE), made non-blocking; else
 * -1. The inode tells the plugin's pipe from whatever a process that
 * inherited the variable, but not the descriptor, has open as N.
 */
static int
cause_fd(void)
{
	const char *v = getenv(CAUSE_ENV), *colon;
	char num[16];
	struct stat st;
	long fd, ino = -1;
	size_t n;
	int fl;

	if (!v || !*v)
		return -1;
	colon = strchr(v, ':');
	n = colon ? (size_t)(colon - v) : strlen(v);
	if (n == 0 || n >= sizeof(num))
		return -1;
	memcpy(num, v, n);
	num[n] = '\0';
	if (ddp_parse_long(num, 3, INT_MAX, &fd) < 0 ||
	    (colon && ddp_parse_long(colon + 1, 0, LONG_MAX, &ino) < 0))
		return -1;
	if (fstat((int)fd, &st) < 0 || !S_ISFIFO(st.st_mode) ||
	    (ino >= 0 && (unsigned long)ino != (unsigned long)st.st_ino))
		return -1;
	fl = fcntl((int)fd, F_GETFL);
	if (fl < 0 || (fl & O_ACCMODE) == O_RDONLY)
		return -1;
	if (!(fl & O_NONBLOCK) && fcntl((int)fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -1;
	return (int)fd;
}

void
wk_cause_name(int self, int rank, const char *host, const char *why)
{
	struct ddp_failure f;
	char line[DDP_FAILURE_NAMING_MAX];
	int fd;

	memset(&f, 0, sizeof(f));
	f.named_by = self;
	f.named_rank = rank;
	if (ddp_fmt(f.named_node, sizeof(f.named_node), "%s", host) < 0 ||
	    ddp_fmt(f.named_why, sizeof(f.named_why), "%s", why) < 0 ||
	    ddp_failure_format_naming(&f, line, sizeof(line)) < 0 ||
	    __atomic_exchange_n(&named, 1, __ATOMIC_ACQ_REL))
		return;
	fd = cause_fd();
	if (fd < 0)
		return;
	/* One write under PIPE_BUF: the line arrives whole or not at all. */
	if (write(fd, line, strlen(line)) < 0)
		wk_log(2, "%s: %s", CAUSE_ENV, strerror(errno));
}

void
wk_cause_stop(const struct ddp_stop_note *note)
{
	char line[DDP_STOP_NOTE_MAX];
	int fd;

	if (ddp_stop_note_format(note, line, sizeof(line)) < 0 ||
	    __atomic_exchange_n(&noted, 1, __ATOMIC_ACQ_REL))
		return;
	fd = cause_fd();
	if (fd < 0)
		return;
	/* One write under PIPE_BUF (DDP_STOP_NOTE_MAX is less). */
	if (write(fd, line, strlen(line)) < 0)
		wk_log(1, "%s: the stop note: %s", CAUSE_ENV, strerror(errno));
}
