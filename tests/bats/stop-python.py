# SPDX-License-Identifier: BSD-3-Clause
"""The tests of python/slurm_ddp/stop.py (tests/bats/stop-python.bats):
gloo ranks on loopback, started as srun --ddp would start them (RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT and DDP_STOP_BEFORE).

    stop-python.py CASE       runs one case; status 0 when it holds,
                              else 1 with what went wrong
    stop-python.py worker ... one rank (started by the cases)

Every wait is on an event (a line a rank prints, a rank's exit), bounded
by a deadline that only a broken stop reaches.
"""

import argparse
import os
import queue
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

from slurm_ddp import stop  # noqa: E402

DEADLINE = int(os.environ.get("STOP_TEST_DEADLINE", "120"))


def fail(msg):
    print(f"stop-python: {msg}", flush=True)
    sys.exit(1)


# ---------------------------------------------------------------- worker
def worker(args):
    import torch
    import torch.distributed as dist

    state = {"stopper": None}

    def mine(sig, frame):
        print("own handler", flush=True)
        if state["stopper"] is not None:
            state["stopper"].request()

    if args.own_handler:
        signal.signal(signal.SIGTERM, mine)
    dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank()
    grad = torch.ones(1024)
    w = torch.randn(64, 64)

    def label(sig):
        h = signal.getsignal(sig)
        if h == signal.SIG_DFL:
            return "default"
        if h is mine:
            return "own"
        if getattr(h, "__self__", None) is state["stopper"]:
            return "stopper"
        return "other"

    for trial in range(args.trials):
        stopper = state["stopper"] = stop.Stopper()
        handlers = " ".join(f"{n}={label(s)}"
                            for s, n in stop.SIGNAL_WHY.items())
        print(f"trial {trial} ready rank {rank} handlers {handlers}", flush=True)
        while True:
            # A step of data-parallel training in small: some compute and
            # the gradients' all_reduce, which keeps the ranks in step.
            w = torch.tanh(w @ w) * 0.5
            dist.all_reduce(grad)
            grad.fill_(1.0)
            if args.request_at and stopper.steps + 1 == args.request_at and rank == 0:
                stopper.request()
            if stopper.should_stop():
                break
        print(f"trial {trial} stopped rank {rank} step {stopper.stop_step} "
              f"why {stopper.why} at {time.time():.3f} k {stopper.k} "
              f"step_us {stopper.step_seconds * 1e6:.0f} "
              f"agreement_us {stopper.agreement_seconds * 1e6:.0f} "
              f"overhead {stopper.overhead * 100:.3f}%", flush=True)
        if trial + 1 < args.trials:
            stopper.close()
            dist.barrier()
    if args.exit:
        stopper.exit()
    stopper.close()
    dist.barrier()
    dist.destroy_process_group()


