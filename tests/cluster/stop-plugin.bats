#!/usr/bin/env bats
# An agreed stop, the plugin's side (common/stop.h, plugin/stopping.c): a
# task that writes its stop note on DDP_FAILURE_FD and exits 75 stopped
# cleanly, so slurmstepd leaves the step running for the other ranks and
# reports the stop to srun; srun prints one line for the step's stops and
# requeues a batch job that may be requeued (which then completes, its
# program seeing SLURM_RESTART_COUNT=1), or says how to continue one that
# may not be. A real failure among the stops wins, and exit 75 without a
# note is a failure. Every task gets DDP_STOP_BEFORE and the job's end
# time, DDP_END_TIME as scontrol shows EndTime, and DDP_END_TIME_FILE,
# which srun rewrites when the time limit changes. The tasks are shell
# scripts: what they write is what libddp and the Python module write.
# shellcheck source=tests/cluster/common.bash
source "$BATS_TEST_DIRNAME/common.bash"

setup_file() {
	mc_up --nodes 3 --gpus-per-node 4
}

setup() {
	require_plugin
	require_prolog
	out=$(mktemp)
	dir=$(mktemp -d)
	chmod 0755 "$dir"
	srun_pid=
	# The task: rank 1 writes its stop note (why sigusr1) and exits 75 at
	# once; the others wait for $GATE when it is set, then write theirs
	# (rank 0 for the time, the others "agreed") and exit 75. A rank that
	# runs again (SLURM_RESTART_COUNT set) says so and exits 0.
	cat >"$dir/task.sh" <<-'EOF'
		#!/bin/bash
		set -euo pipefail
		fd=${DDP_FAILURE_FD%%:*}
		if [ -n "${SLURM_RESTART_COUNT:-}" ]; then
			echo "rank $RANK restart=$SLURM_RESTART_COUNT: resumed"
			exit 0
		fi
		echo "rank $RANK env DDP_STOP_BEFORE=${DDP_STOP_BEFORE:-unset} DDP_END_TIME=${DDP_END_TIME:-unset} DDP_END_TIME_FILE=${DDP_END_TIME_FILE:-unset}"
		if [ "$RANK" = 1 ]; then
			echo "stop rank=1 step=41 why=sigusr1 ckpt_ms=180" >&"$fd"
			exit 75
		fi
		if [ -n "${GATE:-}" ]; then
			for _ in $(seq 1200); do [ -e "$GATE" ] && break; sleep 0.1; done
			echo "rank $RANK alive after the first stop"
		fi
		why=agreed ckpt=5
		if [ "$RANK" = 0 ]; then why=time-limit ckpt=210; fi
		echo "stop rank=$RANK step=41 why=$why ckpt_ms=$ckpt" >&"$fd"
		exit 75
	EOF
	chmod 0755 "$dir/task.sh"
	cat >"$dir/job.sh" <<-EOF
		#!/bin/bash
		echo "batch restart=\${SLURM_RESTART_COUNT:-unset}"
		srun --nodes=2 --ntasks-per-node=1 --ddp $dir/task.sh
	EOF
	chmod 0755 "$dir/job.sh"
	chown -R ddptest "$dir"
}

teardown() {
	[ -z "${srun_pid:-}" ] || kill "$srun_pid" 2>/dev/null || true
	rm -rf "$out" "$dir" "${GATE:-}"
}

# stop_lines: srun's stop lines in $output.
stop_lines() { grep -E '^(srun: )?ddp: step [0-9]+\.[0-9]+ stopped on ' <<<"$output" || true; }

# epoch TEXT: scontrol's EndTime (local time) as Unix seconds.
epoch() { date -d "${1/T/ }" +%s; }

