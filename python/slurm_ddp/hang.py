# SPDX-License-Identifier: BSD-3-Clause
"""A hung PyTorch rank named, with its node, within DDP_TIMEOUT.

When one rank of a torch.distributed job stops making progress (a stuck
data loader, a skipped collective, a process stopped with SIGSTOP), every
other rank sits in its next collective until NCCL's or Gloo's own timeout,
10 to 30 minutes, and nothing says which rank it waits for. libddp names
such a rank within DDP_TIMEOUT; this module does the same for PyTorch.

    hb = Heartbeat().start()      # after init_process_group (env://)
    for x, y in loader:
        hb.beat()                 # the per-step call, before the step's
        ...                       # first collective
    hb.close()

slurm_ddp.Stopper does this by itself: it starts a Heartbeat (its
heartbeat attribute) and its should_stop() is the per-step call. That
call comes after optimizer.step(), when every rank has done the step: a
rank stopped (SIGSTOP) or cut off is named from that alone, but a rank
whose loader never returns the next batch is then at the same step as
the others, blocked in that step's collective. Iterating the loader
through stopper.watch(loader) counts the step when its batch arrives,
and such a rank is named too.

beat() is one in-memory write (the step number): it costs nothing
measurable. The work is done by a daemon thread in each rank, which keeps
running while the main thread is blocked inside a collective. Every
INTERVAL seconds it publishes "STEP BEAT" (BEAT counts its own
publications) under slurm_ddp/hb/RANK in the job's store: its own client
connection to the TCPStore that init_process_group's env:// started on
rank 0 (MASTER_ADDR:MASTER_PORT), so it never shares a socket with the
main thread. The first WATCHERS ranks also read every rank's entry and
name a rank when:

  - every rank not at the lowest step N is at N+1 or later and rank R has
    stood at N, behind them, for DDP_TIMEOUT seconds: R is alive (its
    thread still publishes) but does not call (its data loader is stuck,
    or it skipped a collective);
  - rank R's entry has not changed for DDP_TIMEOUT seconds while the
    others' did: R's whole process is stopped (SIGSTOP, a debugger), or
    cut off from the store's node;
  - the store itself does not answer for DDP_TIMEOUT + UNREACHABLE_GRACE
    seconds (a request that times out, not one refused: a refusal means
    rank 0's process is gone, which Slurm sees by itself): rank 0, which
    hosts it, is named "unreachable". That says only what this rank could
    not reach; this rank may be the one cut off, which is why it waits
    UNREACHABLE_GRACE longer than a hang naming: the ranks that can still
    reach the store name it first, and srun weighs the namings
    (common/failure.h, rule 2).

A world that progresses, however slowly, is never named: a rank that
moves on restarts its clock. Neither is a stall of the whole world (every
rank at the same step, every entry fresh): nobody is behind anybody, and
libddp cannot attribute that either.

The watcher that names is the lowest-numbered one that is itself fresh
and, for a rank behind, itself ahead. It prints one line in libddp's
words to stderr,

  ddp: error: hang: rank 0 (node1, pid 812) is in step 8, which rank 2
  (node3, pid 977, still in step 7) has not entered (...); the step is
  ended (DDP_TIMEOUT=300)

writes the naming line "BY names R HOST hang\\n" (common/failure.h,
ddp_failure_format_naming; "unreachable" for the store) to the pipe
DDP_FAILURE_FD names, as libddp does (worker/cause.c), and ends its own
process with status 1. slurmstepd ends the step, srun prints "ddp: rank 2
on node3 hangs (named by rank 0)", and srun --ddp-restart
--ddp-restart-on=hang runs it again on the same nodes: a hang blames no
node. HOST is the name the rank published: DDP_HOSTNAME, else its host
name.

DDP_TIMEOUT (seconds, fractions allowed, default 300) is libddp's
variable. A rank marks itself done on close() and at interpreter exit, so
that a rank still writing its output after the others left is not named.
Per watcher and INTERVAL, the store answers one set and WORLD_SIZE gets.
Needs only torch.distributed (1.13 or later).
"""

