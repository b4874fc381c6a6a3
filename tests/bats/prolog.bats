#!/usr/bin/env bats
# SPDX-License-Identifier: BSD-3-Clause
# The Prolog/Epilog scripts and ddp-nodectl without a cluster: real nft in
# private network namespaces (a node, a job peer, a stranger joined by veth
# pairs), a fake scontrol that records drains, temporary roots.

setup() {
	repo=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	helper=$repo/${BUILD:-build}/bin/ddp-nodectl
	[ -x "$helper" ] || skip "ddp-nodectl not built ($helper)"
	[ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces, chown)"
	command -v nft >/dev/null || skip "nft not installed"
	export DDP_NODECTL=$helper
	tmp=$(mktemp -d /tmp/ddp-bats.XXXXXX)
	chmod 0755 "$tmp"
	ns=ddpbats$$
	mkdir -p "$tmp/shared" "$tmp/bin"
	cat >"$tmp/bin/scontrol" <<EOF
#!/bin/sh
printf '%s\n' "\$*" >>"$tmp/scontrol.log"
EOF
	chmod 0755 "$tmp/bin/scontrol"
	fstype=$(findmnt -n -o FSTYPE -T "$tmp/shared")
	cat >"$tmp/ddp.conf" <<EOF
shared_root = $tmp/shared
shared_fstypes = $fstype
scratch_root = $tmp/scratch
state_dir = $tmp/state
scontrol_path = $tmp/bin/scontrol
firewall_timeout = 1h
port_key = $tmp/port.key
EOF
	(umask 077 && head -c 32 /dev/urandom >"$tmp/port.key")
	export DDP_CONF=$tmp/ddp.conf
	export SLURM_JOB_ID=12 SLURM_JOB_UID=65534 SLURM_JOB_GID=65534
	export SLURM_NODELIST='n[1-2]' SLURMD_NODENAME=n1

	# node <-> peer on 10.9.1.0/24, node <-> stranger on 10.9.2.0/24.
	for n in node peer other; do ip netns add "$ns-$n"; done
	ip link add vpa netns "$ns-node" type veth peer name vpb netns "$ns-peer"
	ip link add voa netns "$ns-node" type veth peer name vob netns "$ns-other"
	ip -n "$ns-node" addr add 10.9.1.1/24 dev vpa
	ip -n "$ns-node" addr add 10.9.2.1/24 dev voa
	ip -n "$ns-peer" addr add 10.9.1.2/24 dev vpb
	ip -n "$ns-other" addr add 10.9.2.2/24 dev vob
	for n in node peer other; do ip -n "$ns-$n" link set lo up; done
	ip -n "$ns-node" link set vpa up
	ip -n "$ns-node" link set voa up
	ip -n "$ns-peer" link set vpb up
	ip -n "$ns-other" link set vob up
	# ip netns exec bind-mounts /etc/netns/NAME/hosts over /etc/hosts.
	mkdir -p "/etc/netns/$ns-node"
	printf '10.9.1.1 n1\n10.9.1.2 n2\n10.9.2.2 n3\n' >"/etc/netns/$ns-node/hosts"
}

teardown() {
	# A failed test may leave its lock holder or a waiting epilog.
	local pid
	for pid in ${holder:-} ${epilog:-} ${writers:-}; do kill -9 "$pid" 2>/dev/null || true; done
	[ -n "${ns:-}" ] || return 0
	for n in node peer other; do ip netns del "$ns-$n" 2>/dev/null || true; done
	rm -rf "/etc/netns/$ns-node"
	rmdir /etc/netns 2>/dev/null || true
	if [ -n "${tmp:-}" ]; then
		umount "$tmp/shared" 2>/dev/null || true
		rm -rf "$tmp"
	fi
}

# on NAME CMD...: runs CMD in namespace NAME (node, peer, other).
on() {
	local n=$1
	shift
	ip netns exec "$ns-$n" "$@"
}

elements() { on node nft list ruleset | grep -c 'comment "job=' || true; }

# connect NS ADDR PORT: prints open, refused or timeout.
connect() {
	on "$1" "$repo/tests/lib/tcp-probe" "$2" "$3"
}

# wait_listening NS PORT: returns once something listens on PORT in NS
# (up to 20 s), however long the machine takes to start the listener.
wait_listening() {
	local _
	for _ in $(seq 200); do
		[ -z "$(on "$1" ss -Htln "sport = :$2")" ] || return 0
		sleep 0.1
	done
	echo "nothing listens on port $2 in $1 after 20 s" >&2
	return 1
}