# ----------------------------------------------------------------- ranks
def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Ranks:
    """N worker ranks; their lines arrive on one queue as (rank, line)."""

    def __init__(self, n, worker_args, env=None, pass_fds=(), fd_env=None):
        port = free_port()
        self.lines = queue.Queue()
        self.backlog = []
        self.procs = []
        self.out = [[] for _ in range(n)]
        for r in range(n):
            e = dict(os.environ, RANK=str(r), WORLD_SIZE=str(n),
                     LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                     MASTER_PORT=str(port), USE_LIBUV="0")
            e.pop("DDP_FAILURE_FD", None)
            e.update(env or {})
            if fd_env and r in fd_env:
                e["DDP_FAILURE_FD"] = fd_env[r]
            p = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "worker"]
                + worker_args, env=e, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, text=True, pass_fds=pass_fds)
            self.procs.append(p)
            threading.Thread(target=self._read, args=(r, p),
                             daemon=True).start()

    def _read(self, r, p):
        for line in p.stdout:
            self.out[r].append(line)
            self.lines.put((r, line.rstrip("\n")))
        self.lines.put((r, None))

    def expect(self, pred, count, what):
        """The first count lines for which pred(rank, line) is true, in
        the order they came (the others are kept for later); fails on a
        rank's end or the deadline."""
        got, rest = [], []
        for r, line in self.backlog:
            (got if pred(r, line) and len(got) < count else rest).append(
                (r, line))
        self.backlog = rest
        end = time.monotonic() + DEADLINE
        while len(got) < count:
            try:
                r, line = self.lines.get(timeout=max(end - time.monotonic(), 0))
            except queue.Empty:
                self.kill()
                fail(f"no {what} within {DEADLINE} s; the ranks said:\n"
                     + "".join(f"{r}: {line}" for r in range(len(self.out))
                               for line in self.out[r][-3:]))
            if line is None:
                self.kill()
                fail(f"rank {r} ended before {what}: "
                     + "".join(self.out[r][-15:]))
            if pred(r, line):
                got.append((r, line))
            else:
                # A line of what comes next, from a rank that is ahead.
                self.backlog.append((r, line))
        return got

    def wait(self):
        return [p.wait(timeout=DEADLINE) for p in self.procs]

    def kill(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()


def stopped_lines(ranks, trial, n):
    got = ranks.expect(lambda r, l: l.startswith(f"trial {trial} stopped "),
                       n, f"stop of trial {trial}")
    res = {}
    for r, line in got:
        f = line.split()[3:]
        kv = dict(zip(f[::2], f[1::2]))
        res[r] = {"step": int(kv["step"]), "why": kv["why"],
                  "at": float(kv["at"]), "k": int(kv["k"]),
                  "step_us": int(kv["step_us"]),
                  "agreement_us": int(kv["agreement_us"]),
                  "overhead": kv["overhead"]}
    return res


def ready(ranks, trial, n):
    return ranks.expect(lambda r, l: l.startswith(f"trial {trial} ready "),
                        n, f"trial {trial} ready")


# ----------------------------------------------------------------- cases
def case_signal_one(n=4, trials=20):
    """SIGUSR1 to one rank at a random moment: every rank stops after the
    same step, the signalled one for sigusr1, the others as agreed."""
    far = int(time.time()) + 3600
    ranks = Ranks(n, ["--trials", str(trials)],
                  env={"DDP_STOP_BEFORE": "auto", "DDP_END_TIME": str(far)})
    same = 0
    ks, overheads, lags = [], [], []
    for t in range(trials):
        ready(ranks, t, n)
        target = random.randrange(n)
        # The random moment: a stimulus, not a wait for something.
        time.sleep(random.uniform(0, 0.3))
        sent = time.time()
        os.kill(ranks.procs[target].pid, signal.SIGUSR1)
        res = stopped_lines(ranks, t, n)
        steps = {v["step"] for v in res.values()}
        whys = [res[r]["why"] for r in range(n)]
        want = ["sigusr1" if r == target else "agreed" for r in range(n)]
        if len(steps) == 1 and whys == want:
            same += 1
        else:
            print(f"trial {t}: rank {target} signalled: steps "
                  f"{[res[r]['step'] for r in range(n)]} whys {whys}")
        ks.append(res[0]["k"])
        overheads.append(res[0]["overhead"])
        lags.append(max(v["at"] for v in res.values()) - sent)
    rc = ranks.wait()
    print(f"# {same} of {trials} trials: every rank stopped after the same "
          "step")
    print(f"# agreement: K {min(ks)}..{max(ks)} steps, per-step overhead "
          f"{', '.join(overheads[-3:])} (last trials: step "
          f"{res[0]['step_us']} us, all_reduce {res[0]['agreement_us']} us); "
          f"signal to stop {min(lags) * 1e3:.0f}..{max(lags) * 1e3:.0f} ms")
    if same != trials or rc != [0] * n:
        fail(f"{same} of {trials} trials agreed; exit statuses {rc}")


def case_end_time():
    """The end time moved near (DDP_END_TIME_FILE rewritten, as srun does
    for scontrol update TimeLimit): the ranks stop before it, for the
    time, at the same step, no earlier than the margin asks."""
    n = 3
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, ".ddp-end-time")
        far = int(time.time()) + 3600
        with open(path, "w") as f:
            f.write(f"{far}\n")
        ranks = Ranks(n, ["--trials", "1"], env={
            "DDP_STOP_BEFORE": "auto", "DDP_END_TIME": str(far),
            "DDP_END_TIME_FILE": path})
        ready(ranks, 0, n)
        end = int(time.time()) + 22
        with open(path + ".new", "w") as f:
            f.write(f"{end}\n")
        os.replace(path + ".new", path)
        res = stopped_lines(ranks, 0, n)
        rc = ranks.wait()
    steps = {v["step"] for v in res.values()}
    at = max(v["at"] for v in res.values())
    print(f"# end time in 22 s: stopped {end - at:.1f} s before it, at step "
          f"{steps}, whys {[res[r]['why'] for r in range(n)]}")
    if len(steps) != 1 or rc != [0] * n:
        fail(f"steps {steps}, exit statuses {rc}")
    if "time-limit" not in [v["why"] for v in res.values()]:
        fail("no rank stopped for the time")
    # The margin: 15 s and two steps (no checkpoint timed), less the K
    # steps of the agreement and a busy host's delays; the file is read
    # at most every 5 s.
    if not at < end - 2:
        fail(f"stopped at {at:.3f}, later than the margin before {end}")
    if at < end - 15 - 5 - 1:
        fail(f"stopped at {at:.3f}, long before the margin before {end}")


