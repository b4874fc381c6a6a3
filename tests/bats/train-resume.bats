#!/usr/bin/env bats
# SPDX-License-Identifier: BSD-3-Clause
# examples/train and examples/train.py resume from their checkpoint, without
# Slurm: 2 ranks on this machine get the env:// variables srun --ddp sets
# (DDP_AUTH=none on loopback). A run killed with SIGKILL once its checkpoint
# of an epoch is there, started again with the same options, ends with the
# parameters of an uninterrupted run, bit for bit; a checkpoint that does
# not fit the run (world size, model, damage, a directory the ranks do not
# share) is refused with a message that says so. The resumed run goes on
# from the epochs the killed one had done and trains none of them again
# (tests/lib/resume.bash). train.py's agreed stop (python/slurm_ddp): a
# signal to one rank stops every rank after the same step, checkpointed
# in the middle of an epoch, and the run started again goes on from the
# next batch; a version 1 checkpoint (whole epochs) is still read.

# shellcheck source=tests/lib/resume.bash
source "$BATS_TEST_DIRNAME/../lib/resume.bash"
# shellcheck source=tests/lib/local-ranks.bash
source "$BATS_TEST_DIRNAME/../lib/local-ranks.bash"

setup() {
	repo=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	train=$repo/${BUILD:-build}/examples/train
	python=${PYTHON:-/usr/bin/python3}
	tmp=$(mktemp -d /tmp/ddp-resume.XXXXXX)
	pids=()
}

teardown() {
	local p
	for p in "${pids[@]}"; do
		kill -KILL "$p" 2>/dev/null || true
	done
	rm -rf "$tmp"
}

need_train() {
	[ -x "$train" ] || skip "examples/train not built ($train)"
}

need_torch() {
	"$python" -c 'import torch, numpy' 2>/dev/null ||
		skip "$python has no torch and numpy"
}


# kill_when FILE TEST...: waits (60 s at most) until TEST, run on FILE,
# succeeds while the ranks run, then kills every rank with SIGKILL.
kill_when() {
	local file=$1 p
	shift
	for _ in $(seq 6000); do
		"$@" "$file" && break
		for p in "${pids[@]}"; do
			kill -0 "$p" 2>/dev/null || {
				echo "a rank ended before $file was ready"
				return 1
			}
		done
		sleep 0.01
	done
	kill -KILL "${pids[@]}"
	wait "${pids[@]}" 2>/dev/null || true
	pids=()
}

# The epochs done in examples/train's checkpoint FILE (a little-endian u64
# at offset 32), 0 when there is none.
ckpt_epoch() {
	if [ -s "$1" ]; then
		od -An -t u8 -j 32 -N 8 "$1" | tr -d ' '
	else
		echo 0
	fi
}

at_least_2() {
	[ "$(ckpt_epoch "$1")" -ge 2 ]
}

# The one params_crc every rank printed, or nothing.
crc_of() {
	cat "$tmp/$1".* | sed -n 's/^rank [0-9]* params_crc=//p' | sort -u
}

train_opts=(--synthetic 2048 --hidden 32 --epochs 8)

@test "train killed after its checkpoint of epoch 2 resumes from it, trains no epoch twice and ends bit-identical to an uninterrupted run" {
	need_train
	run_ranks 2 plain "$train" "${train_opts[@]}"
	want=$(crc_of plain)
	[ "$(printf '%s\n' "$want" | wc -l)" -eq 1 ] && [ -n "$want" ]

	mkdir "$tmp/ck"
	start_ranks 2 killed "$train" "${train_opts[@]}" --checkpoint "$tmp/ck" \
		--checkpoint-every 1
	kill_when "$tmp/ck/train.ckpt" at_least_2
	done_at_kill=$(ckpt_epoch "$tmp/ck/train.ckpt")
	echo "killed with $done_at_kill epochs done"
	[ "$done_at_kill" -ge 2 ] && [ "$done_at_kill" -lt 8 ]
	[ -z "$(crc_of killed)" ]

	run_ranks 2 resumed "$train" "${train_opts[@]}" --checkpoint "$tmp/ck" \
		--checkpoint-every 1
	grep -q "^train: resuming from $tmp/ck/train.ckpt (restart 0): $done_at_kill of 8 epochs done" "$tmp/resumed.0"
	# The resumed run trained only the epochs left, none twice.
	cat "$tmp/killed.0" "$tmp/resumed.0" >"$tmp/runs"
	resume_check train "$tmp/runs" 8 "$done_at_kill"
	[ "$(crc_of resumed)" = "$want" ]
	[ "$(ckpt_epoch "$tmp/ck/train.ckpt")" -eq 8 ]
	# Mode 0600, and no temporary file of a finished write left behind.
	[ "$(stat -c %a "$tmp/ck/train.ckpt")" = 600 ]
	[ "$(find "$tmp/ck" -name '.train.ckpt.tmp-*' | wc -l)" -le 1 ]
}

