# SPDX-License-Identifier: BSD-3-Clause
"""An agreed stop for PyTorch programs: every rank stops after the same
step, checkpointed, before the job's time limit, on preemption, or on a
signal that reached one node only.

This module mirrors the contract of the C side exactly, common/stop.h
(the same environment variables, the same stop decision, the same stop
note, the same exit status); libddp programs get the same behaviour from
ddp_should_stop(). A change to one is a change to both.

Three lines in a training script::

    from slurm_ddp import Stopper
    stopper = Stopper()                      # after init_process_group
    ...
    optimizer.step()
    if stopper.should_stop():                # every rank, every step
        if rank == 0:
            save_checkpoint(...)
        stopper.exit()                       # note, teardown, exit 75

What a rank wants. A rank wants to stop when
- it gets SIGTERM (preemption, the time limit, scancel), SIGUSR1, SIGUSR2
  or SIGHUP (srun --signal, scancel --signal). A handler is installed
  only for a signal whose disposition is still the default, and only
  when DDP_STOP_BEFORE is set and not "0" (srun --ddp sets it): a
  program's own handler is never replaced; it calls request();
- the program calls request();
- the job's end time (DDP_END_TIME, then DDP_END_TIME_FILE re-read at
  most every 5 s: the time limit may move) is closer than the margin:
  under DDP_STOP_BEFORE=auto room for two more steps, one and a half
  times the longest checkpoint measured, and 15 s for the ranks to exit
  and srun to requeue the job (stop_margin); under DDP_STOP_BEFORE=SECS that many seconds.

How the ranks agree. should_stop() is the one call per step. Every K
steps it all_reduces (MAX) a tiny tensor on the process group's device:
this rank's wish, and its bounds on K. Every rank gets the same answer
at the same step, and from then on should_stop() returns True. K is
chosen so that the all_reduce costs at most 1 % of a step (both
measured: the largest K any rank needs for that) unless a stop would
then come more than half a second of steps late (the smallest K any
rank allows for that wins); agreed in the same all_reduce, every rank
switches K at the same step. A rank that wants to stop for the time
counts the K steps it may have to wait.

What the program does then. Rank 0 writes its checkpoint (time it with
``stopper.checkpointing()``, or let exit() take the time since the
agreement), then every rank calls exit(): it writes the stop note on
DDP_FAILURE_FD, destroys the process group and exits with status 75
(STOP_EXIT_STATUS). srun --ddp takes a task that exits 75 after its note
for a clean stop: not a failure, no blame, no restart.

Periodic checkpoints should be timed too (``with
stopper.checkpointing(): save(...)``), so that the margin before the end
time knows how long a checkpoint takes before the last one is due.

Outside a --ddp step (DDP_STOP_BEFORE unset) nothing stops but a
request(); without an initialised process group the Stopper decides for
this process alone. Construct it in the main thread: Python runs signal
handlers there only.

Hooks for other parts of slurm_ddp: add_step_callback(fn) has fn(step)
called at the start of every should_stop(), add_exit_callback(fn) has
fn() called by exit() before the process group is destroyed.
"""

import contextlib
import math
import os
import re
import signal
import sys
import threading
import time

from .failure_pipe import failure_fd, write_line  # noqa: F401 (failure_fd: tests)

# common/stop.h
END_TIME_ENV = "DDP_END_TIME"
END_TIME_FILE_ENV = "DDP_END_TIME_FILE"
STOP_BEFORE_ENV = "DDP_STOP_BEFORE"
END_TIME_READ_SECONDS = 5
STOP_EXIT_STATUS = 75
STOP_EXIT_SECONDS = 15
STOP_NOTE_MAX = 128
STOP_BEFORE_MAX = 604800
END_TIME_MAX = 99999999999
# worker/cause.h

# The words of ddp_stop_why_name, in the order of enum ddp_stop_why
# (DDP_STOP_NONE, 0, has none).
WHY_WORDS = ("time-limit", "sigterm", "sigusr1", "sigusr2", "sighup",
             "request", "agreed")
SIGNAL_WHY = {signal.SIGTERM: "sigterm", signal.SIGUSR1: "sigusr1",
              signal.SIGUSR2: "sigusr2", signal.SIGHUP: "sighup"}

