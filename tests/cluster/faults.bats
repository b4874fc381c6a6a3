#!/usr/bin/env bats
# Faults under srun --ddp --ddp-restart=2 on a 5-node minicluster, each
# injected by tests/lib/faults.bash into a batch job of five nodes that
# trains on fewer: a node's link cut (rank 2's node, then rank 0's node on
# a node that is not the batch host) and a PyTorch rank killed with
# SIGKILL. Each ends with the job COMPLETED and the parameters of an
# uninterrupted run of the same world size: a cut link, node evidence,
# without the cut node in the last step; the SIGKILL, a crash of the
# program that blames no node, under --ddp-restart-on=crash on the same
# nodes. Each prints the time from the fault to srun's first-failure line
# and to the restarted step's first epoch line.
#
# A cut link: libddp on the other ranks gives up after DDP_TIMEOUT=5 and
# their exit ends the step; srun stops waiting for the cut node's tasks a
# few seconds later. slurmctld cannot reach the node's slurmd: were the
# link to stay cut past SlurmdTimeout (30 s here), the node would be
# declared down and the whole job ended (NODE_FAIL). The tests model a
# flapping link: it comes back once a surviving rank has named the
# failure, and the step runs again without the node that libddp named.
#
# Every restarted step resumes from the epochs saved when the fault
# struck and trains none of them again (tests/lib/resume.bash): a step
# that started over would end with the same parameters.
# shellcheck source=tests/cluster/common.bash
source "$BATS_TEST_DIRNAME/common.bash"
# shellcheck source=tests/lib/faults.bash
source "$BATS_TEST_DIRNAME/../lib/faults.bash"
# shellcheck source=tests/lib/resume.bash
source "$BATS_TEST_DIRNAME/../lib/resume.bash"

setup_file() {
	mc_up --nodes 5
}

setup() {
	require_plugin
	local stage=${MINICLUSTER_STAGE:-$repo_root/build/stage}
	prefix=$stage${MINICLUSTER_PREFIX:-/usr/local}
	train=$prefix/libexec/slurm-ddp/examples/train
	[ -x "$train" ] || skip "examples/train is not staged at $train (run: make stage)"
	[ -x "$prefix/libexec/slurm-ddp/ddp-restart" ] ||
		skip "ddp-restart is not staged (run: make stage)"
	dir=$(mktemp -d)
	mkdir "$dir/ckpt" "$dir/tmp"
	chown -R ddptest "$dir"
}

teardown() {
	fault_restore_all
	rm -rf "$dir"
}

train_opts=(--synthetic 4096 --hidden 32 --epochs 12)
first_failure='^ddp: rank [0-9]+ on [^ ]+ (was killed|exited|hangs|is unreachable|was lost).*\(first failure of step [0-9]+\.[0-9]+\)$'

# wait_after FILE MARK REGEX SECONDS: waits until a line of FILE matching
# REGEX follows one matching MARK, at most SECONDS; fails at once when the
# batch script's srun has ended.
wait_after() {
	local deadline=$((SECONDS + $4))
	until awk -v m="$2" -v r="$3" '$0 ~ m { seen = 1 } seen && $0 ~ r { found = 1 } END { exit !found }' "$1" 2>/dev/null; do
		[ "$SECONDS" -lt "$deadline" ] && ! grep -q '^srun exit ' "$1" || return 1
		sleep 0.1
	done
}

# since T: seconds from epoch time T to now.
since() { awk -v a="$1" -v b="$(fault_now)" 'BEGIN { printf "%.1f", b - a }'; }

# uninterrupted N CMD...: the one checksum line of an uninterrupted run of
# CMD on N nodes (REGEX crc_re picks it), in want.
uninterrupted() {
	local n=$1
	shift
	run mc_run --user ddptest -- env USE_LIBUV=0 srun -N"$n" --ntasks-per-node=1 --ddp "$@"
	show
	[ "$status" -eq 0 ]
	want=$(printf '%s\n' "$output" | sed -n "$crc_re" | sort -u)
	[ "$(printf '%s\n' "$want" | wc -l)" -eq 1 ] && [ -n "$want" ]
}