@test "srun --ddp: one rank stops, the step goes on; every rank stops: one stop line, no requeue for a job that is not a batch job; DDP_END_TIME is the job's EndTime and the file follows scontrol update TimeLimit" {
	local job step end file before after rc=0
	new_gate
	mc_run --user ddptest -- env GATE="$GATE" srun --nodes=3 --ntasks-per-node=1 --time=10 --ddp \
		"$dir/task.sh" >"$out" 2>&1 &
	srun_pid=$!
	wait_line "$out" '^rank 0 env ' 120
	wait_line "$out" '^rank 2 env ' 60
	read -r job step < <(mc_run -- squeue -h -s -o %i | awk -F. '$2 ~ /^[0-9]+$/ { print $1, $2; exit }')
	[ -n "$job" ]
	# Rank 1 stopped: its slurmstepd says so and leaves the step running.
	wait_line "$(mc_state)/log/slurmd-node2.log" "rank 1 on node2 stopped after step 41 \\(sigusr1\\), checkpointed in 180 ms: step $job\\.$step left running" 30
	# Every task has the job's end time and its file.
	end=$(epoch "$(job_field "$job" EndTime)")
	grep -qx "rank 0 env DDP_STOP_BEFORE=auto DDP_END_TIME=$end DDP_END_TIME_FILE=$(mc_state)/shared/ddptest/$job/.ddp-end-time" "$out"
	[ "$(grep -c "^rank [0-2] env DDP_STOP_BEFORE=auto DDP_END_TIME=$end DDP_END_TIME_FILE=/" "$out")" -eq 3 ]
	file=$(mc_state)/shared/ddptest/$job/.ddp-end-time
	[ "$(cat "$file")" = "$end" ]
	[ "$(stat -c '%U %a' "$file")" = "ddptest 600" ]
	# The user lowers the time limit: the file follows within two poll
	# periods (DDP_END_TIME_POLL_SECONDS, 10 s).
	run mc_run --user ddptest -- scontrol update "JobId=$job" TimeLimit=5
	show
	[ "$status" -eq 0 ]
	after=$(epoch "$(job_field "$job" EndTime)")
	[ "$after" -lt "$end" ]
	before=$SECONDS
	wait_line "$file" "^$after\$" 25
	echo "# end time $end -> $after, the file followed in $((SECONDS - before)) s" >&3
	# The other ranks were not ended by rank 1's stop.
	open_gate
	wait "$srun_pid" || rc=$?
	srun_pid=
	output=$(cat "$out")
	status=$rc
	show
	[ "$status" -eq 75 ]
	[ "$(grep -c '^rank [02] alive after the first stop$' <<<"$output")" -eq 2 ]
	# One line for the stops: why on which rank, the step, the longest
	# checkpoint, and what comes next.
	output=$(stop_lines)
	[ "$(wc -l <<<"$output")" -eq 1 ]
	[[ $output == *"ddp: step $job.$step stopped on every rank after step 41 (time-limit on rank 0; sigusr1 on rank 1): checkpoint written in 0.21 s; not requeued: not a batch job: only sbatch jobs are requeued; submit the job again and the program resumes from its checkpoint" ]]
	[ "$(grep -c 'first failure of step' "$out")" -eq 0 ]
}

# shellcheck disable=SC2016 # the ranks' shell expands them
@test "a real failure among the stops wins; exit 75 without a stop note is a failure" {
	# Rank 1 stops cleanly, rank 2 then exits 1: the failure is named.
	# The gate: a file rank 1 makes (as the job's user) once its note is
	# written, which rank 2 waits for.
	mkdir "$dir/gate"
	chown ddptest "$dir/gate"
	GATE=$dir/gate/open
	run mc_run --user ddptest -- env GATE="$GATE" srun --nodes=3 --ntasks-per-node=1 --ddp bash -c '
		fd=${DDP_FAILURE_FD%%:*}
		case $RANK in
		1) echo "stop rank=1 step=7 why=sigusr1 ckpt_ms=3" >&"$fd"; touch "$GATE"; exit 75 ;;
		2) '"$GATE_WAIT"'exit 1 ;;
		*) sleep 30 ;;
		esac'
	show
	[ "$status" -ne 0 ]
	[ -e "$GATE" ]
	[[ $output == *"ddp: rank 2 on node"[0-9]*" exited with status 1; the step was ended (first failure of step "* ]]
	[ -z "$(stop_lines)" ]
	# Exit 75 alone, no note: a failure like any other.
	run mc_run --user ddptest -- srun --nodes=2 --ntasks-per-node=1 --ddp bash -c '
		[ "$RANK" = 1 ] && exit 75; sleep 30'
	show
	[ "$status" -ne 0 ]
	# Slurm places the ranks: rank 1 is on whichever node it got.
	[[ $output == *"ddp: rank 1 on node"[0-9]*" exited with status 75; the step was ended (first failure of step "* ]]
	[ -z "$(stop_lines)" ]
}