import atexit
import datetime
import os
import socket
import sys
import threading
import time

from .failure_pipe import failure_fd, write_line  # noqa: F401 (failure_fd: tests)

PREFIX = "slurm_ddp/hb/"
INTERVAL = 0.5
WATCHERS = 3
UNREACHABLE_GRACE = 1.0
# How long one store request may take before the store counts as silent.
OP_TIMEOUT = 1.0
DEFAULT_TIMEOUT = 300.0
DONE = "done"
WHYS = ("lost", "hang", "unreachable", "behind")
# common/failure.h: DDP_FAILURE_NAMING_MAX is DDP_HOSTNAME_MAX + 96.
_HOST_MAX = 255


def timeout_from_env(environ=None):
    """DDP_TIMEOUT as libddp reads it: seconds > 0 and at most a week,
    fractions allowed, 300 when unset or empty. Raises ValueError naming
    the value and what is accepted."""
    environ = os.environ if environ is None else environ
    v = environ.get("DDP_TIMEOUT", "")
    if not v:
        return DEFAULT_TIMEOUT
    try:
        t = float(v)
    except ValueError:
        t = float("nan")
    if not (0 < t <= 86400.0 * 7):
        raise ValueError(f"DDP_TIMEOUT='{v[:64]}' is not a number of "
                         "seconds greater than 0 and at most 604800 "
                         "(e.g. DDP_TIMEOUT=300)")
    return t


def _host_ok(host):
    return (0 < len(host) < _HOST_MAX
            and all(c.isascii() and (c.isalnum() or c in "._-")
                    for c in host))


def format_naming(by, named, host, why):
    """The naming line of common/failure.c's ddp_failure_format_naming,
    "BY names NAMED HOST WHY\\n". Raises ValueError where that returns -1:
    a rank outside 0-2^31-1, a rank naming itself, a host outside Slurm's
    host name syntax, a WHY other than lost, hang, unreachable, behind."""
    for r in (by, named):
        if not isinstance(r, int) or not 0 <= r <= 0x7FFFFFFF:
            raise ValueError(f"rank {r!r} is not in 0-2147483647")
    if by == named:
        raise ValueError(f"rank {by} cannot name itself")
    if not _host_ok(host):
        raise ValueError(f"host {host!r} is not a host name (letters, "
                         "digits, '.', '_', '-')")
    if why not in WHYS:
        raise ValueError(f"why {why!r} is none of {', '.join(WHYS)}")
    return f"{by} names {named} {host} {why}\n"


def write_naming(line, environ=None):
    """Writes a naming line on DDP_FAILURE_FD (failure_pipe.write_line)."""
    return write_line(line, environ)


def _own_host():
    host = os.environ.get("DDP_HOSTNAME", "")
    return host or socket.gethostname()