# submit SRUN_ARGS PROGRAM...: a batch job of five nodes that runs PROGRAM
# under srun SRUN_ARGS --ddp --ddp-restart=2, each rank first printing its
# node, step and restart count; sets job once PROGRAM has saved its first
# checkpoint.
submit() {
	local srun_args=$1
	shift
	cat >"$dir/job.sh" <<-EOF
		#!/bin/bash
		export TMPDIR=$dir/tmp DDP_TIMEOUT=5 USE_LIBUV=0
		srun $srun_args --ntasks-per-node=1 --ddp --ddp-restart=2 bash -c \\
			'echo "rank \$RANK on \$(hostname) step \$SLURM_STEP_ID nodes \$SLURM_STEP_NODELIST restart=\${DDP_RESTART_COUNT:-unset}"; exec "\$0" "\$@"' \\
			$*
		echo "srun exit \$?"
	EOF
	chmod 0755 "$dir/job.sh"
	run mc_run --user ddptest -- sbatch --parsable -N5 -o "$dir/job.out" "$dir/job.sh"
	show
	[ "$status" -eq 0 ]
	job=$output
	wait_line "$dir/job.out" '^train(\.py)?: checkpoint of epoch [0-9]+ in ' 180
}

# node_of RANK: the node RANK of the first step ran on.
node_of() { sed -n "s/^rank $1 on \(node[0-9]*\) step 0 .*/\1/p" "$dir/job.out"; }

# measure: waits for srun's first-failure line and the restarted step's
# first epoch line, printing the time from FAULT_TIME to each. With
# "restore NODE", NODE's link comes back once a surviving rank has named
# the failure (libddp's DDP_TIMEOUT later): a link down for seconds, as a
# flapping one is. A node cut for longer than SlurmdTimeout is declared
# down by Slurm, which ends the whole job unless it was submitted with
# --no-kill; until then srun waits for the cut node's tasks.
measure() {
	if [ "${1:-}" = restore ]; then
		wait_line "$dir/job.out" '(^ddp: error: hang: |communication failed: )' 120 || true
		echo "# fault to a survivor's naming: $(since "$FAULT_TIME") s" >&3
		fault_restore "$2"
	fi
	wait_line "$dir/job.out" "$first_failure" 120 || true
	echo "# fault to srun's first-failure line: $(since "$FAULT_TIME") s" >&3
	if wait_after "$dir/job.out" '^ddp: step restarted ' '^epoch [0-9]+ loss' 240; then
		echo "# fault to the restarted step's first epoch line: $(since "$FAULT_TIME") s" >&3
	else
		echo "# no epoch line of a restarted step" >&3
	fi
}

# check_end N NODE WHERE PROG EPOCHS: the job COMPLETED; the step
# restarted once, WHERE "without" NODE (N ranks of the restarted step
# elsewhere) or WHERE "same" on the same nodes, NODE among them, after
# rank 2's crash under --ddp-restart-on=crash; PROG's EPOCHS resumed past
# the epochs done at the fault (reached), none trained twice, checksum
# equal to want.
check_end() {
	local n=$1 node=$2 state got first
	state=$(wait_done "$job" 300) || true
	sed 's/^/# /' "$dir/job.out" >&3
	[ "$state" = COMPLETED ]
	grep -qx 'srun exit 0' "$dir/job.out"
	[ "$(grep -cE '^rank [0-9]+ on node[1-5] step [0-9]+ nodes [^ ]+ restart=1$' "$dir/job.out")" -eq "$n" ]
	grep -E 'restart=1$' "$dir/job.out" | sed 's/.* nodes \([^ ]*\) .*/\1/' | sort -u >"$dir/nodes"
	[ "$(wc -l <"$dir/nodes")" -eq 1 ]
	if [ "$3" = same ]; then
		grep -qx "ddp: step restarted (1 of at most 2) on the same nodes: rank 2 was killed by signal 9 (crash; --ddp-restart-on=crash)" "$dir/job.out"
		first=$(grep -E 'restart=0$' "$dir/job.out" | sed 's/.* nodes \([^ ]*\) .*/\1/' | sort -u)
		echo "# first run on $first, restarted on $(cat "$dir/nodes")" >&3
		[ "$first" = "$(cat "$dir/nodes")" ]
		[ "$(grep -E 'restart=1$' "$dir/job.out" | grep -c " on $node ")" -eq 1 ]
	else
		grep -qE "^ddp: step restarted \(1 of at most 2\) without $node, from the allocation's " "$dir/job.out"
		[ "$(grep -E 'restart=1$' "$dir/job.out" | grep -c " on $node ")" -eq 0 ]
		[ "$(mc_run -- scontrol show hostnames "$(cat "$dir/nodes")" | grep -cx "$node")" -eq 0 ]
	fi
	resume_check "$4" "$dir/job.out" "$5" "$reached"
	got=$(sed -n "$crc_re" "$dir/job.out" | sort -u)
	echo "# uninterrupted $want, restarted $got" >&3
	[ "$got" = "$want" ]
	[ -z "$(ls -A "$dir/tmp")" ]
}

