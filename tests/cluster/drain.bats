#!/usr/bin/env bats
# SPDX-License-Identifier: BSD-3-Clause
# The drain rule on the minicluster: the installed health check
# (ddp-healthcheck, HealthCheckProgram) and NHC check read the node's
# verdict record, written by ddp_verdict_append for real jobs of real
# users, and drain the node through the real slurmctld only when jobs of
# enough distinct users named it. One test has slurmd run the health
# check as HealthCheckProgram; the others run it by hand, as slurmd does,
# where the point is the rule. A program's crash is no evidence about its
# node: three users' programs that crash on node2 leave no verdict and
# node2 up.
# shellcheck source=tests/cluster/common.bash
source "$BATS_TEST_DIRNAME/common.bash"

setup_file() {
	mc_up --nodes 4
}

setup() {
	require_prolog
	st=$(mc_state)
	local target libexec
	target=$(sed -n "s/^exec '\(.*\)' \"\$@\"$/\1/p" "$st/etc/prolog")
	libexec=$(dirname "$target")
	healthcheck=$libexec/ddp-healthcheck
	helper=$libexec/../../sbin/ddp-nodectl
	nhc=$libexec/../../share/slurm-ddp/nhc/ddp.nhc
	record=$repo_root/build/tests/cluster/verdict-record
	if [ ! -x "$healthcheck" ] || [ ! -f "$nhc" ]; then
		echo "ddp-healthcheck or ddp.nhc not staged next to $target (run: make stage)" >&2
		return 1
	fi
	[ -x "$record" ] || {
		echo "$record not built (run: make all)" >&2
		return 1
	}
	# A verdict record of this test's own, in the cluster's state folder
	# (every node sees it), under a ddp.conf that names it.
	vstate=$st/drain-test.$BATS_TEST_NUMBER
	rm -rf "$vstate"
	conf=$st/etc/ddp-drain.conf
	{ grep -v '^state_dir' "$st/etc/ddp.conf"; echo "state_dir = $vstate"; } | put_conf "$conf"
	now=$(date +%s)
	ddptest_uid=$(id -u ddptest)
}

teardown() {
	local state
	if [ -n "${slurm_conf_saved:-}" ]; then
		put_conf "$st/etc/slurm.conf" <"$slurm_conf_saved"
		mc_run -- scontrol reconfigure || true
		slurm_conf_saved=
	fi
	rm -f "$st/etc/drain-healthcheck"
	state=$(mc_run -- scontrol show node -o node2 2>/dev/null | sed -n 's/.* State=\([^ ]*\).*/\1/p')
	if [[ $state == *DRAIN* ]]; then
		mc_run -- scontrol update NodeName=node2 State=RESUME || true
	fi
	rm -rf "$vstate"
	rm -f "$st/etc/ddp-drain.conf"
	if [ -n "${crash_user_made:-}" ]; then
		userdel -r "$crash_user" 2>/dev/null || true
		crash_user_made=
	fi
}

# The third user of the crash test, made for it as the minicluster makes
# ddptest, and removed after it.
crash_user=ddpcrash

# crash_on_node2 USER SIGNAL: a --ddp step of USER on node2 whose program
# kills itself with SIGNAL, as a program's own abort() or a bad pointer
# ends it; srun must fail. Prints the job's id.
crash_on_node2() {
	local out
	# shellcheck disable=SC2016 # expanded by the step's shell
	out=$(mc_run --user "$1" -- srun -N1 -w node2 --ntasks-per-node=1 --ddp bash -c 'echo "job $SLURM_JOB_ID"; kill -'"$2"' $$' 2>&1) && {
		echo "srun of $1's crashing program succeeded: $out" >&2
		return 1
	}
	printf '%s\n' "$out" | sed 's/^/# /' >&3
	[[ $out == *"ddp: rank 0 on node2 was killed by signal "* ]] || return 1
	sed -n 's/^job \([0-9]*\)$/\1/p' <<<"$out"
}

# job_of USER: a real job of USER on node2 (done at once); prints its id.
job_of() {
	mc_run --user "$1" -- sbatch --parsable -w node2 -o /dev/null --wrap true
}

# verdict JOB UID [AGE]: node2's link-send finding of JOB, recorded AGE
# seconds ago (0), as the plugin's root side records it.
verdict() {
	"$record" "$vstate" "$((now - ${3:-0}))" "$1" 0 "$2" \
		"node=node2 check=link-send value=0.21 median=1.9 unit=gb-per-s"
}

# health: the installed health check inside node2, as slurmd runs it.
health() {
	mc_exec node2 -- env DDP_CONF="$conf" SLURM_CONF="$st/etc/slurm.conf" \
		SLURMD_NODENAME=node2 "$healthcheck"
}

