#!/usr/bin/env bats
# srun --ddp --ddp-restart=N on a 5-node minicluster: a batch job of five
# nodes runs examples/train on four of them with a checkpoint in a
# directory every node sees, and the test hits rank 2 once an epoch is
# done. The plugin in srun ends the step and reports the failed rank and
# its cause (DDP_RESTART_REPORT); ddp-restart decides by the cause. A
# crash of the program (SIGKILL, SIGSEGV) or its hang (SIGSTOP) blames
# no node: it is not restarted unless --ddp-restart-on names its cause,
# and then runs again on the same nodes, the ranks seeing
# DDP_RESTART_COUNT=1, resuming from the checkpoint and ending with the
# parameters of an uninterrupted run of the same world size. Only node
# evidence (a cut link) leaves a node out: a job of four nodes with no
# spare one is then requeued without it. A program that exits 1 is not
# restarted, --ddp-restart outside an allocation is refused, Ctrl-C
# (SIGINT to the supervisor) ends everything. Every resume goes on from
# the epochs done when rank 2 was hit and trains none of them again
# (tests/lib/resume.bash).
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

# crc_of FILE: the one params_crc the ranks printed in FILE.
crc_of() {
	sed -n 's/^rank [0-9]* params_crc=//p' "$1" | sort -u
}

# train_pid JOB RANK: the pid of rank RANK's examples/train in JOB's
# step 0, once it runs (60 s at most). Found before the test waits for
# an epoch, so that the fault follows the epoch line at once: the whole
# run takes seconds, and a search of the process table after the line
# could find the run already over.
train_pid() {
	local pid deadline=$((SECONDS + 60))
	until pid=$(rank_pid "$1" 0 "$2"); do
		if [ "$SECONDS" -ge "$deadline" ]; then
			echo "no examples/train of rank $2 in job $1 within 60 s" >&2
			return 1
		fi
		sleep 0.2
	done
	echo "$pid"
}

# same_nodes FILE NODE: the step ran again on the nodes of its first run
# ("rank R on NODE step S nodes LIST restart=C" lines), four ranks, NODE
# (the failed rank's) among them.
same_nodes() {
	local first again
	first=$(sed -nE 's/^rank [0-3] on node[1-5] step [0-9]+ nodes ([^ ]+) restart=0$/\1/p' "$1" | sort -u)
	again=$(sed -nE 's/^rank [0-3] on node[1-5] step [0-9]+ nodes ([^ ]+) restart=1$/\1/p' "$1" | sort -u)
	echo "# first run on $first, restarted on $again" >&3
	[ "$(grep -cE '^rank [0-3] on node[1-5] step [0-9]+ nodes [^ ]+ restart=1$' "$1")" -eq 4 ]
	[ -n "$first" ] && [ "$first" = "$again" ]
	[ "$(grep -E 'restart=1$' "$1" | grep -c " on $2 ")" -eq 1 ]
}