@test "train refuses a checkpoint of another world size, model or damaged, naming why" {
	need_train
	mkdir "$tmp/ck"
	run_ranks 2 first "$train" --synthetic 256 --hidden 8 --epochs 2 \
		--checkpoint "$tmp/ck" --checkpoint-every 2
	grep -q "^train: checkpoint of epoch 2 in $tmp/ck/train.ckpt" "$tmp/first.0"

	run env WORLD_SIZE=1 DDP_AUTH=none DDP_BACKEND=tcp "$train" \
		--synthetic 256 --hidden 8 --epochs 3 --checkpoint "$tmp/ck"
	[ "$status" -eq 1 ]
	[[ $output == *"train.ckpt was written by a world of 2 ranks, this run has 1"* ]]

	start_ranks 2 shape "$train" --synthetic 256 --hidden 16 --epochs 3 \
		--checkpoint "$tmp/ck"
	if wait_ranks; then false; fi
	grep -q "train.ckpt holds a 3072-8-10 model, this run trains 3072-16-10" "$tmp/shape.0"

	start_ranks 2 data "$train" --synthetic 300 --hidden 8 --epochs 3 \
		--checkpoint "$tmp/ck"
	if wait_ranks; then false; fi
	grep -q "train.ckpt was trained on 256 samples, this run has 300" "$tmp/data.0"

	# One flipped bit in the parameters.
	byte=$(od -An -t u1 -j 100 -N 1 "$tmp/ck/train.ckpt" | tr -d ' ')
	printf '%b' "\\$(printf '%03o' $((byte ^ 1)))" |
		dd of="$tmp/ck/train.ckpt" bs=1 seek=100 conv=notrunc status=none
	start_ranks 2 damaged "$train" --synthetic 256 --hidden 8 --epochs 3 \
		--checkpoint "$tmp/ck"
	if wait_ranks; then false; fi
	grep -q "train.ckpt is damaged (its CRC does not match)" "$tmp/damaged.0"
}

@test "train: ranks that do not find the same checkpoint stop instead of training apart" {
	need_train
	mkdir "$tmp/a" "$tmp/b"
	run_ranks 2 first "$train" --synthetic 256 --hidden 8 --epochs 1 \
		--checkpoint "$tmp/a"
	# Rank 0 sees a checkpoint, rank 1 an empty directory: as on nodes
	# that do not share the directory.
	port=$(free_port)
	for r in 0 1; do
		dir=$tmp/a
		[ "$r" -eq 0 ] || dir=$tmp/b
		RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
			DDP_AUTH=none DDP_BACKEND=tcp DDP_TIMEOUT=60 "$train" \
			--synthetic 256 --hidden 8 --epochs 3 --checkpoint "$dir" \
			>"$tmp/apart.$r" 2>&1 &
		pids+=("$!")
	done
	if wait_ranks; then false; fi
	grep -q "the ranks did not all find the same checkpoint in $tmp/a" "$tmp/apart.0"
	if grep -q "^epoch " "$tmp/apart.0"; then false; fi
}

@test "train: a malformed restart count, --checkpoint-every alone and a missing directory are refused" {
	need_train
	run env DDP_RESTART_COUNT=two DDP_AUTH=none "$train" --synthetic 16 \
		--checkpoint "$tmp"
	[ "$status" -eq 1 ]
	[[ $output == *"DDP_RESTART_COUNT='two' is not a restart count"* ]]
	run "$train" --synthetic 16 --checkpoint-every 2
	[ "$status" -eq 2 ]
	[[ $output == *"--checkpoint-every needs --checkpoint DIR"* ]]
	run env DDP_AUTH=none "$train" --synthetic 16 --checkpoint "$tmp/none"
	[ "$status" -eq 1 ]
	[[ $output == *"--checkpoint $tmp/none: No such file or directory"* ]]
}

py_opts=(--epochs 40 --device cpu)

digest_of() {
	cat "$tmp/$1".* | sed -n 's/^params_sha256 \([0-9a-f]*\) rank [0-9]*$/\1/p' | sort -u
}

# saved_two FILE: FILE has the checkpoint line of epoch 2 or later: a
# resume from the first checkpoint would then be too early.
saved_two() {
	[ "$(epochs_done "$1")" -ge 2 ]
}

