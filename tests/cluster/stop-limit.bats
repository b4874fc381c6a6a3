#!/usr/bin/env bats
# An agreed stop before the time limit (common/stop.h), on a 5-node
# minicluster, on the machine's Slurm: a batch job of --time=1 that may be requeued runs
# examples/train (3 ranks, one per node) or examples/train.py (2 ranks)
# with a checkpoint every few epochs, sized to outlast its minute. With no
# option, srun --ddp gives the ranks the job's end time; they stop together
# before it, after the same step, rank 0 writes the checkpoint, srun says
# so in one line and requeues the job, which resumes from that step (at
# most the step in flight run twice) and ends COMPLETED with the
# parameters of an uninterrupted run, bit for bit. Slurm never ends the
# job for its time (no "DUE TO TIME LIMIT"). Both jobs and their
# uninterrupted runs are started together in setup_file, after a short run
# of each program that measures its epoch here, so that the training
# lasts about 60 s whatever the machine's speed.
# shellcheck source=tests/cluster/common.bash
source "$BATS_TEST_DIRNAME/common.bash"
# shellcheck source=tests/lib/stop.bash
source "$BATS_TEST_DIRNAME/../lib/stop.bash"

# The seconds of training each job is sized to (its time limit is 60 s,
# of which a run trains about 40: the start, and the automatic margin's
# 15 s to exit and requeue): past one run, since this machine's pace may
# differ from the measured one; a run that still has work after a second
# one stops and is requeued again (stop_requeue_max is 2).
train_seconds=60

setup_file() {
	mc_up --nodes 5
	require_plugin
	local stage=${MINICLUSTER_STAGE:-$repo_root/build/stage} d per_t per_py
	export TRAIN=$stage${MINICLUSTER_PREFIX:-/usr/local}/libexec/slurm-ddp/examples/train
	[ -x "$TRAIN" ] || skip "examples/train is not staged at $TRAIN (run: make stage)"
	export TRAIN_PY=$repo_root/examples/train.py
	d=$(mktemp -d)
	export STOP_DIR=$d
	mkdir "$d/ckpt" "$d/ckpt-py" "$d/tmp"
	chown -R ddptest "$d"

	# The epoch of each program here, one after the other (train.py's
	# start would slow train's epochs).
	mc_run --user ddptest -- srun -N3 --ntasks-per-node=1 --ddp "$TRAIN" \
		--synthetic 4096 --hidden 32 --epochs 8 2>&1 3>&- | stamp_lines >"$d/probe.out" 3>&-
	mc_run --user ddptest -- env USE_LIBUV=0 srun -N2 --ntasks-per-node=1 --ddp \
		/usr/bin/python3 "$TRAIN_PY" --device cpu --epochs 16 2>&1 3>&- | stamp_lines >"$d/probe-py.out" 3>&-
	per_t=$(epoch_seconds "$d/probe.out") || {
		cat "$d/probe.out" >&2
		return 1
	}
	per_py=$(epoch_seconds "$d/probe-py.out") || {
		cat "$d/probe-py.out" >&2
		return 1
	}
	OPTS="--synthetic 4096 --hidden 32 --epochs $(epochs_for "$train_seconds" "$per_t")"
	OPTS_PY="--device cpu --epochs $(epochs_for "$train_seconds" "$per_py")"
	export OPTS OPTS_PY
	echo "# an epoch: train $per_t s, train.py $per_py s; train $OPTS, train.py $OPTS_PY" >&3

	# The two jobs, then their uninterrupted runs beside them, niced so
	# that on a machine with fewer cores than ranks the jobs train at the
	# pace just measured.
	cat >"$d/job.sh" <<-EOF
		#!/bin/bash
		export TMPDIR=$d/tmp
		echo "batch restart=\${SLURM_RESTART_COUNT:-0} at \$(date +%s)"
		srun -N3 --ntasks-per-node=1 --ddp $TRAIN $OPTS --checkpoint $d/ckpt --checkpoint-every 5
		echo "srun exit \$?"
	EOF
	cat >"$d/job-py.sh" <<-EOF
		#!/bin/bash
		export TMPDIR=$d/tmp USE_LIBUV=0
		echo "batch restart=\${SLURM_RESTART_COUNT:-0} at \$(date +%s)"
		srun -N2 --ntasks-per-node=1 --ddp /usr/bin/python3 $TRAIN_PY $OPTS_PY --checkpoint $d/ckpt-py --checkpoint-every 10
		echo "srun exit \$?"
	EOF
	chmod 0755 "$d/job.sh" "$d/job-py.sh"
	JOB=$(mc_run --user ddptest -- sbatch --parsable -N3 --time=1 --requeue \
		--open-mode=append -o "$d/job.out" "$d/job.sh")
	JOB_PY=$(mc_run --user ddptest -- sbatch --parsable -N2 --time=1 --requeue \
		--open-mode=append -o "$d/job-py.out" "$d/job-py.sh")
	export JOB JOB_PY
	# shellcheck disable=SC2086 # OPTS are words
	mc_run --user ddptest -- srun -N3 --ntasks-per-node=1 --ddp nice -n 19 "$TRAIN" $OPTS >"$d/ref.out" 2>&1 3>&- &
	echo $! >"$d/ref.pid"
	# shellcheck disable=SC2086
	mc_run --user ddptest -- env USE_LIBUV=0 srun -N2 --ntasks-per-node=1 --ddp \
		nice -n 19 /usr/bin/python3 "$TRAIN_PY" $OPTS_PY >"$d/ref-py.out" 2>&1 3>&- &
	echo $! >"$d/ref-py.pid"
}