class Heartbeat:
    """The per-step heartbeat of one rank and, on the first WATCHERS ranks,
    the watchdog that names a hung rank (the module's docstring says how).

    Heartbeat(timeout=None, rank=None, world_size=None, host=None,
              master_addr=None, master_port=None, interval=INTERVAL)
    reads DDP_TIMEOUT, the rank and world size (torch.distributed's when
    it is initialized, else RANK and WORLD_SIZE), DDP_HOSTNAME and
    MASTER_ADDR/MASTER_PORT for what is not given. start() publishes this
    rank and starts the thread; beat(step=None) is the per-step call;
    close() marks the rank done. beat() may be called from any one thread;
    start() and close() from the main thread. A world of one rank, or one
    without MASTER_ADDR and MASTER_PORT, starts nothing (start() says why
    on stderr for the latter)."""

    def __init__(self, timeout=None, rank=None, world_size=None, host=None,
                 master_addr=None, master_port=None, interval=INTERVAL):
        self.timeout = timeout_from_env() if timeout is None else timeout
        if rank is None or world_size is None:
            r, w = _dist_rank_world()
            rank = r if rank is None else rank
            world_size = w if world_size is None else world_size
        self.rank, self.world = rank, world_size
        self.host = host or _own_host()
        self.addr = master_addr or os.environ.get("MASTER_ADDR", "")
        port = master_port or os.environ.get("MASTER_PORT", "")
        self.port = int(port) if str(port).isdigit() else 0
        self.interval = interval
        self.step = 0
        self._stop = threading.Event()
        self._thread = None
        self._store = None
        self._beats = 0

    # The per-step call: one attribute write.
    def beat(self, step=None):
        if step is None:
            self.step += 1
        else:
            self.step = step

    __call__ = beat

    def watch(self, iterable):
        """Yields iterable's items (a data loader's batches), counting a
        step as each one arrives: the point between a step's loading and
        its first collective, where a rank whose loader is stuck is seen
        behind the others. Beside Stopper.should_stop() after
        optimizer.step(), which sets the step to its own count, the two
        agree: the batch of step N+1 makes N+1, should_stop() keeps it."""
        for item in iterable:
            self.step += 1
            yield item

    def start(self):
        if self._thread or self.world < 2:
            return self
        if not self.addr or not self.port:
            print("slurm_ddp: warning: no MASTER_ADDR and MASTER_PORT "
                  "(init_process_group's env://): no rank is watched for "
                  "hangs", file=sys.stderr, flush=True)
            return self
        store = self._connect(timeout=max(self.timeout, 30.0))
        store.set(f"{PREFIX}who/{self.rank}", f"{self.host} {os.getpid()}")
        store.set(f"{PREFIX}{self.rank}", f"{self.step} 0")
        if self.rank < WATCHERS:
            # Every key a watcher reads exists from here on: its thread
            # only ever gets existing keys, each a request with a
            # timeout (in torch 1.13 an add, or a get of a key not yet
            # set, can wait past the store's timeout).
            store.wait([f"{PREFIX}who/{r}" for r in range(self.world)])
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="slurm_ddp-heartbeat")
        self._thread.start()
        atexit.register(self.close)
        return self

    def close(self):
        """Marks this rank done (it is never named after) and stops the
        thread. Idempotent; a store that does not answer is ignored."""
        if not self._thread or self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(timeout=2 * OP_TIMEOUT + self.interval)
        try:
            self._connect(OP_TIMEOUT).set(f"{PREFIX}{self.rank}", DONE)
        except Exception:  # noqa: BLE001 - the store went first: nothing to say
            pass

    def _connect(self, timeout=OP_TIMEOUT):
        import torch.distributed as dist

        args = (self.addr, self.port, None, False,
                datetime.timedelta(seconds=timeout))
        try:
            # A client needs no libuv, which some builds lack (Debian's
            # PyTorch 2: "use_libuv was requested but PyTorch was built
            # without libuv support"), whatever USE_LIBUV says.
            return dist.TCPStore(*args, wait_for_workers=False,
                                 use_libuv=False)
        except TypeError:  # PyTorch before use_libuv (1.13)
            return dist.TCPStore(*args, wait_for_workers=False)

    # --- the thread ---------------------------------------------------

    def _run(self):
        watcher = self.rank < WATCHERS
        w = _Watch(self) if watcher else None
        last_ok = time.monotonic()
        fail_since = None
        while not self._stop.is_set():
            t = time.monotonic()
            try:
                if self._store is None:
                    self._store = self._connect()
                self._beats += 1
                self._store.set(f"{PREFIX}{self.rank}",
                                f"{self.step} {self._beats}")
                if watcher:
                    w.read(self._store)
                last_ok, fail_since = time.monotonic(), None
            except Exception:  # noqa: BLE001 - torch raises RuntimeError and others
                # A client that timed out may read a late answer as the
                # next one's: start a new one.
                self._store = None
                now = time.monotonic()
                if now - t >= 0.9 * OP_TIMEOUT:
                    fail_since = fail_since or last_ok
                else:
                    # Refused: rank 0's process is gone, which Slurm sees.
                    fail_since = None
                    last_ok = now
                if (watcher and fail_since is not None and self.rank != 0
                        and now - fail_since >= self.timeout
                        + UNREACHABLE_GRACE):
                    w.name_unreachable(now - fail_since)
                if fail_since is not None:
                    continue
            else:
                if watcher:
                    w.decide()
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - t)))


