# SPDX-License-Identifier: BSD-3-Clause
# The fault injector of slurm-ddp's cluster tests and bench/recovery, for a
# minicluster (tests/cluster/minicluster): find a rank's process, kill or
# stop it, cut a node's link and restore it. Source it after
# tests/cluster/common.bash (it uses mc_exec). Every injection prints one
# line on standard error, "fault: <what> at <epoch seconds.ns>", and sets
# FAULT_TIME to that time, so that a test measures from it.
#
# A cut link is an nftables table of its own (ddp_fault) in the node's
# network namespace that drops every packet to and from the bridge
# (loopback stays): this kernel has no netem. fault_restore_all undoes
# every cut this shell made; call it from teardown (or a trap) so that no
# later test meets a cut node.

# The nodes this shell has cut, restored by fault_restore_all.
FAULT_CUT_NODES=()

# Seconds since the epoch, read without a fork: a fault's time is taken
# just before it strikes, not a process start later.
fault_now() { echo "${EPOCHREALTIME/,/.}"; }

# fault_note WHAT [TIME]: the injection line; FAULT_TIME its time (TIME,
# taken just before the fault, else now).
fault_note() {
	FAULT_TIME=${2:-$(fault_now)}
	echo "fault: $1 at $FAULT_TIME" >&2
}

# job_pids JOB [COMM]: the pids of this machine whose environment names
# JOB (and whose command is COMM), one per line. The minicluster's nodes
# share this machine's process table, so every node's tasks are seen.
job_pids() {
	local p comm
	for p in /proc/[0-9]*; do
		# Builtins only: a fork per process makes the search take
		# seconds on a busy host, while the processes come and go.
		[ -z "${2:-}" ] || { read -r comm 2>/dev/null <"$p/comm" && [ "$comm" = "$2" ]; } || continue
		tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qx "SLURM_JOB_ID=$1" &&
			echo "${p#/proc/}"
	done
	return 0
}

# rank_pid JOB STEP RANK [COMM]: the pid of the program (COMM, default
# train) of RANK in JOB's step STEP; fails when there is none.
rank_pid() {
	local p env
	for p in $(job_pids "$1" "${4:-train}"); do
		env=$(tr '\0' '\n' 2>/dev/null <"/proc/$p/environ") || continue
		grep -qx "SLURM_STEP_ID=$2" <<<"$env" &&
			grep -qx "SLURM_PROCID=$3" <<<"$env" && {
			echo "$p"
			return 0
		}
	done
	return 1
}

# fault_kill PID [SIGNAL]: sends SIGNAL (default KILL) to PID.
fault_kill() {
	local t
	t=$(fault_now)
	kill -"${2:-KILL}" "$1" || return 1
	fault_note "SIG${2:-KILL} to pid $1" "$t"
}

# fault_stop PID / fault_cont PID: SIGSTOP (a hung rank) and SIGCONT.
fault_stop() {
	local t
	t=$(fault_now)
	kill -STOP "$1" || return 1
	fault_note "SIGSTOP to pid $1" "$t"
}
fault_cont() { kill -CONT "$1" 2>/dev/null || true; }

# fault_cut NODE: NODE's link to the bridge cut, both ways.
fault_cut() {
	mc_exec "$1" -- nft -f - <<-'NFT' || return 1
		table inet ddp_fault {
			chain in { type filter hook input priority -400; policy accept; iifname != "lo" drop; }
			chain out { type filter hook output priority -400; policy accept; oifname != "lo" drop; }
		}
	NFT
	FAULT_CUT_NODES+=("$1")
	fault_note "link of $1 cut"
}

# fault_restore NODE: NODE's link back; nothing when it was not cut.
fault_restore() {
	mc_exec "$1" -- nft delete table inet ddp_fault 2>/dev/null || return 0
	echo "fault: link of $1 restored at $(fault_now)" >&2
}

# fault_restore_all: every link this shell cut, back. Cannot fail.
fault_restore_all() {
	local n
	for n in "${FAULT_CUT_NODES[@]}"; do
		fault_restore "$n"
	done
	FAULT_CUT_NODES=()
	return 0
}
