#!/usr/bin/env bats
# minicluster up --cpu-share: each node runs in a cpuset of its own share of
# the machine's CPUs, so --ddp binds the ranks of different nodes to
# different CPUs, as on separate machines, instead of piling every node's
# rank 0 onto CPU 0.
# Then the CPUs of each --ddp rank (see the second part below), which
# tests/run also runs on every other Slurm version.

# shellcheck source=tests/cluster/common.bash
source "$BATS_TEST_DIRNAME/common.bash"

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

# The CPUs of a --ddp rank (spank-ddp(8), "CPUS OF A RANK"), on nodes that
# Slurm and the plugin see as a real 2-socket machine with 3 GPUs (its
# shape is read back from Slurm, never assumed): outside an allocation
# every rank gets its GPU's equal share of the node's cores; what the user
# states (#SBATCH --cpus-per-task, -c) wins; inside salloc --exclusive the
# ranks share the whole node.

share_topology="$repo_root/tests/topologies/32em64t-2n8c2t-pci-wholeio.xml"

# up_share: the 2-node cluster on that topology, one rank per GPU.
up_share() {
	require_plugin
	mc_up --nodes 2 --gpus-per-node 3 --topology "$share_topology"
	read -r node_cpus node_cores node_threads node_gpus < <(
		mc_run -- scontrol -o show node node1 | tr ' ' '\n' | awk -F= '
			$1 == "CPUTot" { cpus = $2 }
			$1 == "Sockets" { s = $2 }
			$1 == "CoresPerSocket" { c = $2 }
			$1 == "ThreadsPerCore" { t = $2 }
			$1 == "Gres" { n = split($2, g, ":"); sub(/\(.*/, "", g[n]); gpus = g[n] }
			END { print cpus, s * c, t, gpus }')
	echo "node1: $node_cpus CPUs, $node_cores cores, $node_threads threads per core, $node_gpus GPUs" >&3
	[ "$node_gpus" -ge 2 ] && [ "$node_cores" -ge "$node_gpus" ]
}

# count LIST: the CPUs of a list such as 0-3,16-19.
count() {
	local n=0 part lo hi
	for part in ${1//,/ }; do
		lo=${part%-*} hi=${part#*-}
		n=$((n + hi - lo + 1))
	done
	echo "$n"
}

# The line every rank prints.
rank_line='echo "rank $RANK host $(hostname) cpus $DDP_CPUS omp $OMP_NUM_THREADS"'

# every_rank_gets N RANKS TEXT: $output (or TEXT) has RANKS rank lines, and
# each rank has N CPUs in DDP_CPUS and OMP_NUM_THREADS=N, disjoint on its
# node.
every_rank_gets() {
	local want=$1 ranks=$2 text=$3 lines rank host cpus omp seen
	lines=$(printf '%s\n' "$text" | grep '^rank ')
	[ "$(printf '%s\n' "$lines" | wc -l)" -eq "$ranks" ] || return 1
	while read -r _ rank _ host _ cpus _ omp; do
		echo "rank $rank on $host: $(count "$cpus") CPUs ($cpus), OMP_NUM_THREADS=$omp" >&3
		[ "$(count "$cpus")" -eq "$want" ] && [ "$omp" = "$want" ] || return 1
	done <<<"$lines"
	for host in node1 node2; do
		seen=$(printf '%s\n' "$lines" | awk -v h="$host" '$4 == h { print $6 }' |
			tr ',' '\n' | awk -F- '{ for (i = $1; i <= ($2 == "" ? $1 : $2); i++) print i }' |
			sort -n | uniq -d)
		[ -z "$seen" ] || return 1
	done
}

@test "srun --nodes=2 --gpus-per-node=G --ddp outside an allocation: every rank gets its GPU's share of the node's cores" {
	up_share
	local share=$(((node_cores / node_gpus) * node_threads))
	run mc_run -- srun --nodes=2 --gpus-per-node="$node_gpus" --ddp --ddp-verbose sh -c "$rank_line"
	show
	[ "$status" -eq 0 ]
	[[ $output == *"ddp: CPUs: $share CPUs per GPU, each GPU's equal share of its node"* ]]
	[ "$share" -gt 1 ]
	every_rank_gets "$share" $((2 * node_gpus)) "$output" || { show; false; }
}

@test "#SBATCH --cpus-per-task=8 --ddp: srun in the script gives every rank the 8 CPUs it states" {
	up_share
	local dir
	dir=$(mktemp -d)
	chmod 0755 "$dir"
	cat >"$dir/job.sh" <<-EOS
		#!/bin/bash
		#SBATCH --nodes=2 --exclusive --gpus-per-node=2
		#SBATCH --cpus-per-task=8
		#SBATCH --ddp
		srun --ddp-verbose sh -c '$rank_line'
	EOS
	run mc_run -- sbatch --wait -o "$dir/job.out" "$dir/job.sh"
	show
	cat "$dir/job.out" >&2
	[ "$status" -eq 0 ]
	# The whole node is the job's: without the stated 8 each rank would
	# get half of it.
	[ $((node_cpus / 2)) -ne 8 ]
	every_rank_gets 8 4 "$(cat "$dir/job.out")" || { cat "$dir/job.out" >&2; false; }
	rm -rf "$dir"
}

@test "#SBATCH --cpus-per-task=8 --ddp with one task per node: srun refuses before launch, saying what would work" {
	up_share
	local dir
	dir=$(mktemp -d)
	chmod 0755 "$dir"
	cat >"$dir/job.sh" <<-EOS
		#!/bin/bash
		#SBATCH --nodes=2 --gpus-per-node=2 --cpus-per-task=8 --ddp
		srun sh -c '$rank_line'
	EOS
	run mc_run -- sbatch --wait -o "$dir/job.out" "$dir/job.sh"
	show
	cat "$dir/job.out" >&2
	[ "$status" -ne 0 ]
	grep -q -- '--ddp: 2 ranks per node with 8 CPUs each (SLURM_CPUS_PER_TASK' "$dir/job.out"
	grep -q -- 'give the job --ntasks-per-node=2 as well' "$dir/job.out"
	[ "$(grep -c '^rank ' "$dir/job.out")" -eq 0 ]
	rm -rf "$dir"
}

@test "inside salloc --exclusive the ranks share the whole node evenly" {
	up_share
	local ranks=2
	run mc_run -- salloc --nodes=2 --exclusive --gpus-per-node="$ranks" \
		srun --ddp --ddp-verbose sh -c "$rank_line"
	show
	[ "$status" -eq 0 ]
	every_rank_gets $(((node_cores / ranks) * node_threads)) $((2 * ranks)) "$output" || { show; false; }
	[[ $output != *"CPUs per GPU"* ]]
}

@test "an explicit -c wins over the share" {
	up_share
	run mc_run -- srun --nodes=2 --gpus-per-node="$node_gpus" -c "$node_threads" --ddp --ddp-verbose sh -c "$rank_line"
	show
	[ "$status" -eq 0 ]
	every_rank_gets "$node_threads" $((2 * node_gpus)) "$output" || { show; false; }
	[[ $output != *"CPUs per GPU"* ]]
}
