#!/usr/bin/env bats
# SPDX-License-Identifier: BSD-3-Clause
# ddp-restart, the supervisor of srun --ddp --ddp-restart=N, without Slurm:
# a fake srun writes the report the plugin writes in srun after a failed
# rank (DDP_RESTART_REPORT) and fails or succeeds as the test says. The
# supervisor runs it again without the blamed node, at most N times, says
# why it does not, forwards signals, exits with srun's status and leaves
# no process and no directory behind.

setup() {
	repo=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	restart=$repo/${BUILD:-build}/bin/ddp-restart
	[ -x "$restart" ] || skip "ddp-restart not built ($restart)"
	tmp=$(mktemp -d /tmp/ddp-restart-test.XXXXXX)
	mkdir "$tmp/tmpdir"
	srun=$tmp/srun
	# The fake srun: records each run, then does what $tmp/plan-K says
	# for run K (DDP_RESTART_COUNT): "blame NODE" (a record of an older
	# plugin, without cause=), "crash SIG" (cause=crash), "exit N",
	# "kill", "wait" (until a signal), or nothing (success).
	cat >"$srun" <<'EOF'
#!/bin/bash
set -euo pipefail
dir=$(dirname "$0")
k=$DDP_RESTART_COUNT
printf 'run=%s supervisor=%s parent=%s args=%s\n' "$k" "$DDP_RESTART_SUPERVISOR" "$PPID" "$*" >>"$dir/runs"
report() {
	printf 'rank=2 node=%s how=%s time=1764240000.123 blame=%s nodes=%s step_nodes=node[1-3]%s\n' \
		"${2:-x}" "$1" "${2:-}" "${3:-4}" "${4:+ why= cause=$4}" >"$DDP_RESTART_REPORT.tmp"
	mv "$DDP_RESTART_REPORT.tmp" "$DDP_RESTART_REPORT"
}
what=
[ ! -e "$dir/plan-$k" ] || read -r what arg nodes <"$dir/plan-$k" || true
case "${what:-}" in
blame) report signal:9 "$arg" "${nodes:-4}"; exit 137 ;;
exit) report "exit:$arg"; exit "$arg" ;;
crash) report "signal:$arg" "" 4 crash; exit $((128 + arg)) ;;
silent) exit "$arg" ;;
kill) kill -KILL $$ ;;
wait)
	echo $$ >"$dir/srun.pid"
	trap 'echo INT >>"$dir/signals"' INT
	trap 'echo TERM >>"$dir/signals"; report signal:15 node3; exit 143' TERM
	while [ ! -e "$dir/release" ]; do sleep 0.1; done
	report signal:2 node3
	exit 130
	;;
esac
exit 0
EOF
	chmod 0755 "$srun"
}

teardown() {
	[ -z "${tmp:-}" ] || rm -rf "$tmp"
}

# supervise N ARGS...: runs ddp-restart N with the fake srun in a
# five-node allocation.
supervise() {
	local n=$1
	shift
	run env TMPDIR="$tmp/tmpdir" SLURM_JOB_NODELIST='node[1-5]' \
		"$restart" "$n" "$srun" "$@"
}

# no_leftovers: the supervisor's directory is gone.
no_leftovers() {
	[ -z "$(ls -A "$tmp/tmpdir")" ] || {
		ls -la "$tmp/tmpdir"
		false
	}
}

