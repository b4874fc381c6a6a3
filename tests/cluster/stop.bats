#!/usr/bin/env bats
# Agreed stops (common/stop.h) on a 5-node minicluster, examples/train on
# three nodes (one rank each) with a checkpoint every two epochs, in a batch
# job that may be requeued: a preemption (a job of a partition of a higher
# PriorityTier takes the nodes; the minicluster's debug partition has
# PreemptMode=REQUEUE and GraceTime=20), SIGUSR1 sent to rank 2's process
# only, and the job's time limit lowered by its user with scontrol update.
# Each time every rank stops after the same step, rank 0 checkpoints, the
# job is requeued (by Slurm for the preemption, by srun otherwise), resumes
# from that step (at most the step in flight run twice) and ends COMPLETED
# with the parameters of an uninterrupted run (setup_file's, sized from a
# short run that measures an epoch here to train for about 35 s). The time
# limit itself, on every Slurm version, is stop-limit.bats; these run on
# Slurm 26.05. The lowered
# limit is raised again by root once the ranks stopped, so that the
# resumed run has time to finish.
# shellcheck source=tests/cluster/common.bash
source "$BATS_TEST_DIRNAME/common.bash"
# shellcheck source=tests/lib/faults.bash
source "$BATS_TEST_DIRNAME/../lib/faults.bash"
# shellcheck source=tests/lib/stop.bash
source "$BATS_TEST_DIRNAME/../lib/stop.bash"

train_seconds=35

setup_file() {
	# Slurm 26.05 (as 24.11) requeues a preempted job whose batch script
	# ends within its GraceTime; 22.05 ends it COMPLETED, the training
	# unfinished.
	mc_up --nodes 5 --slurm 26.05
	require_plugin
	# The partition that preempts debug's jobs, for this file only (see
	# tests/cluster/minicluster).
	mc_run -- scontrol delete PartitionName=high >/dev/null 2>&1 || true
	mc_run -- scontrol create PartitionName=high Nodes=ALL PriorityTier=2 \
		PreemptMode=OFF MaxTime=INFINITE State=UP
	local stage=${MINICLUSTER_STAGE:-$repo_root/build/stage} d per
	export TRAIN=$stage${MINICLUSTER_PREFIX:-/usr/local}/libexec/slurm-ddp/examples/train
	[ -x "$TRAIN" ] || skip "examples/train is not staged at $TRAIN (run: make stage)"
	d=$(mktemp -d)
	export STOP_DIR=$d
	chown ddptest "$d"
	mc_run --user ddptest -- srun -N3 --ntasks-per-node=1 --ddp "$TRAIN" \
		--synthetic 4096 --hidden 32 --epochs 8 2>&1 3>&- | stamp_lines >"$d/probe.out" 3>&-
	per=$(epoch_seconds "$d/probe.out") || {
		cat "$d/probe.out" >&2
		return 1
	}
	OPTS="--synthetic 4096 --hidden 32 --epochs $(epochs_for "$train_seconds" "$per")"
	export OPTS
	echo "# an epoch: $per s; train $OPTS" >&3
	# The uninterrupted run, beside the first tests (the preemption, last,
	# takes nodes from every job on its nodes), niced so that they train
	# at the pace just measured.
	# shellcheck disable=SC2086 # OPTS are words
	mc_run --user ddptest -- srun -N3 --ntasks-per-node=1 --ddp nice -n 19 "$TRAIN" $OPTS >"$d/ref.out" 2>&1 3>&- &
	echo $! >"$d/ref.pid"
}

teardown_file() {
	mc_run -- scontrol delete PartitionName=high >/dev/null 2>&1 || true
	[ -z "${STOP_DIR:-}" ] || rm -rf "$STOP_DIR"
}

setup() {
	dir=$STOP_DIR/$BATS_TEST_NUMBER
	mkdir -p "$dir/ckpt" "$dir/tmp"
	chown -R ddptest "$dir"
	job=""
}

teardown() {
	[ -z "$job" ] || mc_run -- scancel "$job" 2>/dev/null || true
}

# job_script [SRUN_OPTS]: the batch script of the tests, in $dir/job.sh.
job_script() {
	cat >"$dir/job.sh" <<-EOF
		#!/bin/bash
		export TMPDIR=$dir/tmp
		echo "batch restart=\${SLURM_RESTART_COUNT:-0} at \$(date +%s)"
		srun -N3 --ntasks-per-node=1 --ddp ${1:-} $TRAIN $OPTS --checkpoint $dir/ckpt --checkpoint-every 2
		echo "srun exit \$?"
	EOF
	chmod 0755 "$dir/job.sh"
}

# submit SBATCH_OPTS...: submits $dir/job.sh as ddptest, sets job.
submit() {
	run mc_run --user ddptest -- sbatch --parsable -N3 --requeue --open-mode=append \
		-o "$dir/job.out" "$@" "$dir/job.sh"
	show
	[ "$status" -eq 0 ]
	job=$output
}

