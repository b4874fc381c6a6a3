#!/usr/bin/env bats
# SPDX-License-Identifier: BSD-3-Clause
# ddp-nodectl doctor inside a minicluster node, installed as a site would:
# the healthy node passes every check; copies of its slurm.conf and
# ddp.conf, each broken in one piece, are named with the fix. The live
# configuration is never changed, so the cluster stays up for other files.
# shellcheck source=tests/cluster/common.bash
source "$BATS_TEST_DIRNAME/common.bash"

setup_file() {
	mc_up --nodes 2 --gpus-per-node 2
}

setup() {
	require_plugin
	require_prolog
	st=$(mc_state)
	# The staged helper sits next to the staged scripts the wrapper runs.
	local target
	target=$(sed -n "s/^exec '\(.*\)' \"\$@\"$/\1/p" "$st/etc/prolog")
	helper=$(dirname "$target")/../../sbin/ddp-nodectl
	[ -x "$helper" ] || skip "ddp-nodectl not staged next to $target"
	# Where the broken copies go: the state folder, which every node sees.
	work=$st/doctor.$BATS_TEST_NUMBER
	rm -rf "$work"
	mkdir -p "$work"
	chmod 0755 "$work"
}

teardown() {
	[ -n "${work:-}" ] && rm -rf "$work"
	return 0
}

# doctor NODE [SLURM_CONF [DDP_CONF]]: runs doctor on NODE (bats `run`).
doctor() {
	run mc_exec "$1" -- "$helper" -c "${3:-$st/etc/ddp.conf}" doctor \
		--slurm-conf "${2:-$st/etc/slurm.conf}"
	show
}

@test "a node of the minicluster passes every check" {
	# The first job on the node makes the nft table if boot did not.
	run mc_run -- srun -N1 -w node1 true
	[ "$status" -eq 0 ] || { show; false; }
	doctor node1
	[ "$status" -eq 0 ]
	[[ $output == *"ok plugstack: "* ]]
	[[ $output == *"ok Prolog: "*"runs ddp-prolog"* ]]
	[[ $output == *"ok Epilog: "*"runs ddp-epilog"* ]]
	[[ $output == *"ok PrologFlags: "* ]]
	[[ $output == *"ok port_key: "* ]]
	[[ $output == *"ok shared_root: $st/shared mounted"* ]]
	[[ $output == *"ok firewall: table inet ddp present"* ]]
	[[ $output != *FAIL* ]]
}

@test "a slurm.conf without Prolog and a plugstack without the plugin are named" {
	grep -v '^Prolog=' "$st/etc/slurm.conf" |
		sed "s|^PlugStackConfig=.*|PlugStackConfig=$work/plugstack.conf|" >"$work/slurm.conf"
	echo "# nothing here" >"$work/plugstack.conf"
	doctor node1 "$work/slurm.conf"
	[ "$status" -eq 1 ]
	[[ $output == *"FAIL Prolog: not set in slurm.conf; fix: Prolog="* ]]
	[[ $output == *"FAIL plugstack: no required or optional line names spank_ddp.so in $work/plugstack.conf"* ]]
	[[ $output == *"ok Epilog: "* ]]
}

@test "a world-readable port key and an unmounted shared_root are named" {
	cp "$st/etc/ddp-port.key" "$work/port.key"
	chmod 0644 "$work/port.key"
	mkdir -p "$work/share"
	sed -e "s|^port_key = .*|port_key = $work/port.key|" \
		-e "s|^shared_root = .*|shared_root = $work/share|" \
		-e "s|^shared_mount = .*|shared_mount = $work/share|" \
		"$st/etc/ddp.conf" >"$work/ddp.conf"
	doctor node2 "" "$work/ddp.conf"
	[ "$status" -eq 1 ]
	[[ $output == *"FAIL port_key: "*"mode 0644"*"; fix: chown root:root $work/port.key && chmod 0600 $work/port.key"* ]]
	[[ $output == *"FAIL shared_root: $work/share not mounted; fix: "* ]]
	[[ $output == *"ok Prolog: "* ]]
}