@test "a blamed node: the step runs again without it, the restarts counted" {
	echo "blame node3 3" >"$tmp/plan-0"
	echo "blame node5 3" >"$tmp/plan-1"
	supervise 2 -N3 --ntasks-per-node=1 --ddp --ddp-restart=2 prog --epochs 3
	echo "$output"
	[ "$status" -eq 0 ]
	[[ $output == *"ddp: step restarted (1 of at most 2) without node3, from the allocation's node[1-2,4-5]: rank 2 was killed by signal 9"* ]]
	[[ $output == *"ddp: step restarted (2 of at most 2) without node5, from the allocation's node[1-2,4]: rank 2 was killed by signal 9"* ]]
	run cat "$tmp/runs"
	echo "$output"
	[ "${#lines[@]}" -eq 3 ]
	[[ ${lines[0]} == "run=0 supervisor="*" args=-N3 --ntasks-per-node=1 --ddp --ddp-restart=2 prog --epochs 3" ]]
	[[ ${lines[1]} == "run=1 supervisor="*" args=-N3 --ntasks-per-node=1 --ddp --ddp-restart=2 --exclude=node3 prog --epochs 3" ]]
	[[ ${lines[2]} == "run=2 supervisor="*" args=-N3 --ntasks-per-node=1 --ddp --ddp-restart=2 --exclude=node3,node5 prog --epochs 3" ]]
	# The variable names the supervisor, srun's parent.
	local sup parent
	sup=${lines[0]#*supervisor=}
	sup=${sup%% *}
	parent=${lines[0]#*parent=}
	parent=${parent%% *}
	[ "$sup" = "$parent" ]
	no_leftovers
}

@test "the user's own --exclude is kept; no restart left ends with srun's status" {
	echo "blame node3 3" >"$tmp/plan-0"
	echo "blame node4 3" >"$tmp/plan-1"
	supervise 1 -x node1 --ddp prog
	echo "$output"
	[ "$status" -eq 137 ]
	[[ $output == *"step restarted (1 of at most 1) without node3, from the allocation's node[2,4-5]"* ]]
	[[ $output == *"ddp: not restarted: rank 2 was killed by signal 9 on node4, and no restart is left (1 of at most 1 used)"* ]]
	grep -qx 'run=1 .* args=-x node1 --ddp --exclude=node1,node3 prog' "$tmp/runs"
	no_leftovers
}

@test "too few nodes left: not restarted, the --exclude= to use said" {
	printf 'blame node3 5\n' >"$tmp/plan-0"
	supervise 2 -N5 --ddp prog
	echo "$output"
	[ "$status" -eq 137 ]
	[[ $output == *"not restarted: rank 2 was killed by signal 9, and the allocation has 4 nodes left without node3, fewer than the 5 the step needs; run it again in a new allocation with --exclude=node3"* ]]
	[ "$(wc -l <"$tmp/runs")" -eq 1 ]
	no_leftovers
}

@test "a program that exits 1 is not restarted: no node is to blame" {
	echo "exit 1" >"$tmp/plan-0"
	supervise 2 --ddp prog
	echo "$output"
	[ "$status" -eq 1 ]
	[[ $output == *"ddp: not restarted: rank 2 exited with status 1, the program's own exit, which blames no node (--ddp-restart-on=exit restarts it)"* ]]
	[ "$(wc -l <"$tmp/runs")" -eq 1 ]
	no_leftovers
}

@test "a crash (SIGSEGV) is not restarted by default, and no node is left out" {
	echo "crash 11" >"$tmp/plan-0"
	supervise 2 -N3 --ddp prog
	echo "$output"
	[ "$status" -eq 139 ]
	[[ $output == *"ddp: not restarted: rank 2 was killed by signal 11, a crash of the program, which blames no node (--ddp-restart-on=crash restarts it)"* ]]
	[ "$(wc -l <"$tmp/runs")" -eq 1 ]
	no_leftovers
}

@test "--restart-on=crash: a crash runs again on the same nodes, saying why" {
	echo "crash 11" >"$tmp/plan-0"
	echo "crash 6" >"$tmp/plan-1"
	run env TMPDIR="$tmp/tmpdir" SLURM_JOB_NODELIST='node[1-5]' \
		"$restart" --restart-on=crash 2 "$srun" -N3 --ddp prog
	echo "$output"
	[ "$status" -eq 0 ]
	[[ $output == *"ddp: step restarted (1 of at most 2) on the same nodes: rank 2 was killed by signal 11 (crash; --ddp-restart-on=crash)"* ]]
	[[ $output == *"ddp: step restarted (2 of at most 2) on the same nodes: rank 2 was killed by signal 6 (crash; --ddp-restart-on=crash)"* ]]
	run cat "$tmp/runs"
	[ "${#lines[@]}" -eq 3 ]
	# No node left out, the failed step's own pinned: the program
	# failed, not a node, and Slurm may not move it.
	[[ ${lines[1]} == *" args=-N3 --ddp --nodelist=node[1-3] prog" ]]
	[[ ${lines[2]} == *" args=-N3 --ddp --nodelist=node[1-3] prog" ]]
	no_leftovers
}

@test "no report: srun's status, and why" {
	echo "silent 3" >"$tmp/plan-0"
	supervise 2 --ddp prog
	echo "$output"
	[ "$status" -eq 3 ]
	[[ $output == *"not restarted: srun failed and wrote no report of a failed rank"* ]]
	echo "kill" >"$tmp/plan-0"
	supervise 2 --ddp prog
	[ "$status" -eq 137 ]
	no_leftovers
}

@test "a success is not restarted and prints nothing" {
	supervise 2 --ddp prog
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	no_leftovers
}

# start_waiting: the supervisor in the background with a srun that waits
# for a signal; sets sup.
start_waiting() {
	echo "wait" >"$tmp/plan-0"
	env TMPDIR="$tmp/tmpdir" SLURM_JOB_NODELIST='node[1-5]' \
		"$restart" 2 "$srun" --ddp prog >"$tmp/out" 2>&1 &
	sup=$!
	local _
	for _ in $(seq 100); do
		[ -s "$tmp/srun.pid" ] && return 0
		sleep 0.1
	done
	echo "srun did not start"
	return 1
}

@test "SIGTERM is passed on, waited for, and ends the restarts" {
	start_waiting
	kill -TERM "$sup"
	local rc=0
	wait "$sup" || rc=$?
	cat "$tmp/out"
	[ "$rc" -eq 143 ]
	grep -qx TERM "$tmp/signals"
	grep -q "not restarted: the step was stopped by a signal that ddp-restart passed on to srun" "$tmp/out"
	[ "$(wc -l <"$tmp/runs")" -eq 1 ]
	if kill -0 "$(cat "$tmp/srun.pid")" 2>/dev/null; then
		echo "srun was left behind"
		false
	fi
	no_leftovers
}

# signals_seen N: waits until the fake srun has recorded N signals, at
# most 10 s.
signals_seen() {
	local _
	for _ in $(seq 100); do
		[ "$(cat "$tmp/signals" 2>/dev/null | wc -l)" -ge "$1" ] && return 0
		sleep 0.1
	done
	echo "the fake srun recorded $(cat "$tmp/signals" 2>/dev/null | wc -l) signals, not $1"
	return 1
}

@test "SIGINT is passed on once per signal; srun decides, nothing restarts" {
	start_waiting
	# Each signal once srun has taken the one before: two sent at once
	# may reach it as one.
	kill -INT "$sup"
	signals_seen 1
	kill -INT "$sup"
	signals_seen 2
	touch "$tmp/release"
	local rc=0
	wait "$sup" || rc=$?
	cat "$tmp/out"
	[ "$rc" -eq 130 ]
	[ "$(grep -cx INT "$tmp/signals")" -eq 2 ]
	grep -q "not restarted: the step was stopped" "$tmp/out"
	[ "$(wc -l <"$tmp/runs")" -eq 1 ]
	no_leftovers
}

@test "a supervisor killed outright takes srun with it" {
	start_waiting
	kill -KILL "$sup"
	local _
	for _ in $(seq 50); do
		kill -0 "$(cat "$tmp/srun.pid")" 2>/dev/null || break
		sleep 0.1
	done
	grep -qx TERM "$tmp/signals"
	if kill -0 "$(cat "$tmp/srun.pid")" 2>/dev/null; then
		echo "srun was left behind"
		false
	fi
}

@test "usage: N and srun are required" {
	run "$restart" 0 "$srun"
	[ "$status" -eq 2 ]
	[[ $output == *"usage: ddp-restart [--requeue-max=Q] [--restart-on=LIST] N SRUN"* ]]
	run "$restart" 2
	[ "$status" -eq 2 ]
}

@test "a bad --restart-on word is named, with the words that work" {
	run "$restart" --restart-on=crash,segv 2 "$srun"
	echo "$output"
	[ "$status" -eq 2 ]
	[[ $output == *"--ddp-restart-on=crash,segv: 'segv' is no cause to restart on; give a comma list of exit, crash, oom, hang, node or all"* ]]
}