@test "--ddp-stop-before: a bad value is refused before launch, naming it and what works; 0 reaches every task" {
	run mc_run --user ddptest -- srun --nodes=1 --ddp --ddp-stop-before=soon true
	show
	[ "$status" -ne 0 ]
	[[ $output == *"--ddp-stop-before=soon: not a time to stop before the job's end; use auto"*"0 (no stop for the time, nor on a signal) or whole seconds from 1 to 604800"* ]]
	run mc_run --user ddptest -- srun --nodes=2 --ntasks-per-node=1 --ddp --ddp-stop-before=0 \
		bash -c 'echo "rank $RANK DDP_STOP_BEFORE=$DDP_STOP_BEFORE DDP_END_TIME=${DDP_END_TIME:-unset}"'
	show
	[ "$status" -eq 0 ]
	[ "$(grep -c '^rank [01] DDP_STOP_BEFORE=0 DDP_END_TIME=unset$' <<<"$output")" -eq 2 ]
}

@test "sbatch --requeue: every rank stops, the job is requeued once and completes, its program seeing SLURM_RESTART_COUNT=1" {
	local job state
	run mc_run --user ddptest -- sbatch --parsable -N2 --requeue --open-mode=append --time=10 \
		-o "$dir/job.out" "$dir/job.sh"
	show
	[ "$status" -eq 0 ]
	job=$output
	# Slurm starts a requeued job no sooner than AuthInfo's cred_expire.
	state=$(wait_done "$job" 300) || true
	echo "# job $job: $state, restarts $(job_field "$job" Restarts)" >&3
	sed 's/^/# /' "$dir/job.out" >&3
	[ "$state" = COMPLETED ]
	grep -qx 'batch restart=unset' "$dir/job.out"
	grep -qE "^ddp: step $job\\.0 stopped on every rank after step 41 \\(time-limit on rank 0; sigusr1 on rank 1\\): checkpoint written in 0\\.21 s; the job is requeued \\(1 of at most 2\\)$" "$dir/job.out"
	grep -qx 'batch restart=1' "$dir/job.out"
	[ "$(grep -c '^rank [01] restart=1: resumed$' "$dir/job.out")" -eq 2 ]
	[ "$(job_field "$job" Restarts)" = 1 ]
}

@test "sbatch --no-requeue: every rank stops, one line says the job is not requeued and how to continue" {
	local job state
	run mc_run --user ddptest -- sbatch --parsable -N2 --no-requeue -o "$dir/job.out" "$dir/job.sh"
	show
	[ "$status" -eq 0 ]
	job=$output
	state=$(wait_done "$job" 120) || true
	sed 's/^/# /' "$dir/job.out" >&3
	grep -qE "^ddp: step $job\\.0 stopped on every rank after step 41 \\(time-limit on rank 0; sigusr1 on rank 1\\): checkpoint written in 0\\.21 s; not requeued: the job may not be requeued \\(sbatch --requeue allows it where the site's JobRequeue does not\\); submit the job again and the program resumes from its checkpoint$" "$dir/job.out"
	[ "$(job_field "$job" Restarts)" = 0 ]
	[ "$state" != COMPLETED ]
}
