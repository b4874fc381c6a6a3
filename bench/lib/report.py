#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""report.py RESULTS_DIR: turns bench/run's raw CSVs into the summary.

Reads RESULTS_DIR/raw/*.csv and writes RESULTS_DIR/{allreduce,ratios,tcp,
launch,train,overlap}.csv, RESULTS_DIR/summary.md and the gnuplot data
files under RESULTS_DIR/raw/. Every figure is the median over runs with
its spread (min-max over runs); ratios are computed within each run first
(libddp against the peer measured in the same run), then summarised.
"""
import csv
import os
import statistics
import sys
from collections import defaultdict

IMPLS = ["libddp", "openmpi", "gloo"]
NAMES = {"libddp": "libddp", "openmpi": "Open MPI", "gloo": "Gloo"}


def read(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def med(xs):
    return statistics.median(xs) if xs else None


def spread(xs):
    return (min(xs), max(xs)) if xs else (None, None)


def human(b):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div and b % div == 0:
            return "%d %s" % (b // div, unit)
    return "%d B" % b


def fmt_us(x):
    if x is None:
        return "-"
    return "%.0f" % x if x >= 100 else "%.1f" % x


def fmt_pm(xs, f="%.3f"):
    """median and, when several runs exist, the relative spread."""
    if not xs:
        return "-"
    m = med(xs)
    if len(xs) < 2 or not m:
        return f % m
    lo, hi = spread(xs)
    return (f + " ±%.0f%%") % (m, 50 * (hi - lo) / m)


def fmt_ratio(xs):
    if not xs:
        return "-"
    lo, hi = spread(xs)
    if len(xs) < 2:
        return "%.2f×" % med(xs)
    return "%.2f× (%.2f–%.2f)" % (med(xs), lo, hi)


def overlap_cells(o):
    """compute, comm, off, on and hidden cells of an overlap table row."""
    lo, hi = spread(o["hidden"])
    return [fmt_pm(o[k], "%.1f") for k in ("compute_ms", "comm_ms", "off_ms", "on_ms")] + \
        ["%.0f %% (%.0f … %.0f %%)" % (100 * med(o["hidden"]), 100 * lo, 100 * hi)]


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
    for r in read(os.path.join(raw, "tcp.csv")):
        tcp[r["mode"]].append(float(r["GBps"]))
        if r["mode"] == "1-stream-inrun":
            inrun[r["run"]] = float(r["GBps"])
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

    def ceiling_frac(n, b):
        """libddp busbw / the 1-stream ceiling of the same run, per run."""
        return [float(r["busbw_GBps"]) / inrun[run]
                for (i, nn, bb, run), r in per_run.items()
                if i == "libddp" and nn == n and bb == b and run in inrun]

    # Ratios within each run: libddp vs peer at the same size.
    ratio = defaultdict(lambda: defaultdict(list))  # (n,b,peer) -> lat/bw
    for (impl, n, b, run), r in per_run.items():
        if impl != "libddp":
            continue
        for peer in ("openmpi", "gloo"):
            p = per_run.get((peer, n, b, run))
            if not p:
                continue
            ratio[(n, b, peer)]["lat"].append(
                float(r["median_us"]) / float(p["median_us"]))
            ratio[(n, b, peer)]["bw"].append(
                float(r["busbw_GBps"]) / float(p["busbw_GBps"]))
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
                f.write("# bytes median_us p95_us busbw busbw_min busbw_max\n")
                for k in keys:
                    v = ar[k]
                    lo, hi = spread(v["busbw_GBps"])
                    f.write("%d %g %g %g %g %g\n" % (
                        k[2], med(v["median_us"]), med(v["p95_us"]),
                        med(v["busbw_GBps"]), lo, hi))

    # ---- launch ----
    launch = defaultdict(lambda: defaultdict(list))
    lrep = defaultdict(dict)
    for r in read(os.path.join(raw, "launch.csv")):
        launch[r["what"]]["first"].append(float(r["first_s"]))
        launch[r["what"]]["total"].append(float(r["total_s"]))
        lrep[r["rep"]][r["what"]] = float(r["first_s"])
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
              "machine; medians over runs, ± is half the min–max spread "
              "over runs; ratios are taken within each run. Method and "
              "caveats: `bench/README.md`.\n")
    md.append("```\n" + env.strip() + "\n```\n")

    def r_at(n, b, peer, k):
        v = ratio.get((n, b, peer), {}).get(k, [])
        return v

    def big_sizes(n):
        return sorted({b for (i, nn, b) in ar if i == "libddp" and nn == n and b >= 1 << 20})

    def small_sizes(n):
        return sorted({b for (i, nn, b) in ar if i == "libddp" and nn == n and b <= 4096})

    tgt = []
    for n in (2, 4):
        for peer, want in (("openmpi", 1.2), ("gloo", 1.5)):
            vals = [(b, med(r_at(n, b, peer, "bw"))) for b in big_sizes(n)
                    if r_at(n, b, peer, "bw")]
            if vals:
                worst = min(vals, key=lambda x: x[1])
                tgt.append(["busbw ≥ %.1f× %s, ≥ 1 MiB, %d ranks" % (want, NAMES[peer], n),
                            "min %.2f× (at %s)" % (worst[1], human(worst[0])),
                            "met" if worst[1] >= want else "missed"])
        for peer, want in (("openmpi", 1.0), ("gloo", 0.5)):
            vals = [(b, med(r_at(n, b, peer, "lat"))) for b in small_sizes(n)
                    if r_at(n, b, peer, "lat")]
            if vals:
                worst = max(vals, key=lambda x: x[1])
                tgt.append(["latency ≤ %.1f× %s, ≤ 4 KiB, %d ranks" % (want, NAMES[peer], n),
                            "max %.2f× (at %s)" % (worst[1], human(worst[0])),
                            "met" if worst[1] <= want else "missed"])
        v = ar.get(("libddp", n, 64 << 20), {}).get("busbw_GBps")
        fr = ceiling_frac(n, 64 << 20)
        if v and (fr or ceil1):
            frac = med(fr) if fr else med(v) / ceil1
            tgt.append(["busbw ≥ 80 %% of raw TCP at 64 MiB, %d ranks" % n,
                        "%.0f %% of 1 stream%s (%.2f of %.2f GB/s)%s" % (
                            100 * frac, ", same run" if fr else "", med(v), ceil1,
                            "; %.0f %% of 4 streams" % (100 * med(v) / ceil4) if ceil4 else ""),
                        "met" if frac >= 0.8 else "missed"])
    if launch_ratio:
        tgt.append(["PyTorch launch: srun --ddp ≤ 0.5× srun + torchrun",
                    fmt_ratio(launch_ratio),
                    "met" if med(launch_ratio) <= 0.5 else "missed"])
    elif os.path.exists(os.path.join(raw, "launch-ddp.txt")):
        tgt.append(["PyTorch launch: srun --ddp ≤ 0.5× srun + torchrun",
                    "plugin not installed", "not measured"])
    if ddp_adds:
        lo, hi = spread(ddp_adds)
        tgt.append(["--ddp adds ≤ 10 ms to srun true",
                    "%+.0f ms (%+.0f … %+.0f)" % (1e3 * med(ddp_adds), 1e3 * lo, 1e3 * hi),
                    "met" if med(ddp_adds) <= 0.010 else "missed"])
    if ov["hidden"]:
        tgt.append(["overlap hides ≥ 50 % of communication (minicluster)",
                    "%.0f %% (bench/overlap)" % (100 * med(ov["hidden"])),
                    "met" if med(ov["hidden"]) >= 0.5 else "missed"])
    if ovl["hidden"]:
        tgt.append(["overlap hides ≥ 50 % of communication (node with spare cores)",
                    "%.0f %% (bench/overlap, bench/gpu-run)" % (100 * med(ovl["hidden"])),
                    "met" if med(ovl["hidden"]) >= 0.5 else "missed"])
    md.append("## Targets\n")
    md.append("| target | measured | status |\n|---|---|---|")
    md.extend("| %s | %s | %s |" % tuple(t) for t in tgt)
    md.append("")
    if bad:
        md.append("**Verification failed** for: %s\n" % ", ".join(
            "%s %d ranks %s" % (i, n, human(b)) for i, n, b in sorted(set(bad))))

    if tcp:
        md.append("## Raw TCP between two nodes (iperf3)\n")
        md.append("| mode | GB/s |\n|---|---|")
        for m, v in sorted(tcp.items()):
            md.append("| %s | %s |" % (m, fmt_pm(v, "%.2f")))
        md.append("")

    for n in (2, 4):
        sizes = sorted({b for (i, nn, b) in ar if nn == n})
        if not sizes:
            continue
        have = [i for i in IMPLS if any((i, n, b) in ar for b in sizes)]
        md.append("## Allreduce, fp32 sum in place, 2 nodes × %d rank%s (%d ranks)\n"
                  % (n // 2, "s" if n > 2 else "", n))
        hdr = ["size"] + ["%s µs" % NAMES[i] for i in have] + \
              ["%s busbw GB/s" % NAMES[i] for i in have] + \
              ["libddp/%s busbw" % NAMES[p] for p in have if p != "libddp"] + \
              ["libddp/%s time" % NAMES[p] for p in have if p != "libddp"]
        md.append("| " + " | ".join(hdr) + " |")
        md.append("|" + "---|" * len(hdr))
        for b in sizes:
            row = [human(b)]
            row += [fmt_pm(ar[(i, n, b)]["median_us"], "%.1f" if med(ar[(i, n, b)]["median_us"]) < 100 else "%.0f")
                    if (i, n, b) in ar else "-" for i in have]
            row += [fmt_pm(ar[(i, n, b)]["busbw_GBps"], "%.3f") if (i, n, b) in ar else "-"
                    for i in have]
            row += [fmt_ratio(r_at(n, b, p, "bw")) for p in have if p != "libddp"]
            row += [fmt_ratio(r_at(n, b, p, "lat")) for p in have if p != "libddp"]
            md.append("| " + " | ".join(row) + " |")
        md.append("")
        if ceil1:
            v = ar.get(("libddp", n, 64 << 20), {}).get("busbw_GBps")
            if v:
                md.append("libddp busbw at 64 MiB: %.0f %% of the 1-stream TCP "
                          "ceiling%s.\n" % (100 * med(v) / ceil1,
                                            ", %.0f %% of 4 streams" % (100 * med(v) / ceil4) if ceil4 else ""))
    coll = os.path.join(raw, "mpi-coll.txt")
    if os.path.exists(coll):
        md.append("Open MPI collective selection:\n\n```\n%s\n```\n"
                  % open(coll).read().strip())
    md.append("![busbw](busbw.png)\n\n![latency](latency.png)\n")

    if launch or os.path.exists(os.path.join(raw, "launch-ddp.txt")):
        md.append("## Launch, 2 nodes × 2 ranks\n")
        md.append("Wall time from srun's start (on the login host) to the "
                  "first completed allreduce on rank 0; for `true`, to srun's "
                  "exit.\n")
        md.append("| launch | to first allreduce s | to exit s |\n|---|---|---|")
        labels = {"srun-true": "`srun true`",
                  "srun-ddp-true": "`srun --ddp true`",
                  "libddp-ddp": "libddp program, `srun --ddp`",
                  "torch-ddp": "PyTorch script, `srun --ddp`",
                  "torch-torchrun": "PyTorch script, `srun` + `torchrun` (c10d)"}
        for w in labels:
            if w in launch:
                md.append("| %s | %s | %s |" % (labels[w], fmt_pm(launch[w]["first"], "%.3f"),
                                                fmt_pm(launch[w]["total"], "%.3f")))
            elif os.path.exists(os.path.join(raw, "launch-ddp.txt")) and "ddp" in w:
                md.append("| %s | plugin not installed | |" % labels[w])
        if launch_ratio:
            md.append("\nsrun --ddp / torchrun (PyTorch, same run): %s" % fmt_ratio(launch_ratio))
        if ddp_adds:
            md.append("\n`srun --ddp true` − `srun true` (same run): %+.1f ms median" % (1e3 * med(ddp_adds)))
        md.append("\n![launch](launch.png)\n")

    if train:
        md.append("## Training: examples/train (MLP, synthetic CIFAR-10 format)\n")
        md.append("| ranks | samples/s | step ms | speed-up vs 1 rank |\n|---|---|---|---|")
        base = med(train.get(1, {}).get("sps", [])) if 1 in train else None
        for n, v in sorted(train.items()):
            md.append("| %d | %s | %s | %s |" % (
                n, fmt_pm(v["sps"], "%.0f"), fmt_pm(v["step"], "%.2f"),
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
                human(b), fmt_pm(lib["us"], "%.1f") if lib else "-",
                fmt_pm(nccl["us"], "%.1f") if nccl else "-",
                fmt_ratio(gpu_ratio.get(b)),
                fmt_pm(lib["GBps"], "%.1f") if lib else "-"))
        md.append("")
        ceil = [v for (t, i, b), d in gpu.items() if t == "copy" for v in d["GBps"]]
        md.append("Gradient sync step (every gradient marked ready, then the "
                  "wait). Gradients in the program's own buffers are copied "
                  "into the bucket and back: GB/s counts both copies, "
                  "against the device's own copy bandwidth (`cudaMemcpy` "
                  "device to device, %s GB/s). Gradient views (registered "
                  "with grad NULL) live in the bucket and are not copied.\n"
                  % (fmt_pm(ceil, "%.0f") if ceil else "-"))
        md.append("| gradients | step ms, copied | GB/s copied | of copy bandwidth "
                  "| step ms, views | copied / views |\n|---|---|---|---|---|---|")
        for (t, i, b), d in sorted(gpu.items(), key=lambda x: (x[0][2], x[0][1])):
            if t != "bucket" or i.endswith(" views"):
                continue
            v = gpu.get((t, i + " views", b))
            frac = "%.1f %%" % (100 * med(d["GBps"]) / med(ceil)) if ceil else "-"
            md.append("| %s (%s) | %s | %s | %s | %s | %s |" % (
                i.replace("grad sync ", ""), human(b),
                fmt_pm([x / 1e3 for x in d["us"]], "%.2f"),
                fmt_pm(d["GBps"], "%.1f"), frac,
                fmt_pm([x / 1e3 for x in v["us"]], "%.2f") if v else "-",
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
