#!/usr/bin/env bats
# A failed rank ends its --ddp step promptly, for any program: slurmstepd
# ends the step at the node's first failed task (plugin/failure.c), and
# srun prints one line naming the first failed rank, its node and how it
# ended, and writes it to DDP_RESTART_REPORT. srun -K0 and
# kill_on_bad_exit = no leave the step running; a report without the
# step's nonce is ignored.
# shellcheck source=tests/cluster/common.bash
source "$BATS_TEST_DIRNAME/common.bash"

setup_file() {
	mc_up --nodes 3 --gpus-per-node 4
}

setup() {
	require_plugin
	local stage=${MINICLUSTER_STAGE:-$repo_root/build/stage}
	train=$stage${MINICLUSTER_PREFIX:-/usr/local}/libexec/slurm-ddp/examples/train
	[ -x "$train" ] || train=$repo_root/build/examples/train
	out=$(mktemp)
}

teardown() {
	[ -z "${srun_pid:-}" ] || kill "$srun_pid" 2>/dev/null || true
	rm -f "$out" "$out.err" "${GATE:-}"
}

# first_failure_lines: srun's first-failure lines in $output.
first_failure_lines() { grep -E 'ddp: rank [0-9]+ on [^ ]+ (was killed|exited).*\(first failure of step [0-9]+\.[0-9]+\)$' <<<"$output" || true; }

# job_step: "JOB STEP" of the running step (squeue), waiting for it.
job_step() {
	local id _
	for _ in $(seq 1 100); do
		id=$(mc_run -- squeue -h -s -o %i | grep -E '^[0-9]+\.[0-9]+$' | head -n 1 || true)
		if [ -n "$id" ]; then
			echo "${id%.*} ${id#*.}"
			return 0
		fi
		sleep 0.2
	done
	return 1
}

# rank_pid JOB STEP RANK COMM: "PID NODE" of the task of JOB.STEP with
# SLURM_PROCID=RANK running COMM, found by its environment; the nodes
# share the process table of the machine.
rank_pid() {
	mc_exec node1 -- bash -c '
		for d in /proc/[0-9]*; do
			[ "$(cat "$d/comm" 2>/dev/null)" = "$4" ] || continue
			env=$(tr "\0" "\n" <"$d/environ" 2>/dev/null) || continue
			grep -qx "SLURM_JOB_ID=$1" <<<"$env" &&
				grep -qx "SLURM_STEP_ID=$2" <<<"$env" &&
				grep -qx "SLURM_PROCID=$3" <<<"$env" || continue
			echo "${d#/proc/} $(sed -n "s/^SLURMD_NODENAME=//p" <<<"$env")"
			exit 0
		done
		exit 1' rank_pid "$@"
}

