#!/usr/bin/env bats
# SPDX-License-Identifier: BSD-3-Clause
# examples/train's agreed stop (libddp(3), STOPPING), without Slurm: 3
# ranks on this machine get the env:// variables and DDP_STOP_BEFORE that
# srun --ddp sets (DDP_AUTH=none on loopback). SIGUSR1 to one rank stops
# every rank after the same step with exit status 75 (DDP_EXIT_STOPPED);
# rank 0 saves that step in the middle of its epoch (checkpoint version
# 2), and the run started again goes on with the next batch of that epoch
# (tests/lib/resume.bash) and ends bit-identical to an uninterrupted run.
# A version 1 checkpoint (whole epochs, before the stop) is still read.

# shellcheck source=tests/lib/resume.bash
source "$BATS_TEST_DIRNAME/../lib/resume.bash"
# shellcheck source=tests/lib/local-ranks.bash
source "$BATS_TEST_DIRNAME/../lib/local-ranks.bash"

setup() {
	repo=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	train=$repo/${BUILD:-build}/examples/train
	python=${PYTHON:-/usr/bin/python3}
	tmp=$(mktemp -d /tmp/ddp-stop.XXXXXX)
	pids=()
	[ -x "$train" ] || skip "examples/train not built ($train)"
}

teardown() {
	local p
	for p in "${pids[@]}"; do
		kill -KILL "$p" 2>/dev/null || true
	done
	rm -rf "$tmp"
}

# The one params_crc every rank printed, or nothing.
crc_of() {
	cat "$tmp/$1".* | sed -n 's/^rank [0-9]* params_crc=//p' | sort -u
}

# signal_when FILE PATTERN SIG PID: waits (60 s at most) until FILE has a
# line matching PATTERN while the ranks run, then sends SIG to PID.
signal_when() {
	local file=$1 pattern=$2 sig=$3 pid=$4 p
	for _ in $(seq 6000); do
		grep -q "$pattern" "$file" && break
		for p in "${pids[@]}"; do
			kill -0 "$p" 2>/dev/null || {
				echo "a rank ended before $file had $pattern"
				return 1
			}
		done
		sleep 0.01
	done
	kill "-$sig" "$pid"
}

train_opts=(--synthetic 2048 --hidden 32 --epochs 8)

@test "train (3 ranks): SIGUSR1 to one rank stops every rank after the same step, checkpointed mid-epoch (exit 75); the run started again goes on from the next batch and ends bit-identical" {
	run_ranks 3 plain "$train" "${train_opts[@]}"
	want=$(crc_of plain)
	[ "$(printf '%s\n' "$want" | wc -l)" -eq 1 ] && [ -n "$want" ]

	mkdir "$tmp/ck"
	DDP_STOP_BEFORE=auto start_ranks 3 stopped "$train" "${train_opts[@]}" \
		--checkpoint "$tmp/ck" --checkpoint-every 5
	target=$((RANDOM % 3))
	signal_when "$tmp/stopped.0" '^epoch 2 loss ' USR1 "${pids[$target]}"
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
	# One step for every rank; the signalled one's reason is its signal,
	# the others' the agreement.
	steps=$(sed -n 's/^train: rank [0-2] stopped after step \([0-9]*\) (.*)$/\1/p' "$tmp"/stopped.* | sort -u)
	[ "$(printf '%s\n' "$steps" | wc -l)" -eq 1 ] && [ -n "$steps" ]
	grep -qx "train: rank $target stopped after step $steps (sigusr1)" "$tmp/stopped.$target"
	[ "$(cat "$tmp"/stopped.* | grep -c '^train: rank [0-2] stopped after step [0-9]* (agreed)$')" -eq 2 ]
	grep -qx "train: checkpoint at step $steps in $tmp/ck/train.ckpt" "$tmp/stopped.0"
	[ -z "$(crc_of stopped)" ]
	# 22 batches an epoch (2048 samples, 3 ranks, 32 a batch).
	epochs=$(((steps - 1) / 22))
	echo "stopped after step $steps, in epoch $((epochs + 1))"
	od -An -t u4 -j 8 -N 4 "$tmp/ck/train.ckpt" | grep -qw 2

	DDP_STOP_BEFORE=auto run_ranks 3 resumed "$train" "${train_opts[@]}" \
		--checkpoint "$tmp/ck" --checkpoint-every 5
	grep -qx "train: resuming from $tmp/ck/train.ckpt (restart 0): $epochs of 8 epochs done, step $steps" "$tmp/resumed.0"
	cat "$tmp/stopped.0" "$tmp/resumed.0" >"$tmp/runs"
	resume_check train "$tmp/runs" 8 "$epochs"
	# The cut epoch is finished once, with the loss of an uninterrupted
	# run.
	e=$((epochs + 1))
	[ "$(grep "^epoch $e loss " "$tmp/resumed.0" | cut -d' ' -f1-6)" = \
		"$(grep "^epoch $e loss " "$tmp/plain.0" | cut -d' ' -f1-6)" ]
	[ "$(crc_of resumed)" = "$want" ]
}

@test "train without --checkpoint: an agreed stop still stops every rank after the same step, exit 75, nothing saved" {
	DDP_STOP_BEFORE=auto start_ranks 3 stopped "$train" "${train_opts[@]}"
	signal_when "$tmp/stopped.0" '^epoch 1 loss ' TERM "${pids[2]}"
	for r in 0 1 2; do
		rc=0
		wait "${pids[$r]}" || rc=$?
		[ "$rc" -eq 75 ]
	done
	pids=()
	[ "$(sed -n 's/^train: rank [0-2] stopped after step \([0-9]*\) (.*)$/\1/p' "$tmp"/stopped.* | sort -u | wc -l)" -eq 1 ]
	grep -q '^train: rank 2 stopped after step [0-9]* (sigterm)$' "$tmp/stopped.2"
	[ "$(grep -c '^train: checkpoint' "$tmp/stopped.0")" -eq 0 ]
}

@test "train resumes from a version 1 checkpoint (whole epochs, before the stop's format) and ends bit-identical" {
	run_ranks 2 plain "$train" --synthetic 512 --hidden 16 --epochs 3
	mkdir "$tmp/ck"
	run_ranks 2 first "$train" --synthetic 512 --hidden 16 --epochs 2 \
		--checkpoint "$tmp/ck"
	# Written as train wrote it before version 2: no fields 48 to 87.
	"$python" - "$tmp/ck/train.ckpt" <<-'EOF'
		import struct, sys, zlib
		path = sys.argv[1]
		b = open(path, "rb").read()
		assert struct.unpack_from("<I", b, 8)[0] == 2
		assert struct.unpack_from("<Q", b, 48)[0] == 0
		v1 = bytearray(b[:48] + b[88:-4])
		struct.pack_into("<I", v1, 8, 1)
		v1 += struct.pack("<I", zlib.crc32(bytes(v1)) & 0xffffffff)
		open(path, "wb").write(bytes(v1))
	EOF
	run_ranks 2 resumed "$train" --synthetic 512 --hidden 16 --epochs 3 \
		--checkpoint "$tmp/ck"
	grep -qx "train: resuming from $tmp/ck/train.ckpt (restart 0): 2 of 3 epochs done" "$tmp/resumed.0"
	[ "$(grep -c '^epoch ' "$tmp/resumed.0")" -eq 1 ]
	[ -n "$(crc_of plain)" ]
	[ "$(crc_of resumed)" = "$(crc_of plain)" ]
	# And the version it writes is 2.
	od -An -t u4 -j 8 -N 4 "$tmp/ck/train.ckpt" | grep -qw 2
}