@test "prolog makes the shared dir and scratch 0700 for the job's user" {
	run on node "$repo/prolog/ddp-prolog"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(stat -c '%U %a' "$tmp/shared/nobody/12")" = "nobody 700" ]
	[ "$(stat -c '%U %a' "$tmp/scratch/12")" = "nobody 700" ]
	[ ! -e "$tmp/scontrol.log" ]
}

@test "prolog opens the peer only, the epilog closes it, twice is fine" {
	on node python3 -c '
import socket, time
s = socket.socket(); s.bind(("0.0.0.0", 29500)); s.listen(8)
time.sleep(30)' >/dev/null 2>&1 3>&- &
	listener=$!
	wait_listening node 29500
	run on node "$repo/prolog/ddp-prolog"
	echo "$output"
	[ "$status" -eq 0 ]
	run on node nft list set inet ddp peers4
	echo "$output"
	[[ $output == *'10.9.1.2 . 29400-29999'*'comment "job=12"'* ]]
	[[ $output != *10.9.1.1* ]]
	[ "$(connect peer 10.9.1.1 29500)" = open ]
	[ "$(connect other 10.9.2.1 29500)" = refused ]
	run on node "$repo/prolog/ddp-epilog"
	[ "$status" -eq 0 ]
	[ "$(elements)" -eq 0 ]
	[ "$(connect peer 10.9.1.1 29500)" = refused ]
	[ ! -e "$tmp/scratch/12" ]
	[ -d "$tmp/shared/nobody/12" ]
	run on node "$repo/prolog/ddp-epilog"
	[ "$status" -eq 0 ]
	kill "$listener" 2>/dev/null || true
	wait "$listener" 2>/dev/null || true
}

@test "epilog without a prolog succeeds and touches nothing" {
	run on node "$repo/prolog/ddp-epilog"
	echo "$output"
	[ "$status" -eq 0 ]
	[ ! -e "$tmp/scontrol.log" ]
}

@test "an element two jobs need survives the first job's epilog" {
	on node "$repo/prolog/ddp-prolog"
	SLURM_JOB_ID=13 on node "$repo/prolog/ddp-prolog"
	on node "$repo/prolog/ddp-epilog"
	run on node nft list set inet ddp peers4
	echo "$output"
	[[ $output == *'10.9.1.2 . 29400-29999'*'comment "job=13"'* ]]
	SLURM_JOB_ID=13 on node "$repo/prolog/ddp-epilog"
	[ "$(elements)" -eq 0 ]
}

# expires_ms SET ADDR: the milliseconds left to the first of ADDR's
# elements in SET to expire.
expires_ms() {
	on node nft list set inet ddp "$1" | tr ',' '\n' | grep -F "$2 . " |
		sed -n 's/.* expires \([0-9dhms]*\).*/\1/p' |
		awk '{ t = 0; s = $0
			while (match(s, /^[0-9]+(ms|d|h|m|s)/)) {
				u = substr(s, 1, RLENGTH); s = substr(s, RLENGTH + 1)
				v = u + 0; sub(/^[0-9]+/, "", u)
				t += v * (u == "d" ? 86400000 : u == "h" ? 3600000 : u == "m" ? 60000 : u == "s" ? 1000 : 1)
			}
			print t }' | sort -n | head -n 1
}

# expiry_at SET ADDR: when the first of ADDR's elements in SET expires, in
# milliseconds since the epoch (at most a little early: the clock is read
# before nft), so that tests compare expiries, not how fast they ran.
expiry_at() {
	local now left
	now=$(date +%s%3N)
	left=$(expires_ms "$1" "$2")
	[ -n "$left" ] && echo $((now + left))
}

@test "an element two jobs share lives as long as the later job's opening, and the log says it is shared" {
	# Jobs 12 and 13 both run on n1 and n2: on n1 both need n2's
	# element, the same (address, ports) whatever the comment.
	local first at
	on node "$repo/prolog/ddp-prolog"
	first=$(expiry_at peers4 10.9.1.2)
	sleep 5
	SLURM_JOB_ID=13 run on node "$repo/prolog/ddp-prolog"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ $output == *'job 13: opened 0 firewall elements for 1 peer nodes, kept 2 shared with job 12'* ]]
	run on node nft list set inet ddp peers4
	echo "$output"
	[[ $output == *'10.9.1.2 . 29400-29999'*'comment "job=13"'* ]]
	# nft keeps one element: it must not expire with job 12's (5 s
	# earlier) but with job 13's.
	at=$(expiry_at peers4 10.9.1.2)
	echo "job 12's opening expired at $first, the element now at $at"
	[ "$at" -ge $((first + 3000)) ]
	# Job 12 ends: job 13's peer still reaches the node.
	on node python3 -c '