# health_check_by_slurmd INTERVAL: slurm.conf's HealthCheckProgram is the
# installed health check under this test's ddp.conf, run every INTERVAL
# seconds; slurmd gives it no environment but SLURMD_NODENAME, so a
# wrapper names the configuration, as a site's would. teardown puts
# slurm.conf back.
health_check_by_slurmd() {
	local wrapper=$st/etc/drain-healthcheck
	cat >"$wrapper" <<-EOF
		#!/bin/sh
		export DDP_CONF='$conf' SLURM_CONF='$st/etc/slurm.conf'
		exec '$healthcheck' "\$@"
	EOF
	chmod 0755 "$wrapper"
	slurm_conf_saved=$BATS_TEST_TMPDIR/slurm.conf
	cp "$st/etc/slurm.conf" "$slurm_conf_saved"
	{
		cat "$slurm_conf_saved"
		echo "HealthCheckProgram=$wrapper"
		echo "HealthCheckInterval=$1"
	} | put_conf "$st/etc/slurm.conf"
	mc_run -- scontrol reconfigure
}

# wait_node2_drained SECONDS: polls until slurmctld shows node2 drained, at
# most SECONDS.
wait_node2_drained() {
	local deadline=$((SECONDS + $1))
	while [[ $(node2_state) != *DRAIN* ]]; do
		[ "$SECONDS" -lt "$deadline" ] || return 1
		sleep 0.5
	done
}

node2_state() {
	mc_run -- scontrol show node -o node2 | sed -n 's/.* State=\([^ ]*\).*/\1/p'
}

node2_reason() {
	mc_run -- scontrol show node -o node2 | sed -n 's/.* Reason=\(.*\) \[.*/\1/p'
}

@test "one job naming node2 does not drain it" {
	verdict "$(job_of ddptest)" "$ddptest_uid"
	run health
	show
	[ "$status" -eq 0 ]
	[ "$output" = "node2: ok: 1 job of 1 user named it within 86400s (drained at 3 jobs of 2 users)" ]
	[[ $(node2_state) != *DRAIN* ]]
}

@test "two jobs of one user and one of another leave node2 up: one user's jobs count once" {
	verdict "$(job_of ddptest)" "$ddptest_uid"
	verdict "$(job_of ddptest)" "$ddptest_uid"
	verdict "$(job_of root)" 0
	run health
	show
	[ "$status" -eq 0 ]
	[ "$output" = "node2: ok: 3 jobs of 2 users named it within 86400s, one user's jobs counting once (drained at 3 jobs of 2 users)" ]
	[[ $(node2_state) != *DRAIN* ]]
}

@test "two jobs each of two users drain node2, with the measurement as the reason, once" {
	local want="ddp-check: link-send 0.21 GB/s vs median 1.9 GB/s, 4 jobs of 2 users in 24h"
	verdict "$(job_of ddptest)" "$ddptest_uid"
	verdict "$(job_of ddptest)" "$ddptest_uid"
	verdict "$(job_of root)" 0
	verdict "$(job_of root)" 0
	run health
	show
	[ "$status" -eq 0 ]
	[ "$output" = "node2: drained: $want" ]
	[[ $(node2_state) == *DRAIN* ]]
	[ "$(node2_reason)" = "$want" ]

	# Not drained again, and an admin's reason is kept.
	mc_run -- scontrol update NodeName=node2 State=DRAIN Reason="admin: cable swap"
	run health
	show
	[ "$status" -eq 0 ]
	[[ $output == "node2: already drained ("*"DRAIN"*"), not drained again: $want" ]]
	[ "$(node2_reason)" = "admin: cable swap" ]
}

@test "slurmd runs the health check (HealthCheckProgram): two jobs each of two users drain node2 with the measurement as the reason" {
	local want="ddp-check: link-send 0.21 GB/s vs median 1.9 GB/s, 4 jobs of 2 users in 24h" start=$SECONDS
	verdict "$(job_of ddptest)" "$ddptest_uid"
	verdict "$(job_of ddptest)" "$ddptest_uid"
	verdict "$(job_of root)" 0
	verdict "$(job_of root)" 0
	[[ $(node2_state) != *DRAIN* ]]
	health_check_by_slurmd 2
	wait_node2_drained 60
	echo "# slurmd drained node2 $((SECONDS - start)) s after the verdicts" >&3
	run node2_reason
	show
	[ "$output" = "$want" ]
	# No node the verdicts do not name.
	run mc_run -- sinfo -h -N -t drain -o %N
	show
	[ "$output" = node2 ]
}