# The jobs that are restarted on the same nodes have no spare node: their
# restarted step can only run on the nodes of the first, so none was left
# out. With a spare node Slurm may place it elsewhere (the --export=NONE
# test).
@test "sbatch -N4, srun -N4 --ddp-restart=2 --ddp-restart-on=crash: rank 2 killed with SIGKILL (a crash), the step runs again on the same four nodes, none left out, resumes past the killed epoch and ends as an uninterrupted run" {
	local job state pid node want got reached
	# The parameters of an uninterrupted run of four ranks.
	run mc_run --user ddptest -- srun -N4 --ntasks-per-node=1 --ddp "$train" "${train_opts[@]}"
	show
	[ "$status" -eq 0 ]
	want=$(printf '%s\n' "$output" | sed -n 's/^rank [0-9]* params_crc=//p' | sort -u)
	[ "$(printf '%s\n' "$want" | wc -l)" -eq 1 ] && [ -n "$want" ]

	cat >"$dir/job.sh" <<-EOF
		#!/bin/bash
		export TMPDIR=$dir/tmp
		srun -N4 --ntasks-per-node=1 --ddp --ddp-restart=2 --ddp-restart-on=crash bash -c \\
			'echo "rank \$RANK on \$(hostname) step \$SLURM_STEP_ID nodes \$SLURM_STEP_NODELIST restart=\${DDP_RESTART_COUNT:-unset}"; exec "\$0" "\$@"' \\
			$train ${train_opts[*]} --checkpoint $dir/ckpt --checkpoint-every 1
		echo "srun exit \$?"
	EOF
	chmod 0755 "$dir/job.sh"
	run mc_run --user ddptest -- sbatch --parsable -N4 -o "$dir/job.out" "$dir/job.sh"
	show
	[ "$status" -eq 0 ]
	job=$output
	pid=$(train_pid "$job" 2)
	wait_line "$dir/job.out" '^epoch [0-9]+ loss' 120
	node=$(sed -n 's/^rank 2 on \(node[0-9]*\) step 0 .*/\1/p' "$dir/job.out")
	reached=$(epochs_done "$dir/job.out")
	echo "# job $job: killing rank 2 (pid $pid) on $node, $reached epochs done" >&3
	[ -n "$node" ]
	fault_kill "$pid" KILL
	state=$(wait_done "$job" 300) || true
	sed 's/^/# /' "$dir/job.out" >&3
	[ "$state" = COMPLETED ]
	grep -qx 'srun exit 0' "$dir/job.out"
	grep -qx "ddp: step restarted (1 of at most 2) on the same nodes: rank 2 was killed by signal 9 (crash; --ddp-restart-on=crash)" "$dir/job.out"
	# The restarted step: four ranks on the same nodes, restart count 1,
	# one of them on the node whose rank was killed.
	same_nodes "$dir/job.out" "$node"
	resume_check train "$dir/job.out" 12 "$reached"
	got=$(crc_of "$dir/job.out")
	echo "# params_crc: uninterrupted $want, restarted $got" >&3
	[ "$got" = "$want" ]
	[ -z "$(ls -A "$dir/tmp")" ]
}

# fail_once HOW: the batch script of a step of four ranks under
# --ddp-restart=1 and the srun options in srun_opts, each rank printing
# its node, step and restart count; rank 2 of the first run ends by HOW
# (a shell command: "exit 1", 'kill -SEGV $$') once the four ranks'
# lines are in the job's output, the others wait to be ended. A restarted
# run ends at once.
fail_once() {
	cat >"$dir/job.sh" <<-EOF
		#!/bin/bash
		export TMPDIR=$dir/tmp
		srun -N4 --ntasks-per-node=1 --ddp --ddp-restart=1 ${srun_opts:-} /bin/bash -c \\
			'c=\${DDP_RESTART_COUNT:-unset}; echo "rank \$RANK on \$(hostname) step \$SLURM_STEP_ID nodes \$SLURM_STEP_NODELIST restart=\$c"
			[ "\$c" = 0 ] || exit 0
			[ "\$RANK" = 2 ] || exec sleep 300
			for _ in \$(seq 1200); do [ "\$(grep -c restart= $dir/job.out)" -ge 4 ] && break; sleep 0.1; done; $1'
		echo "srun exit \$?"
	EOF
	chmod 0755 "$dir/job.sh"
}

@test "sbatch -N5, srun -N4 --ddp-restart=1: rank 2 segfaults (SIGSEGV): not restarted though a node is spare, the line says a crash and --ddp-restart-on=crash" {
	local job state
	srun_opts="" fail_once 'kill -SEGV $$'
	run mc_run --user ddptest -- sbatch --parsable -N5 -o "$dir/job.out" "$dir/job.sh"
	show
	[ "$status" -eq 0 ]
	job=$output
	state=$(wait_done "$job" 120) || true
	sed 's/^/# /' "$dir/job.out" >&3
	[ "$state" = COMPLETED ] # the batch script's own status
	grep -qE '^srun exit [1-9]' "$dir/job.out"
	grep -qx 'ddp: not restarted: rank 2 was killed by signal 11, a crash of the program, which blames no node (--ddp-restart-on=crash restarts it)' "$dir/job.out"
	[ "$(grep -c 'restart=0$' "$dir/job.out")" -eq 4 ]
	[ "$(grep -c 'restart=1$' "$dir/job.out")" -eq 0 ]
	[ -z "$(ls -A "$dir/tmp")" ]
}

