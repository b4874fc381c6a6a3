#!/usr/bin/env bats
# SPDX-License-Identifier: BSD-3-Clause
# A configless cluster (SlurmctldParameters=enable_configless, slurmd
# --conf-server), set up as doc/admin-guide.md's "Configless clusters"
# says: the plugin's line inline in the plugstack.conf beside slurmctld's
# slurm.conf, which slurmctld sends to every slurmd; ddp.conf, the port
# key and the Prolog scripts where every node has them (the minicluster's
# hosts share its folder, as a site's configuration management would copy
# them). slurmd has no slurm.conf of its own, and srun --ddp works with
# the Prolog run.
# shellcheck source=tests/cluster/common.bash
source "$BATS_TEST_DIRNAME/common.bash"

setup_file() {
	# Configless arrived in Slurm 20.02: a slurmd without --conf-server
	# cannot run it (the test then skips, naming why).
	slurmd --help 2>&1 | grep -q -- --conf-server || return 0
	mc_up --nodes 2 --gpus-per-node 0 --configless
}

setup() {
	slurmd --help 2>&1 | grep -q -- --conf-server ||
		skip "this slurmd has no --conf-server (configless needs Slurm 20.02 or later)"
	require_plugin
	require_prolog
	st=$(mc_state)
}

@test "configless: every slurmd got slurm.conf and plugstack.conf from slurmctld, and no ddp.conf" {
	grep -qx 'SlurmctldParameters=enable_configless' "$st/etc/slurm.conf"
	[ -z "$(grep '^PlugStackConfig=' "$st/etc/slurm.conf")" ]
	local node cache
	for node in node1 node2; do
		# slurmd runs with --conf-server and no -f.
		pgrep -af "slurmd -D -N $node --conf-server" >/dev/null
		cache=$st/spool/$node/conf-cache
		[ -f "$cache/slurm.conf" ]
		cmp "$cache/plugstack.conf" "$st/etc/plugstack.conf"
		grep -q "^required .*spank_ddp\.so config=$st/etc/ddp.conf" "$cache/plugstack.conf"
		# Slurm never sends ddp.conf: the node reads the copy the site put there.
		[ ! -e "$cache/ddp.conf" ]
		run mc_exec "$node" -- readlink /run/slurm/conf
		show
		[ "$status" -eq 0 ] && [ "$output" = "$cache" ]
	done
}

@test "configless: srun -N2 -n4 --ddp gives every rank its variables from the plugin slurmctld's plugstack.conf names" {
	run mc_run -- srun -N2 -n4 --ntasks-per-node=2 --ddp bash -c \
		'echo "RANK=$RANK WORLD_SIZE=$WORLD_SIZE LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE MASTER_ADDR=$MASTER_ADDR MASTER_PORT=$MASTER_PORT"'
	show
	[ "$status" -eq 0 ]
	[ "$(grep -cE '^RANK=[0-3] WORLD_SIZE=4 LOCAL_WORLD_SIZE=2 MASTER_ADDR=node1 MASTER_PORT=[0-9]+$' <<<"$output")" -eq 4 ]
	[ "$(grep -o 'RANK=[0-3] ' <<<"$output" | sort -u | wc -l)" -eq 4 ]
	[ "$(grep -o 'MASTER_PORT=[0-9]*' <<<"$output" | sort -u | wc -l)" -eq 1 ]
}

@test "configless: the Prolog ran with the site's ddp.conf: the job's shared dir is the user's, mode 0700" {
	run mc_run --user ddptest -- srun -N2 --ntasks-per-node=1 --ddp bash -c \
		'stat -c "%U %a" "'"$st"'/shared/ddptest/$SLURM_JOB_ID"'
	show
	[ "$status" -eq 0 ]
	[ "$(grep -cx 'ddptest 700' <<<"$output")" -eq 2 ]
}

@test "configless: ddp-nodectl doctor on a node, given the conf-cache's slurm.conf, finds the plugin line" {
	local nodectl=${MINICLUSTER_STAGE:-$repo_root/build/stage}${MINICLUSTER_PREFIX:-/usr/local}/sbin/ddp-nodectl
	[ -x "$nodectl" ] || skip "ddp-nodectl is not staged at $nodectl (run: make stage)"
	run mc_exec node1 -- env DDP_CONF="$st/etc/ddp.conf" "$nodectl" doctor \
		--slurm-conf "$st/spool/node1/conf-cache/slurm.conf"
	show
	grep -qE '^ok plugstack: .*plugstack.conf:1 loads .*spank_ddp\.so' <<<"$output"
}