def case_off():
    """DDP_STOP_BEFORE=0 (and unset): no handler; SIGUSR1 kills as ever."""
    for env in ({"DDP_STOP_BEFORE": "0"}, {}):
        os.environ.pop("DDP_STOP_BEFORE", None)
        ranks = Ranks(2, ["--trials", "1"], env=env)
        got = ready(ranks, 0, 2)
        for r, line in got:
            if "sigterm=default sigusr1=default sigusr2=default sighup=default" not in line:
                ranks.kill()
                fail(f"{env}: rank {r}: {line}")
        os.kill(ranks.procs[1].pid, signal.SIGUSR1)
        if ranks.procs[1].wait(timeout=DEADLINE) != -signal.SIGUSR1:
            ranks.kill()
            fail(f"{env}: SIGUSR1 did not end rank 1 as its default does")
        ranks.kill()
        ranks.wait()
    print("# DDP_STOP_BEFORE=0 and unset: no handler, SIGUSR1 ends the rank")


def case_own_handler():
    """A program's own SIGTERM handler is kept (and asks the stop);
    the other signals get the Stopper's."""
    n = 3
    ranks = Ranks(n, ["--trials", "1", "--own-handler"],
                  env={"DDP_STOP_BEFORE": "auto"})
    for r, line in ready(ranks, 0, n):
        if "sigterm=own sigusr1=stopper sigusr2=stopper sighup=stopper" not in line:
            ranks.kill()
            fail(f"rank {r}: {line}")
    os.kill(ranks.procs[2].pid, signal.SIGTERM)
    ranks.expect(lambda r, l: r == 2 and l == "own handler", 1, "own handler")
    res = stopped_lines(ranks, 0, n)
    rc = ranks.wait()
    if [res[r]["why"] for r in range(n)] != ["agreed", "agreed", "request"] \
            or len({v["step"] for v in res.values()}) != 1 or rc != [0] * n:
        fail(f"stops {res}, exit statuses {rc}")
    print("# own SIGTERM handler kept; it asked the stop, every rank agreed")


