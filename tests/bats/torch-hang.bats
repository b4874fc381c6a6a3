#!/usr/bin/env bats
# SPDX-License-Identifier: BSD-3-Clause
# slurm_ddp.hang (python/slurm_ddp/hang.py) without Slurm: 3 ranks of a
# Gloo training loop on loopback (tests/lib/torch-hang-world, env://),
# each with its own pipe as DDP_FAILURE_FD and DDP_HOSTNAME=nodeR. A rank
# whose data loader never returns, or that is stopped with SIGSTOP, is
# named within DDP_TIMEOUT + 2 s, with its node, pid and step, in libddp's
# words; the naming line on the namer's pipe is exactly what
# ddp_failure_format_naming writes; the namer ends with status 1. Rank 0
# stopped takes the job's store with it: it is named unreachable. A world
# with one slow rank, and one where every rank stalls at once, names
# nobody and ends.

setup() {
	repo=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	python=${PYTHON:-/usr/bin/python3}
	world=$repo/tests/lib/torch-hang-world
	"$python" -c 'import torch.distributed' 2>/dev/null ||
		skip "$python has no torch"
}

# field OUTPUT WORD: the rest of OUTPUT's line that starts with WORD.
field() {
	sed -n "s/^$2 //p" <<<"$1" | head -n 1
}

# within SECONDS LIMIT: SECONDS is at most LIMIT (decimals).
within() {
	awk -v s="$1" -v l="$2" 'BEGIN { exit !(s <= l) }'
}

# bound TIGHT LOOSE: the most seconds a naming may take. The bats tier
# runs on hosts whose load no test controls: there the bound is LOOSE,
# far from the design yet short of any other timeout a broken watchdog
# would fall back to; DDP_TEST_TIMING=strict holds the TIGHT bound the
# design promises (DDP_TIMEOUT + 2 s).
bound() {
	if [ "${DDP_TEST_TIMING:-}" = strict ]; then echo "$1"; else echo "$2"; fi
}

@test "a rank whose data loader never returns is named by rank 0 within DDP_TIMEOUT + 2 s, with its node, pid and step, on the namer's pipe" {
	run "$python" "$world" DDP_TIMEOUT=3 HANG_STUCK=2:7
	echo "$output"
	[ "$status" -eq 0 ]
	read -r r pid step <<<"$(field "$output" stuck)"
	[ "$r" = 2 ] && [ "$step" = 7 ]
	grep -qE "^hang 0 ddp: error: hang: rank 0 \(node0, pid [0-9]+\) is in step 8, which rank 2 \(node2, pid $pid, still in step 7\) has not entered \(.*\); the step is ended \(DDP_TIMEOUT=3\)$" <<<"$output"
	[ "$(field "$output" naming)" = "0 b'0 names 2 node2 hang\\n'" ]
	[ "$(grep -c '^naming ' <<<"$output")" -eq 1 ]
	[ "$(field "$output" 'exit 0')" = 1 ]
	after=$(field "$output" named_after)
	echo "# named ${after} s after the loader stuck (DDP_TIMEOUT=3)" >&3
	within 3 "$after"
	within "$after" "$(bound 5 20)"
}

@test "a rank stopped with SIGSTOP is named by rank 0 within DDP_TIMEOUT + 2 s, with its node and pid" {
	run "$python" "$world" --stop 2 DDP_TIMEOUT=3 HANG_STEPS=1000000
	echo "$output"
	[ "$status" -eq 0 ]
	read -r r pid _ <<<"$(field "$output" stuck)"
	[ "$r" = 2 ]
	grep -qE "^hang 0 ddp: error: hang: rank 0 \(node0, pid [0-9]+\) is in step [0-9]+, and rank 2 \(node2, pid $pid, last heard in step [0-9]+\) has been silent for [0-9.]+ s \(stopped, or cut off by the network\?\); the step is ended \(DDP_TIMEOUT=3\)$" <<<"$output"
	[ "$(field "$output" naming)" = "0 b'0 names 2 node2 hang\\n'" ]
	[ "$(field "$output" 'exit 0')" = 1 ]
	after=$(field "$output" named_after)
	echo "# named ${after} s after its SIGSTOP (DDP_TIMEOUT=3)" >&3
	within 3 "$after"
	within "$after" "$(bound 5 20)"
}

@test "rank 0 stopped with SIGSTOP, and the job's store with it, is named unreachable within DDP_TIMEOUT + 2 s" {
	run "$python" "$world" --stop 0 DDP_TIMEOUT=3 HANG_STEPS=1000000
	echo "$output"
	[ "$status" -eq 0 ]
	grep -qE "^hang [12] ddp: error: hang: rank [12] \(node[12], pid [0-9]+\) is in step [0-9]+ and has not reached the job's store on rank 0 \(node0, pid [0-9]+\) for [0-9.]+ s: rank 0 is unreachable" <<<"$output"
	# Every naming names rank 0 on node0; no rank names another.
	grep '^naming ' <<<"$output" | grep -vqE "^naming ([12]) b'\1 names 0 node0 unreachable\\\\n'$" && return 1
	grep -q '^naming ' <<<"$output"
	[ "$(field "$output" 'exit 0')" = killed ]
	after=$(field "$output" named_after)
	echo "# named ${after} s after rank 0's SIGSTOP (DDP_TIMEOUT=3)" >&3
	within 3 "$after"
	within "$after" "$(bound 5 20)"
}

@test "a world with one slow rank, then a stall of every rank at once, names nobody and ends" {
	run "$python" "$world" DDP_TIMEOUT=2 HANG_STEPS=10 HANG_SLOW=2:1.5 HANG_STALL=8:5
	echo "$output"
	[ "$status" -eq 0 ]
	if grep -q '^hang \|^naming ' <<<"$output"; then return 1; fi
	for r in 0 1 2; do
		[ "$(field "$output" "exit $r")" = 0 ]
		grep -q "^out $r done rank $r$" <<<"$output"
	done
}

@test "the naming line is ddp_failure_format_naming's, and DDP_FAILURE_FD is used only when it is that pipe" {
	run "$python" - "$repo/python" <<'EOF'
import os, sys
sys.path.insert(0, sys.argv[1])
from slurm_ddp.hang import failure_fd, format_naming, write_naming
assert format_naming(0, 2, "node3", "hang") == "0 names 2 node3 hang\n"
for bad in ((2, 2, "n", "hang"), (0, -1, "n", "hang"), (0, 1, "a b", "hang"),
            (0, 1, "n", "stuck"), (0, 2**31, "n", "hang")):
    try:
        format_naming(*bad)
    except ValueError:
        continue
    raise SystemExit(f"{bad} accepted")
rd, wr = os.pipe()
ino = os.fstat(wr).st_ino
assert failure_fd({"DDP_FAILURE_FD": f"{wr}:{ino}"}) == wr
assert failure_fd({"DDP_FAILURE_FD": f"{wr}:{ino + 1}"}) is None
assert failure_fd({"DDP_FAILURE_FD": f"{rd}"}) is None  # read end
assert failure_fd({"DDP_FAILURE_FD": "x"}) is None
f = os.open("/dev/null", os.O_WRONLY)
assert failure_fd({"DDP_FAILURE_FD": str(f)}) is None  # not a pipe
assert write_naming("1 names 0 node1 unreachable\n", {"DDP_FAILURE_FD": str(wr)})
assert os.read(rd, 100) == b"1 names 0 node1 unreachable\n"
print("ok")
EOF
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$output" = ok ]
}