import socket, time
s = socket.socket(); s.bind(("0.0.0.0", 29500)); s.listen(8)
time.sleep(30)' >/dev/null 2>&1 3>&- &
	listener=$!
	wait_listening node 29500
	run on node "$repo/prolog/ddp-epilog"
	echo "$output"
	[[ $output == *'job 12: removed 0 firewall elements, kept 2 shared with job 13'* ]]
	run on node nft list set inet ddp peers4
	[[ $output == *'10.9.1.2 . 29400-29999'*'comment "job=13"'* ]]
	[ "$(connect peer 10.9.1.1 29500)" = open ]
	[ "$(connect other 10.9.2.1 29500)" = refused ]
	kill "$listener" 2>/dev/null || true
	wait "$listener" 2>/dev/null || true
	# Reconcile with job 13 live keeps it, then without removes it.
	run on node "$helper" reconcile --grace 0 13
	[ "$status" -eq 0 ]
	[ "$(elements)" -eq 2 ]
	run on node "$helper" reconcile --grace 0
	[ "$(elements)" -eq 0 ]
}

@test "the later of two jobs sharing an element ends first: the earlier one keeps it, for its own time left" {
	local first at
	on node "$repo/prolog/ddp-prolog"
	first=$(expiry_at peers4 10.9.1.2)
	sleep 5
	SLURM_JOB_ID=13 on node "$repo/prolog/ddp-prolog"
	run env SLURM_JOB_ID=13 ip netns exec "$ns-node" "$repo/prolog/ddp-epilog"
	echo "$output"
	[[ $output == *'job 13: removed 0 firewall elements, kept 2 shared with job 12'* ]]
	run on node nft list set inet ddp peers4
	echo "$output"
	[[ $output == *'10.9.1.2 . 29400-29999'*'comment "job=12"'* ]]
	[[ $output != *'job=13"'* ]]
	# Job 12's own expiry (job 13's came 5 s later), however long the
	# prologs and the epilog took.
	at=$(expiry_at peers4 10.9.1.2)
	echo "job 12's opening expired at $first, the element now at $at"
	[ "$at" -gt $((first - 2000)) ]
	[ "$at" -lt $((first + 2000)) ]
	on node "$repo/prolog/ddp-epilog"
	[ "$(elements)" -eq 0 ]
}

@test "port_range changed while a job runs: the next job's overlapping ranges merge, no drain, each epilog leaves the other's" {
	on node "$repo/prolog/ddp-prolog"
	echo "port_range = 29500-30999" >>"$DDP_CONF"
	SLURM_JOB_ID=13 run on node "$repo/prolog/ddp-prolog"
	echo "$output"
	[ "$status" -eq 0 ]
	[ ! -e "$tmp/scontrol.log" ]
	[[ $output == *'kept 2 shared with job 12'* ]]
	run on node nft list set inet ddp peers4
	echo "$output"
	[[ $output == *'10.9.1.2 . 29400-30999 '*'comment "job=13"'* ]]
	SLURM_JOB_ID=13 on node "$repo/prolog/ddp-epilog"
	run on node nft list set inet ddp peers4
	echo "$output"
	[[ $output == *'10.9.1.2 . 29400-29999 '*'comment "job=12"'* ]]
	[[ $output != *30999* ]]
	on node "$repo/prolog/ddp-epilog"
	[ "$(elements)" -eq 0 ]
}

@test "5 concurrent prologs and epilogs leave no element, state or lock" {
	local pids=() j
	for j in 21 22 23 24 25; do
		SLURM_JOB_ID=$j on node "$repo/prolog/ddp-prolog" & pids+=($!)
	done
	for j in "${pids[@]}"; do wait "$j"; done
	local states=("$tmp"/state/net-*/job.*)
	[ "${#states[@]}" -eq 5 ]
	run on node nft list set inet ddp peers4
	[[ $output == *'10.9.1.2 . 29400-29999'*'comment "job=2'* ]]
	pids=()
	for j in 21 22 23 24 25; do
		SLURM_JOB_ID=$j on node "$repo/prolog/ddp-epilog" & pids+=($!)
	done
	for j in "${pids[@]}"; do wait "$j"; done
	[ "$(elements)" -eq 0 ]
	[ -z "$(ls "$tmp/scratch")" ]
	# The lock and the Prolog's reserve stay (nodectl.h), nothing else.
	[ "$(ls "$tmp"/state/net-* | tr '\n' ' ')" = "lock reserve " ]
	[ "$(stat -c %s "$tmp"/state/net-*/reserve)" -eq 1048576 ]
	flock -n "$tmp"/state/net-*/lock true
}

