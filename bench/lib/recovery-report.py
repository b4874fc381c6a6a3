#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""bench/recovery's summary: DIR/recovery.md from DIR/raw/recovery.csv.

Per fault and path, each phase over the trials that resumed: median, p95
(nearest rank: a value that was measured; with 10 trials the 10th is the
max, the p95 the 10th too) and max, then the totals side by side with each
requeue path's ratio to --ddp-restart, and the targets judged on the worst
trial. Writes nothing else and runs nothing.

Usage: bench/lib/recovery-report.py [DIR]   (default bench/results)
"""
import csv
import math
import os
import statistics
import sys

PHASES = [("detection_s", "detection"), ("teardown_s", "teardown"),
          ("relaunch_s", "relaunch"), ("wait_s", "... of it the wait to start again"),
          ("rendezvous_s", "rendezvous"), ("checkpoint_s", "checkpoint load"),
          ("allreduce_s", "first allreduce"),
          ("step_end_s", "fault to the end of the step"),
          ("total_s", "fault to the resumed first allreduce")]
PATHS = {"restart": "srun --ddp --ddp-restart=1",
         "requeue": "Slurm's requeue (sbatch --requeue, scontrol requeue)",
         "check-requeue": "requeue with srun --ddp-check=requeue first"}
FAULTS = {"kill": "SIGKILL of rank 2 (examples/train)",
          "stop": "SIGSTOP of rank 2 (examples/train), a hang",
          "cut": "rank 2's node's link cut (examples/train)",
          "torch-kill": "SIGKILL of rank 2 (examples/train.py, PyTorch Gloo)"}
KILL_TARGET_S = 15.0
TORCH_TARGET_S = 5.0
# bench/recovery's DDP_TIMEOUT: a hang is named after it.
HANG_TIMEOUT_S = 5.0
HANG_TARGET_S = HANG_TIMEOUT_S + 15.0


def p95(xs):
    s = sorted(xs)
    return s[max(0, math.ceil(0.95 * len(s)) - 1)]


def fmt(x):
    return "%.2f" % x


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "bench/results"
    rows = list(csv.DictReader(open(os.path.join(out, "raw", "recovery.csv"))))
    groups = {}
    for r in rows:
        groups.setdefault((r["fault"], r["path"]), []).append(r)
    lines = ["# Recovery after a fault", "",
             "`bench/recovery`, written by `bench/lib/recovery-report.py` "
             "from `raw/recovery.csv`. Seconds from the fault (the "
             "injector's clock) to each phase's end, on the minicluster "
             "(4 ranks, one per node, all nodes on one machine). Median, "
             "p95 (nearest rank) and max over the trials that resumed. "
             "Phases: detection (srun's first-failure line), teardown (the "
             "failed srun's exit), relaunch (the new step's last rank "
             "started; with a requeue it holds the wait for the job to "
             "start again), rendezvous (the last rank's communicator "
             "ready; for train.py it holds importing PyTorch), checkpoint "
             "load (for train it holds making the data and the model "
             "before it), first allreduce (the first training step reduced).",
             ""]
    totals = {}
    tried = {}
    for fault in list(FAULTS) + sorted({f for f, _ in groups} - set(FAULTS)):
        for path in list(PATHS) + sorted({p for _, p in groups} - set(PATHS)):
            g = groups.get((fault, path))
            if not g:
                continue
            good = [r for r in g if r["ok"] == "1"]
            tried[(fault, path)] = (len(g), len(good))
            lines += ["## %s: %s" % (FAULTS.get(fault, fault),
                                     PATHS.get(path, path)), "",
                      "%d trials, %d resumed." % (len(g), len(good)), ""]
            if not good:
                continue
            lines += ["| phase | median | p95 | max |", "|---|---|---|---|"]
            for key, name in PHASES:
                xs = [float(r[key]) for r in good if r[key] != ""]
                if not xs:
                    continue
                lines.append("| %s | %s s | %s s | %s s |" % (
                    name, fmt(statistics.median(xs)), fmt(p95(xs)),
                    fmt(max(xs))))
                if key in ("total_s", "step_end_s"):
                    totals[(fault, path, key)] = xs
            lines.append("")
    lines += ["## Paths compared", "",
              "| fault | path | trials | total median | p95 | max | "
              "median / --ddp-restart's |", "|---|---|---|---|---|---|---|"]
    for (fault, path, key), xs in totals.items():
        if key != "total_s":
            continue
        base = totals.get((fault, "restart", "total_s"))
        ratio = ("%.1fx" % (statistics.median(xs) / statistics.median(base))
                 if base else "-")
        lines.append("| %s | %s | %d | %s s | %s s | %s s | %s |" % (
            fault, path, len(xs), fmt(statistics.median(xs)), fmt(p95(xs)),
            fmt(max(xs)), ratio))
    lines += ["", "## Targets (worst trial)", ""]
    kill = totals.get(("kill", "restart", "total_s"))
    if kill:
        n, good = tried[("kill", "restart")]
        # A trial that never resumed is the worst run of all.
        met = max(kill) <= KILL_TARGET_S and good == n
        lines.append("- At most %.0f s from a SIGKILL to the resumed first "
                     "allreduce (--ddp-restart): %s, worst %s (median %s s "
                     "of the %d of %d trials that resumed)."
                     % (KILL_TARGET_S, "met" if met else "not met",
                        "%s s" % fmt(max(kill)) if good == n else
                        "%d of %d trials never resumed" % (n - good, n),
                        fmt(statistics.median(kill)), good, n))
    for fault, what in (("stop", "hang (SIGSTOP)"), ("cut", "cut link")):
        hang = totals.get((fault, "restart", "total_s"))
        if not hang:
            continue
        n, good = tried[(fault, "restart")]
        met = max(hang) <= HANG_TARGET_S and good == n
        lines.append("- At most DDP_TIMEOUT + 15 s (%.0f s) from a %s to the "
                     "resumed first allreduce (--ddp-restart): %s, worst %s "
                     "(median %s s of the %d of %d trials that resumed)."
                     % (HANG_TARGET_S, what, "met" if met else "not met",
                        "%s s" % fmt(max(hang)) if good == n else
                        "%d of %d trials never resumed" % (n - good, n),
                        fmt(statistics.median(hang)), good, n))
    ends = [x for (f, _, k), xs in totals.items()
            if f == "torch-kill" and k == "step_end_s" for x in xs]
    if ends:
        lines.append("- At most %.0f s from a PyTorch rank's death to the end "
                     "of its step (srun's exit, every path): %s, worst %s s "
                     "(median %s s)."
                     % (TORCH_TARGET_S,
                        "met" if max(ends) <= TORCH_TARGET_S else "not met",
                        fmt(max(ends)), fmt(statistics.median(ends))))
    failed = [r for r in rows if r["ok"] != "1"]
    if failed:
        lines += ["", "Trials that did not resume, with the step's last "
                  "ddp line (logs in raw/):", ""]
        for r in failed:
            log = os.path.join(out, "raw", "recovery-%s-%s-%s.log" % (
                r["fault"], r["path"], r["trial"]))
            why = "no log"
            if os.path.exists(log):
                said = [ln.split(" ", 1)[1].strip() for ln in open(log)
                        if " ddp: " in ln]
                why = said[-1] if said else "no ddp line"
            lines.append("- %s/%s #%s: %s" % (r["fault"], r["path"],
                                             r["trial"], why))
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "recovery.md"), "w") as f:
        f.write(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
