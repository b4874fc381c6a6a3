# SPDX-License-Identifier: BSD-3-Clause
"""The task's end of the pipe slurmstepd reads a failed or stopped rank's
word on (DDP_FAILURE_FD, worker/cause.h): the one place the Python module
finds it and writes to it. The stop note (stop.py) and the naming of a
hung rank (hang.py) are written here; what they say is formatted by their
own modules, as common/stop.c and common/failure.c do for libddp."""

import fcntl
import os
import stat

FAILURE_FD_ENV = "DDP_FAILURE_FD"
_INT_MAX = 0x7FFFFFFF
_LONG_MAX = 0x7FFFFFFFFFFFFFFF


def failure_fd(environ=None):
    """The descriptor DDP_FAILURE_FD names ("N", or "N:INODE" as the
    plugin sets it) when it is a pipe open for writing (that pipe, with
    INODE), made non-blocking; else None. As worker/cause.c: the inode
    tells the plugin's pipe from whatever a process that inherited the
    variable, but not the descriptor, has open as N."""
    environ = os.environ if environ is None else environ
    num, colon, ino_text = environ.get(FAILURE_FD_ENV, "").partition(":")
    if (not num.isdigit() or len(num) >= 16
            or (colon and (not ino_text.isdigit() or len(ino_text) > 19))):
        return None
    fd = int(num)
    ino = int(ino_text) if colon else -1
    if not 3 <= fd <= _INT_MAX or ino > _LONG_MAX:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISFIFO(st.st_mode) or (ino >= 0 and ino != st.st_ino):
            return None
        fl = fcntl.fcntl(fd, fcntl.F_GETFL)
        if fl & os.O_ACCMODE == os.O_RDONLY:
            return None
        if not fl & os.O_NONBLOCK:
            fcntl.fcntl(fd, fcntl.F_SETFL, fl | os.O_NONBLOCK)
    except OSError:
        return None
    return fd


def write_line(line, environ=None):
    """Writes line on DDP_FAILURE_FD in one write (under PIPE_BUF: it
    arrives whole or not at all). True when written; False when there is
    no such pipe, or it is full."""
    fd = failure_fd(environ)
    if fd is None:
        return False
    try:
        return os.write(fd, line.encode()) == len(line)
    except OSError:
        return False