@test "shared root of the wrong type: drain with a specific reason, exit 1" {
	sed -i 's/^shared_fstypes = .*/shared_fstypes = nfs,lustre/' "$DDP_CONF"
	run on node "$repo/prolog/ddp-prolog"
	echo "$output"
	[ "$status" -eq 1 ]
	grep -E "^update NodeName=n1 State=DRAIN Reason=ddp: $tmp/shared (not mounted|is [a-z0-9]+, not nfs,lustre)\$" "$tmp/scontrol.log"
	[ "$(elements)" -eq 0 ]
}

@test "shared root mounted with an accepted type passes; unmounted drains" {
	mount -t tmpfs -o mode=0755 ddpbats "$tmp/shared"
	sed -i 's/^shared_fstypes = .*/shared_fstypes = nfs,tmpfs/' "$DDP_CONF"
	run on node "$repo/prolog/ddp-prolog"
	[ "$status" -eq 0 ]
	umount "$tmp/shared"
	sed -i 's/^shared_fstypes = .*/shared_fstypes = tmpfs/' "$DDP_CONF"
	run on node "$repo/prolog/ddp-prolog"
	[ "$status" -eq 1 ]
	grep -F "Reason=ddp: $tmp/shared " "$tmp/scontrol.log"
}

@test "shared_mount not mounted drains even when the dir exists" {
	echo "shared_mount = $tmp/shared" >>"$DDP_CONF"
	run on node "$repo/prolog/ddp-prolog"
	echo "$output"
	[ "$status" -eq 1 ]
	grep -F "Reason=ddp: $tmp/shared not mounted" "$tmp/scontrol.log"
	mount -t tmpfs -o mode=0755 ddpbats "$tmp/shared"
	sed -i 's/^shared_fstypes = .*/shared_fstypes = tmpfs/' "$DDP_CONF"
	run on node "$repo/prolog/ddp-prolog"
	[ "$status" -eq 0 ]
}

@test "untrusted job id and uid are refused and drain" {
	SLURM_JOB_ID='12;touch /tmp/pwned' run on node "$repo/prolog/ddp-prolog"
	[ "$status" -eq 1 ]
	grep -F 'Reason=ddp: bad prolog environment' "$tmp/scontrol.log"
	SLURM_JOB_UID=abc run on node "$repo/prolog/ddp-prolog"
	[ "$status" -eq 1 ]
	[ ! -e /tmp/pwned ]
}

# One typo in the cluster-wide ddp.conf must not drain every node: the job
# runs without openings or directories and the plugin refuses its --ddp
# steps, naming the line.
@test "bad ddp.conf: the prolog logs it and drains nothing, the epilog exits 0" {
	echo 'firewall = maybe' >>"$DDP_CONF"
	run on node "$repo/prolog/ddp-prolog"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ $output == *"ddp.conf:8: firewall: invalid value 'maybe'"* ]]
	[ ! -e "$tmp/scontrol.log" ]
	[ "$(elements)" -eq 0 ]
	run on node "$repo/prolog/ddp-epilog"
	[ "$status" -eq 0 ]
}

@test "-c or DDP_CONF naming a missing file is an error naming it; prolog and epilog log it and exit 0; a missing default is not one" {
	run "$helper" -c "$tmp/missing.conf" show
	echo "$output"
	[ "$status" -eq 2 ]
	[[ $output == *"$tmp/missing.conf: cannot open: No such file or directory"* ]]
	[[ $output != *port_range* ]]
	run on node "$helper" -c "$tmp/missing.conf" prolog
	echo "$output"
	[ "$status" -eq 0 ]
	[[ $output == *"$tmp/missing.conf: cannot open"* ]]
	[ ! -e "$tmp/scontrol.log" ]
	[ ! -e "$tmp/scratch/12" ]
	run on node "$helper" -c "$tmp/missing.conf" epilog
	[ "$status" -eq 0 ]
	[[ $output == *"$tmp/missing.conf: cannot open"* ]]
	# $DDP_CONF names a file as -c does: an Epilog whose cluster's
	# configuration went away does not fall back to the defaults, whose
	# state_dir is the machine's own.
	DDP_CONF=$tmp/missing.conf run "$helper" show
	echo "$output"
	[ "$status" -eq 2 ]
	[[ $output == *"$tmp/missing.conf: cannot open: No such file or directory"* ]]
	local had_state=0
	[ ! -e /run/slurm-ddp ] || had_state=1
	DDP_CONF=$tmp/missing.conf run on node "$helper" epilog
	[ "$status" -eq 0 ]
	[[ $output == *"$tmp/missing.conf: cannot open"* ]]
	[ "$had_state" -eq 1 ] || [ ! -e /run/slurm-ddp ]
	# The built-in path alone may be missing: then the defaults hold.
	if [ ! -e /etc/slurm/ddp.conf ]; then
		DDP_CONF='' run "$helper" show
		echo "$output"
		[ "$status" -eq 0 ]
		[[ $output == *'port_range = 29400-29999'* ]]
	fi
}