# kill_rank_2 COMM: once a line says training runs, SIGKILLs rank 2 of the
# running step (its program COMM) and waits for srun; sets output, status,
# node (rank 2's) and took (seconds from the kill to srun's end).
kill_rank_2() {
	local job step pid killed rc=0
	wait_line "$out" '^epoch [0-9]+ loss ' 180
	read -r job step < <(job_step)
	[ -n "$job" ]
	read -r pid node < <(rank_pid "$job" "$step" 2 "$1")
	[ -n "$pid" ] && [ -n "$node" ]
	killed=$(date +%s.%N)
	mc_exec node1 -- kill -9 "$pid"
	wait "$srun_pid" || rc=$?
	took=$(awk -v a="$killed" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
	srun_pid=
	output=$(cat "$out")
	status=$rc
	show
	echo "# srun returned ${took} s after rank 2 ($node) was killed" >&3
}

@test "libddp: rank 2 killed with SIGKILL: srun returns within 5 s, one line names rank 2, its node and signal 9" {
	[ -x "$train" ] || skip "examples/train is not built (run: make stage)"
	mc_run -- env DDP_TIMEOUT=300 srun --nodes=3 --ntasks-per-node=1 --ddp \
		"$train" --synthetic 2048 --epochs 100000 >"$out" 2>&1 &
	srun_pid=$!
	kill_rank_2 train
	[ "$status" -ne 0 ]
	awk -v t="$took" 'BEGIN { exit !(t < 5) }'
	output=$(first_failure_lines)
	[ "$(wc -l <<<"$output")" -eq 1 ]
	[[ $output == *"ddp: rank 2 on $node was killed by signal 9 (SIGKILL); the step was ended (first failure of step "* ]]
}

@test "PyTorch (gloo on the CPU): rank 2 killed with SIGKILL: srun returns within 5 s, one line names it" {
	[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import torch' 2>/dev/null ||
		skip "python3-torch is not installed"
	# USE_LIBUV=0: see plugin.bats.
	mc_run -- env USE_LIBUV=0 srun --nodes=3 --ntasks-per-node=1 --ddp \
		/usr/bin/python3 "$repo_root/examples/train.py" --device cpu --epochs 1000000 >"$out" 2>&1 &
	srun_pid=$!
	kill_rank_2 python3
	[ "$status" -ne 0 ]
	awk -v t="$took" 'BEGIN { exit !(t < 5) }'
	output=$(first_failure_lines)
	[ "$(wc -l <<<"$output")" -eq 1 ]
	[[ $output == *"ddp: rank 2 on $node was killed by signal 9 (SIGKILL); the step was ended"* ]]
}

# survives ARGS...: srun ARGS --ddp on 3 nodes, where rank 2 exits 1 at
# once and the others print ALIVE after the gate opens, which happens once
# srun has heard of rank 2's exit; sets output and status.
survives() {
	local rc=0
	new_gate
	mc_run -- env GATE="$GATE" srun "$@" --nodes=3 --ntasks-per-node=1 --ddp \
		bash -c '[ "$SLURM_PROCID" = 2 ] && exit 1; '"$GATE_WAIT"'echo "ALIVE $SLURM_PROCID"' >"$out" 2>&1 &
	srun_pid=$!
	wait_line "$out" 'task 2: Exited with exit code 1' 120
	open_gate
	wait "$srun_pid" || rc=$?
	srun_pid=
	output=$(cat "$out")
	status=$rc
	show
}

@test "srun -K0: a rank that exits 1 does not end the step; the line says so" {
	survives -K0
	[ "$status" -eq 1 ]
	[ "$(grep -c '^ALIVE [01]$' <<<"$output")" -eq 2 ]
	output=$(first_failure_lines)
	[ "$(wc -l <<<"$output")" -eq 1 ]
	[[ $output == *"rank 2 on "*" exited with status 1; the step was not ended (kill-on-bad-exit off)"* ]]
}

@test "kill_on_bad_exit = no: a rank that exits 1 does not end the step" {
	local conf
	conf=$(mc_state)/etc/ddp.conf
	cp "$conf" "$BATS_TEST_TMPDIR/ddp.conf.orig"
	{ cat "$BATS_TEST_TMPDIR/ddp.conf.orig" && echo "kill_on_bad_exit = no"; } | put_conf "$conf"
	survives
	put_conf "$conf" <"$BATS_TEST_TMPDIR/ddp.conf.orig"
	[ "$status" -eq 1 ]
	[ "$(grep -c '^ALIVE [01]$' <<<"$output")" -eq 2 ]
	[[ $output == *"exited with status 1; the step was not ended"* ]]
}

@test "a rank that exits 1 ends the step: 'exited with status 1', and DDP_RESTART_REPORT has blame= empty" {
	local report rc=0 line
	report=$(mc_state)/restart-report.$$
	rm -f "$report"
	new_gate
	# The gate never opens: only the plugin ends ranks 0 and 2.
	mc_run -- env GATE="$GATE" DDP_RESTART_REPORT="$report" srun --nodes=3 --ntasks-per-node=1 --ddp \
		bash -c '[ "$SLURM_PROCID" = 1 ] && exit 1; '"$GATE_WAIT"'echo "ALIVE $SLURM_PROCID"' >"$out" 2>&1 || rc=$?
	output=$(cat "$out")
	status=$rc
	show
	[ "$status" -ne 0 ]
	[ "$(grep -c '^ALIVE' <<<"$output")" -eq 0 ]
	line=$(cat "$report")
	rm -f "$report"
	echo "# $line" >&3
	[[ $line =~ ^rank=1\ node=(node[0-9]+)\ how=exit:1\ time=[0-9]+\.[0-9]{3}\ blame=\ nodes=3\ step_nodes=[^\ ]+\ why=\ cause=exit$ ]]
	local node=${BASH_REMATCH[1]}
	output=$(first_failure_lines)
	[ "$(wc -l <<<"$output")" -eq 1 ]
	[[ $output == *"ddp: rank 1 on $node exited with status 1; the step was ended"* ]]
}

@test "a rank that prints 64 KiB and its last words, then exits 1: srun prints them all before the step ends" {
	local rc=0 trial
	# srun drops the output still on its way once a task dies of
	# SIGKILL; the plugin ends the step only after slurmstepd has taken
	# in all of the failed task's output.
	for trial in 1 2 3 4 5; do
		rc=0
		mc_run -- timeout 120 srun --nodes=3 --ntasks-per-node=1 --ddp \
			/bin/bash -c '[ "$SLURM_PROCID" = 1 ] || exec /bin/sleep 600
				head -c 65536 /dev/zero | tr "\0" x; echo
				echo "LAST WORDS of rank 1, trial '"$trial"'" >&2; exit 1' >"$out" 2>"$out.err" || rc=$?
		output=$(cat "$out.err")
		status=$rc
		echo "# trial $trial: $(wc -c <"$out") bytes of output" >&3
		[ "$status" -ne 0 ] && [ "$status" -ne 124 ]
		[ "$(awk 'length($0) == 65536 && !/[^x]/' "$out" | wc -l)" -eq 1 ]
		[[ $output == *"LAST WORDS of rank 1, trial $trial"* ]]
		[[ $output == *"ddp: rank 1 on node"*" exited with status 1; the step was ended"* ]]
	done
}

@test "srun --export=NONE: a rank that exits 1 still ends the step, and srun names it" {
	local rc=0
	# Nothing of srun's environment but SLURM_* reaches the step: the
	# other ranks would sleep for ten minutes unless the plugin ends them.
	mc_run -- timeout 120 srun --export=NONE --nodes=3 --ntasks-per-node=1 --ddp \
		/bin/bash -c '[ "$SLURM_PROCID" = 1 ] && exit 1; exec /bin/sleep 600' >"$out" 2>&1 || rc=$?
	output=$(cat "$out")
	status=$rc
	show
	[ "$status" -ne 0 ] && [ "$status" -ne 124 ]
	output=$(first_failure_lines)
	[ "$(wc -l <<<"$output")" -eq 1 ]
	[[ $output == *"ddp: rank 1 on node"*" exited with status 1; the step was ended"* ]]
}

@test "a forged report with the wrong nonce is ignored, however early it claims to be" {
	local rc=0
	new_gate
	# Rank 0 forges rank 0's death at 1970 with another nonce, then lets
	# rank 1 fail for real.
	mc_run -- env GATE="$GATE" srun --nodes=3 --ntasks-per-node=1 --ddp \
		bash -c 'case $SLURM_PROCID in
			0) exec 3<>"/dev/tcp/${SLURM_DDP_FAILURE_REPORT%:*}/${SLURM_DDP_FAILURE_REPORT##*:}" &&
				echo "ffffffffffffffffffffffffffffffff 0 node1 signal:9 1.000 3 node[1-3]" >&3 &&
				exec 3>&- && touch "$GATE" && sleep 300 ;;
			1) '"$GATE_WAIT"'exit 1 ;;
			*) sleep 300 ;;
		esac' >"$out" 2>&1 || rc=$?
	output=$(cat "$out")
	status=$rc
	show
	[ "$status" -ne 0 ]
	output=$(first_failure_lines)
	[ "$(wc -l <<<"$output")" -eq 1 ]
	[[ $output == *"ddp: rank 1 on "*" exited with status 1; the step was ended"* ]]
}

