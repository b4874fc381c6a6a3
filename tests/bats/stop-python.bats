#!/usr/bin/env bats
# SPDX-License-Identifier: BSD-3-Clause
# python/slurm_ddp's agreed stop (stop.py), without Slurm: gloo ranks on
# loopback get the env:// variables and DDP_STOP_BEFORE as srun --ddp sets
# them (tests/bats/stop-python.py starts them and waits on their lines).

setup() {
	repo=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	python=${PYTHON:-/usr/bin/python3}
	export PYTHONPATH=$repo/python
}

need_torch() {
	"$python" -c 'import torch' 2>/dev/null || skip "$python has no torch"
}

# case NAME: runs one case of stop-python.py; its "# " lines are the
# measurements, shown with the TAP output.
case_() {
	run "$python" "$BATS_TEST_DIRNAME/stop-python.py" "$1"
	printf '%s\n' "$output" | grep '^# ' >&3 || true
	[ "$status" -eq 0 ] || {
		echo "$output"
		return 1
	}
}

@test "stop.py mirrors common/stop.h: DDP_STOP_BEFORE, the end time, the margin, the decision and the note" {
	case_ contract
}

@test "SIGUSR1 to one of 4 ranks at a random moment: every rank stops after the same step, 20 of 20 trials (K and the agreement's cost printed)" {
	need_torch
	case_ signal-one
}

@test "the end time moved near in DDP_END_TIME_FILE: every rank stops at the same step, for the time, before it" {
	need_torch
	case_ end-time
}

@test "DDP_STOP_BEFORE=0 or unset: no signal handler is installed" {
	need_torch
	case_ off
}

@test "a program's own SIGTERM handler is kept, and its request stops every rank" {
	need_torch
	case_ own-handler
}

@test "exit() writes the stop note on DDP_FAILURE_FD's pipe only, as ddp_stop_note_format does, and exits 75" {
	need_torch
	parse=$repo/${BUILD:-build}/tests/bats/stop-note
	[ -x "$parse" ] || {
		echo "$parse is not built (make)"
		return 1
	}
	case_ note
	note=$(printf '%s\n' "$output" | grep '^stop ')
	[[ $note == "stop rank=0 step=3 why=request ckpt_ms="* ]]
	# slurmstepd's parser reads it, and the C formatter writes it back
	# byte for byte.
	run "$parse" <<<"$note"
	[ "$status" -eq 0 ]
	[ "$output" = "$note" ]
}