@test "epilog removes scratch without following symlinks" {
	on node "$repo/prolog/ddp-prolog"
	mkdir "$tmp/victim"
	touch "$tmp/victim/keep"
	ln -s "$tmp/victim" "$tmp/scratch/12/link"
	run on node "$repo/prolog/ddp-epilog"
	[ "$status" -eq 0 ]
	[ ! -e "$tmp/scratch/12" ]
	[ -e "$tmp/victim/keep" ]
}

# keys JOB.STEP.TAG...: step keys as slurmstepd leaves them when killed
# before slurm_spank_exit: files of the job's user in root's step-keys.
keys() {
	local k
	mkdir -p "$tmp/state/step-keys"
	chmod 0711 "$tmp/state" "$tmp/state/step-keys"
	for k in "$@"; do
		head -c 32 /dev/zero >"$tmp/state/step-keys/$k"
		chmod 0400 "$tmp/state/step-keys/$k"
		chown 65534:65534 "$tmp/state/step-keys/$k"
	done
}

@test "the epilog removes the step keys a killed slurmstepd left for its job, and no other job's" {
	keys 12.0.4711 12.3.4712 13.0.4713
	run on node "$repo/prolog/ddp-epilog"
	echo "$output"
	[ "$status" -eq 0 ]
	[ ! -e "$tmp/state/step-keys/12.0.4711" ]
	[ ! -e "$tmp/state/step-keys/12.3.4712" ]
	[ -e "$tmp/state/step-keys/13.0.4713" ]
	[[ $output == *"removed 2 step keys left by a killed slurmstepd"* ]]
}

@test "reconcile removes the step keys of jobs not running; the prolog those grown past a key" {
	keys 12.0.1 13.0.2 14.0.3
	# Its owner made job 14's key writable and grew it while it runs.
	chmod 0600 "$tmp/state/step-keys/14.0.3"
	head -c 65536 /dev/zero >>"$tmp/state/step-keys/14.0.3"
	run on node "$repo/prolog/ddp-prolog"
	echo "$output"
	[ "$status" -eq 0 ]
	[ ! -e "$tmp/state/step-keys/14.0.3" ]
	[ -e "$tmp/state/step-keys/13.0.2" ]
	run on node "$helper" reconcile --grace 0 12
	echo "$output"
	[ "$status" -eq 0 ]
	[ -e "$tmp/state/step-keys/12.0.1" ]
	[ ! -e "$tmp/state/step-keys/13.0.2" ]
}

@test "reconcile removes elements of jobs not running, keeps live ones" {
	on node "$repo/prolog/ddp-prolog"
	on node nft add element inet ddp peers4 \
		'{ 10.9.2.2 . 29400-29999 timeout 1h comment "job=999" }'
	[ "$(elements)" -eq 3 ]
	run on node "$helper" reconcile --grace 0 12
	echo "$output"
	[ "$status" -eq 0 ]
	run on node nft list set inet ddp peers4
	[[ $output != *job=999* ]]
	[[ $output == *job=12* ]]
	run on node "$helper" reconcile --grace 0
	[ "$status" -eq 0 ]
	[ "$(elements)" -eq 0 ]
	[ ! -e "$tmp/scratch/12" ]
}

@test "install recreates the table; the prolog reinstalls a missing one" {
	run on node "$helper" install
	[ "$status" -eq 0 ]
	run on node nft list chain inet ddp input
	[[ $output == *'tcp dport @ports reject with tcp reset'* ]]
	on node nft delete table inet ddp
	run on node "$repo/prolog/ddp-prolog"
	[ "$status" -eq 0 ]
	[ "$(elements)" -eq 2 ]
}

