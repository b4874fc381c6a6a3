#!/usr/bin/env bats
# --ddp-check=requeue on a 4-node minicluster, node2's link throttled with
# tbf as in check.bats: a batch job that may be requeued fails its first
# check naming node2, prints node2's measurement, is requeued by its own
# user without node2, and completes on the other three nodes, its program
# seeing SLURM_RESTART_COUNT=1; slurmstepd records the verdict about node2
# in the root-owned verdicts file of state_dir. A job that may not be
# requeued fails as with --ddp-check and prints the --exclude= to retry
# with. Each test undoes its tc and ddp.conf changes.
# shellcheck source=tests/cluster/common.bash
source "$BATS_TEST_DIRNAME/common.bash"

# Links below this fraction of the typical one are slow (as in check.bats).
fraction=0.2

setup_file() {
	mc_up --nodes 4 --gpus-per-node 4
	check_conf_file "$fraction"
}

teardown_file() {
	check_conf_file_restore
}

setup() {
	require_plugin
	throttle node2
	dir=$(mktemp -d)
	chown ddptest "$dir"
	cat >"$dir/job.sh" <<-'EOF'
		#!/bin/bash
		echo "batch on $SLURM_JOB_NODELIST restart=${SLURM_RESTART_COUNT:-unset}"
		srun --ntasks-per-node=1 --ddp-check=requeue bash -c \
			'echo "rank $RANK on $(hostname) restart=${SLURM_RESTART_COUNT:-unset}: program started"'
	EOF
	chmod 0755 "$dir/job.sh"
}

teardown() {
	unthrottle node2
	rm -rf "$dir"
}

@test "sbatch -N3 --requeue, --ddp-check=requeue: node2 is named, the job is requeued without it and completes on the other three with restart count 1" {
	local job state verdicts
	run mc_run --user ddptest -- sbatch --parsable -N3 --requeue --open-mode=append \
		-o "$dir/job.out" "$dir/job.sh"
	show
	[ "$status" -eq 0 ]
	job=$output
	# Slurm starts a requeued job no sooner than AuthInfo's cred_expire
	# after the requeue (10 s on the minicluster, 120 s by default).
	state=$(wait_done "$job" 300) || true
	echo "# job $job: $state, restarts $(job_field "$job" Restarts), excluded $(job_field "$job" ExcNodeList)" >&3
	sed 's/^/# /' "$dir/job.out" >&3
	[ "$state" = COMPLETED ]
	# The first run: on node2, the check names it, with its measurement.
	grep -qE '^batch on node\[1-3\] restart=unset$' "$dir/job.out"
	grep -qE '^ddp-check: FAIL: node2 \(slow-send' "$dir/job.out"
	grep -qE '^ddp: node2: link-send [0-9.e+-]+ GB/s, the step.s median [0-9.e+-]+ GB/s$' "$dir/job.out"
	grep -qx "ddp: job $job requeued (restart 1 of at most 2) without node2" "$dir/job.out"
	# The second: the other three nodes, SLURM_RESTART_COUNT=1 in the
	# batch script and in every rank.
	grep -qx 'batch on node\[1,3-4\] restart=1' "$dir/job.out"
	[ "$(grep -cE '^rank [0-2] on node[134] restart=1: program started$' "$dir/job.out")" -eq 3 ]
	[ "$(grep -c 'on node2 restart=1' "$dir/job.out")" -eq 0 ]
	[ "$(job_field "$job" Restarts)" = 1 ]
	[ "$(job_field "$job" ExcNodeList)" = node2 ]
	# slurmstepd on node2 recorded the verdict, as root, 0600.
	verdicts=$(mc_state)/ddp-state/verdicts
	[ "$(stat -c '%U %a' "$verdicts")" = "root 600" ]
	grep -E "^v1 time=[0-9]+ job=$job step=0 uid=$(id -u ddptest) node=node2 check=link-send value=[0-9.e+-]+ median=[0-9.e+-]+ unit=gb-per-s$" "$verdicts"
	[ "$(grep -cE "job=$job .*node=node[134] " "$verdicts")" -eq 0 ]
}

@test "sbatch --no-requeue or srun alone, --ddp-check=requeue: the step fails as with --ddp-check and prints the --exclude= to retry with" {
	local job state
	run mc_run --user ddptest -- sbatch --parsable -N3 --no-requeue -o "$dir/job.out" "$dir/job.sh"
	show
	[ "$status" -eq 0 ]
	job=$output
	state=$(wait_done "$job" 120) || true
	cat "$dir/job.out" >&2
	[ "$state" = FAILED ]
	grep -qE '^ddp-check: FAIL: node2 \(slow-send' "$dir/job.out"
	grep -qE 'ddp: retry with: --exclude=node2 \(not requeued: the job may not be requeued \(sbatch --requeue allows it' "$dir/job.out"
	[ "$(grep -c 'program started' "$dir/job.out")" -eq 0 ]
	[ "$(job_field "$job" Restarts)" = 0 ]

	# Outside a batch job: the same, naming why.
	run mc_run --user ddptest -- srun -N3 --ntasks-per-node=1 --ddp-check=requeue \
		bash -c 'echo "rank $RANK: program started"'
	show
	[ "$status" -ne 0 ]
	[[ $output == *"ddp: retry with: --exclude=node2 (not requeued: not a batch job: only sbatch jobs are requeued)"* ]]
	[[ $output != *"program started"* ]]
}