# Three ranks: with two, a + b rounds the same in any order, so a resumed
# run that summed its gradients in another order would pass unnoticed.
@test "train.py (3 ranks) killed after its second checkpoint resumes from it, trains no saved epoch twice and ends bit-identical to an uninterrupted run" {
	need_torch
	run_ranks 3 plain "$python" "$repo/examples/train.py" "${py_opts[@]}"
	want=$(digest_of plain)
	[ "$(printf '%s\n' "$want" | wc -l)" -eq 1 ] && [ -n "$want" ]
	[ "$(cat "$tmp"/plain.* | grep -cE '^rank [012] local_rank 0 world 3 device cpu backend gloo checksum ')" -eq 3 ]

	mkdir "$tmp/ck"
	start_ranks 3 killed "$python" "$repo/examples/train.py" "${py_opts[@]}" \
		--checkpoint "$tmp/ck" --checkpoint-every 1
	kill_when "$tmp/killed.0" saved_two
	[ -z "$(digest_of killed)" ]
	# The epochs rank 0 had saved, and said so, when it was killed.
	done_at_kill=$(epochs_done "$tmp/killed.0")
	echo "killed with $done_at_kill epochs done"
	[ "$done_at_kill" -ge 2 ] && [ "$done_at_kill" -lt 40 ]

	run_ranks 3 resumed "$python" "$repo/examples/train.py" "${py_opts[@]}" \
		--checkpoint "$tmp/ck" --checkpoint-every 1
	cat "$tmp/killed.0" "$tmp/resumed.0" >"$tmp/runs"
	resume_check train.py "$tmp/runs" 40 "$done_at_kill"
	[ "$(digest_of resumed)" = "$want" ]
	[ "$(grep -h ' checksum ' "$tmp"/resumed.* | awk '{print $NF}' | sort -u)" = \
		"$(grep -h ' checksum ' "$tmp"/plain.* | awk '{print $NF}' | sort -u)" ]
	[ "$(stat -c %a "$tmp/ck/train.pt")" = 600 ]
}

# epoch_two FILE: rank 0 has trained two epochs.
epoch_two() {
	grep -q '^epoch 1 loss ' "$1"
}

# signal_when FILE TEST SIG PID: waits (60 s at most) until TEST, run on
# FILE, succeeds while the ranks run, then sends SIG to PID.
signal_when() {
	local file=$1 test=$2 sig=$3 pid=$4 p
	for _ in $(seq 6000); do
		"$test" "$file" && break
		for p in "${pids[@]}"; do
			kill -0 "$p" 2>/dev/null || {
				echo "a rank ended before $file was ready"
				return 1
			}
		done
		sleep 0.01
	done
	kill "-$sig" "$pid"
}

@test "train.py (3 ranks): SIGUSR1 to one rank stops every rank after the same step, checkpointed mid-epoch (exit 75); the run started again goes on from the next batch and ends bit-identical" {
	need_torch
	run_ranks 3 plain "$python" "$repo/examples/train.py" "${py_opts[@]}"
	want=$(digest_of plain)
	[ -n "$want" ]

	mkdir "$tmp/ck"
	DDP_STOP_BEFORE=auto start_ranks 3 stopped "$python" "$repo/examples/train.py" \
		"${py_opts[@]}" --checkpoint "$tmp/ck" --checkpoint-every 5
	target=$((RANDOM % 3))
	signal_when "$tmp/stopped.0" epoch_two USR1 "${pids[$target]}"
	for r in 0 1 2; do
		rc=0
		wait "${pids[$r]}" || rc=$?
		[ "$rc" -eq 75 ] || {
			echo "rank $r exited $rc, not 75"
			tail -n 5 "$tmp/stopped.$r"
			false
		}
	done
	pids=()
	# One step for every rank, the signalled one's reason its signal.
	steps=$(sed -n 's/^train.py: rank [0-2] stopped after step \([0-9]*\) (.*)$/\1/p' "$tmp"/stopped.* | sort -u)
	[ "$(printf '%s\n' "$steps" | wc -l)" -eq 1 ] && [ -n "$steps" ]
	grep -qx "train.py: rank $target stopped after step $steps (sigusr1)" "$tmp/stopped.$target"
	[ "$(grep -c '(agreed)$' "$tmp"/stopped.*  | awk -F: '{ n += $2 } END { print n }')" -eq 2 ]
	grep -qx "train.py: checkpoint at step $steps in $tmp/ck/train.pt" "$tmp/stopped.0"
	[ -z "$(digest_of stopped)" ]
	# 11 batches an epoch (2048 samples, 3 ranks, 64 a batch).
	epochs=$(((steps - 1) / 11))
	echo "stopped after step $steps, in epoch $epochs"

	DDP_STOP_BEFORE=auto run_ranks 3 resumed "$python" "$repo/examples/train.py" \
		"${py_opts[@]}" --checkpoint "$tmp/ck" --checkpoint-every 5
	grep -qx "train.py: resuming from $tmp/ck/train.pt (restart 0): $epochs of 40 epochs done, step $steps" "$tmp/resumed.0"
	cat "$tmp/stopped.0" "$tmp/resumed.0" >"$tmp/runs"
	resume_check train.py "$tmp/runs" 40 "$epochs"
	# The cut epoch is finished once, with the loss of an uninterrupted
	# run, and the epochs after it follow.
	[ "$(sed -n 's/^epoch \([0-9]*\) loss .*/\1/p' "$tmp/stopped.0" | tail -n 1)" -eq $((epochs - 1)) ] ||
		[ "$epochs" -eq 0 ]
	[ "$(sed -n 's/^epoch \([0-9]*\) loss .*/\1/p' "$tmp/resumed.0" | head -n 1)" -eq "$epochs" ]
	[ "$(grep -c '^epoch ' "$tmp/resumed.0")" -eq $((40 - epochs)) ]
	[ "$(grep "^epoch $epochs loss " "$tmp/resumed.0")" = "$(grep "^epoch $epochs loss " "$tmp/plain.0")" ]
	[ "$(digest_of resumed)" = "$want" ]
}

