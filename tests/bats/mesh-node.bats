#!/usr/bin/env bats
# SPDX-License-Identifier: BSD-3-Clause
# A node of WK_HIER_LOCAL_MAX (128) ranks, the largest whose ranks all
# connect to each other: every rank of the node dials each other rank's
# data port from the node's one address at once, and each connection
# stays pending for the mesh hello's round trip, so a listener must hold
# them all. examples/train with every rank on this host as one node.

setup() {
	repo=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	train=$repo/${BUILD:-build}/examples/train
	[ -x "$train" ] || { echo "examples/train not built ($train): make all" >&2; return 1; }
	tmp=$(mktemp -d)
}

teardown() {
	rm -rf "$tmp"
}

@test "128 ranks on one node form their full local mesh and train to equal parameters" {
	local world=128 port r pids=() failed=0
	port=$((20000 + RANDOM % 20000))
	for r in $(seq 0 $((world - 1))); do
		env RANK="$r" WORLD_SIZE="$world" LOCAL_RANK="$r" \
			LOCAL_WORLD_SIZE="$world" MASTER_ADDR=127.0.0.1 \
			MASTER_PORT="$port" DDP_AUTH=none DDP_TIMEOUT=120 \
			OMP_NUM_THREADS=1 \
			"$train" --synthetic 256 --epochs 1 --batch 2 --hidden 8 \
			>"$tmp/rank$r" 2>&1 &
		pids+=($!)
	done
	for r in "${!pids[@]}"; do
		wait "${pids[$r]}" || { failed=$((failed + 1)); echo "rank $r failed:"; tail -n 3 "$tmp/rank$r"; }
	done
	[ "$failed" -eq 0 ]
	[ "$(cat "$tmp"/rank* | grep -c 'params_crc=')" -eq "$world" ]
	[ "$(cat "$tmp"/rank* | sed -n 's/.*params_crc=\([0-9a-f]*\).*/\1/p' | sort -u | wc -l)" -eq 1 ]
}
