#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""report.py RESULTS_DIR: turns bench/run's raw CSVs into the summary.

Reads RESULTS_DIR/raw/*.csv and writes RESULTS_DIR/{allreduce,ratios,tcp,
launch,train,overlap}.csv, RESULTS_DIR/summary.md and the gnuplot data
files under RESULTS_DIR/raw/. Every figure is given as the median over
runs, its p95 and its min-max over runs; an allreduce run's own figure is
the median of its iterations, its p95 the iterations' p95. Ratios are
computed within each run first (libddp against the peer measured in the
same run), then summarised. Targets are judged on the worst run.
"""
import csv
import os
import statistics
import sys
from collections import defaultdict

IMPLS = ["libddp", "libddp-flat", "openmpi", "gloo"]
NAMES = {"libddp": "libddp", "libddp-flat": "libddp flat ring",
         "openmpi": "Open MPI", "gloo": "Gloo"}


def read(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def med(xs):
    return statistics.median(xs) if xs else None


def spread(xs):
    return (min(xs), max(xs)) if xs else (None, None)


def p95(xs):
    """95th percentile, nearest rank: a value that was measured (with 5
    runs, the largest)."""
    if not xs:
        return None
    s = sorted(xs)
    return s[max(0, -(-95 * len(s) // 100) - 1)]


def human(b):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div and b % div == 0:
            return "%d %s" % (b // div, unit)
    return "%d B" % b


def fmt_time(x):
    return "%.1f" % x if x < 100 else "%.0f" % x


def fmt_range(xs, f="%.3f"):
    """min–max over runs, or "-" with fewer than two runs."""
    if len(xs) < 2:
        return "-"
    lo, hi = spread(xs)
    return (f + "–" + f) % (lo, hi)


def stat_cells(xs, f="%.3f"):
    """median, p95 and min–max over runs: three table cells."""
    if not xs:
        return ["-", "-", "-"]
    return [f % med(xs), f % p95(xs), fmt_range(xs, f)]


def fmt_ratio(xs):
    if not xs:
        return "-"
    lo, hi = spread(xs)
    if len(xs) < 2:
        return "%.2f×" % med(xs)
    return "%.2f× (%.2f–%.2f)" % (med(xs), lo, hi)


def fmt_med_range(xs, f="%.3f"):
    """median with the min–max over runs in parentheses."""
    if not xs:
        return "-"
    if len(xs) < 2:
        return f % med(xs)
    return (f + " (" + f + "–" + f + ")") % ((med(xs),) + spread(xs))


def overlap_cells(o):
    """compute, comm, off, on and hidden cells of an overlap table row."""
    return [fmt_med_range(o[k], "%.1f") for k in ("compute_ms", "comm_ms", "off_ms", "on_ms")] + \
        [fmt_med_range([100 * x for x in o["hidden"]], "%.0f") + " %"]


def worst_cell(xs, f, worst):
    """the worst run's value and, with several runs, the median beside it."""
    w = worst(xs)
    if len(xs) < 2:
        return f % w
    return (f + " (median " + f + ", %d runs)") % (w, med(xs), len(xs))


def write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def r4(x):
    return "" if x is None else "%.6g" % x


def main():
    out = sys.argv[1]
    raw = os.path.join(out, "raw")
    md = []
    env = open(os.path.join(raw, "env.txt")).read() if os.path.exists(
        os.path.join(raw, "env.txt")) else ""

    # ---- TCP ceiling ----
    tcp = defaultdict(list)
    inrun = {}  # run -> 1-stream ceiling measured beside that allreduce run
    duplex = {}  # run -> per-direction rate with both directions at once
    for r in read(os.path.join(raw, "tcp.csv")):
        tcp[r["mode"]].append(float(r["GBps"]))
        if r["mode"] == "1-stream-inrun":
            inrun[r["run"]] = float(r["GBps"])
        if r["mode"] == "duplex-inrun":
            duplex[r["run"]] = float(r["GBps"])
    write_csv(os.path.join(out, "tcp.csv"),
              ["mode", "runs", "GBps_median", "GBps_min", "GBps_max"],
              [[m, len(v), r4(med(v))] + [r4(x) for x in spread(v)]
               for m, v in sorted(tcp.items())])
    ceil1 = med(tcp.get("1-stream-inrun", []) or tcp.get("1-stream", []))
    ceil4 = med(tcp.get("4-streams", []))

    # ---- allreduce ----
    ar = defaultdict(lambda: defaultdict(list))  # (impl,n,bytes) -> field -> per-run
    per_run = {}
    bad = []
    for r in read(os.path.join(raw, "allreduce.csv")):
        key = (r["impl"], int(r["ranks"]), int(r["bytes"]))
        for fld in ("median_us", "p95_us", "busbw_GBps", "algbw_GBps"):
            ar[key][fld].append(float(r[fld]))
        ar[key]["ok"].append(r["ok"] == "yes")
        per_run[key + (r["run"],)] = r
        if r["ok"] != "yes":
            bad.append(key)
    rows = []
    for (impl, n, b), v in sorted(ar.items(), key=lambda kv: (
            IMPLS.index(kv[0][0]) if kv[0][0] in IMPLS else 9, kv[0][1], kv[0][2])):
        lo, hi = spread(v["median_us"])
        blo, bhi = spread(v["busbw_GBps"])
        rows.append([impl, n, b, len(v["median_us"]), r4(med(v["median_us"])),
                     r4(lo), r4(hi), r4(med(v["p95_us"])),
                     r4(med(v["algbw_GBps"])), r4(med(v["busbw_GBps"])),
                     r4(blo), r4(bhi), "yes" if all(v["ok"]) else "NO"])
    write_csv(os.path.join(out, "allreduce.csv"),
              ["impl", "ranks", "bytes", "runs", "median_us", "median_us_min",
               "median_us_max", "p95_us", "algbw_GBps", "busbw_GBps",
               "busbw_min", "busbw_max", "verified"], rows)

    def libddp_runs(n, b, fn):
        """fn(row, run) over libddp's runs at n ranks and b bytes (None
        values left out)."""
        xs = [fn(r, run) for (i, nn, bb, run), r in per_run.items()
              if i == "libddp" and nn == n and bb == b]
        return [x for x in xs if x is not None]

    def of_ceiling(ceil):
        """libddp busbw / a ceiling measured in the same run."""
        return lambda r, run: float(r["busbw_GBps"]) / ceil[run] if run in ceil else None

    def vs_peer(peer, n):
        """peer's time / libddp's, same run and size: the busbw ratio."""
        def f(r, run):
            p = per_run.get((peer, n, int(r["bytes"]), run))
            return float(p["median_us"]) / float(r["median_us"]) if p else None
        return f

    # Ratios within each run: libddp vs peer at the same size.
    ratio = defaultdict(lambda: defaultdict(list))  # (n,b,peer) -> lat/bw
    for (impl, n, b, run), r in per_run.items():
        if impl != "libddp":
            continue
        for peer in ("libddp-flat", "openmpi", "gloo"):
            p = per_run.get((peer, n, b, run))
            if not p:
                continue
            ratio[(n, b, peer)]["lat"].append(
                float(r["median_us"]) / float(p["median_us"]))
            # Same bytes and ranks: the busbw ratio is the inverse time
            # ratio, which a busbw printed as 0.000000 (Open MPI's 25 ms
            # for 8 B) cannot turn into a division by zero.
            ratio[(n, b, peer)]["bw"].append(
                float(p["median_us"]) / float(r["median_us"]))
    write_csv(os.path.join(out, "ratios.csv"),
              ["ranks", "bytes", "peer", "runs", "latency_ratio",
               "latency_ratio_min", "latency_ratio_max", "busbw_ratio",
               "busbw_ratio_min", "busbw_ratio_max"],
              [[n, b, peer, len(v["lat"]), r4(med(v["lat"]))]
               + [r4(x) for x in spread(v["lat"])] + [r4(med(v["bw"]))]
               + [r4(x) for x in spread(v["bw"])]
               for (n, b, peer), v in sorted(ratio.items())])

    # gnuplot data: one file per (impl, ranks).
    for impl in IMPLS:
        for n in (2, 4):
            keys = sorted(k for k in ar if k[0] == impl and k[1] == n)
            with open(os.path.join(raw, "plot-%s-%d.dat" % (impl, n)), "w") as f:
                f.write("# bytes median_us p95_us busbw busbw_min busbw_max"
                        " median_us_min median_us_max (over runs)\n")
                for k in keys:
                    v = ar[k]
                    f.write("%d %g %g %g %g %g %g %g\n" % (
                        (k[2], med(v["median_us"]), med(v["p95_us"]),
                         med(v["busbw_GBps"])) + spread(v["busbw_GBps"])
                        + spread(v["median_us"])))

    # ---- launch ----
    launch = defaultdict(lambda: defaultdict(list))
    lrep = defaultdict(lambda: defaultdict(list))  # rep -> what -> launches
    for r in read(os.path.join(raw, "launch.csv")):
        launch[r["what"]]["first"].append(float(r["first_s"]))
        launch[r["what"]]["total"].append(float(r["total_s"]))
        lrep[r["rep"]][r["what"]].append(float(r["first_s"]))
    lrep = {rep: {w: med(v) for w, v in d.items()} for rep, d in lrep.items()}
    write_csv(os.path.join(out, "launch.csv"),
              ["what", "reps", "first_s_median", "first_s_min", "first_s_max",
               "total_s_median"],
              [[w, len(v["first"]), r4(med(v["first"]))]
               + [r4(x) for x in spread(v["first"])] + [r4(med(v["total"]))]
               for w, v in sorted(launch.items())])
    launch_ratio = [d["torch-ddp"] / d["torch-torchrun"]
                    for d in lrep.values() if "torch-ddp" in d and "torch-torchrun" in d]
    ddp_adds = [d["srun-ddp-true"] - d["srun-true"]
                for d in lrep.values() if "srun-ddp-true" in d and "srun-true" in d]
    with open(os.path.join(raw, "plot-launch.dat"), "w") as f:
        for i, w in enumerate(("srun-true", "srun-ddp-true", "libddp-ddp",
                               "torch-ddp", "torch-torchrun")):
            v = launch.get(w, {}).get("first", [])
            if v:
                lo, hi = spread(v)
                f.write('%d "%s" %g %g %g\n' % (i, w, med(v), lo, hi))

    with open(os.path.join(raw, "vars.gp"), "w") as f:
        f.write("ceil1 = %g\nceil4 = %g\nhave_launch = %d\n" % (ceil1 or 0, ceil4 or 0, 1 if launch else 0))

    # ---- training ----
    train = defaultdict(lambda: defaultdict(list))
    for r in read(os.path.join(raw, "train.csv")):
        train[int(r["ranks"])]["sps"].append(float(r["samples_per_s"]))
        train[int(r["ranks"])]["step"].append(float(r["step_ms"]))
    write_csv(os.path.join(out, "train.csv"),
              ["ranks", "reps", "samples_per_s", "samples_per_s_min",
               "samples_per_s_max", "step_ms"],
              [[n, len(v["sps"]), r4(med(v["sps"]))]
               + [r4(x) for x in spread(v["sps"])] + [r4(med(v["step"]))]
               for n, v in sorted(train.items())])
    overlap = read(os.path.join(raw, "overlap.csv"))
    ov = defaultdict(list)
    for r in overlap:
        for k in ("compute_ms", "comm_ms", "off_ms", "on_ms", "hidden",
                  "early_buckets"):
            if r.get(k) not in (None, ""):
                ov[k].append(float(r[k]))
    if overlap:
        write_csv(os.path.join(out, "overlap.csv"),
                  ["reps", "compute_ms", "comm_ms", "off_ms", "on_ms",
                   "hidden_fraction", "hidden_min", "hidden_max"],
                  [[len(ov["hidden"])] + [r4(med(ov[k])) for k in
                   ("compute_ms", "comm_ms", "off_ms", "on_ms", "hidden")]
                   + [r4(x) for x in spread(ov["hidden"])]])

    # bench/gpu-run: the same overlap benchmark on a node with spare cores.
    ovl = defaultdict(list)
    for r in read(os.path.join(raw, "overlap-local.csv")):
        for k in ("compute_ms", "comm_ms", "off_ms", "on_ms", "hidden"):
            ovl[k].append(float(r[k]))

    # ---- GPU (bench/gpu-run) ----
    gpu = defaultdict(lambda: defaultdict(list))
    gpu_ratio = defaultdict(list)  # bytes -> libddp/NCCL time, per run
    by_run = defaultdict(dict)
    for r in read(os.path.join(raw, "gpu.csv")):
        key = (r["test"], r["impl"], int(r["bytes"]))
        gpu[key]["us"].append(float(r["median_us"]))
        gpu[key]["GBps"].append(float(r["GBps"]))
        gpu[key]["ok"].append(r["ok"] == "1")
        if r["test"] == "allreduce":
            by_run[(r["rep"], int(r["bytes"]))][r["impl"]] = float(r["median_us"])
    for (rep, b), v in by_run.items():
        if "libddp" in v and "nccl" in v and v["nccl"] > 0:
            gpu_ratio[b].append(v["libddp"] / v["nccl"])
    if gpu:
        write_csv(os.path.join(out, "gpu.csv"),
                  ["test", "impl", "bytes", "reps", "median_us", "GBps",
                   "all_ok"],
                  [[t, i, b, len(v["us"]), r4(med(v["us"])),
                    r4(med(v["GBps"])), int(all(v["ok"]))]
                   for (t, i, b), v in sorted(gpu.items())])

    # ---- summary.md ----
    md.append("# slurm-ddp benchmarks\n")
    md.append("Minicluster: 2 Slurm nodes as network namespaces on one "
              "machine. Every figure: median over runs, p95 (nearest "
              "rank, so with 5 runs the largest) and min–max over runs; "
              "an allreduce run's figure is the median of its iterations "
              "and its p95 column the iterations' p95 (median over runs). "
              "Ratios are taken within each run; targets are judged on "
              "the worst run. Method and caveats: `bench/README.md`.\n")
    md.append("```\n" + env.strip() + "\n```\n")

    def r_at(n, b, peer, k):
        return ratio.get((n, b, peer), {}).get(k, [])

    def big_sizes(n):
        return sorted({b for (i, nn, b) in ar if i == "libddp" and nn == n and b >= 1 << 20})

    def small_sizes(n):
        return sorted({b for (i, nn, b) in ar if i == "libddp" and nn == n and b <= 4096})

    def status(ok):
        return "met" if ok else "missed"

    # Under load: impl -> run -> busy -> busbw, and the share of the nodes'
    # cores an alone run used.
    load = defaultdict(dict)
    core_alone = defaultdict(list)
    for r in read(os.path.join(raw, "load.csv")):
        load[r["impl"]].setdefault(int(r["run"]), {})[int(r["busy"])] = float(r["busbw_GBps"])
        if r["busy"] == "0" and r.get("core_busy"):
            core_alone[r["impl"]].append(float(r["core_busy"]))

    def load_loss(impl):
        """run -> 1 - busy/alone."""
        return {run: 1 - v[1] / v[0] for run, v in load.get(impl, {}).items()
                if 0 in v and 1 in v and v[0] > 0}

    # Each target on its worst run: the lowest busbw ratio, fraction or
    # hidden share and the highest latency ratio or launch time of any
    # run (and, over sizes, of the worst size).
    tgt = []
    for n in (2, 4):
        for peer, want in (("openmpi", 1.2), ("gloo", 1.5)):
            vals = [(b, r_at(n, b, peer, "bw")) for b in big_sizes(n) if r_at(n, b, peer, "bw")]
            if vals:
                b, xs = min(vals, key=lambda x: min(x[1]))
                tgt.append(["busbw ≥ %.1f× %s, ≥ 1 MiB, %d ranks" % (want, NAMES[peer], n),
                            "%s at %s" % (worst_cell(xs, "%.2f×", min), human(b)),
                            status(min(xs) >= want)])
        for peer, want in (("openmpi", 1.0), ("gloo", 0.5)):
            vals = [(b, r_at(n, b, peer, "lat")) for b in small_sizes(n) if r_at(n, b, peer, "lat")]
            if vals:
                b, xs = max(vals, key=lambda x: max(x[1]))
                tgt.append(["latency ≤ %.1f× %s, ≤ 4 KiB, %d ranks" % (want, NAMES[peer], n),
                            "%s at %s" % (worst_cell(xs, "%.2f×", max), human(b)),
                            status(max(xs) <= want)])
    # The TCP targets at gradient-bucket sizes: every size from lo up, on
    # the worst run of the worst size.
    def size_target(label, n, lo, fn, want, worst, fmt):
        vals = [(b, libddp_runs(n, b, fn)) for b in
                sorted({b for (i, nn, b) in ar if i == "libddp" and nn == n and b >= lo})]
        vals = [(b, xs) for b, xs in vals if xs]
        if not vals:
            return
        b, xs = worst(vals, key=lambda x: worst(x[1]))
        ok = worst(xs) >= want if worst is min else worst(xs) <= want
        tgt.append([label, "%s at %s" % (worst_cell(xs, fmt, worst), human(b)), status(ok)])

    def pct(fn):
        def f(r, run):
            x = fn(r, run)
            return None if x is None else 100 * x
        return f

    size_target("2 × 1: busbw ≥ 80 % of one stream (same run), every size ≥ 4 MiB",
                2, 4 << 20, pct(of_ceiling(inrun)), 80, min, "%.0f %%")
    size_target("2 × 1: iterations' p95 ≤ 1.5× median, every size", 2, 0,
                lambda r, run: float(r["p95_us"]) / float(r["median_us"]), 1.5, max, "%.2f×")
    size_target("2 × 2: busbw ≥ 1.5× Gloo (same run), every size ≥ 8 MiB",
                4, 8 << 20, vs_peer("gloo", 4), 1.5, min, "%.2f×")
    size_target("2 × 2: busbw ≥ 70 % of one stream (same run), every size ≥ 8 MiB",
                4, 8 << 20, pct(of_ceiling(inrun)), 70, min, "%.0f %%")
    ll, lg = load_loss("libddp"), load_loss("gloo")
    both = sorted(set(ll) & set(lg))
    if both:
        worst_run = max(both, key=lambda run: ll[run] - lg[run])
        tgt.append(["under load (8 MiB, 2 × 1): libddp loses no more than Gloo (same run)",
                    "libddp −%.0f %%, Gloo −%.0f %% (run %d of %d)"
                    % (100 * ll[worst_run], 100 * lg[worst_run], worst_run, len(both)),
                    status(ll[worst_run] <= lg[worst_run])])
    if launch_ratio:
        tgt.append(["PyTorch launch: srun --ddp ≤ 0.5× srun + torchrun",
                    worst_cell(launch_ratio, "%.2f×", max),
                    status(max(launch_ratio) <= 0.5)])
    elif os.path.exists(os.path.join(raw, "launch-ddp.txt")):
        tgt.append(["PyTorch launch: srun --ddp ≤ 0.5× srun + torchrun",
                    "plugin not installed", "not measured"])
    if ddp_adds:
        tgt.append(["--ddp adds ≤ 10 ms to srun true (medians of the launches in a rep)",
                    worst_cell([1e3 * x for x in ddp_adds], "%+.0f ms", max),
                    status(max(ddp_adds) <= 0.010)])
    if ov["hidden"]:
        tgt.append(["overlap hides ≥ 50 % of communication (minicluster)",
                    worst_cell([100 * x for x in ov["hidden"]], "%.0f %%", min),
                    status(min(ov["hidden"]) >= 0.5)])
    if ovl["hidden"]:
        tgt.append(["overlap hides ≥ 50 % of communication (node with spare cores, bench/gpu-run)",
                    worst_cell([100 * x for x in ovl["hidden"]], "%.0f %%", min),
                    status(min(ovl["hidden"]) >= 0.5)])
    md.append("## Targets\n")
    md.append("| target | worst run (median of runs) | status, on the worst run |\n|---|---|---|")
    md.extend("| %s | %s | %s |" % tuple(t) for t in tgt)
    md.append("")
    if bad:
        md.append("**Verification failed** for: %s\n" % ", ".join(
            "%s %d ranks %s" % (i, n, human(b)) for i, n, b in sorted(set(bad))))

    if tcp:
        md.append("## Raw TCP between two nodes (iperf3)\n")
        md.append("| mode | GB/s median | p95 | min–max |\n|---|---|---|---|")
        for m, v in sorted(tcp.items()):
            md.append("| %s | %s |" % (m, " | ".join(stat_cells(v, "%.2f"))))
        md.append("")

    for n in (2, 4):
        sizes = sorted({b for (i, nn, b) in ar if nn == n})
        if not sizes:
            continue
        have = [i for i in IMPLS if any((i, n, b) in ar for b in sizes)]
        peers = [p for p in have if p != "libddp"]
        md.append("## Allreduce, fp32 sum in place, 2 nodes × %d rank%s (%d ranks)\n"
                  % (n // 2, "s" if n > 2 else "", n))
        md.append("Time per call, µs: median over runs of each run's median "
                  "iteration, the iterations' p95, min–max over runs of the "
                  "run's median; libddp/peer: median (min–max) of the "
                  "within-run ratios.\n")
        hdr = ["size"] + ["%s %s" % (NAMES[i], c) for i in have
                          for c in ("µs", "p95 µs", "min–max µs")] + \
              ["libddp/%s time" % NAMES[p] for p in peers]
        md.append("| " + " | ".join(hdr) + " |")
        md.append("|" + "---|" * len(hdr))
        for b in sizes:
            row = [human(b)]
            for i in have:
                v = ar.get((i, n, b))
                if not v:
                    row += ["-", "-", "-"]
                    continue
                row += [fmt_time(med(v["median_us"])), fmt_time(med(v["p95_us"])),
                        fmt_range(v["median_us"], "%.1f" if max(v["median_us"]) < 100 else "%.0f")]
            row += [fmt_ratio(r_at(n, b, p, "lat")) for p in peers]
            md.append("| " + " | ".join(row) + " |")
        md.append("")
        md.append("busbw, GB/s: median, p95 (the run whose median time is "
                  "the p95 over runs) and min–max over runs.\n")
        hdr = ["size"] + ["%s %s" % (NAMES[i], c) for i in have
                          for c in ("busbw", "p95", "min–max")] + \
              ["libddp/%s busbw" % NAMES[p] for p in peers]
        md.append("| " + " | ".join(hdr) + " |")
        md.append("|" + "---|" * len(hdr))
        for b in sizes:
            row = [human(b)]
            for i in have:
                v = ar.get((i, n, b))
                if not v:
                    row += ["-", "-", "-"]
                    continue
                bw = v["busbw_GBps"]
                # busbw falls as time rises: its p95 is the 5th percentile.
                row += ["%.3f" % med(bw), "%.3f" % -p95([-x for x in bw]),
                        fmt_range(bw, "%.3f")]
            row += [fmt_ratio(r_at(n, b, p, "bw")) for p in peers]
            md.append("| " + " | ".join(row) + " |")
        md.append("")
        big = [b for b in sizes if b >= 4 << 20]
        fr1 = [x for b in big for x in libddp_runs(n, b, of_ceiling(inrun))]
        frd = [x for b in big for x in libddp_runs(n, b, of_ceiling(duplex))]
        if fr1:
            md.append("libddp busbw from 4 MiB up, per run and size: %.0f–%.0f %% "
                      "(median %.0f %%) of the same run's one iperf3 stream%s.\n"
                      % (100 * min(fr1), 100 * max(fr1), 100 * med(fr1),
                         "; %.0f–%.0f %% (median %.0f %%) of the rate each "
                         "direction gets with both directions at once "
                         "(two iperf3, same run)" % (100 * min(frd), 100 * max(frd), 100 * med(frd))
                         if frd else ""))
        # The ranges README.md quotes: at each size the median over runs
        # of the within-run ratio, lowest and highest over the sizes, and
        # the worst run of any size.
        for peer in peers:
            for what, k, keep, worst in (
                    ("busbw from 8 MiB up", "bw", lambda b: b >= 8 << 20, min),
                    ("time up to 4 KiB", "lat", lambda b: b <= 4096, max)):
                vals = [(b, r_at(n, b, peer, k)) for b in sizes
                        if keep(b) and r_at(n, b, peer, k)]
                if not vals:
                    continue
                meds = [med(xs) for _, xs in vals]
                wb, wxs = worst(vals, key=lambda v: worst(v[1]))
                md.append("libddp/%s %s, the median of runs at each size: "
                          "%.2f–%.2f× over %s to %s; worst run %.2f× (%s).\n"
                          % (NAMES[peer], what, min(meds), max(meds),
                             human(vals[0][0]), human(vals[-1][0]),
                             worst(wxs), human(wb)))
    coll = os.path.join(raw, "mpi-coll.txt")
    if os.path.exists(coll):
        md.append("Open MPI collective selection:\n\n```\n%s\n```\n"
                  % open(coll).read().strip())
    place = os.path.join(raw, "placement.txt")
    if os.path.exists(place):
        md.append("Placement of the `srun --ddp` launches (`--ddp-verbose`):\n\n```\n%s\n```\n"
                  % open(place).read().strip())
    md.append("![busbw](busbw.png)\n\n![latency](latency.png)\n")

    if load:
        md.append("## Under load: 8 MiB, 2 nodes × 1 rank\n")
        md.append("busbw alone and beside one busy process per node (a shell "
                  "loop in the node's CPU share), in the same run; the loss "
                  "is 1 - busy/alone per run. Median and min–max over runs; "
                  "the worst run's loss is the one that counts. Core use "
                  "alone: the share of the nodes' cores busy (user, system "
                  "and softirq, /proc/stat) during the run alone; an "
                  "implementation that needs all of its core alone can "
                  "keep only what the scheduler gives it beside the busy "
                  "process, half of the core.\n")
        md.append("| implementation | core use alone | alone GB/s | busy GB/s | loss | worst run's loss |\n|---|---|---|---|---|---|")
        for impl in sorted(load, key=lambda i: list(NAMES).index(i) if i in NAMES else 99):
            runs = [v for v in load[impl].values() if 0 in v and 1 in v]
            losses = [100 * (1 - v[1] / v[0]) for v in runs if v[0] > 0]
            cores = [100 * x for x in core_alone.get(impl, [])]
            md.append("| %s | %s | %s | %s | %s | %s |" % (
                NAMES.get(impl, impl),
                fmt_med_range(cores, "%.0f") + " %" if cores else "-",
                fmt_med_range([v[0] for v in runs]),
                fmt_med_range([v[1] for v in runs]),
                fmt_med_range(losses, "%.0f") + " %" if losses else "-",
                "%.0f %%" % max(losses) if losses else "-"))
        md.append("")

    if launch or os.path.exists(os.path.join(raw, "launch-ddp.txt")):
        md.append("## Launch, 2 nodes × 2 ranks\n")
        md.append("Wall time from srun's start (on the login host) to the "
                  "first completed allreduce on rank 0; for `true`, to srun's "
                  "exit. Median, p95 and min–max over repetitions.\n")
        md.append("| launch | to first allreduce s | p95 | min–max | to exit s |\n|---|---|---|---|---|")
        labels = {"srun-true": "`srun true`",
                  "srun-ddp-true": "`srun --ddp true`",
                  "libddp-ddp": "libddp program, `srun --ddp`",
                  "torch-ddp": "PyTorch script, `srun --ddp`",
                  "torch-torchrun": "PyTorch script, `srun` + `torchrun` (c10d)"}
        for w in labels:
            if w in launch:
                md.append("| %s | %s | %s |" % (labels[w], " | ".join(stat_cells(launch[w]["first"], "%.3f")),
                                                "%.3f" % med(launch[w]["total"])))
            elif os.path.exists(os.path.join(raw, "launch-ddp.txt")) and "ddp" in w:
                md.append("| %s | plugin not installed | | | |" % labels[w])
        if launch_ratio:
            md.append("\nsrun --ddp / torchrun (PyTorch, same run): %s" % fmt_ratio(launch_ratio))
        if ddp_adds:
            md.append("\n`srun --ddp true` − `srun true` (same run): %+.1f ms median" % (1e3 * med(ddp_adds)))
        md.append("\n![launch](launch.png)\n")

    if train:
        md.append("## Training: examples/train (MLP, synthetic CIFAR-10 format)\n")
        md.append("| ranks | samples/s | p95 | min–max | step ms | speed-up vs 1 rank |\n|---|---|---|---|---|---|")
        base = med(train.get(1, {}).get("sps", [])) if 1 in train else None
        for n, v in sorted(train.items()):
            # Fewer samples/s is worse: the p95 is the 5th percentile.
            md.append("| %d | %.0f | %.0f | %s | %.2f | %s |" % (
                n, med(v["sps"]), -p95([-x for x in v["sps"]]),
                fmt_range(v["sps"], "%.0f"), med(v["step"]),
                "%.2f×" % (med(v["sps"]) / base) if base else "-"))
        md.append("")
    if overlap:
        md.append("## Overlap of gradient sync with backward (bench/overlap)\n")
        md.append("8 layers × 4 MiB fp32 gradients, one bucket per layer, "
                  "2 nodes × 1 rank; hidden = (off − on) / (off − compute); "
                  "early buckets: allreduces started before the step's wait.\n")
        md.append("| compute ms | comm alone ms | step, overlap off ms | step, overlap on ms | hidden | early buckets |\n|---|---|---|---|---|---|")
        md.append("| " + " | ".join(overlap_cells(ov) + [
            "%g of 8" % med(ov["early_buckets"]) if ov["early_buckets"] else "-"]) + " |")
        md.append("")
    if ovl["hidden"]:
        md.append("### The same on a node with spare cores\n")
        md.append("2 ranks over loopback on the GPU node of the next section "
                  "(bench/gpu-run), where the communication thread has a "
                  "core of its own.\n")
        md.append("| compute ms | comm alone ms | step, overlap off ms | step, overlap on ms | hidden |\n|---|---|---|---|---|")
        md.append("| " + " | ".join(overlap_cells(ovl)) + " |")
        md.append("")
    if gpu:
        genv = open(os.path.join(raw, "gpu-env.txt")).read() if os.path.exists(
            os.path.join(raw, "gpu-env.txt")) else ""
        md.append("## GPU: NCCL backend on one GPU (bench/gpu-run)\n")
        md.append("```\n" + genv.strip() + "\n```\n")
        md.append("Allreduce, fp32 sum, out of place (with one rank NCCL "
                  "copies the input; in place it moves nothing): "
                  "`ddp_allreduce` against `ncclAllReduce` + stream sync on "
                  "the same GPU.\n")
        md.append("| size | libddp µs | NCCL µs | libddp/NCCL time | libddp GB/s |\n|---|---|---|---|---|")
        for b in sorted({b for (t, i, b) in gpu if t == "allreduce"}):
            lib, nccl = gpu.get(("allreduce", "libddp", b)), gpu.get(("allreduce", "nccl", b))
            md.append("| %s | %s | %s | %s | %s |" % (
                human(b), fmt_med_range(lib["us"], "%.1f") if lib else "-",
                fmt_med_range(nccl["us"], "%.1f") if nccl else "-",
                fmt_ratio(gpu_ratio.get(b)),
                fmt_med_range(lib["GBps"], "%.1f") if lib else "-"))
        md.append("")
        gsizes = [b for b in sorted(gpu_ratio)
                  if ("allreduce", "libddp", b) in gpu and ("allreduce", "nccl", b) in gpu]
        if gsizes:
            meds = [med(gpu_ratio[b]) for b in gsizes]
            more = [med(gpu[("allreduce", "libddp", b)]["us"])
                    - med(gpu[("allreduce", "nccl", b)]["us"]) for b in gsizes]
            md.append("libddp/NCCL time, the median of runs at each size: "
                      "%.2f–%.2f× over %s to %s; libddp's time less NCCL's, "
                      "median over the sizes: %.1f µs.\n"
                      % (min(meds), max(meds), human(gsizes[0]),
                         human(gsizes[-1]), med(more)))
        ceil = [v for (t, i, b), d in gpu.items() if t == "copy" for v in d["GBps"]]
        md.append("Gradient sync step (every gradient marked ready, then the "
                  "wait). Gradients in the program's own buffers are copied "
                  "into the bucket and back: GB/s counts both copies, "
                  "against the device's own copy bandwidth (`cudaMemcpy` "
                  "device to device, %s GB/s). Gradient views (registered "
                  "with grad NULL) live in the bucket and are not copied.\n"
                  % (fmt_med_range(ceil, "%.0f") if ceil else "-"))
        md.append("| gradients | step ms, copied | GB/s copied | of copy bandwidth "
                  "| step ms, views | copied / views |\n|---|---|---|---|---|---|")
        for (t, i, b), d in sorted(gpu.items(), key=lambda x: (x[0][2], x[0][1])):
            if t != "bucket" or i.endswith(" views"):
                continue
            v = gpu.get((t, i + " views", b))
            frac = "%.1f %%" % (100 * med(d["GBps"]) / med(ceil)) if ceil else "-"
            md.append("| %s (%s) | %s | %s | %s | %s | %s |" % (
                i.replace("grad sync ", ""), human(b),
                fmt_med_range([x / 1e3 for x in d["us"]], "%.2f"),
                fmt_med_range(d["GBps"], "%.1f"), frac,
                fmt_med_range([x / 1e3 for x in v["us"]], "%.2f") if v else "-",
                "%.1f×" % (med(d["us"]) / med(v["us"])) if v else "-"))
        md.append("")
        if not all(ok for d in gpu.values() for ok in d["ok"]):
            md.append("**GPU verification failed** for: %s\n" % ", ".join(
                "%s %s %s" % (t, i, human(b)) for (t, i, b), d in sorted(gpu.items())
                if not all(d["ok"])))
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