@test "a program that exits 1 is not restarted: the line says the program's own exit and --ddp-restart-on=exit" {
	local job state
	srun_opts="" fail_once 'exit 1'
	run mc_run --user ddptest -- sbatch --parsable -N5 -o "$dir/job.out" "$dir/job.sh"
	show
	[ "$status" -eq 0 ]
	job=$output
	state=$(wait_done "$job" 120) || true
	sed 's/^/# /' "$dir/job.out" >&3
	[ "$state" = COMPLETED ] # the batch script's own status
	grep -qE '^srun exit [1-9]' "$dir/job.out"
	grep -qx "ddp: not restarted: rank 2 exited with status 1, the program's own exit, which blames no node (--ddp-restart-on=exit restarts it)" "$dir/job.out"
	[ "$(grep -c 'restart=0$' "$dir/job.out")" -eq 4 ]
	[ "$(grep -c 'restart=1$' "$dir/job.out")" -eq 0 ]
	[ -z "$(ls -A "$dir/tmp")" ]
}

@test "sbatch -N5, srun --export=NONE -N4 --ddp-restart=1 --ddp-restart-on=crash: rank 2 segfaults, the step runs again on the same nodes, not on the spare one, and the restarted ranks see DDP_RESTART_COUNT=1" {
	local job state node
	# Under --export=NONE only SLURM_* crosses from srun to the step; the
	# count comes through slurmstepd. Rank 2 segfaults on the first run
	# only, so the restart is the test's order, not a time.
	srun_opts="--export=NONE --ddp-restart-on=crash" fail_once 'kill -SEGV $$'
	run mc_run --user ddptest -- sbatch --parsable -N5 -o "$dir/job.out" "$dir/job.sh"
	show
	[ "$status" -eq 0 ]
	job=$output
	state=$(wait_done "$job" 120) || true
	sed 's/^/# /' "$dir/job.out" >&3
	[ "$state" = COMPLETED ]
	grep -qx 'srun exit 0' "$dir/job.out"
	node=$(sed -n 's/^rank 2 on \(node[0-9]*\) step 0 .*restart=0$/\1/p' "$dir/job.out")
	[ -n "$node" ]
	grep -qx 'ddp: step restarted (1 of at most 1) on the same nodes: rank 2 was killed by signal 11 (crash; --ddp-restart-on=crash)' "$dir/job.out"
	same_nodes "$dir/job.out" "$node"
	[ "$(grep -c 'restart=unset$' "$dir/job.out")" -eq 0 ]
}

@test "--ddp-restart outside an allocation is refused, saying what to do" {
	run mc_run --user ddptest -- srun -N1 --ddp --ddp-restart=1 true
	show
	[ "$status" -ne 0 ]
	[[ $output == *"--ddp-restart needs an allocation: run srun inside sbatch or salloc"* ]]
	run mc_run --user ddptest -- srun -N1 --ddp --ddp-restart=x true
	show
	[ "$status" -ne 0 ]
	[[ $output == *"--ddp-restart=x: not a number of restarts"* ]]
}