@test "tasks that --ddp-check stops before their program are no failed ranks: no first-failure line" {
	local conf rc=0
	conf=$(mc_state)/etc/ddp.conf
	cp "$conf" "$BATS_TEST_TMPDIR/ddp.conf.orig"
	# A check that always finds a problem, as a slow link would.
	{ cat "$BATS_TEST_TMPDIR/ddp.conf.orig" && echo "check_path = /usr/bin/false"; } | put_conf "$conf"
	mc_run -- srun --nodes=3 --ntasks-per-node=1 --ddp --ddp-check=fail true >"$out" 2>&1 || rc=$?
	put_conf "$conf" <"$BATS_TEST_TMPDIR/ddp.conf.orig"
	output=$(cat "$out")
	status=$rc
	show
	[ "$status" -ne 0 ]
	[[ $output == *"--ddp-check found a problem"* ]]
	[ -z "$(first_failure_lines)" ]
}

@test "libddp: rank 2 stopped with SIGSTOP (DDP_TIMEOUT=5): the line says rank 2 hangs on its node, named by a survivor, and DDP_RESTART_REPORT says cause=hang, blaming no node" {
	[ -x "$train" ] || skip "examples/train is not built (run: make stage)"
	local report job step pid stopped rc=0 line
	report=$(mc_state)/restart-report.$$
	rm -f "$report"
	mc_run -- env DDP_TIMEOUT=5 DDP_RESTART_REPORT="$report" srun --nodes=3 --ntasks-per-node=1 --ddp \
		"$train" --synthetic 2048 --epochs 100000 >"$out" 2>&1 &
	srun_pid=$!
	wait_line "$out" '^epoch [0-9]+ loss ' 180
	read -r job step < <(job_step)
	[ -n "$job" ]
	read -r pid node < <(rank_pid "$job" "$step" 2 train)
	[ -n "$pid" ] && [ -n "$node" ]
	stopped=$(date +%s.%N)
	mc_exec node1 -- kill -STOP "$pid"
	wait "$srun_pid" || rc=$?
	took=$(awk -v a="$stopped" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
	srun_pid=
	output=$(cat "$out")
	status=$rc
	show
	echo "# srun returned ${took} s after rank 2 ($node) was stopped" >&3
	[ "$status" -ne 0 ]
	awk -v t="$took" 'BEGIN { exit !(t < 20) }'
	line=$(cat "$report")
	rm -f "$report"
	echo "# $line" >&3
	# A stopped rank hangs to the ranks surveying a call it never
	# entered, and is unreachable to one it stopped sending to mid-call;
	# the record's why= is the same naming. Its node's slurmstepd
	# reported (the step's end killed it): the node was up, so the
	# stopped rank is the program's hang, not the node's fault.
	[[ $line =~ ^rank=2\ node=$node\ how=[a-z]+:[0-9]+\ time=[0-9]+\.[0-9]{3}\ blame=\ nodes=3\ step_nodes=[^\ ]+\ why=(hang|behind|unreachable)\ cause=hang$ ]]
	local why=${BASH_REMATCH[1]} says
	case $why in
	hang) says=hangs ;;
	behind) says="hangs in an earlier call" ;;
	*) says="is unreachable" ;;
	esac
	output=$(grep -E '\(first failure of step [0-9]+\.[0-9]+\)$' <<<"$output")
	[ "$(wc -l <<<"$output")" -eq 1 ]
	[[ $output == *"ddp: rank 2 on $node $says (named by rank "[01]"); the step was ended (first failure of step "* ]]
}