class _Watch:
    """A watcher's view of every rank's entry, with its own clock."""

    def __init__(self, hb):
        self.hb = hb
        self.who = {}
        self.vals = {}
        self.beat_at = {}
        self.behind = {}  # rank -> (step, since)

    def read(self, store):
        hb = self.hb
        now = time.monotonic()
        for r in range(hb.world):
            if r not in self.who:
                host, _, pid = store.get(f"{PREFIX}who/{r}").decode() \
                    .partition(" ")
                self.who[r] = (host, pid)
            v = store.get(f"{PREFIX}{r}").decode()
            if v != self.vals.get(r):
                self.beat_at[r] = now
            self.vals[r] = v

    def decide(self):
        hb = self.hb
        now = time.monotonic()
        steps = {}
        for r, v in self.vals.items():
            if v != DONE:
                steps[r] = int(v.split()[0])
        if hb.rank not in steps or len(steps) < 2:
            return
        low = min(steps.values())
        ahead = any(s > low for s in steps.values())
        for r, s in steps.items():
            if ahead and s == low:
                if self.behind.get(r, (None,))[0] != s:
                    self.behind[r] = (s, now)
            else:
                self.behind.pop(r, None)
        # A rank publishes every interval: the silence begins one
        # interval after the last change seen.
        silent = [r for r in sorted(steps) if r != hb.rank
                  and now - self.beat_at[r] >= hb.timeout + hb.interval]
        if silent:
            namer = min((x for x in steps if x < WATCHERS and x not in silent),
                        default=None)
            if namer == hb.rank:
                r = silent[0]
                self.name(r, "hang", steps,
                          f"is in step {steps[hb.rank]}, and rank {r} "
                          f"({self._who(r)}, last heard in step {steps[r]}) has "
                          f"been silent for {now - self.beat_at[r]:.1f} s "
                          "(stopped, or cut off by the network?)")
            return
        # A rank behind whose entry has gone stale is stopped, not stuck
        # in its loop: the silence names it, an interval later.
        stuck = [r for r in sorted(self.behind)
                 if now - self.behind[r][1] >= hb.timeout
                 and now - self.beat_at[r] < 3 * hb.interval]
        if not stuck or steps[hb.rank] == low:
            return
        namer = min((x for x in steps if x < WATCHERS and steps[x] > low),
                    default=None)
        if namer != hb.rank:
            return
        r = stuck[0]
        self.name(r, "hang", steps,
                  f"is in step {steps[hb.rank]}, which rank {r} "
                  f"({self._who(r)}, still in step {low}) has not entered "
                  "(alive but not calling: a stuck data loader, a skipped "
                  "collective?)")

    def _who(self, r):
        host, pid = self.who.get(r, ("?", "?"))
        return f"{host}, pid {pid}"

    def name_unreachable(self, for_s):
        hb = self.hb
        host, pid = self.who.get(0, (hb.addr, "?"))
        self.name(0, "unreachable", {hb.rank: hb.step},
                  f"is in step {hb.step} and has not reached the job's store "
                  f"on rank 0 ({host}, pid {pid}) for {for_s:.1f} s: rank 0 "
                  "is unreachable (stopped, or this rank is cut off by the "
                  "network?)")

    def name(self, r, why, steps, what):
        hb = self.hb
        host = self.who.get(r, (hb.addr, ""))[0]
        print(f"ddp: error: hang: rank {hb.rank} ({hb.host}, pid "
              f"{os.getpid()}) {what}; the step is ended "
              f"(DDP_TIMEOUT={hb.timeout:g})", file=sys.stderr, flush=True)
        try:
            write_naming(format_naming(hb.rank, r, host, why))
        except ValueError as e:
            print(f"ddp: warning: no naming line for srun: {e}",
                  file=sys.stderr, flush=True)
        try:
            sys.stdout.flush()
        finally:
            os._exit(1)


def _dist_rank_world():
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except ImportError:
        pass
    return (int(os.environ.get("RANK", "0")),
            int(os.environ.get("WORLD_SIZE", "1")))
