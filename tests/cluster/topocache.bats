#!/usr/bin/env bats
# The node's topology cache on the minicluster (ddp.conf topology_cache, here
# <state>/ddp-state/topology.xml): the first --ddp step writes it as root,
# later steps read it instead of rediscovering the machine, --ddp-verbose
# says which; a cache a user could write, or one of another boot, is
# ignored and rewritten; the placement is the same with and without it,
# also on nodes confined to their own cpuset (--cpu-share).
# shellcheck source=tests/cluster/common.bash
source "$BATS_TEST_DIRNAME/common.bash"

setup_file() {
	mc_up --nodes 3 --gpus-per-node 4
}

setup() {
	require_plugin
	cache=$(mc_state)/ddp-state/topology.xml
	conf=$(mc_state)/etc/ddp.conf
	grep -q "^topology_cache = $cache\$" "$conf" ||
		skip "the minicluster's ddp.conf names no topology_cache"
}

teardown() {
	if [ -n "${conf_saved:-}" ]; then
		cp "$conf_saved" "$conf"
		conf_saved=
	fi
}

# topo_lines: the "topology:" lines of --ddp-verbose in $output.
topo_lines() { printf '%s\n' "$output" | grep -E '^ddp: node[0-9]+: topology: ' || true; }

@test "the first step writes the cache as root; the next steps read it" {
	rm -f "$cache"
	run mc_run -- srun -N2 --gpus-per-node=2 --ddp --ddp-verbose true
	show
	[ "$status" -eq 0 ]
	[ "$(topo_lines | wc -l)" -eq 2 ]
	# Both nodes share this machine's /run: the first to get there
	# writes, the other may already read what it wrote.
	topo_lines | grep -q "discovered, cache $cache written (was: absent)"
	[ "$(stat -c '%u %a' "$cache")" = "0 644" ]
	[ "$(stat -c '%u %a' "$(dirname "$cache")")" = "0 755" ]
	grep -q 'name="DDPTopologyCache" value="format 1; boot ' "$cache"
	run mc_run -- srun -N2 --gpus-per-node=2 --ddp --ddp-verbose true
	show
	[ "$status" -eq 0 ]
	[ "$(topo_lines | grep -c "topology: cache $cache (")" -eq 2 ]
}

@test "a cache a user could write is ignored and rewritten by root" {
	run mc_run -- srun -N1 --gpus-per-node=1 --ddp true
	[ -f "$cache" ]
	chown ddptest "$cache"
	run mc_run -- srun -N1 --gpus-per-node=1 --ddp --ddp-verbose true
	show
	[ "$status" -eq 0 ]
	topo_lines | grep -qE "discovered, cache $cache written \(was: owned by uid [1-9][0-9]* with mode 0644"
	[ "$(stat -c '%u %a' "$cache")" = "0 644" ]
	chmod 0666 "$cache"
	run mc_run -- srun -N1 --gpus-per-node=1 --ddp --ddp-verbose true
	show
	topo_lines | grep -q "discovered, cache $cache written (was: owned by uid 0 with mode 0666"
	[ "$(stat -c '%u %a' "$cache")" = "0 644" ]
}

@test "a cache of another boot is stale: rediscovered and rewritten" {
	run mc_run -- srun -N1 --gpus-per-node=1 --ddp true
	boot=$(cat /proc/sys/kernel/random/boot_id)
	sed -i "s/boot $boot;/boot 00000000-0000-0000-0000-000000000000;/" "$cache"
	run mc_run -- srun -N1 --gpus-per-node=1 --ddp --ddp-verbose true
	show
	[ "$status" -eq 0 ]
	topo_lines | grep -q "discovered, cache $cache written (was: stale (written for 'format 1; boot 00000000-"
	grep -q "boot $boot;" "$cache"
}

@test "the placement is the same with and without the cache" {
	local ranks='echo "$RANK $DDP_CPUS $DDP_NUMA $DDP_NIC $DDP_HCA $DDP_GPU_BUSID $DDP_BOUND $OMP_NUM_THREADS"'
	run mc_run -- srun -N2 --gpus-per-node=2 --ddp --ddp-verbose bash -c "$ranks"
	show
	[ "$status" -eq 0 ]
	[ "$(topo_lines | grep -c "topology: cache $cache (")" -eq 2 ]
	cached=$(printf '%s\n' "$output" | grep -E '^[0-9]+ ' | sort -n)
	[ "$(grep -c . <<<"$cached")" -eq 4 ]
	conf_saved=$BATS_TEST_TMPDIR/ddp.conf
	cp "$conf" "$conf_saved"
	sed -i 's|^topology_cache = .*|topology_cache = none|' "$conf"
	run mc_run -- srun -N2 --gpus-per-node=2 --ddp --ddp-verbose bash -c "$ranks"
	show
	[ "$status" -eq 0 ]
	[ "$(topo_lines | grep -c 'topology: discovered (topology_cache none)')" -eq 2 ]
	live=$(printf '%s\n' "$output" | grep -E '^[0-9]+ ' | sort -n)
	[ "$cached" = "$live" ]
}

@test "--cpu-share: a cache written in one node's cpuset gives every node its own CPUs" {
	[ "$(nproc)" -ge 2 ] || skip "one CPU: no share to give each node"
	mc_up --nodes 2 --gpus-per-node 2 --cpu-share
	local ranks='echo "R $SLURM_NODEID $DDP_CPUS $(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status)"'
	conf_saved=$BATS_TEST_TMPDIR/ddp.conf
	cp "$conf" "$conf_saved"
	sed -i 's|^topology_cache = .*|topology_cache = none|' "$conf"
	run mc_run -- srun -N2 --ntasks-per-node=1 --ddp --ddp-verbose bash -c "$ranks"
	show
	[ "$status" -eq 0 ]
	live=$(printf '%s\n' "$output" | grep '^R ' | sort)
	cp "$conf_saved" "$conf"
	rm -f "$cache"
	run mc_run -- srun -N2 --ntasks-per-node=1 --ddp --ddp-verbose bash -c "$ranks"
	show
	[ "$status" -eq 0 ]
	topo_lines | grep -q "written (was: absent)"
	run mc_run -- srun -N2 --ntasks-per-node=1 --ddp --ddp-verbose bash -c "$ranks"
	show
	[ "$status" -eq 0 ]
	[ "$(topo_lines | grep -c "topology: cache $cache (")" -eq 2 ]
	cached=$(printf '%s\n' "$output" | grep '^R ' | sort)
	# Each node's rank runs on its own node's share, bound where the
	# plan says, exactly as when each node discovers for itself.
	[ "$(awk '$3 == $4' <<<"$cached" | wc -l)" -eq 2 ]
	[ "$(awk '{print $3}' <<<"$cached" | sort -u | wc -l)" -eq 2 ]
	[ "$cached" = "$live" ]
}
