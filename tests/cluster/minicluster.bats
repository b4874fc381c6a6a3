#!/usr/bin/env bats
# The minicluster itself: real munged, slurmctld and slurmd in namespaces.
# shellcheck source=tests/cluster/common.bash
source "$BATS_TEST_DIRNAME/common.bash"

setup_file() {
	mc_up --nodes 3 --gpus-per-node 4
}

@test "srun -N3 hostname prints three different node names" {
	run mc_run -- srun -N3 hostname
	show
	[ "$status" -eq 0 ]
	[ "$(printf '%s\n' "$output" | sort -u | grep -c '^node[123]$')" -eq 3 ]
}

@test "two nodes x 4 tasks each see the node's 4 fake GPUs" {
	run mc_run -- srun --nodes=2 --gpus-per-node=4 --ntasks-per-node=4 \
		bash -c 'echo "$(hostname) $CUDA_VISIBLE_DEVICES $SLURM_STEP_GPUS"'
	show
	[ "$status" -eq 0 ]
	[ "$(printf '%s\n' "$output" | grep -cE '^node[0-9] 0,1,2,3 0,1,2,3$')" -eq 8 ]
	[ "$(printf '%s\n' "$output" | grep -E '^node' | cut -d' ' -f1 | sort -u | wc -l)" -eq 2 ]
}

@test "exec NODE runs inside that node's namespaces" {
	run mc_exec node2 -- hostname
	[ "$output" = node2 ]
	run mc_exec node2 -- ip -4 -o addr show dev eth0
	show
	[[ $output == *"172.30.77.12/24"* ]]
}

@test "each node resolves the others by name through its private hosts file" {
	run mc_exec node1 -- getent hosts node3
	show
	[[ $output == "172.30.77.13"*node3* ]]
}

@test "jobs run as the non-root test user" {
	run mc_run --user ddptest -- srun -N2 id -un
	show
	[ "$status" -eq 0 ]
	[ "$(printf '%s\n' "$output" | grep -cx ddptest)" -eq 2 ]
}

@test "sbatch runs a batch script across two nodes" {
	local out
	out=$(mktemp -d)
	chmod 0755 "$out"
	run mc_run -- sbatch --wait -N2 -o "$out/job.out" --wrap 'srun hostname'
	show
	[ "$status" -eq 0 ]
	[ "$(sort -u "$out/job.out" | wc -l)" -eq 2 ]
	rm -rf "$out"
}

@test "up is idempotent" {
	run "$MC" up --nodes 3 --gpus-per-node 4
	show
	[ "$status" -eq 0 ]
	[[ $output == *"already up"* ]]
}

@test "the nodes have no route out of the cluster's bridge" {
	run mc_exec node1 -- ip route
	show
	[[ $output != *default* ]]
}

@test "bad arguments are refused with a message that says what works" {
	run "$MC" up --nodes zero
	[ "$status" -ne 0 ]
	[[ $output == *"--nodes 'zero' is not a number from 1 to 16"* ]]
	run "$MC" up --tcp-cc 'no such'
	[ "$status" -ne 0 ]
	[[ $output == *"--tcp-cc 'no such' is not a congestion control this kernel has (available: "* ]]
	run "$MC" exec node9 -- true
	[ "$status" -ne 0 ]
	[[ $output == *"unknown host 'node9'"* ]]
}

@test "each node is declared with the sockets and cores it can use, so --ddp places on Slurm's cores" {
	require_plugin
	local node declared found
	for node in node1 node2 node3; do
		declared=$(mc_run -- scontrol show node "$node" |
			sed -n 's/.*CoresPerSocket=\([0-9]*\).*Sockets=\([0-9]*\).*/\1 \2/p' | awk '{print $1 * $2}')
		found=$(mc_exec "$node" -- hwloc-calc --number-of core machine:0)
		echo "$node: declared $declared cores, hwloc finds $found" >&2
		[ -n "$declared" ] && [ "$declared" = "$found" ]
	done
	run mc_run -- srun --nodes=2 --gpus-per-node=4 --ddp --ddp-verbose true
	show
	[ "$status" -eq 0 ]
	[ "$(grep -c '^ddp: rank=' <<<"$output")" -eq 8 ]
	[[ $output != *"do not fit"* ]]
	[[ $output != *"using all allowed CPUs"* ]]
}

@test "the README's --ddp-check example runs as printed: the staged ddp-check passes, then the program runs" {
	require_plugin
	local cmd
	cmd=$(sed -n 's/^    \$ \(srun .*--ddp-check.*\)$/\1/p' "$repo_root/README.md" | head -n 1)
	[ -n "$cmd" ]
	cd "$repo_root/examples"
	# shellcheck disable=SC2086 # the README's command, word for word
	run mc_run -- $cmd
	show
	[ "$status" -eq 0 ]
	[[ $output == *"ddp-check: ok"* ]]
	[ "$(grep -cE '^rank [0-9]+ .* world 6 device cpu backend gloo checksum ' <<<"$output")" -eq 6 ]
	[ "$(grep -oE ' checksum [^ ]+' <<<"$output" | sort -u | wc -l)" -eq 1 ]
}