teardown_file() {
	[ -n "${STOP_DIR:-}" ] || return 0
	mc_run -- scancel "${JOB:-0}" "${JOB_PY:-0}" 2>/dev/null || true
	rm -rf "$STOP_DIR"
}

# limit_check PROG JOB OUT REF RANKS: the job stopped before its time
# limit on every rank after the same step, was requeued by srun, resumed
# and completed with the uninterrupted run's parameters.
limit_check() {
	local prog=$1 job=$2 out=$3 ref=$4 ranks=$5 state summary want got at
	state=$(wait_done "$job" 300) || true
	wait_gone "$(cat "${ref%.out}.pid")" 300
	echo "# job $job ($prog): $state, restarts $(job_field "$job" Restarts)" >&3
	grep -vE '^epoch [0-9]+ loss' "$out" | sed 's/^/# /' >&3
	[ "$state" = COMPLETED ]
	# Stopped and resumed, every rank after the same step, at most the
	# step in flight run twice.
	summary=$(stop_check "$prog" "$out" "$ranks")
	echo "# $prog: $summary" >&3
	# Its own ranks saw the time run out: no signal, and Slurm did not
	# end the job for its time.
	stop_whys "$prog" "$out" | grep -q ' time-limit$'
	[ -z "$(stop_whys "$prog" "$out" | grep -v -e ' time-limit$' -e ' agreed$')" ]
	[ "$(grep -c 'DUE TO TIME LIMIT' "$out")" -eq 0 ]
	# srun's one line per stop, at the step the ranks name, and the
	# requeue; the resumed run sees SLURM_RESTART_COUNT.
	at=$(sed -nE "s/^$prog: rank [0-9]+ stopped after step ([0-9]+) .*/\1/p" "$out" | head -n 1)
	[ "$(grep -cE "^ddp: step [0-9]+\.[0-9]+ stopped on every rank after step $at\b.*requeued" "$out")" -eq 1 ]
	grep -qE '^batch restart=1 at [0-9]+$' "$out"
	grep -qE "^$prog: resuming from .* \(restart 1\): [0-9]+ of [0-9]+ epochs done, step [0-9]+$" "$out"
	[ "$(job_field "$job" Restarts)" -ge 1 ]
	# The parameters of the uninterrupted run, on every rank.
	want=$(digest_of "$prog" "$ref")
	got=$(digest_of "$prog" "$out")
	echo "# $prog: uninterrupted $want, stopped and resumed $got" >&3
	[ "$(digest_count "$prog" "$ref")" -eq "$ranks" ]
	[ -n "$want" ] && [ "$(printf '%s\n' "$want" | wc -l)" -eq 1 ]
	[ "$got" = "$want" ]
	[ "$(digest_count "$prog" "$out")" -eq "$ranks" ]
}

@test "sbatch --time=1 --requeue, examples/train on 3 nodes outlasting its minute: every rank stops after the same step before the limit, checkpointed; srun requeues the job, it resumes at that step and completes with an uninterrupted run's params_crc" {
	limit_check train "$JOB" "$STOP_DIR/job.out" "$STOP_DIR/ref.out" 3
}

@test "sbatch --time=1 --requeue, examples/train.py on 2 nodes outlasting its minute: the same, ending with an uninterrupted run's params_sha256" {
	limit_check train.py "$JOB_PY" "$STOP_DIR/job-py.out" "$STOP_DIR/ref-py.out" 2
}
