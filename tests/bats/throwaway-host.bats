#!/usr/bin/env bats
# SPDX-License-Identifier: BSD-3-Clause
# tests/lib/throwaway-host, which make deps and make demo ask before they
# install packages, stop Slurm's and munge's services or start the
# minicluster: it lets them go on on a throw-away machine (this one, or
# CI's) and refuses on a machine with signs of a real Slurm node, here
# daemons this file starts itself under the daemons' names, and a
# slurm.conf it points SLURM_CONF at.

setup() {
	repo=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	guard=$repo/tests/lib/throwaway-host
	bin=$BATS_TEST_TMPDIR/bin
	mkdir -p "$bin"
	pids=()
	run "$guard" "make deps"
	[ "$status" -eq 0 ] || skip "this machine is no throw-away one itself: $output"
}

teardown() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
}

# daemon NAME ARGS...: a process whose command name is NAME (a copy of
# bash that waits), with ARGS on its command line, as a daemon's would be;
# teardown ends it.
daemon() {
	local name=$1
	shift
	[ -x "$bin/$name" ] || cp "$(command -v bash)" "$bin/$name"
	# It takes its sleep along when teardown ends it, and holds none of
	# bats' descriptors, which bats would wait for.
	"$bin/$name" -c 'trap "kill \$!; exit 0" TERM; sleep 300 & wait' "$@" \
		</dev/null >/dev/null 2>&1 3>&- &
	pids+=($!)
	# Until the copy runs under its name.
	for _ in $(seq 50); do
		[ "$(cat "/proc/${pids[-1]}/comm" 2>/dev/null)" = "$name" ] && return 0
		sleep 0.1
	done
	return 1
}

@test "this machine is a throw-away one: nothing said, exit 0" {
	run "$guard" "make deps"
	[ "$status" -eq 0 ]
	[ -z "$output" ]
}

@test "a running slurmd of the machine refuses make deps, saying why and what it would do; DEMO_ON_THIS_HOST=1 goes on" {
	daemon slurmd -D
	run "$guard" "make deps"
	[ "$status" -eq 1 ]
	[[ $output == *"make deps: refused: this machine looks like a real Slurm node"* ]]
	[[ $output == *"slurmd runs (pid ${pids[0]}:"* ]]
	[[ $output == *"installs about 35 Debian packages"*"stops the slurmctld, slurmd and munge"* ]]
	[[ $output == *"/var/cache/slurm-ddp/roots"*"DEMO_ON_THIS_HOST=1"* ]]
	run env DEMO_ON_THIS_HOST=1 "$guard" "make deps"
	[ "$status" -eq 0 ]
	[[ $output == *"DEMO_ON_THIS_HOST=1: going on"*"slurmd runs"* ]]
}

@test "the machine's munged refuses; a munged on a socket of its own (the tests') does not" {
	daemon munged --socket="$BATS_TEST_TMPDIR/munge.sock"
	run "$guard" "make demo"
	[ "$status" -eq 0 ]
	daemon munged --foreground
	run "$guard" "make demo"
	[ "$status" -eq 1 ]
	[[ $output == *"make demo: refused"*"munged runs (pid ${pids[1]}:"* ]]
	[[ $output != *"pid ${pids[0]}:"* ]]
}

@test "the minicluster's slurmctld (-f in its state folder) does not count; one with the machine's slurm.conf does" {
	daemon slurmctld -D -i -f /run/ddp-minicluster/etc/slurm.conf
	run "$guard" "make deps"
	[ "$status" -eq 0 ]
	daemon slurmctld -D -f /etc/slurm/slurm.conf
	run "$guard" "make deps"
	[ "$status" -eq 1 ]
	[[ $output == *"slurmctld runs (pid ${pids[1]}:"* ]]
}

@test "a Slurm configuration refuses, naming it" {
	echo "ClusterName=site" >"$BATS_TEST_TMPDIR/slurm.conf"
	run env SLURM_CONF="$BATS_TEST_TMPDIR/slurm.conf" "$guard" "make demo"
	[ "$status" -eq 1 ]
	[[ $output == *"a Slurm configuration, $BATS_TEST_TMPDIR/slurm.conf"* ]]
}

@test "make demo asks first, before make deps installs anything" {
	run make -C "$repo" --no-print-directory -n demo
	[ "$status" -eq 0 ]
	[ "$(head -n 1 <<<"$output")" = 'tests/lib/throwaway-host "make demo"' ]
	grep -q 'throwaway-host" "make deps" || exit 1' "$repo/tests/lib/install-deps"
}
