#!/usr/bin/env bats
# srun --ddp placement on nodes that slurmstepd sees as a real machine's
# hwloc topology (minicluster up --topology): each rank's CPUs lie in its
# GPU's NUMA node where the allocation allows it, and shares are disjoint.
load common

topo() { echo "$shared_dir/topologies/$1"; }

# cpus_of RANK: DDP_CPUS of that rank from $output ("R cpus").
check_disjoint() {
	/usr/bin/python3 - "$1" <<-'PY'
		import sys
		seen = set()
		for line in open(sys.argv[1]):
		    r, cpus = line.split()
		    s = set()
		    for part in cpus.split(","):
		        a, _, b = part.partition("-")
		        s.update(range(int(a), int(b or a) + 1))
		    assert not (s & seen), f"rank {r} overlaps: {cpus}"
		    seen |= s
	PY
}

@test "power8 (4 GPUs, 2 per NUMA node): every rank's CPUs are in its GPU's NUMA node, disjoint" {
	[ -f "$(topo power8gpudistances.xml)" ] || skip "no topology fixtures"
	mc_up --nodes 2 --gpus-per-node 4 --topology "$(topo power8gpudistances.xml)"
	require_plugin
	run mc_run -- srun -N2 --gpus-per-node=4 -c 4 --ddp --ddp-verbose bash -c 'echo "R=$RANK L=$LOCAL_RANK BUS=$DDP_GPU_BUSID NUMA=$DDP_NUMA CPUS=$DDP_CPUS B=$DDP_BOUND"'
	show
	[ "$status" -eq 0 ]
	[ "$(printf '%s\n' "$output" | grep -c '^R=')" -eq 8 ]
	# GPUs 0002/0003 are on NUMA 0, 000a/000b on NUMA 1.
	[ "$(printf '%s\n' "$output" | grep -cE 'BUS=000[23]:01:00.0 NUMA=0 ')" -eq 4 ]
	[ "$(printf '%s\n' "$output" | grep -cE 'BUS=000[ab]:01:00.0 NUMA=1 ')" -eq 4 ]
	# Not this machine: computed and exported, not bound, and said so.
	[ "$(printf '%s\n' "$output" | grep -c 'B=0$')" -eq 8 ]
	[[ $output == *"not applied: the topology is not this machine"* ]]
	local f
	f=$(mktemp)
	for node in 0 1; do
		printf '%s\n' "$output" | grep '^R=' | awk -v n="$node" '{split($1,a,"=");
			if (int(a[2] / 4) == n) { split($5,c,"="); print a[2], c[2] } }' >"$f"
		check_disjoint "$f"
	done
	rm -f "$f"
}

@test "DGX-2: 4 ranks get the first four GPUs in PCI bus order" {
	[ -f "$(topo nvidiaDGX2.xml)" ] || skip "no topology fixtures"
	mc_up --nodes 2 --gpus-per-node 4 --topology "$(topo nvidiaDGX2.xml)"
	require_plugin
	run mc_run -- srun -N2 --gpus-per-node=4 --ddp --ddp-verbose true
	show
	[ "$status" -eq 0 ]
	for bus in 0000:34:00.0 0000:36:00.0 0000:39:00.0 0000:3b:00.0; do
		[ "$(printf '%s\n' "$output" | grep -c "gpu=$bus ")" -eq 2 ]
	done
}

@test "24em64t (GPUs split 1+2, HCA mlx4_0): NCCL_IB_HCA and the GPU's NUMA node" {
	[ -f "$(topo 24em64t-2n6c2t-pci.xml)" ] || skip "no topology fixtures"
	mc_up --nodes 2 --gpus-per-node 3 --topology "$(topo 24em64t-2n6c2t-pci.xml)"
	require_plugin
	run mc_run -- srun -N2 --gpus-per-node=3 -c 4 --ddp --ddp-verbose bash -c 'echo "R=$RANK BUS=$DDP_GPU_BUSID NUMA=$DDP_NUMA HCA=$NCCL_IB_HCA"'
	show
	[ "$status" -eq 0 ]
	[ "$(printf '%s\n' "$output" | grep -c 'HCA==mlx4_0')" -eq 6 ]
	[ "$(printf '%s\n' "$output" | grep -c 'BUS=0000:06:00.0 NUMA=0 ')" -eq 2 ]
	[ "$(printf '%s\n' "$output" | grep -c 'BUS=0000:11:00.0 NUMA=1 ')" -eq 2 ]
}