@test "Ctrl-C: SIGINT to the supervisor ends the step, nothing restarts, nothing is left behind" {
	local job state sup
	cat >"$dir/job.sh" <<-EOF
		#!/bin/bash
		export TMPDIR=$dir/tmp
		srun -N4 --ntasks-per-node=1 --ddp --ddp-restart=2 bash -c \\
			'echo "rank \$RANK restart=\${DDP_RESTART_COUNT:-unset}"; exec sleep 300'
		echo "srun exit \$?"
	EOF
	chmod 0755 "$dir/job.sh"
	run mc_run --user ddptest -- sbatch --parsable -N5 -o "$dir/job.out" "$dir/job.sh"
	show
	[ "$status" -eq 0 ]
	job=$output
	wait_line "$dir/job.out" '^rank 3 restart=0$' 60
	wait_line "$dir/job.out" '^rank 0 restart=0$' 60
	sup=$(job_pids "$job" ddp-restart)
	echo "# job $job: supervisor $sup" >&3
	[ -n "$sup" ] && [ "$(printf '%s\n' "$sup" | wc -l)" -eq 1 ]
	# srun's own Ctrl-C: the first asks for the tasks' state, a second
	# within a second ends the step. The second goes once srun has taken
	# the first: two sent at once may reach it as one.
	kill -INT "$sup"
	wait_line "$dir/job.out" '^srun: interrupt \(one more within 1 sec to abort\)$' 10
	kill -INT "$sup"
	state=$(wait_done "$job" 120) || true
	sed 's/^/# /' "$dir/job.out" >&3
	grep -qE '^srun exit [1-9]' "$dir/job.out"
	grep -qx 'ddp: not restarted: the step was stopped by a signal that ddp-restart passed on to srun' "$dir/job.out"
	[ "$(grep -c 'restart=1$' "$dir/job.out")" -eq 0 ]
	[ "$state" = COMPLETED ]
	[ -z "$(job_pids "$job")" ]
	[ -z "$(ls -A "$dir/tmp")" ]
}

# A cut link is node evidence: the ranks on the other nodes name rank 2
# lost or unreachable and no report comes from its node. The link comes
# back once a survivor has named it (see faults.bats: cut for longer than
# SlurmdTimeout, Slurm would end the job).
@test "sbatch -N4 --requeue, srun -N4 --ddp-restart=1, DDP_TIMEOUT=5: no spare node: rank 2's node's link cut, the job is requeued without that node, resumes past the cut epoch and completes" {
	local job state blamed want got reached
	run mc_run --user ddptest -- srun -N4 --ntasks-per-node=1 --ddp "$train" "${train_opts[@]}"
	show
	[ "$status" -eq 0 ]
	want=$(printf '%s\n' "$output" | sed -n 's/^rank [0-9]* params_crc=//p' | sort -u)
	[ "$(printf '%s\n' "$want" | wc -l)" -eq 1 ] && [ -n "$want" ]

	cat >"$dir/job.sh" <<-EOF
		#!/bin/bash
		export TMPDIR=$dir/tmp DDP_TIMEOUT=5
		echo "batch on \$SLURM_JOB_NODELIST restart=\${SLURM_RESTART_COUNT:-unset}"
		srun -N4 --ntasks-per-node=1 --ddp --ddp-restart=1 bash -c \\
			'echo "rank \$RANK on \$(hostname) step \$SLURM_STEP_ID restart=\${SLURM_RESTART_COUNT:-unset}"; exec "\$0" "\$@"' \\
			$train ${train_opts[*]} --checkpoint $dir/ckpt --checkpoint-every 1
		echo "srun exit \$?"
	EOF
	chmod 0755 "$dir/job.sh"
	run mc_run --user ddptest -- sbatch --parsable -N4 --requeue --open-mode=append -o "$dir/job.out" "$dir/job.sh"
	show
	[ "$status" -eq 0 ]
	job=$output
	wait_line "$dir/job.out" '^epoch [0-9]+ loss' 120
	blamed=$(sed -n 's/^rank 2 on \(node[0-9]*\) step 0 restart=unset$/\1/p' "$dir/job.out")
	reached=$(epochs_done "$dir/job.out")
	echo "# job $job: cutting rank 2's node $blamed, $reached epochs done" >&3
	[ -n "$blamed" ] && [ "$blamed" != node1 ]
	fault_cut "$blamed"
	wait_line "$dir/job.out" '(^ddp: error: hang: |communication failed: )' 120
	fault_restore "$blamed"
	wait_line "$dir/job.out" "^ddp: job $job requeued " 60
	echo "# fault to the requeue line: $(awk -v a="$FAULT_TIME" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s" >&3
	# Slurm starts a requeued job no sooner than AuthInfo's cred_expire
	# after the requeue (10 s on the minicluster, 120 s by default).
	state=$(wait_done "$job" 400) || true
	echo "# job $job: $state $(awk -v a="$FAULT_TIME" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }') s after the fault, restarts $(job_field "$job" Restarts), excluded $(job_field "$job" ExcNodeList)" >&3
	sed 's/^/# /' "$dir/job.out" >&3
	[ "$state" = COMPLETED ]
	grep -qE "^ddp: job $job requeued \(restart 1 of at most 2\) without $blamed: rank 2 (was lost|is unreachable|hangs), and the allocation has no spare node left$" "$dir/job.out"
	[ "$(job_field "$job" Restarts)" = 1 ]
	[ "$(job_field "$job" ExcNodeList)" = "$blamed" ]
	# The second run: four ranks elsewhere, SLURM_RESTART_COUNT=1.
	[ "$(grep -cE '^rank [0-3] on node[1-5] step 0 restart=1$' "$dir/job.out")" -eq 4 ]
	[ "$(grep -E 'restart=1$' "$dir/job.out" | grep -c " on $blamed ")" -eq 0 ]
	grep -qx 'srun exit 0' "$dir/job.out"
	resume_check train "$dir/job.out" 12 "$reached"
	got=$(crc_of "$dir/job.out")
	echo "# params_crc: uninterrupted $want, requeued $got" >&3
	[ "$got" = "$want" ]
}