# The share of a step the agreement may cost, and the most seconds of
# steps a wish may wait for the next agreement.
TARGET_OVERHEAD = 0.01
MAX_DELAY_SECONDS = 0.5
# Agreements made every step before K is measured; the weight of a new
# measurement in the running means.
WARM_AGREEMENTS = 3
EMA_WEIGHT = 0.2

_INT_RE = re.compile(r"[+-]?[0-9]+")
_LONG_MAX = 2**63 - 1
_INT_MAX = 2**31 - 1


def _parse_long(text, low, high):
    """ddp_parse_long: the whole text an integer from low to high (an
    optional sign, then digits only); None otherwise."""
    if not _INT_RE.fullmatch(text):
        return None
    v = int(text)
    return v if low <= v <= high else None


class StopBefore:
    """What DDP_STOP_BEFORE says (struct ddp_stop_before)."""

    def __init__(self, off=False, automatic=False, secs=0.0):
        self.off, self.automatic, self.secs = off, automatic, secs

    def __repr__(self):
        return (f"StopBefore(off={self.off}, automatic={self.automatic}, "
                f"secs={self.secs})")


def parse_stop_before(value):
    """ddp_stop_before_parse: "auto", "0" or whole seconds from 1 to
    604800, no sign. Raises ValueError naming the value and what is
    accepted."""
    if value == "auto":
        return StopBefore(automatic=True)
    v = None if value[:1] in ("+", "-") else _parse_long(value, 0,
                                                          STOP_BEFORE_MAX)
    if v is None:
        raise ValueError(f"{STOP_BEFORE_ENV}: invalid value '{value[:64]}' "
                         "(use auto, 0 to turn stopping off, or whole "
                         f"seconds from 1 to {STOP_BEFORE_MAX})")
    return StopBefore(off=True) if v == 0 else StopBefore(secs=float(v))


def parse_end(text):
    """ddp_stop_end_parse: whole Unix seconds from 1 to END_TIME_MAX, no
    sign, a trailing newline allowed; None for anything else."""
    if text.endswith("\n"):
        text = text[:-1]
    if not text or len(text) >= 24 or text[0] in ("+", "-"):
        return None
    v = _parse_long(text, 1, END_TIME_MAX)
    return None if v is None else float(v)


def stop_margin(step_s, ckpt_s):
    """ddp_stop_margin: 2 * step_s + 1.5 * ckpt_s + 15 seconds (a negative
    time counts as 0)."""
    return 2 * max(step_s, 0) + 1.5 * max(ckpt_s, 0) + STOP_EXIT_SECONDS


def stop_due(before, now, end, step_s, ckpt_s):
    """ddp_stop_due: whether now plus the margin reaches end."""
    if before.off or end <= 0:
        return False
    margin = stop_margin(step_s, ckpt_s) if before.automatic else before.secs
    return margin > 0 and now + margin >= end


def format_note(rank, step, why, ckpt_ms):
    """ddp_stop_note_format: "stop rank=R step=S why=WHY ckpt_ms=M\\n".
    Raises ValueError for a field out of range or a line too long."""
    if (not isinstance(rank, int) or not 0 <= rank <= _INT_MAX
            or not isinstance(step, int) or not 0 <= step <= _LONG_MAX
            or not isinstance(ckpt_ms, int) or not 0 <= ckpt_ms <= _LONG_MAX
            or why not in WHY_WORDS):
        raise ValueError(f"no stop note for rank={rank!r} step={step!r} "
                         f"why={why!r} ckpt_ms={ckpt_ms!r}")
    line = f"stop rank={rank} step={step} why={why} ckpt_ms={ckpt_ms}\n"
    if len(line) + 1 > STOP_NOTE_MAX:
        raise ValueError(f"stop note longer than {STOP_NOTE_MAX - 1}: {line!r}")
    return line


def write_note(line):
    """Writes a stop note on DDP_FAILURE_FD (failure_pipe.write_line)."""
    return write_line(line)