# hold_lock: holds the firewall state lock (as a stuck prolog would) until
# release_lock.
hold_lock() {
	local lock=("$tmp"/state/net-*/lock)
	python3 -c '
import fcntl, sys, time
f = open(sys.argv[1], "a"); fcntl.flock(f, fcntl.LOCK_EX)
open(sys.argv[2], "w").close(); time.sleep(60)' "${lock[0]}" "$tmp/held" 3>&- &
	holder=$!
	local _
	for _ in $(seq 50); do
		[ -e "$tmp/held" ] && return 0
		sleep 0.1
	done
	return 1
}
# wait_lock_waiter: waits until a process other than the holder has the
# lock file open (one that waits for the lock), at most 10 s.
wait_lock_waiter() {
	local lock _
	lock=$(realpath "$tmp"/state/net-*/lock)
	for _ in $(seq 100); do
		find /proc/[0-9]*/fd -maxdepth 1 -lname "$lock" 2>/dev/null |
			grep -qv "^/proc/$holder/" && return 0
		sleep 0.1
	done
	return 1
}
release_lock() {
	kill "$holder" 2>/dev/null || true
	wait "$holder" 2>/dev/null || true
	holder=
}

# fake_squeue STATUS [LINE...]: squeue next to the fake scontrol, logging
# its arguments, printing the lines, exiting with STATUS.
fake_squeue() {
	local rc=$1
	shift
	{
		echo '#!/bin/sh'
		echo "printf '%s\\n' \"\$*\" >>'$tmp/squeue.log'"
		[ "$rc" -eq 0 ] || echo 'echo "slurm_load_jobs error: Unable to contact slurm controller" >&2'
		[ "$#" -eq 0 ] || printf "echo '%s'\n" "$@"
		echo "exit $rc"
	} >"$tmp/bin/squeue"
	chmod 0755 "$tmp/bin/squeue"
}

@test "epilog removes the firewall first: scratch waits while the lock is held" {
	on node "$repo/prolog/ddp-prolog"
	hold_lock
	ip netns exec "$ns-node" "$repo/prolog/ddp-epilog" 3>&- &
	epilog=$!
	wait_lock_waiter
	# The epilog waits for the lock to remove the elements; scratch,
	# which may be a huge tree, has not been touched yet.
	[ -d "$tmp/scratch/12" ]
	[ "$(elements)" -eq 2 ]
	release_lock
	wait "$epilog"
	epilog=
	[ "$(elements)" -eq 0 ]
	[ ! -e "$tmp/scratch/12" ]
}

@test "an epilog waiting for the lock drops the job's state first; killed, its elements go at the next update" {
	on node "$repo/prolog/ddp-prolog"
	local states=("$tmp"/state/net-*)
	[ -e "${states[0]}/job.12" ]
	hold_lock
	ip netns exec "$ns-node" "$repo/prolog/ddp-epilog" 3>&- &
	epilog=$!
	local _
	for _ in $(seq 50); do
		[ -e "${states[0]}/job.12" ] || break
		sleep 0.1
	done
	[ ! -e "${states[0]}/job.12" ]
	# Killed while it waits, as PrologEpilogTimeout would.
	kill -9 "$epilog"
	wait "$epilog" || true
	epilog=
	release_lock
	[ "$(on node nft list ruleset | grep -c 'comment "job=12"')" -eq 2 ]
	# Another job's prolog on the node drops them (the peer stays
	# opened for that job, re-tagged).
	SLURM_JOB_ID=13 on node "$repo/prolog/ddp-prolog"
	run on node nft list set inet ddp peers4
	echo "$output"
	[[ $output != *'job=12"'* ]]
	[[ $output == *'10.9.1.2 . 29400-29999'*'comment "job=13"'* ]]
}

@test "epilog removes a 2000-level scratch tree" {
	on node "$repo/prolog/ddp-prolog"
	setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
for i in range(2000):
    os.mkdir("d", dir_fd=fd)
    nfd = os.open("d", os.O_RDONLY, dir_fd=fd); os.close(fd); fd = nfd
os.close(os.open("data", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))' "$tmp/scratch/12"
	run on node "$repo/prolog/ddp-epilog"
	echo "$output"
	[ "$status" -eq 0 ]
	[ ! -e "$tmp/scratch/12" ]
	[[ $output != *error* ]]
}