# shrink_once: one step of train under DDP_ON_FAILURE=shrink on 3 nodes,
# rank 2 SIGKILLed in its third epoch; waits for srun and sets output,
# status and node (rank 2's), and shrunk to 1 when the survivors went on,
# 0 when they failed as libddp(3) says they may: the kill fell between a
# step's end on one survivor and on the other (the survivors then differ
# by a step, and say so). Fails on any other outcome.
shrink_once() {
	local job step pid rc=0 t_kill
	mc_run -- env DDP_ON_FAILURE=shrink DDP_TIMEOUT=10 srun --nodes=3 --ntasks-per-node=1 --ddp \
		"$train" --synthetic 4096 --hidden 32 --epochs 40 >"$out" 2>&1 &
	srun_pid=$!
	wait_line "$out" '^epoch 2 loss' 120
	read -r job step < <(job_step)
	read -r pid node < <(rank_pid "$job" "$step" 2 train)
	[ -n "$pid" ]
	t_kill=$EPOCHREALTIME
	kill -KILL "$pid"
	wait_line "$out" '^train: rank 1 goes on in a world of 2 ranks|survivors were at different steps' 60
	echo "# rank 2 (on $node) killed; rank 1 went on or failed after $(awk -v a="$t_kill" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }') s (polled every 0.1 s)" >&3
	wait "$srun_pid" || rc=$?
	srun_pid=
	output=$(cat "$out")
	status=$rc
	show
	# The killed task's status is srun's, whatever the survivors did.
	[ "$status" -ne 0 ]
	[[ $output == *"ddp: rank 2 on $node was killed by signal 9 (SIGKILL); the step was not ended"* ]]
	shrunk=1
	if [[ $output == *"survivors were at different steps"* ]]; then
		shrunk=0
		# Both survivors stop, one at least naming the steps (srun may
		# drop the other's line once a task was killed): no copy
		# trains on.
		grep -qE '^train: rank [01]: communication failed: grad sync: after the loss of a rank the survivors were at different steps \([0-9]+ to [0-9]+\)' "$out"
		[ "$(grep -cE '^srun: error: node[0-9]+: task [01]: Exited with exit code 1$' "$out")" -eq 2 ]
		[ "$(grep -c 'params_crc=' "$out")" -eq 0 ]
		return 0
	fi
	[[ $output == *"train: rank 0 goes on in a world of 2 ranks (DDP_ON_FAILURE=shrink)"* ]]
	grep -q '^epoch 40 loss' "$out"
	[ "$(grep -cE '^rank [01] params_crc=[0-9a-f]{8}$' "$out")" -eq 2 ]
	[ "$(sed -n 's/^rank [01] params_crc=//p' "$out" | sort -u | wc -l)" -eq 1 ]
	[ "$(grep -c '^rank 2 params_crc=' "$out")" -eq 0 ]
}

@test "DDP_ON_FAILURE=shrink: rank 2 killed mid-training, ranks 0 and 1 on the other nodes go on in a world of 2 and end with equal parameters; of two tries at most one stops both" {
	# A kill between the two survivors' ends of a step (about 1 in 12
	# here) stops both, as documented: then it is tried once more. Two
	# such tries in a row (about 1 in 144) fail the test: more tries
	# would let a rising rate of stopped survivors pass.
	local try shrunk=0 stopped=()
	for try in 1 2; do
		shrink_once
		[ "$shrunk" -eq 0 ] || break
		stopped+=("$try")
		echo "# try $try: the survivors were at different steps and stopped" >&3
	done
	if [ "${#stopped[@]}" -gt 1 ]; then
		echo "# tries ${stopped[*]} of 2 took the failure path (survivors at different steps): more than one" >&3
		false
	fi
	[ "$shrunk" -eq 1 ]
}
