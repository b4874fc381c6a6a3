#!/usr/bin/env bats
# SPDX-License-Identifier: BSD-3-Clause
# A hung PyTorch rank named (python/slurm_ddp/hang.py) on a 3-node
# minicluster: srun -N3 --ddp runs a Gloo training loop that makes the
# module's per-step call (tests/lib/torch-hang-rank) with DDP_TIMEOUT=5,
# and rank 2 is stopped with SIGSTOP. A survivor names it on its
# DDP_FAILURE_FD and ends, slurmstepd ends the step, and srun's line says
# "rank 2 on NODE hangs (named by rank 0)" within DDP_TIMEOUT + 2 s of the
# SIGSTOP. With --ddp-restart=1 --ddp-restart-on=hang the step runs again
# on the same nodes (a hang blames no node) and completes.
# shellcheck source=tests/cluster/common.bash
source "$BATS_TEST_DIRNAME/common.bash"
# shellcheck source=tests/lib/faults.bash
source "$BATS_TEST_DIRNAME/../lib/faults.bash"

setup_file() {
	mc_up --nodes 3
}

setup() {
	require_plugin
	[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import torch' 2>/dev/null ||
		skip "python3-torch is not installed"
	rank=$repo_root/tests/lib/torch-hang-rank
	dir=$(mktemp -d)
	chmod 0755 "$dir"
	srun_pid=
}

teardown() {
	fault_restore_all
	[ -z "${srun_pid:-}" ] || kill "$srun_pid" 2>/dev/null || true
	rm -rf "$dir"
}

# stop_rank_2 FILE: waits for rank 2's "rank 2 pid P step 5" line in FILE
# (the first one), stops P with SIGSTOP and waits for srun's line naming
# a rank (120 s at most); sets node (rank 2's, from its "rank 2 on NODE"
# line) and took (seconds from the SIGSTOP to srun's line).
stop_rank_2() {
	local pid stopped
	wait_line "$1" '^rank 2 pid [0-9]+ step 5 at ' 180
	pid=$(sed -nE 's/^rank 2 pid ([0-9]+) step 5 at .*/\1/p' "$1" | head -n 1)
	node=$(sed -nE 's/^rank 2 on (node[0-9]+) .*/\1/p' "$1" | head -n 1)
	[ -n "$pid" ] && [ -n "$node" ]
	stopped=$(fault_now)
	fault_stop "$pid"
	wait_line "$1" '^ddp: rank [0-9]+ on [^ ]+ .*\(named by rank [0-9]+\)' 120
	took=$(awk -v a="$stopped" -v b="$(fault_now)" 'BEGIN { printf "%.2f", b - a }')
	echo "# srun named rank 2 on $node ${took} s after its SIGSTOP (DDP_TIMEOUT=5)" >&3
}

# The line each rank prints before the loop: its rank, node and run.
say='echo "rank $RANK on $(hostname) step $SLURM_STEP_ID restart=${DDP_RESTART_COUNT:-unset}"; exec "$0" "$@"'

@test "srun -N3 --ddp, DDP_TIMEOUT=5: a PyTorch rank stopped with SIGSTOP is named with its node by srun within DDP_TIMEOUT + 2 s, and the step ends" {
	local rc=0 line
	mc_run -- env USE_LIBUV=0 DDP_TIMEOUT=5 HANG_STEPS=1000000 \
		srun -N3 --ntasks-per-node=1 --ddp bash -c "$say" \
		/usr/bin/python3 "$rank" >"$dir/out" 2>&1 &
	srun_pid=$!
	stop_rank_2 "$dir/out"
	wait "$srun_pid" || rc=$?
	srun_pid=
	sed 's/^/# /' "$dir/out" >&3
	[ "$rc" -ne 0 ]
	line=$(grep -E '^ddp: rank [0-9]+ on [^ ]+ .*\(named by rank [0-9]+\)' "$dir/out")
	[ "$(wc -l <<<"$line")" -eq 1 ]
	[[ $line == "ddp: rank 2 on $node hangs (named by rank 0); the step was ended"* ]]
	# The namer's own line: rank 2, its node and pid, in libddp's words.
	grep -qE "^ddp: error: hang: rank 0 \(node[0-9]+, pid [0-9]+\) is in step [0-9]+, and rank 2 \($node, pid [0-9]+, last heard in step [0-9]+\) has been silent for [0-9.]+ s" "$dir/out"
	# DDP_TIMEOUT + 2 s is the design (the figure above); a busy host
	# gets the bound restart.bats gives libddp's naming.
	awk -v t="$took" 'BEGIN { exit !(t <= 20) }'
}

@test "sbatch -N3, srun -N3 --ddp-restart=1 --ddp-restart-on=hang, DDP_TIMEOUT=5: the stopped PyTorch rank is named, the step runs again on the same nodes and completes" {
	local job state first again
	cat >"$dir/job.sh" <<-EOF
		#!/bin/bash
		export USE_LIBUV=0 DDP_TIMEOUT=5 HANG_STEPS=300
		srun -N3 --ntasks-per-node=1 --ddp --ddp-restart=1 --ddp-restart-on=hang \\
			bash -c '$say' /usr/bin/python3 $rank
		echo "srun exit \$?"
	EOF
	chmod 0755 "$dir/job.sh"
	run mc_run -- sbatch --parsable -N3 -o "$dir/job.out" "$dir/job.sh"
	show
	[ "$status" -eq 0 ]
	job=$output
	stop_rank_2 "$dir/job.out"
	state=$(wait_done "$job" 300) || true
	sed 's/^/# /' "$dir/job.out" >&3
	[ "$state" = COMPLETED ]
	grep -qx 'srun exit 0' "$dir/job.out"
	grep -qE "^ddp: rank 2 on $node hangs \(named by rank 0\); the step was ended" "$dir/job.out"
	grep -qE "^ddp: step restarted \(1 of at most 1\) on the same nodes: rank 2 hangs \(hang; --ddp-restart-on=hang\)$" "$dir/job.out"
	# DDP_TIMEOUT + 2 s is the design (the figure above); a busy host
	# gets the bound restart.bats gives libddp's naming.
	awk -v t="$took" 'BEGIN { exit !(t <= 20) }'
	# The same nodes, rank for rank; every rank of the second run ends.
	first=$(sed -nE 's/^(rank [0-2] on node[0-9]+) step [0-9]+ restart=0$/\1/p' "$dir/job.out" | sort)
	again=$(sed -nE 's/^(rank [0-2] on node[0-9]+) step [0-9]+ restart=1$/\1/p' "$dir/job.out" | sort)
	[ "$(wc -l <<<"$first")" -eq 3 ] && [ "$first" = "$again" ]
	[ "$(grep -c '^done rank [0-2]$' "$dir/job.out")" -eq 3 ]
}