@test "train.py resumes from a version 1 checkpoint (whole epochs, before the stop's format) and ends bit-identical" {
	need_torch
	run_ranks 2 plain "$python" "$repo/examples/train.py" --device cpu --epochs 3
	mkdir "$tmp/ck"
	run_ranks 2 first "$python" "$repo/examples/train.py" --device cpu \
		--epochs 2 --checkpoint "$tmp/ck"
	# Written as train.py wrote it before version 2.
	"$python" -c 'import sys, torch
s = torch.load(sys.argv[1])
assert s["version"] == 2 and s["batches"] == 0, s["version"]
del s["batches"], s["loss_total"]
s["version"] = 1
torch.save(s, sys.argv[1])' "$tmp/ck/train.pt"
	run_ranks 2 resumed "$python" "$repo/examples/train.py" --device cpu \
		--epochs 3 --checkpoint "$tmp/ck"
	grep -qx "train.py: resuming from $tmp/ck/train.pt (restart 0): 2 of 3 epochs done" "$tmp/resumed.0"
	[ "$(grep -c '^epoch ' "$tmp/resumed.0")" -eq 1 ]
	[ "$(digest_of resumed)" = "$(digest_of plain)" ]
}

@test "train.py refuses a checkpoint of another world size, naming both, and a missing directory" {
	need_torch
	mkdir "$tmp/ck"
	run_ranks 2 first "$python" "$repo/examples/train.py" --epochs 1 \
		--device cpu --checkpoint "$tmp/ck"
	run_ranks 1 one "$python" "$repo/examples/train.py" --epochs 2 \
		--device cpu --checkpoint "$tmp/ck" || true
	grep -q "train.pt was written by a world of 2 ranks, this run has 1" "$tmp/one.0"
	run "$python" "$repo/examples/train.py" --checkpoint "$tmp/none"
	[ "$status" -eq 2 ]
	[[ $output == *"--checkpoint $tmp/none: no such directory"* ]]
}

# phases_in FILE PREFIX: the phase names of the "PREFIX: time rank R PHASE
# SECONDS" lines of FILE, in order, checking that the times never go back.
phases_in() {
	awk -v p="$2:" '$1 == p && $2 == "time" && $3 == "rank" {
		if ($6 < last) { print "time went back at " $5; exit 1 }
		last = $6; printf "%s ", $5 }' "$1"
}

@test "train and train.py --times (or DDP_TRAIN_TIMES=1) print each phase of their start on every rank, and nothing without it" {
	need_train
	mkdir "$tmp/ck" "$tmp/ckpy"
	run_ranks 2 times "$train" --synthetic 256 --hidden 8 --epochs 1 --times --checkpoint "$tmp/ck"
	for r in 0 1; do
		[ "$(phases_in "$tmp/times.$r" train)" = "start rendezvous checkpoint first-allreduce " ]
	done
	DDP_TRAIN_TIMES=1 run_ranks 2 env "$train" --synthetic 256 --hidden 8 --epochs 1
	[ "$(phases_in "$tmp/env.0" train)" = "start rendezvous first-allreduce " ]
	run_ranks 2 plain "$train" --synthetic 256 --hidden 8 --epochs 1
	run grep -q ' time rank ' "$tmp/plain.0" "$tmp/plain.1"
	[ "$status" -eq 1 ]
	"$train" --help | grep -q -- '--times'
	need_torch
	run_ranks 2 py "$python" "$repo/examples/train.py" --device cpu --epochs 1 --times --checkpoint "$tmp/ckpy"
	for r in 0 1; do
		[ "$(phases_in "$tmp/py.$r" train.py)" = "start rendezvous checkpoint first-allreduce " ]
	done
	run_ranks 2 pyplain "$python" "$repo/examples/train.py" --device cpu --epochs 1
	run grep -q ' time rank ' "$tmp/pyplain.0" "$tmp/pyplain.1"
	[ "$status" -eq 1 ]
}