@test "epilog ends while processes of the job's user keep writing in scratch" {
	on node "$repo/prolog/ddp-prolog"
	# Processes of the user that outlive the job (another job of theirs
	# on the node), each holding the directory open and filling it.
	local i
	writers=
	for i in 1 2 3; do
		setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
n = 0
while True:
    n += 1
    try:
        os.mkdir("d%s.%d" % (sys.argv[2], n), dir_fd=fd)
        os.close(os.open("f%s.%d" % (sys.argv[2], n), os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
    except OSError:
        pass' "$tmp/scratch/12" "$i" &
		writers="$writers $!"
	done
	for i in $(seq 100); do
		[ "$(find "$tmp/scratch/12" -maxdepth 1 | wc -l)" -gt 300 ] && break
		sleep 0.1
	done
	run timeout 30 ip netns exec "$ns-node" "$repo/prolog/ddp-epilog"
	echo "$output"
	local alive=0 pid
	for pid in $writers; do kill -0 "$pid" 2>/dev/null && alive=$((alive + 1)); done
	[ "$status" -eq 0 ]
	[ ! -e "$tmp/scratch/12" ]
	[ "$alive" -eq 3 ]
}

@test "a scratch dir left over under the job id is removed, never handed to the new owner" {
	mkdir -p "$tmp/scratch/12/old"
	touch "$tmp/scratch/12/old/secret"
	chown -R 1:1 "$tmp/scratch/12"
	chmod 0700 "$tmp/scratch/12"
	run on node "$repo/prolog/ddp-prolog"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ $output == *"scratch $tmp/scratch/12 was left over from an earlier job: removed, made anew"* ]]
	[ "$(stat -c '%U %a' "$tmp/scratch/12")" = "nobody 700" ]
	[ -z "$(ls -A "$tmp/scratch/12")" ]
}

@test "reconcile --listpids keeps a job slurmctld runs here though it has no step here" {
	on node "$repo/prolog/ddp-prolog"
	SLURM_JOB_ID=14 on node "$repo/prolog/ddp-prolog"
	# slurmctld has job 12 on n1 (an salloc between sruns); 14 ended
	# while slurmd was down. scontrol listpids lists no step at all.
	fake_squeue 0 12
	run on node "$helper" reconcile --listpids --grace 0
	echo "$output"
	[ "$status" -eq 0 ]
	grep -F -- '--nodelist=n1' "$tmp/squeue.log"
	[ -d "$tmp/scratch/12" ]
	[ ! -e "$tmp/scratch/14" ]
	local states=("$tmp"/state/net-*)
	[ -e "${states[0]}/job.12" ]
	[ ! -e "${states[0]}/job.14" ]
	[ "$(on node nft list ruleset | grep -c 'comment "job=12"')" -eq 2 ]
}

@test "reconcile removes nothing when slurmctld cannot be asked" {
	on node "$repo/prolog/ddp-prolog"
	fake_squeue 1
	run on node "$helper" reconcile --listpids --grace 0
	echo "$output"
	[ "$status" -eq 1 ]
	[[ $output == *"cannot tell which jobs run on n1: nothing removed"* ]]
	[ -d "$tmp/scratch/12" ]
	[ "$(elements)" -eq 2 ]
	run on node "$helper" reconcile --squeue --node n1 --grace 0
	[ "$status" -eq 1 ]
	[ -d "$tmp/scratch/12" ]
	[ "$(elements)" -eq 2 ]
}

@test "a scratch root a user made first does not drain: the job runs without scratch" {
	mkdir "$tmp/scratch"
	chown 65534:65534 "$tmp/scratch"
	run on node "$repo/prolog/ddp-prolog"
	echo "$output"
	[ "$status" -eq 0 ]
	[ ! -e "$tmp/scontrol.log" ]
	[[ $output == *"scratch root $tmp/scratch is owned by uid 65534, not root (a user made it first): remove it and run 'ddp-nodectl install'"* ]]
	[ ! -e "$tmp/scratch/12" ]
	[ "$(elements)" -eq 2 ]
}

@test "install creates scratch_root and state_dir root-owned, and names a squatted one" {
	run on node "$helper" install
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(stat -c '%u %a' "$tmp/scratch")" = "0 755" ]
	[ "$(stat -c '%u %a' "$tmp/state")" = "0 755" ]
	rmdir "$tmp/scratch"
	mkdir "$tmp/scratch"
	chown 65534:65534 "$tmp/scratch"
	run on node "$helper" install
	echo "$output"
	[ "$status" -eq 1 ]
	[[ $output == *"scratch root $tmp/scratch is owned by uid 65534, not root"* ]]
	on node nft list chain inet ddp input >/dev/null
}

@test "install checks port_key: ready when root's 0600, exit 1 naming file, owner, mode and fix otherwise" {
	run on node "$helper" install
	echo "$output"
	[ "$status" -eq 0 ]
	[[ $output == *"port key $tmp/port.key ready"* ]]
	chmod 0644 "$tmp/port.key"
	run on node "$helper" install
	echo "$output"
	[ "$status" -eq 1 ]
	[[ $output == *"port_key $tmp/port.key: file owned by uid 0 with mode 0644: others can read or change it"*"head -c 32 /dev/urandom"* ]]
	rm "$tmp/port.key"
	run on node "$helper" install
	echo "$output"
	[ "$status" -eq 1 ]
	[[ $output == *"port_key $tmp/port.key: No such file or directory"* ]]
	[ ! -e "$tmp/port.key" ]
}