def case_note():
    """exit(): the stop note on DDP_FAILURE_FD ("N:INODE" of a pipe), in
    ddp_stop_note_format's form, and status 75; nothing on a descriptor
    that is no pipe or another pipe. Prints the notes (for a parser)."""
    n = 3
    rd, wr = os.pipe()
    other_rd, other_wr = os.pipe()
    fd_file = tempfile.TemporaryFile()
    ino = os.fstat(wr).st_ino
    fds = {0: f"{wr}:{ino}", 1: f"{other_wr}:{ino}",
           2: f"{fd_file.fileno()}"}
    ranks = Ranks(n, ["--trials", "1", "--request-at", "3", "--exit"],
                  env={"DDP_STOP_BEFORE": "auto"},
                  pass_fds=(wr, other_wr, fd_file.fileno()), fd_env=fds)
    os.close(wr)
    res = stopped_lines(ranks, 0, n)
    rc = ranks.wait()
    os.close(other_wr)
    note = os.read(rd, 4096).decode()
    os.set_blocking(other_rd, False)
    try:
        other = os.read(other_rd, 4096)
    except BlockingIOError:
        other = b""
    fd_file.seek(0)
    if rc != [75] * n:
        fail(f"exit statuses {rc}, want 75 each")
    want = stop.format_note(0, 3, "request", 0)
    head = want.rsplit("ckpt_ms=", 1)[0]
    if not (note.startswith(head) and note.endswith("\n")
            and note.count("\n") == 1
            and note[len(head) + len("ckpt_ms="):-1].isdigit()):
        fail(f"note {note!r}, want {want!r} with some ckpt_ms")
    if other or fd_file.read():
        fail("a note went to another pipe or to a file")
    if res[0]["step"] != 3:
        fail(f"stopped at {res[0]['step']}, requested at 3")
    sys.stdout.write(note)
    print("# note", note.strip())


def case_contract():
    """The pure functions against common/stop.h's words."""
    s = stop
    checks = [
        (s.parse_stop_before("auto").automatic, True),
        (s.parse_stop_before("0").off, True),
        (s.parse_stop_before("90").secs, 90.0),
        (s.parse_end("1700000000\n"), 1700000000.0),
        (s.parse_end("17x"), None),
        (s.parse_end(" 17"), None),
        (s.parse_end("+17"), None),
        (s.parse_end("0"), None),
        (s.parse_end("100000000000"), None),
        (s.stop_margin(-1, -1), 15),
        (s.stop_margin(2, 10), 34.0),
        (s.stop_due(s.parse_stop_before("auto"), 100, 120, 1, 2), True),
        (s.stop_due(s.parse_stop_before("auto"), 100, 120, 1, 1), False),
        (s.stop_due(s.parse_stop_before("30"), 100, 129, 0, 0), True),
        (s.stop_due(s.parse_stop_before("0"), 100, 101, 0, 0), False),
        (s.stop_due(s.parse_stop_before("auto"), 100, 0, 0, 0), False),
        (s.format_note(3, 42, "sigterm", 1234),
         "stop rank=3 step=42 why=sigterm ckpt_ms=1234\n"),
    ]
    for i, (got, want) in enumerate(checks):
        if got != want:
            fail(f"check {i}: {got!r}, want {want!r}")
    for bad in ("", "auto ", "-1", "+5", "-0", "604801", "1.5", "soon"):
        try:
            s.parse_stop_before(bad)
        except ValueError as e:
            if "DDP_STOP_BEFORE" not in str(e) or "auto" not in str(e):
                fail(f"{bad!r}: {e}")
        else:
            fail(f"DDP_STOP_BEFORE={bad!r} accepted")
    for args in ((-1, 0, "sigterm", 0), (0, -1, "sigterm", 0),
                 (0, 0, "bored", 0), (0, 0, "none", 0),
                 (0, 0, "sigterm", -5)):
        try:
            s.format_note(*args)
        except ValueError:
            continue
        fail(f"a note for {args}")
    os.environ["DDP_FAILURE_FD"] = "1"
    if s.failure_fd() is not None:
        fail("DDP_FAILURE_FD=1 taken (below 3)")
    print("# contract: DDP_STOP_BEFORE, end time, margin, due, note")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        ap = argparse.ArgumentParser()
        ap.add_argument("--trials", type=int, default=1)
        ap.add_argument("--own-handler", action="store_true")
        ap.add_argument("--request-at", type=int, default=0)
        ap.add_argument("--exit", action="store_true")
        worker(ap.parse_args(sys.argv[2:]))
        return
    cases = {"signal-one": case_signal_one, "end-time": case_end_time,
             "off": case_off, "own-handler": case_own_handler,
             "note": case_note, "contract": case_contract}
    if len(sys.argv) != 2 or sys.argv[1] not in cases:
        sys.exit(f"usage: stop-python.py {'|'.join(cases)}")
    cases[sys.argv[1]]()


if __name__ == "__main__":
    main()
