#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Summary of a bench/tcp-probe run: iperf3 ceilings, per-size iteration
time distributions, the ring sockets' TCP state and rank 0's threads."""
import collections
import re
import sys


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(q * len(xs) + 0.999999) - 1))]


def main(out):
    print("== iperf3 node1 -> node2 (GB/s: forward, reverse)")
    with open(out + "/iperf.txt") as f:
        print(f.read().rstrip())
    print("== allreduce_ddp: per-iteration times (us), busbw from the median")
    per = collections.defaultdict(list)
    with open(out + "/iters.csv") as f:
        for line in f:
            b, _, us = line.strip().split(",")
            per[int(b)].append(float(us))
    print("bytes      n   min     p50     p95     p99     max   >2x p50  busbw GB/s")
    for b in sorted(per):
        xs = per[b]
        med = quantile(xs, 0.5)
        slow = sum(1 for x in xs if x > 2 * med)
        print("%-9d %3d %7.0f %7.0f %7.0f %7.0f %7.0f %5d   %.3f" % (
            b, len(xs), min(xs), med, quantile(xs, 0.95), quantile(xs, 0.99),
            max(xs), slow, b / med / 1e3))
    print("== ring sockets on node1 (ss -tin samples)")
    keys = ("cwnd", "rtt", "retrans", "sendq", "recvq", "snd_wnd", "rcv_space")
    vals = collections.defaultdict(list)
    with open(out + "/ss.txt") as f:
        lines = f.read().splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"\s*(\d+)\s+(\d+)\s+\S+:\d+\s+\S+:\d+", line)
        if not m or i + 1 >= len(lines):
            continue
        vals["recvq"].append(int(m.group(1)))
        vals["sendq"].append(int(m.group(2)))
        info = lines[i + 1]
        for k in ("cwnd", "snd_wnd", "rcv_space"):
            mk = re.search(r"\b%s:(\d+)" % k, info)
            if mk:
                vals[k].append(int(mk.group(1)))
        mk = re.search(r"\brtt:([\d.]+)", info)
        if mk:
            vals["rtt"].append(float(mk.group(1)))
        mk = re.search(r"\bretrans:\d+/(\d+)", info)
        vals["retrans"].append(int(mk.group(1)) if mk else 0)
    for k in keys:
        xs = vals.get(k)
        if xs:
            print("%-9s samples %4d  min %10.3f  p50 %10.3f  max %10.3f" % (
                k, len(xs), min(xs), quantile(xs, 0.5), max(xs)))
    print("== TCP counters during the allreduce run (after - before)")
    seen = {}
    with open(out + "/counters.csv") as f:
        for line in f:
            when, node, name, value = line.strip().split(",")
            if when == "before":
                seen[(node, name)] = int(value)
            elif (node, name) in seen:
                print("%s %-24s %d" % (node, name,
                                       int(value) - seen[(node, name)]))
    print("== rank 0's threads (share of samples per state; CPU time in ticks)")
    states = collections.defaultdict(collections.Counter)
    cpu = collections.defaultdict(list)
    with open(out + "/threads.csv") as f:
        next(f)
        for line in f:
            _, tid, st, ut, stime, last = line.strip().split(",")
            states[tid][st] += 1
            cpu[tid].append((int(ut) + int(stime), last))
    for tid in sorted(states, key=int):
        n = sum(states[tid].values())
        used = cpu[tid][-1][0] - cpu[tid][0][0]
        cpus = collections.Counter(c for _, c in cpu[tid])
        print("tid %s: %s; %d ticks over %d samples; last CPU %s" % (
            tid, ", ".join("%s %.0f%%" % (s, 100.0 * c / n)
                           for s, c in states[tid].most_common()),
            used, n, dict(cpus)))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bench/results/raw/tcp-probe")