@test "a shared user dir another user made is refused without draining, nothing handed over" {
	# shared_root 1777 as once advised; uid 1 plants the victim's
	# directory and the next job's directory in it.
	chmod 1777 "$tmp/shared"
	mkdir -p "$tmp/shared/nobody/12"
	chown -R 1:1 "$tmp/shared/nobody"
	run on node "$repo/prolog/ddp-prolog"
	echo "$output"
	[ "$status" -eq 0 ]
	[ ! -e "$tmp/scontrol.log" ]
	[[ $output == *"$tmp/shared/nobody is owned by uid 1, not by nobody (uid 65534): refused, no shared directory for this job"* ]]
	[ "$(stat -c '%u' "$tmp/shared/nobody" "$tmp/shared/nobody/12")" = "$(printf '1\n1')" ]
	# The rest of the job's setup is done.
	[ "$(stat -c '%U %a' "$tmp/scratch/12")" = "nobody 700" ]
	[ "$(elements)" -eq 2 ]
}

@test "a shared user dir open to others is refused, nothing made in it" {
	mkdir "$tmp/shared/nobody"
	chown 65534:65534 "$tmp/shared/nobody"
	chmod 0770 "$tmp/shared/nobody"
	run on node "$repo/prolog/ddp-prolog"
	echo "$output"
	[ "$status" -eq 0 ]
	[ ! -e "$tmp/scontrol.log" ]
	[[ $output == *"$tmp/shared/nobody has mode 0770, not 0700: refused"* ]]
	[ ! -e "$tmp/shared/nobody/12" ]
}

# shm_leftovers CMD...: runs CMD (as bash -c with $repo, $helper, $ns)
# with a private tmpfs on /dev/shm holding libddp segments of jobs 12,
# 13, 14 (an hour old) and 120, owned by nobody: the host's /dev/shm is
# never touched.
shm_leftovers() {
	unshare --mount --propagation private bash -euc '
		mount -t tmpfs -o mode=0755 ddp-bats-shm /dev/shm
		hex=0123456789abcdef0123456789abcdef
		for f in 12.0 12.4294967294 12. 13.0 14.0 120.0; do
			head -c 65536 /dev/zero >"/dev/shm/ddp-$f-$hex"
			chown 65534:65534 "/dev/shm/ddp-$f-$hex"
			chmod 0600 "/dev/shm/ddp-$f-$hex"
		done
		touch -d "1 hour ago" "/dev/shm/ddp-14.0-$hex"
		repo=$1 helper=$2 ns=$3
		shift 3
		eval "$*"
		echo "left: $(cd /dev/shm && ls | sort | tr "\n" " ")"
	' _ "$repo" "$helper" "$ns" "$@"
}

@test "the epilog removes the job's leftover shared memory and no other job's; reconcile those of jobs not running" {
	command -v unshare >/dev/null || skip "unshare not installed"
	hex=0123456789abcdef0123456789abcdef
	run shm_leftovers 'ip netns exec "$ns-node" "$repo/prolog/ddp-epilog"'
	echo "$output"
	[ "$status" -eq 0 ]
	[[ $output == *"left: ddp-120.0-$hex ddp-13.0-$hex ddp-14.0-$hex "* ]]
	# reconcile: job 13 is live; 120 is younger than the grace time.
	run shm_leftovers 'ip netns exec "$ns-node" "$helper" reconcile --grace 600 13'
	echo "$output"
	[ "$status" -eq 0 ]
	[[ $output == *"left: ddp-12.-$hex ddp-12.0-$hex ddp-12.4294967294-$hex ddp-120.0-$hex ddp-13.0-$hex "* ]]
}

@test "--help and -h list every command with its description on stdout and exit 0" {
	local opt out c
	for opt in --help -h; do
		out=$("$helper" "$opt" 2>/dev/null)
		echo "$out"
		[[ $out == "usage: ddp-nodectl "* ]]
		for c in prolog epilog install reconcile sweep show port health verdicts doctor; do
			grep -qE "^  $c( |\$)" <<<"$out"
		done
		# A description follows its command, or a long synopsis, on
		# one line of a terminal's width.
		[[ $out == *"  show                   print the effective configuration"$'\n'* ]]
		[[ $out == *"  reconcile [--squeue|--listpids] [--node NAME] [--grace S] [JOBID...]"$'\n'"                         drop "* ]]
		[ -z "$(grep -E '^.{80}' <<<"$out" || true)" ]
	done
	run "$helper" --no-such-option
	[ "$status" -eq 2 ]
	[[ $output == *"usage: ddp-nodectl "* ]]
}
