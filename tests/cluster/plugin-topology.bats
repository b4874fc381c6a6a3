#!/usr/bin/env bats
# srun --ddp placement on nodes that slurmstepd sees as a real machine's
# hwloc topology (minicluster up --topology): each rank's CPUs lie in its
# GPU's NUMA node where the allocation allows it, shares are disjoint, and
# the NCCL variables are the same on every rank (the site's, or none).
# shellcheck source=tests/cluster/common.bash
source "$BATS_TEST_DIRNAME/common.bash"

topo() { echo "$repo_root/tests/topologies/$1"; }

# save_conf FILE: FILE is put back after the test, even when it fails.
save_conf() {
	saved_conf=$1
	saved_text=$(cat "$1")
}
teardown() {
	if [ -n "${saved_conf:-}" ]; then
		printf '%s\n' "$saved_text" | put_conf "$saved_conf"
		saved_conf=
	fi
}

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

@test "DGX-2, --gpus-per-task=1: Slurm narrows each task to its GPU, every rank sees the step's four and gets its own" {
	[ -f "$(topo nvidiaDGX2.xml)" ] || skip "no topology fixtures"
	mc_up --nodes 2 --gpus-per-node 4 --topology "$(topo nvidiaDGX2.xml)"
	require_plugin
	run mc_run -- srun -N1 -n4 --gpus-per-task=1 --ddp bash -c 'echo "L=$LOCAL_RANK CVD=$CUDA_VISIBLE_DEVICES BUS=$DDP_GPU_BUSID"'
	show
	[ "$status" -eq 0 ]
	[ "$(printf '%s\n' "$output" | grep -c ' CVD=0,1,2,3 ')" -eq 4 ]
	# The GPUs in PCI bus order (ddp-plan's golden cases show the same).
	[ "$(printf '%s\n' "$output" | grep '^L=' | sort | sed 's/ CVD=[^ ]*//' | tr '\n' ' ')" = "L=0 BUS=0000:34:00.0 L=1 BUS=0000:36:00.0 L=2 BUS=0000:39:00.0 L=3 BUS=0000:3b:00.0 " ]
}

@test "DGX-2, 2 nodes x 8 GPUs: all 16 ranks see the same NCCL variables, the site's, and a user's export wins" {
	[ -f "$(topo nvidiaDGX2.xml)" ] || skip "no topology fixtures"
	mc_up --nodes 2 --gpus-per-node 8 --topology "$(topo nvidiaDGX2.xml)"
	require_plugin
	local conf s1 o1 r nccl
	conf=$(mc_state)/etc/ddp.conf
	save_conf "$conf"
	printf '%s\n' "$saved_text" "nccl_ib_hca = =mlx5_0,mlx5_1" | put_conf "$conf"
	# The fixture keeps 4 PUs per node, and Slurm 22.05 refuses more
	# tasks per node than CPUs (node mode's --ntasks-per-node=8) even
	# with -O; -n16 -O gives the same 8 ranks per node through the same
	# per-task environment code.
	run mc_run -- timeout 120 srun -l -O -n16 --nodes=2 --gpus-per-node=8 --ddp env
	s1=$status o1=$output
	run mc_run -- env NCCL_IB_HCA=mlx5 NCCL_SOCKET_IFNAME==ib0 timeout 120 srun -l -O -n16 --nodes=2 --gpus-per-node=8 --ddp env
	[ "$s1" -eq 0 ] || { printf '%s\n' "$o1" >&2; false; }
	show
	[ "$status" -eq 0 ]
	# srun -l: "TASK: NAME=VALUE". 16 ranks, each with exactly the
	# site's NCCL variables: no per-rank HCA, no socket interface.
	[ "$(grep -cE '^ *[0-9]+: RANK=' <<<"$o1")" -eq 16 ]
	[ "$(grep -cE '^ *[0-9]+: LOCAL_WORLD_SIZE=8$' <<<"$o1")" -eq 16 ]
	[ "$(grep -E '^ *[0-9]+: CUDA_VISIBLE_DEVICES=' <<<"$o1" | sed 's/.*=//' | sort -u)" = 0,1,2,3,4,5,6,7 ]
	for r in $(seq 0 15); do
		nccl=$(grep -E "^ *$r: NCCL_" <<<"$o1" | sed 's/^ *[0-9]*: //' | sort | tr '\n' ' ')
		[ "$nccl" = "NCCL_IB_HCA==mlx5_0,mlx5_1 " ] || {
			echo "rank $r: $nccl" >&2
			false
		}
	done
	[ "$(grep -cE '^ *[0-9]+: NCCL_' <<<"$o1")" -eq 16 ]
	# The user's own values reach all 16 ranks unchanged.
	[ "$(grep -cE '^ *[0-9]+: RANK=' <<<"$output")" -eq 16 ]
	[ "$(grep -cE '^ *[0-9]+: NCCL_IB_HCA=mlx5$' <<<"$output")" -eq 16 ]
	[ "$(grep -cE '^ *[0-9]+: NCCL_SOCKET_IFNAME==ib0$' <<<"$output")" -eq 16 ]
	[ "$(grep -cE '^ *[0-9]+: NCCL_' <<<"$output")" -eq 32 ]
}

@test "24em64t (GPUs split 1+2, HCA mlx4_0, eth0-2): nearest HCA and NIC as information only, the GPU's NUMA node" {
	[ -f "$(topo 24em64t-2n6c2t-pci.xml)" ] || skip "no topology fixtures"
	mc_up --nodes 2 --gpus-per-node 3 --topology "$(topo 24em64t-2n6c2t-pci.xml)"
	require_plugin
	run mc_run -- srun -N2 --gpus-per-node=3 -c 4 --ddp --ddp-verbose bash -c 'echo "R=$RANK BUS=$DDP_GPU_BUSID NUMA=$DDP_NUMA HCA=$DDP_HCA NIC=$DDP_NIC NCCL=${NCCL_IB_HCA-unset}/${NCCL_SOCKET_IFNAME-unset}"'
	show
	[ "$status" -eq 0 ]
	[ "$(printf '%s\n' "$output" | grep -c 'HCA=mlx4_0 ')" -eq 6 ]
	# Each rank's nearest interface differs (eth0, eth1, eth2 in the
	# golden plan); NCCL is not narrowed to it: no site setting, no NCCL_*.
	[ "$(printf '%s\n' "$output" | grep -oE 'NIC=eth[0-9]+' | sort -u | wc -l)" -ge 2 ]
	[ "$(printf '%s\n' "$output" | grep -c 'NCCL=unset/unset$')" -eq 6 ]
	[ "$(printf '%s\n' "$output" | grep -c 'BUS=0000:06:00.0 NUMA=0 ')" -eq 2 ]
	[ "$(printf '%s\n' "$output" | grep -c 'BUS=0000:11:00.0 NUMA=1 ')" -eq 2 ]
}