# stopped_check: the job completed after one agreed stop or more, resumed
# each time (stop_check), the first run's resumed run seeing restart 1,
# with the uninterrupted run's params_crc on its 3 ranks; sets at to the
# step of the first stop.
stopped_check() {
	local state summary want got
	state=$(wait_done "$job" 240) || true
	wait_gone "$(cat "$STOP_DIR/ref.pid")" 240
	echo "# job $job: $state, restarts $(job_field "$job" Restarts)" >&3
	grep -vE '^epoch [0-9]+ loss' "$dir/job.out" | sed 's/^/# /' >&3
	[ "$state" = COMPLETED ]
	summary=$(stop_check train "$dir/job.out" 3)
	echo "# $summary" >&3
	at=$(sed -nE 's/^train: rank [0-9]+ stopped after step ([0-9]+) .*/\1/p' "$dir/job.out" | head -n 1)
	[ "$(grep -cE "^ddp: step [0-9]+\.[0-9]+ stopped on every rank after step $at\b" "$dir/job.out")" -eq 1 ]
	grep -qE '^batch restart=1 at [0-9]+$' "$dir/job.out"
	grep -qE '^train: resuming from .* \(restart 1\): [0-9]+ of [0-9]+ epochs done, step [0-9]+$' "$dir/job.out"
	[ "$(job_field "$job" Restarts)" -ge 1 ]
	want=$(digest_of train "$STOP_DIR/ref.out")
	got=$(digest_of train "$dir/job.out")
	echo "# params_crc: uninterrupted $want, stopped and resumed $got" >&3
	[ "$(digest_count train "$STOP_DIR/ref.out")" -eq 3 ]
	[ -n "$want" ] && [ "$(printf '%s\n' "$want" | wc -l)" -eq 1 ]
	[ "$got" = "$want" ]
	[ "$(digest_count train "$dir/job.out")" -eq 3 ]
}

@test "SIGUSR1 to rank 2's process only: every rank stops after the same step (rank 2 for the signal, the others agreed), srun requeues the job, it resumes and completes with an uninterrupted run's params_crc" {
	local pid
	job_script
	submit
	wait_line "$dir/job.out" '^epoch [0-9]+ loss' 120
	pid=$(rank_pid "$job" 0 2)
	fault_kill "$pid" USR1
	stopped_check
	[ "$(stop_whys train "$dir/job.out" | grep -c '^2 sigusr1$')" -eq 1 ]
	[ "$(stop_whys train "$dir/job.out" | grep -c '^[01] agreed$')" -eq 2 ]
	grep -qE "^ddp: step [0-9]+\.[0-9]+ stopped on every rank after step $at\b.*requeued" "$dir/job.out"
}

@test "scontrol update TimeLimit lowered by the job's user during the run: the ranks learn the new end time and stop before it (--ddp-stop-before=50), srun requeues the job, it resumes and completes with an uninterrupted run's params_crc" {
	local start stopped
	job_script --ddp-stop-before=50
	submit --time=10
	wait_line "$dir/job.out" '^epoch [0-9]+ loss' 120
	[ "$(grep -c 'stopped after step' "$dir/job.out")" -eq 0 ]
	run mc_run --user ddptest -- scontrol update JobId="$job" TimeLimit=1
	show
	[ "$status" -eq 0 ]
	wait_line "$dir/job.out" '^train: rank [0-9]+ stopped after step ' 60
	stopped=$(date +%s)
	start=$(sed -nE 's/^batch restart=0 at ([0-9]+)$/\1/p' "$dir/job.out")
	echo "# stopped $((stopped - start)) s after the job started, its new limit 60 s" >&3
	[ "$stopped" -lt $((start + 60)) ]
	# Root gives the job its time back (a limit is raised by root only):
	# the resumed run has the rest of the training to do.
	run mc_run -- scontrol update JobId="$job" TimeLimit=10
	show
	[ "$status" -eq 0 ]
	stopped_check
	stop_whys train "$dir/job.out" | grep -q ' time-limit$'
	[ -z "$(stop_whys train "$dir/job.out" | grep -v -e ' time-limit$' -e ' agreed$')" ]
	[ "$(grep -c 'DUE TO TIME LIMIT' "$dir/job.out")" -eq 0 ]
	grep -qE "^ddp: step [0-9]+\.[0-9]+ stopped on every rank after step $at\b.*requeued" "$dir/job.out"
}

@test "preempted by a job of a higher partition: every rank stops after the same step within GraceTime, Slurm requeues the job, it resumes at that step and completes with an uninterrupted run's params_crc" {
	local t0 waited
	job_script
	submit -w 'node[1-3]'
	wait_line "$dir/job.out" '^epoch [0-9]+ loss' 120
	t0=$SECONDS
	run mc_run --user ddptest -- sbatch --parsable -p high --exclusive -N3 -w 'node[1-3]' \
		-o "$dir/high.out" --wrap 'echo "high-priority job ran"'
	show
	[ "$status" -eq 0 ]
	wait_line "$dir/job.out" '^train: rank [0-9]+ stopped after step ' 30
	waited=$((SECONDS - t0))
	echo "# stop line $waited s after the preempting job's submission" >&3
	[ "$waited" -le 20 ]
	stopped_check
	grep -qx 'high-priority job ran' "$dir/high.out"
	stop_whys train "$dir/job.out" | grep -q ' sigterm$'
	[ -z "$(stop_whys train "$dir/job.out" | grep -v -e ' sigterm$' -e ' agreed$')" ]
}