@test "sbatch -N5, srun -N4 --ddp-restart=2: rank 2's node's link cut: restarted without it, resumes past the cut epoch, ends as an uninterrupted run" {
	local blamed reached
	crc_re='s/^rank [0-9]* params_crc=//p'
	uninterrupted 4 "$train" "${train_opts[@]}"
	submit -N4 "$train" "${train_opts[*]}" --checkpoint "$dir/ckpt" --checkpoint-every 1
	blamed=$(node_of 2)
	[ -n "$blamed" ]
	reached=$(epochs_done "$dir/job.out")
	fault_cut "$blamed"
	measure restore "$blamed"
	check_end 4 "$blamed" without train 12
}

# The batch script and srun run on the allocation's first node (node1):
# -x node1 puts rank 0 on node2. That leaves four nodes for the step and
# its restart, so this step has three ranks.
@test "sbatch -N5, srun -N3 -x node1 --ddp-restart=2: rank 0's node (not the batch host) cut: restarted without it, resumes past the cut epoch" {
	local blamed reached
	crc_re='s/^rank [0-9]* params_crc=//p'
	uninterrupted 3 "$train" "${train_opts[@]}"
	submit "-N3 -x node1" "$train" "${train_opts[*]}" --checkpoint "$dir/ckpt" --checkpoint-every 1
	blamed=$(node_of 0)
	[ "$blamed" != node1 ] && [ -n "$blamed" ]
	reached=$(epochs_done "$dir/job.out")
	fault_cut "$blamed"
	measure restore "$blamed"
	check_end 3 "$blamed" without train 12
}

@test "sbatch -N5, srun -N4 --ddp-restart=2 --ddp-restart-on=crash: a PyTorch rank killed with SIGKILL (a crash): restarted on the same nodes, resumes past the killed epoch, ends with an uninterrupted run's parameters" {
	local node reached pid py=/usr/bin/python3 script=$repo_root/examples/train.py
	"$py" -c 'import torch' 2>/dev/null || skip "python3-torch is not installed"
	crc_re='s/^params_sha256 \([0-9a-f]*\) rank [0-9]*$/\1/p'
	uninterrupted 4 "$py" "$script" --device cpu --epochs 60
	submit "-N4 --ddp-restart-on=crash" "$py" "$script" --device cpu --epochs 60 --checkpoint "$dir/ckpt" --checkpoint-every 1
	node=$(node_of 2)
	[ -n "$node" ]
	pid=$(rank_pid "$job" 0 2 python3)
	reached=$(epochs_done "$dir/job.out")
	fault_kill "$pid" KILL
	measure
	check_end 4 "$node" same train.py 60
	# Some epochs left: the kill came while it trained.
	[ "$(sed -nE 's/^train.py: resuming from .* \(restart 1\): ([0-9]+) of 60 epochs done$/\1/p' "$dir/job.out")" -lt 60 ]
}
