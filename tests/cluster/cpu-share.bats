#!/usr/bin/env bats
# minicluster up --cpu-share: each node runs in a cpuset of its own share of
# the machine's CPUs, so --ddp binds the ranks of different nodes to
# different CPUs, as on separate machines, instead of piling every node's
# rank 0 onto CPU 0.

load common

setup_file() {
	[ "$(nproc)" -ge 2 ] || return 0
	mc_up --nodes 2 --gpus-per-node 2 --cpu-share
}

setup() {
	[ "$(nproc)" -ge 2 ] || skip "one CPU: no share to give each node"
}

# allowed NODE: the CPUs a process started on NODE may use.
allowed() {
	mc_exec "$1" -- sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status
}

@test "the two nodes' processes may use different CPUs" {
	local a b
	a=$(allowed node1)
	b=$(allowed node2)
	echo "node1: $a node2: $b" >&2
	[ -n "$a" ] && [ -n "$b" ]
	[ "$a" != "$b" ]
}

@test "the kernel refuses a node's process a CPU of the other node's share" {
	local other
	other=$(allowed node2)
	run mc_exec node1 -- taskset -c "${other%%[-,]*}" true
	[ "$status" -ne 0 ] || { show; false; }
}

@test "--ddp binds rank 0 of node1 and rank 0 of node2 to different CPUs, each in its node's share" {
	require_plugin
	run mc_run -- srun -N2 --ntasks-per-node=1 --ddp --ddp-verbose \
		sh -c 'echo "task $SLURM_NODEID $(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status)"'
	[ "$status" -eq 0 ] || { show; false; }
	local c1 c2 t1 t2
	c1=$(printf '%s\n' "$output" | sed -n 's/.*host=node1 .*cpus=\([0-9,-]*\) .*/\1/p')
	c2=$(printf '%s\n' "$output" | sed -n 's/.*host=node2 .*cpus=\([0-9,-]*\) .*/\1/p')
	t1=$(printf '%s\n' "$output" | sed -n 's/^task 0 //p')
	t2=$(printf '%s\n' "$output" | sed -n 's/^task 1 //p')
	[ -n "$c1" ] && [ -n "$c2" ] && [ "$c1" != "$c2" ] || { show; false; }
	# The binding the plugin reports is the one the task runs with.
	[ "$t1" = "$c1" ] && [ "$t2" = "$c2" ] || { show; false; }
	[[ $output != *"not applied"* ]] || { show; false; }
}

@test "up without --cpu-share gives the nodes every CPU again and removes the cpusets" {
	mc_up --nodes 2 --gpus-per-node 2
	[ "$(allowed node1)" = "$(allowed node2)" ]
	[ ! -e "/sys/fs/cgroup/cpuset/minicluster-${MINICLUSTER_NAME:-ddpmc}" ]
}