@test "sbatch -N4, srun -N4 --ddp-restart=2 --ddp-restart-on=hang, DDP_TIMEOUT=5: rank 2 stopped with SIGSTOP (a hang), a survivor names it, the step runs again on the same four nodes, none left out, resumes past the stopped epoch and ends as an uninterrupted run" {
	local job state pid node want got stopped took reached
	run mc_run --user ddptest -- srun -N4 --ntasks-per-node=1 --ddp "$train" "${train_opts[@]}"
	show
	[ "$status" -eq 0 ]
	want=$(printf '%s\n' "$output" | sed -n 's/^rank [0-9]* params_crc=//p' | sort -u)
	[ "$(printf '%s\n' "$want" | wc -l)" -eq 1 ] && [ -n "$want" ]

	cat >"$dir/job.sh" <<-EOF
		#!/bin/bash
		export TMPDIR=$dir/tmp DDP_TIMEOUT=5
		srun -N4 --ntasks-per-node=1 --ddp --ddp-restart=2 --ddp-restart-on=hang bash -c \\
			'echo "rank \$RANK on \$(hostname) step \$SLURM_STEP_ID nodes \$SLURM_STEP_NODELIST restart=\${DDP_RESTART_COUNT:-unset}"; exec "\$0" "\$@"' \\
			$train ${train_opts[*]} --checkpoint $dir/ckpt --checkpoint-every 1
		echo "srun exit \$?"
	EOF
	chmod 0755 "$dir/job.sh"
	run mc_run --user ddptest -- sbatch --parsable -N4 -o "$dir/job.out" "$dir/job.sh"
	show
	[ "$status" -eq 0 ]
	job=$output
	pid=$(train_pid "$job" 2)
	wait_line "$dir/job.out" '^epoch [0-9]+ loss' 120
	node=$(sed -n 's/^rank 2 on \(node[0-9]*\) step 0 .*/\1/p' "$dir/job.out")
	reached=$(epochs_done "$dir/job.out")
	echo "# job $job: stopping rank 2 (pid $pid) on $node, $reached epochs done" >&3
	[ -n "$node" ]
	stopped=$SECONDS
	fault_stop "$pid"
	wait_line "$dir/job.out" '^ddp: step restarted ' 60
	took=$((SECONDS - stopped))
	echo "# the step was restarted ${took} s after the SIGSTOP (DDP_TIMEOUT=5)" >&3
	state=$(wait_done "$job" 300) || true
	sed 's/^/# /' "$dir/job.out" >&3
	[ "$took" -le 20 ]
	[ "$state" = COMPLETED ]
	grep -qx 'srun exit 0' "$dir/job.out"
	# A stopped rank hangs to the ranks surveying a call it never
	# entered, and is unreachable to one it stopped sending to mid-call:
	# whichever names it first, srun and ddp-restart say the same.
	local said restarted
	# Its node's slurmstepd still reported: the node was up, the
	# program hung, and the same nodes run it again.
	said=$(sed -nE "s/^ddp: rank 2 on $node (.*) \(named by rank [0-3]\); the step was ended .*/\1/p" "$dir/job.out")
	restarted=$(sed -nE "s/^ddp: step restarted \(1 of at most 2\) on the same nodes: rank 2 (.*) \(hang; --ddp-restart-on=hang\)$/\1/p" "$dir/job.out")
	[[ $said =~ ^(hangs|hangs\ in\ an\ earlier\ call|is\ unreachable)$ ]]
	[ "$restarted" = "$said" ]
	same_nodes "$dir/job.out" "$node"
	resume_check train "$dir/job.out" 12 "$reached"
	got=$(crc_of "$dir/job.out")
	echo "# params_crc: uninterrupted $want, restarted $got" >&3
	[ "$got" = "$want" ]
	[ -z "$(ls -A "$dir/tmp")" ]
}