@test "one user's forged verdicts of many jobs leave node2 up" {
	local _
	for _ in 1 2 3 4 5; do
		verdict "$(job_of ddptest)" "$ddptest_uid"
	done
	run health
	show
	[ "$status" -eq 0 ]
	[ "$output" = "node2: ok: 5 jobs of 1 user named it within 86400s, one user's jobs counting once (drained at 3 jobs of 2 users)" ]
	[[ $(node2_state) != *DRAIN* ]]
}

@test "verdicts older than check_drain_window do not count" {
	verdict "$(job_of ddptest)" "$ddptest_uid" 90000
	verdict "$(job_of ddptest)" "$ddptest_uid" 90000
	verdict "$(job_of root)" 0
	run health
	show
	[ "$status" -eq 0 ]
	[[ $output == "node2: ok: 1 job of 1 user named it"* ]]
	[[ $(node2_state) != *DRAIN* ]]
}

@test "ddp-nodectl verdicts shows the node's records with job, user and measurement" {
	local job
	job=$(job_of ddptest)
	verdict "$job" "$ddptest_uid"
	echo "not a record" >>"$vstate/verdicts"
	run mc_exec node2 -- env DDP_CONF="$conf" SLURMD_NODENAME=node2 "$helper" verdicts
	show
	[ "$status" -eq 0 ]
	[[ $output == "node2: 1 verdict in the last 86400 s ($vstate/verdicts)"* ]]
	[[ $output == *"node2  job $job step 0  user ddptest  link-send 0.21 GB/s vs median 1.9 GB/s"* ]]
	[[ $output == *"1 malformed line skipped"* ]]
	[[ $output == *"1 job of 1 user: no drain"* ]]
}

# The NHC check function, run as NHC runs a check (its die and log
# functions defined as NHC defines their contract: die records the
# message that becomes the offline reason). NHC itself is not packaged
# for Debian.
nhc_check() {
	mc_exec node2 -- env DDP_CONF="$conf" SLURMD_NODENAME=node2 NHC="$nhc" \
		HELPER="$helper" bash -c '
			die() { echo "die $1: $2"; return "$1"; }
			log() { echo "log: $*"; }
			source "$NHC"
			check_ddp_verdicts -n node2 -p "$HELPER"
			echo "rc $?"'
}

@test "the NHC check fails with the reason for two jobs each of two users, passes for one user" {
	verdict "$(job_of ddptest)" "$ddptest_uid"
	verdict "$(job_of ddptest)" "$ddptest_uid"
	run nhc_check
	show
	[ "$output" = "rc 0" ]
	verdict "$(job_of root)" 0
	verdict "$(job_of root)" 0
	run nhc_check
	show
	[ "$output" = "$(printf '%s\n' "die 1: ddp-check: link-send 0.21 GB/s vs median 1.9 GB/s, 4 jobs of 2 users in 24h" "rc 1")" ]
	# NHC, not the check, takes the node offline.
	[[ $(node2_state) != *DRAIN* ]]
}

@test "three users' programs crash on node2 (SIGSEGV, SIGABRT, a SIGKILL each sends itself) within the drain window: no verdict is recorded, the health check leaves node2 up" {
	local real=$st/ddp-state/verdicts jobs=() u sig j
	if ! id "$crash_user" >/dev/null 2>&1; then
		useradd --create-home --shell /bin/bash --comment "slurm-ddp crash test user" "$crash_user"
		crash_user_made=1
	fi
	for u in "ddptest SEGV" "root ABRT" "$crash_user KILL"; do
		read -r u sig <<<"$u"
		j=$(crash_on_node2 "$u" "$sig")
		[ -n "$j" ]
		jobs+=("$j")
	done
	echo "# jobs ${jobs[*]} of ddptest, root and $crash_user" >&3
	# slurmstepd on node2 recorded nothing of them.
	if [ -f "$real" ] && grep -E " job=($(IFS='|'; echo "${jobs[*]}")) " "$real"; then
		echo "verdicts recorded for the crashes in $real" >&2
		false
	fi
	# The health check, as slurmd runs it, on what these jobs left in the
	# cluster's record (which also holds other suites' ddp-check
	# findings, not this test's): no job named node2, and node2 is up.
	install -d -m 0700 "$vstate"
	if [ -f "$real" ]; then
		grep -E " job=($(IFS='|'; echo "${jobs[*]}")) " "$real" >"$vstate/verdicts" || true
	fi
	run health
	show
	[ "$status" -eq 0 ]
	[ "$output" = "node2: ok: 0 jobs of 0 users named it within 86400s (drained at 3 jobs of 2 users)" ]
	[[ $(node2_state) != *DRAIN* ]]
	run mc_run -- sinfo -h -N -n node2 -t drain -o %N
	show
	[ -z "$output" ]
}
