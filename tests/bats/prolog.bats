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
EOF
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
	sleep 0.5
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
	[ "$(ls "$tmp"/state/net-*)" = lock ]
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

@test "bad ddp.conf drains in the prolog, epilog still exits 0" {
	echo 'firewall = maybe' >>"$DDP_CONF"
	run on node "$repo/prolog/ddp-prolog"
	echo "$output"
	[ "$status" -eq 1 ]
	[[ $output == *"ddp.conf:7: firewall: invalid value 'maybe'"* ]]
	grep -F 'Reason=ddp: bad ddp.conf' "$tmp/scontrol.log"
	run on node "$repo/prolog/ddp-epilog"
	[ "$status" -eq 0 ]
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
