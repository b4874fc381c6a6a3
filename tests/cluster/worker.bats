#!/usr/bin/env bats
# libddp on the minicluster: examples/train converges with equal checksums
# under srun --ddp (TCP backend, no GPU), a SIGKILLed rank ends the step
# within the timeout, and another user's process is refused by a root job's
# rendezvous while the job completes.
load common

setup_file() {
	mc_up --nodes 3 --gpus-per-node 4
}

setup() {
	require_plugin
	local stage=${MINICLUSTER_STAGE:-$repo_root/build/stage}
	train=$stage/usr/local/libexec/slurm-ddp/examples/train
	[ -x "$train" ] || train=$repo_root/build/examples/train
	[ -x "$train" ] || skip "examples/train is not built (run: make stage)"
}

# crcs: the params_crc values printed, one per line.
crcs() { printf '%s\n' "$output" | grep -oE '^rank [0-9]+ params_crc=[0-9a-f]+$' | sed 's/.*=//'; }

@test "srun --nodes=2 --gpus-per-node=2 --ddp train --synthetic 2048 --epochs 3: loss falls, checksums agree" {
	run mc_run -- env DDP_TIMEOUT=60 srun --nodes=2 --gpus-per-node=2 --ddp \
		"$train" --synthetic 2048 --epochs 3
	show
	[ "$status" -eq 0 ]
	[ "$(crcs | wc -l)" -eq 4 ]
	[ "$(crcs | sort -u | wc -l)" -eq 1 ]
	local first last
	first=$(printf '%s\n' "$output" | grep -oE '^epoch 1 loss [0-9.]+' | awk '{print $4}')
	last=$(printf '%s\n' "$output" | grep -oE '^epoch 3 loss [0-9.]+' | awk '{print $4}')
	[ -n "$first" ] && [ -n "$last" ]
	awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }'
}

@test "train --no-overlap (sync after the whole backward) ends with the same weights" {
	run mc_run -- env DDP_TIMEOUT=60 srun --nodes=2 --ntasks-per-node=2 --ddp \
		"$train" --synthetic 1024 --epochs 2
	show
	[ "$status" -eq 0 ]
	local with_overlap
	with_overlap=$(crcs | sort -u)
	[ "$(printf '%s\n' "$with_overlap" | wc -l)" -eq 1 ]
	[[ $output == *"step_ms "* ]]
	run mc_run -- env DDP_TIMEOUT=60 srun --nodes=2 --ntasks-per-node=2 --ddp \
		"$train" --synthetic 1024 --epochs 2 --no-overlap
	show
	[ "$status" -eq 0 ]
	[ "$(crcs | wc -l)" -eq 4 ]
	[ "$(crcs | sort -u)" = "$with_overlap" ]
}

@test "a rank killed with SIGKILL mid-training ends every other rank within the timeout + 5 s" {
	local timeout=20 killed end
	run mc_run -- env DDP_TIMEOUT=$timeout srun --nodes=2 --gpus-per-node=2 --ddp \
		bash -c 'if [ "$RANK" = 2 ]; then (sleep 2; echo "KILLED_AT $(date +%s.%N)" >&2; kill -9 $$) & fi; exec "$0" --synthetic 2048 --epochs 500' "$train"
	end=$(date +%s.%N)
	show
	[ "$status" -ne 0 ]
	killed=$(printf '%s\n' "$output" | grep -oE 'KILLED_AT [0-9.]+' | awk '{print $2}')
	[ -n "$killed" ]
	echo "# step ended $(awk -v a="$killed" -v b="$end" 'BEGIN { printf "%.2f", b - a }') s after the kill" >&3
	awk -v a="$killed" -v b="$end" -v t=$timeout 'BEGIN { exit !(b - a < t + 5) }'
	# The three survivors say which rank died and where.
	[ "$(printf '%s\n' "$output" | grep -c 'communication failed: .*lost rank 2 (node2)')" -eq 3 ]
	[ "$(printf '%s\n' "$output" | grep -c 'params_crc=')" -eq 0 ]
}

@test "a non-root user's process is refused by a root job's rendezvous while the job completes" {
	local port=29577 out
	out=$(mktemp)
	# The root job's ranks 1-3 join late, so rank 0 is waiting when the
	# intruder (user ddptest, on one of the job's nodes) knocks.
	mc_run -- env MASTER_PORT=$port DDP_TIMEOUT=60 srun --nodes=2 --gpus-per-node=2 --ddp \
		bash -c '[ "$RANK" = 0 ] || sleep 4; exec "$0" --synthetic 512 --epochs 2' "$train" \
		>"$out" 2>&1 &
	local job=$!
	sleep 1.5
	run mc_exec node2 --user ddptest -- env RANK=1 WORLD_SIZE=4 MASTER_ADDR=node1 \
		MASTER_PORT=$port DDP_TIMEOUT=5 "$train" --synthetic 64 --epochs 1
	show
	[ "$status" -ne 0 ]
	[[ $output == *"refused rank 1: credential of uid"* ]]
	local rc=0
	wait "$job" || rc=$?
	output=$(cat "$out")
	rm -f "$out"
	status=$rc
	show
	[ "$status" -eq 0 ]
	[[ $output == *"rank 0 refused connection from "*"this job runs as uid 0"* ]]
	[ "$(crcs | wc -l)" -eq 4 ]
	[ "$(crcs | sort -u | wc -l)" -eq 1 ]
}