@test "sbatch -N5, srun -N4 --ddp-restart=1, DDP_TIMEOUT=5: rank 2 stopped with SIGSTOP (a hang): not restarted though a node is spare, the line says a hang and --ddp-restart-on=hang" {
	local job state pid node
	cat >"$dir/job.sh" <<-EOF
		#!/bin/bash
		export TMPDIR=$dir/tmp DDP_TIMEOUT=5
		srun -N4 --ntasks-per-node=1 --ddp --ddp-restart=1 bash -c \\
			'echo "rank \$RANK on \$(hostname) step \$SLURM_STEP_ID nodes \$SLURM_STEP_NODELIST restart=\${DDP_RESTART_COUNT:-unset}"; exec "\$0" "\$@"' \\
			$train ${train_opts[*]}
		echo "srun exit \$?"
	EOF
	chmod 0755 "$dir/job.sh"
	run mc_run --user ddptest -- sbatch --parsable -N5 -o "$dir/job.out" "$dir/job.sh"
	show
	[ "$status" -eq 0 ]
	job=$output
	pid=$(train_pid "$job" 2)
	wait_line "$dir/job.out" '^epoch [0-9]+ loss' 120
	node=$(sed -n 's/^rank 2 on \(node[0-9]*\) step 0 .*/\1/p' "$dir/job.out")
	echo "# job $job: stopping rank 2 (pid $pid) on $node" >&3
	[ -n "$node" ]
	fault_stop "$pid"
	state=$(wait_done "$job" 120) || true
	sed 's/^/# /' "$dir/job.out" >&3
	[ "$state" = COMPLETED ] # the batch script's own status
	grep -qE '^srun exit [1-9]' "$dir/job.out"
	grep -qE "^ddp: not restarted: rank 2 (hangs|hangs in an earlier call|is unreachable), a hang of the program, which blames no node \(--ddp-restart-on=hang restarts it\)$" "$dir/job.out"
	[ "$(grep -c 'restart=1$' "$dir/job.out")" -eq 0 ]
	[ -z "$(ls -A "$dir/tmp")" ]
}