class Stopper:
    """The agreed stop of one process group (see the module's text).

    group: the process group (default: the default group); device: where
    the agreement's tensor lives (default: the current CUDA device under
    NCCL, else the CPU); stop_before: a DDP_STOP_BEFORE value that
    overrides the environment (e.g. "auto" outside srun --ddp). Raises
    ValueError for a malformed DDP_STOP_BEFORE or DDP_END_TIME.

    Attributes once should_stop() returned True: why (this rank's own
    reason, or "agreed" when another rank's), stop_step (the steps made
    in this run at the agreement). Measurements: k, step_seconds,
    agreement_seconds, overhead (the agreement's share of a step),
    checkpoint_seconds (the longest checkpoint timed).
    """

    def __init__(self, group=None, device=None, stop_before=None):
        import torch
        import torch.distributed as dist

        self._torch, self._dist, self._group = torch, dist, group
        self._distributed = dist.is_available() and dist.is_initialized()
        self.rank = dist.get_rank(group) if self._distributed else 0
        if device is None and self._distributed:
            if dist.get_backend(group) == "nccl":
                device = torch.device("cuda", torch.cuda.current_device())
        self._device = device or torch.device("cpu")

        if stop_before is None:
            stop_before = os.environ.get(STOP_BEFORE_ENV)
        self._before = (parse_stop_before(stop_before)
                        if stop_before is not None else StopBefore(off=True))
        self._end = 0.0
        text = os.environ.get(END_TIME_ENV)
        if text:
            end = parse_end(text)
            if end is None:
                raise ValueError(f"{END_TIME_ENV}={text!r}: not whole Unix "
                                 "seconds")
            self._end = end
        self._end_file = os.environ.get(END_TIME_FILE_ENV) or None
        self._end_read = -math.inf

        self._wish = None
        self.why = None
        self.stop_step = None
        self._agreed_at = None
        self.steps = 0
        self.agreements = 0
        self.k = 1
        self._since = 0
        self._last = None
        self._ar_last = 0.0
        self.step_seconds = 0.0
        self.agreement_seconds = 0.0
        self.checkpoint_seconds = 0.0
        self._step_cbs, self._exit_cbs = [], []

        # A hung rank named within DDP_TIMEOUT (hang.py): should_stop()
        # is its per-step call. Only under env://, which it shares.
        self.heartbeat = None
        if (self._distributed and dist.get_world_size() > 1
                and os.environ.get("MASTER_ADDR")
                and os.environ.get("MASTER_PORT")):
            from .hang import Heartbeat

            hb = Heartbeat()
            try:
                hb.start()
            except Exception as e:  # noqa: BLE001 - the store's errors vary
                # The stop works without it; say what is missing.
                print(f"slurm_ddp: warning: the job's store at "
                      f"{hb.addr}:{hb.port} did not answer ({e}): no rank is "
                      "watched for hangs", file=sys.stderr, flush=True)
            else:
                self.heartbeat = hb
                self.add_step_callback(hb.beat)
                self.add_exit_callback(hb.close)

        self._installed = {}
        if (not self._before.off
                and threading.current_thread() is threading.main_thread()):
            for sig in SIGNAL_WHY:
                if signal.getsignal(sig) == signal.SIG_DFL:
                    self._installed[sig] = signal.signal(sig, self._on_signal)

    # ---- what a rank wants
    def _on_signal(self, sig, frame):
        if self._wish is None:
            self._wish = SIGNAL_WHY.get(sig, "request")

    def request(self):
        """Asks for a stop at the next step every rank agrees on; a
        program's own signal handler may call it."""
        if self._wish is None:
            self._wish = "request"

    def _end_time(self, now_mono):
        if self._end_file and now_mono - self._end_read >= END_TIME_READ_SECONDS:
            self._end_read = now_mono
            try:
                with open(self._end_file, encoding="ascii") as f:
                    end = parse_end(f.read(64))
            except (OSError, UnicodeDecodeError):
                end = None
            if end is not None:
                self._end = end
        return self._end

    def _time_wish(self, now_mono, k):
        if self._before.off:
            return None
        end = self._end_time(now_mono)
        # The wish is heard at the next agreement only, k steps on.
        now = time.time() + k * self.step_seconds
        if stop_due(self._before, now, end, self.step_seconds,
                    self.checkpoint_seconds):
            return "time-limit"
        return None

    # ---- the per-step call
    def add_step_callback(self, fn):
        """fn(step) is called at the start of every should_stop()."""
        self._step_cbs.append(fn)

    def add_exit_callback(self, fn):
        """fn() is called by exit() before the process group goes."""
        self._exit_cbs.append(fn)

    def watch(self, loader):
        """The loader's batches, each counted by the heartbeat as it
        arrives, so that a rank whose loader is stuck is named (hang.py);
        the loader itself when no heartbeat runs."""
        return self.heartbeat.watch(loader) if self.heartbeat else loader

    def _on_step(self, step):
        for fn in self._step_cbs:
            fn(step)

    def _propose_k(self):
        """The fewest steps between agreements that keep them under
        TARGET_OVERHEAD of a step, and the most that keep a stop under
        MAX_DELAY_SECONDS late, as this rank measures them."""
        if self.agreements < WARM_AGREEMENTS or self.step_seconds <= 0:
            return 1, 1
        cost = math.ceil(self.agreement_seconds
                         / (TARGET_OVERHEAD * self.step_seconds))
        late = math.floor(MAX_DELAY_SECONDS / self.step_seconds)
        return max(1, cost), max(1, late)

    def _agree(self, wish, cost, late):
        """One MAX all_reduce: whether any rank wishes to stop, and the K
        of every rank: the largest cost bound, unless the smallest
        lateness bound is smaller (a stop in time comes first)."""
        if self._distributed:
            t = self._torch.tensor([wish, cost, -late],
                                   dtype=self._torch.int64,
                                   device=self._device)
            self._dist.all_reduce(t, op=self._dist.ReduceOp.MAX,
                                  group=self._group)
            wish, cost, late = t.tolist()
            late = -late
        return wish, max(1, min(cost, late))

    def should_stop(self):
        """The one call per step, on every rank, after optimizer.step():
        True when the ranks agreed that this step is the last one (the
        same step on every rank, and from then on)."""
        now = time.monotonic()
        self.steps += 1
        self._on_step(self.steps)
        if self.why is not None:
            return True
        if self._last is not None:
            step = max(now - self._last - self._ar_last, 0.0)
            self.step_seconds = (step if self.step_seconds == 0 else
                                 self.step_seconds
                                 + EMA_WEIGHT * (step - self.step_seconds))
        self._last, self._ar_last = now, 0.0
        self._since += 1
        if self._since < self.k:
            return False
        self._since = 0
        cost, late = self._propose_k()
        wish = self._wish or self._time_wish(now, max(self.k, late))
        t0 = time.monotonic()
        agreed, k = self._agree(1 if wish else 0, cost, late)
        t1 = time.monotonic()
        self._ar_last = t1 - t0
        self.agreement_seconds = (
            self._ar_last if self.agreements == 0 else self.agreement_seconds
            + EMA_WEIGHT * (self._ar_last - self.agreement_seconds))
        self.agreements += 1
        self.k = int(k)
        if not agreed:
            return False
        self.why = wish or "agreed"
        self.stop_step = self.steps
        self._agreed_at = t1
        return True

    @property
    def overhead(self):
        """The agreement's measured share of a step (0 before measured)."""
        if self.step_seconds <= 0:
            return 0.0
        return self.agreement_seconds / (self.k * self.step_seconds)

    # ---- checkpoints and the end
    @contextlib.contextmanager
    def checkpointing(self):
        """Times a checkpoint's save: ``with stopper.checkpointing():
        save(...)``. The longest one counts in the margin."""
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.checkpoint_seconds = max(self.checkpoint_seconds,
                                          time.monotonic() - t0)

    def close(self):
        """Gives back the signal dispositions this Stopper replaced and
        marks this rank done for the heartbeat."""
        if self.heartbeat:
            self.heartbeat.close()
        for sig, old in self._installed.items():
            signal.signal(sig, old)
        self._installed = {}

    def exit(self, status=STOP_EXIT_STATUS):
        """After should_stop() returned True and the checkpoint is saved,
        on every rank: writes the stop note (rank, steps, why, ckpt_ms
        since the agreement) on DDP_FAILURE_FD, destroys the process
        group and exits with status 75. Raises RuntimeError before an
        agreed stop: a rank that left alone would block the others."""
        if self.why is None:
            raise RuntimeError("slurm_ddp: Stopper.exit() before "
                               "should_stop() returned True")
        ckpt = time.monotonic() - self._agreed_at
        self.checkpoint_seconds = max(self.checkpoint_seconds, ckpt)
        write_note(format_note(self.rank, self.stop_step, self.why,
                               int(ckpt * 1000)))
        for fn in self._exit_cbs:
            fn()
        self.close()
        if self._distributed and self._dist.is_initialized():
            self._dist.destroy_process_group()
        sys.stdout.flush()
        sys.stderr.flush()
        sys.exit(status)
