#!/usr/bin/env bats
# srun --ddp on the minicluster: node mode, task mode, uneven and subset
# steps, ports of concurrent steps, sbatch inheritance, bad input, and the
# PyTorch proof (examples/train.py).
# shellcheck source=tests/cluster/common.bash
source "$BATS_TEST_DIRNAME/common.bash"

setup_file() {
	mc_up --nodes 3 --gpus-per-node 4
}

setup() {
	require_plugin
}

# The variables every rank prints, one line per rank.
vars='echo "$(hostname) RANK=$RANK WORLD_SIZE=$WORLD_SIZE LOCAL_RANK=$LOCAL_RANK LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE NODE_RANK=$NODE_RANK GROUP_RANK=$GROUP_RANK MASTER_ADDR=$MASTER_ADDR MASTER_PORT=$MASTER_PORT CUDA_DEVICE_ORDER=$CUDA_DEVICE_ORDER CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES OMP_NUM_THREADS=$OMP_NUM_THREADS DDP_CPUS=$DDP_CPUS SLURM_PROCID=$SLURM_PROCID SLURM_NODEID=$SLURM_NODEID"'

# field NAME: the values of NAME=... in $output, one per line.
field() { printf '%s\n' "$output" | grep -oE "(^| )$1=[^ ]*" | sed "s/^ *$1=//"; }

@test "node mode: --nodes=2 --gpus-per-node=4 --ddp starts 8 ranks with every variable" {
	run mc_run -- srun --nodes=2 --gpus-per-node=4 --ddp bash -c "$vars"
	show
	[ "$status" -eq 0 ]
	[ "$(printf '%s\n' "$output" | grep -c ' RANK=')" -eq 8 ]
	[ "$(field RANK | sort -n | tr '\n' ' ')" = "0 1 2 3 4 5 6 7 " ]
	[ "$(field WORLD_SIZE | sort -u)" = 8 ]
	[ "$(field LOCAL_WORLD_SIZE | sort -u)" = 4 ]
	[ "$(field LOCAL_RANK | sort | uniq -c | awk '{print $1}' | sort -u)" = 2 ]
	[ "$(field LOCAL_RANK | sort -u | tr '\n' ' ')" = "0 1 2 3 " ]
	[ "$(field MASTER_ADDR | sort -u)" = node1 ]
	[ "$(field MASTER_PORT | sort -u | wc -l)" -eq 1 ]
	port=$(field MASTER_PORT | sort -u)
	[ "$port" -ge 29400 ] && [ "$port" -le 29999 ]
	[ "$(field CUDA_DEVICE_ORDER | sort -u)" = PCI_BUS_ID ]
	[ "$(field CUDA_VISIBLE_DEVICES | sort -u)" = 0,1,2,3 ]
	[ "$(field OMP_NUM_THREADS | grep -cE '^[1-9][0-9]*$')" -eq 8 ]
	[ "$(field DDP_CPUS | grep -c .)" -eq 8 ]
	# Every rank is a real Slurm task: RANK is SLURM_PROCID, NODE_RANK
	# and GROUP_RANK are SLURM_NODEID, node1 holds node rank 0.
	while read -r line; do
		[[ $line =~ RANK=([0-9]+).*SLURM_PROCID=([0-9]+) ]]
		[ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ]
		[[ $line =~ NODE_RANK=([0-9]+)\ GROUP_RANK=([0-9]+).*SLURM_NODEID=([0-9]+) ]]
		[ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[3]}" ]
		[ "${BASH_REMATCH[2]}" = "${BASH_REMATCH[3]}" ]
		if [[ $line == node1* ]]; then [[ $line == *" NODE_RANK=0 "* ]]; fi
	done < <(printf '%s\n' "$output" | grep ' RANK=')
}

@test "--ddp-verbose prints one line per rank with host, GPU, CPUs, NUMA and NIC" {
	run mc_run -- srun --nodes=2 --gpus-per-node=4 --ddp --ddp-verbose true
	show
	[ "$status" -eq 0 ]
	[ "$(printf '%s\n' "$output" | grep -cE '^ddp: rank=[0-7] local_rank=[0-3] host=node[12] gpu=[^ ]+ cpus=[0-9][^ ]* numa=[^ ]+ nic=[^ ]+ hca=[^ ]+ bind=')" -eq 8 ]
}

@test "--gpus-per-task=1: each task's narrowed list is widened to the step's, the same on every rank" {
	run mc_run -- srun -N1 -n4 --gpus-per-task=1 --ddp bash -c "$vars"
	show
	[ "$status" -eq 0 ]
	[ "$(field CUDA_VISIBLE_DEVICES | sort | uniq -c | awk '{print $1, $2}')" = "4 0,1,2,3" ]
	[ "$(field LOCAL_RANK | sort -n | tr '\n' ' ')" = "0 1 2 3 " ]
}

# salloc exports the allocation's SLURM_GPUS_PER_NODE, which srun adds to
# a step asking for --gpus-per-task (and, on 22.05, -G): that step would
# hold all the node's GPUs (SLURM_GPUS_ON_NODE=4) and every rank would see
# them.
@test "inside salloc --gpus-per-node=4, -G 2 and --gpus-per-task=1 --ddp steps hold and show only their 2 GPUs" {
	# shellcheck disable=SC2016 # expanded in the allocation and the ranks
	run mc_run -- salloc -N1 --exclusive --gpus-per-node=4 bash -c '
		srun -N1 -G 2 --ddp --ddp-verbose bash -c "echo A RANK=\$RANK CVD=\$CUDA_VISIBLE_DEVICES ON=\$SLURM_GPUS_ON_NODE"
		srun -N1 -n2 --gpus-per-task=1 --ddp bash -c "echo B RANK=\$RANK CVD=\$CUDA_VISIBLE_DEVICES ON=\$SLURM_GPUS_ON_NODE"
		srun -N1 -n2 --gpus-per-node=3 --ddp bash -c "echo C RANK=\$RANK CVD=\$CUDA_VISIBLE_DEVICES ON=\$SLURM_GPUS_ON_NODE"
		echo "D SLURM_GPUS_PER_NODE=$SLURM_GPUS_PER_NODE"'
	show
	[ "$status" -eq 0 ]
	[ "$(printf '%s\n' "$output" | grep -c '^A RANK=[01] CVD=0,1 ON=2$')" -eq 2 ]
	[ "$(printf '%s\n' "$output" | grep -c '^B RANK=[01] CVD=0,1 ON=2$')" -eq 2 ]
	[[ $output == *"not giving this step the allocation's SLURM_GPUS_PER_NODE=4"* ]]
	# A per-node count of its own keeps srun's meaning; the allocation's
	# shell keeps its variable.
	[ "$(printf '%s\n' "$output" | grep -c '^C RANK=[01] CVD=0,1,2 ON=3$')" -eq 2 ]
	[[ $output == *"D SLURM_GPUS_PER_NODE=4"* ]]
}

@test "task mode: --ntasks-per-node=2 gives 4 ranks with LOCAL_WORLD_SIZE 2" {
	run mc_run -- srun --nodes=2 --ntasks-per-node=2 --ddp bash -c "$vars"
	show
	[ "$status" -eq 0 ]
	[ "$(field RANK | sort -n | tr '\n' ' ')" = "0 1 2 3 " ]
	[ "$(field WORLD_SIZE | sort -u)" = 4 ]
	[ "$(field LOCAL_WORLD_SIZE | sort -u)" = 2 ]
	[ "$(field MASTER_ADDR | sort -u)" = node1 ]
}

@test "uneven tasks: -n 5 on 2 nodes (block and cyclic) gives per-node local sizes that add up" {
	local dist node nodes n lws
	for dist in block cyclic; do
		run mc_run -- srun -N2 -n5 -m "$dist" --ddp bash -c "$vars"
		show
		[ "$status" -eq 0 ]
		[ "$(field RANK | sort -n | tr '\n' ' ')" = "0 1 2 3 4 " ]
		[ "$(field WORLD_SIZE | sort -u)" = 5 ]
		# Whichever two nodes Slurm chose (one may still be completing
		# an earlier job).
		nodes=$(printf '%s\n' "$output" | grep -oE '^node[0-9]+ ' | sort -u)
		[ "$(printf '%s\n' "$nodes" | wc -l)" -eq 2 ]
		for node in $nodes; do
			n=$(printf '%s\n' "$output" | grep -c "^$node ")
			lws=$(printf '%s\n' "$output" | grep "^$node " | grep -oE 'LOCAL_WORLD_SIZE=[0-9]+' | sort -u)
			[ "$lws" = "LOCAL_WORLD_SIZE=$n" ]
			[ "$(printf '%s\n' "$output" | grep "^$node " | grep -oE ' LOCAL_RANK=[0-9]+' | sort | tr -d ' \n')" = "$(seq -f 'LOCAL_RANK=%g' 0 $((n - 1)) | tr -d '\n')" ]
		done
		[ "$(printf '%s\n' "$output" | grep -oE '^node[0-9]+ ' | sort | uniq -c | awk '{print $1}' | sort -u | wc -l)" -eq 2 ]
	done
}

@test "a step on a subset of the allocation uses its own first node as MASTER_ADDR" {
	run mc_run -- salloc -N3 srun -N2 -r1 --ntasks-per-node=1 --ddp bash -c "$vars"' SLURM_JOB_NODELIST=$SLURM_JOB_NODELIST'
	show
	[ "$status" -eq 0 ]
	[ "$(field SLURM_JOB_NODELIST | sort -u)" = "node[1-3]" ]
	[ "$(field MASTER_ADDR | sort -u)" = node2 ]
	[ "$(field WORLD_SIZE | sort -u)" = 2 ]
	[ "$(field NODE_RANK | sort | tr '\n' ' ')" = "0 1 " ]
}

@test "two concurrent steps on one master node get different ports" {
	# Every task of both steps marks itself, then waits (at most 60 s) for
	# the four marks: the steps run at the same time.
	local marks task
	marks=$(mc_state)/steps.$BATS_TEST_NUMBER.$$
	# shellcheck disable=SC2016 # expanded by the tasks
	task='touch "$MARKS.$SLURM_STEP_ID.$SLURM_PROCID"
		for _ in $(seq 600); do [ "$(ls "$MARKS".* | wc -l)" -ge 4 ] && break; sleep 0.1; done
		echo "$NAME=$MASTER_PORT MARKS=$(ls "$MARKS".* | wc -l)"'
	run mc_run -- env MARKS="$marks" TASK="$task" salloc -N2 bash -c '
		NAME=A srun -N2 --ntasks-per-node=1 --overlap --ddp bash -c "$TASK" &
		NAME=B srun -N2 --ntasks-per-node=1 --overlap --ddp bash -c "$TASK" &
		wait'
	rm -f "$marks".*
	show
	[ "$status" -eq 0 ]
	[ "$(field MARKS | tr '\n' ' ')" = "4 4 4 4 " ]
	[ "$(field A | sort -u | wc -l)" -eq 1 ]
	[ "$(field B | sort -u | wc -l)" -eq 1 ]
	[ "$(field A | sort -u)" != "$(field B | sort -u)" ]
}

@test "--ddp-port and a preset MASTER_PORT win" {
	run mc_run -- srun -N2 --ntasks-per-node=1 --ddp --ddp-port=29123 printenv MASTER_PORT
	show
	[ "$status" -eq 0 ]
	# srun may add "job N queued" notes while the previous job's epilog runs.
	[ "$(printf '%s\n' "$output" | grep -vE '^srun: job [0-9]+ ' | sort -u)" = 29123 ]
	run mc_run -- env MASTER_PORT=29777 srun -N2 --ntasks-per-node=1 --ddp printenv MASTER_PORT
	show
	[ "$status" -eq 0 ]
	[ "$(printf '%s\n' "$output" | grep -vE '^srun: job [0-9]+ ' | sort -u)" = 29777 ]
}

# public_port JOB STEP: the MASTER_PORT of the public formula (port_key
# = ""), which anyone who knows the job and step ids can compute.
public_port() { echo $((29400 + (($1 % 600) * 16 + $2 % 600) % 600)); }

# nodectl: the staged ddp-nodectl, next to the staged prolog.
nodectl() {
	local target
	target=$(sed -n "s/^exec '\(.*\)' \"\$@\"$/\1/p" "$(mc_state)/etc/prolog")
	echo "$(dirname "$target")/../../sbin/ddp-nodectl"
}

@test "MASTER_PORT is keyed with the site's port_key: another user who knows job, step and nodes cannot compute it" {
	local st key helper j s p n=0 public=0 steps
	st=$(mc_state)
	key=$st/etc/ddp-port.key
	helper=$(nodectl)
	[ -x "$helper" ] || skip "ddp-nodectl is not staged"
	[ "$(stat -c '%u %a' "$key")" = "0 600" ]
	# Three steps of one job of the other user, ddptest.
	run mc_run --user ddptest -- salloc -N2 bash -c '
		for s in 0 1 2; do
			srun -N2 --ntasks-per-node=1 --ddp bash -c "echo \$(hostname) J=\$SLURM_JOB_ID S=\$SLURM_STEP_ID P=\$MASTER_PORT"
		done'
	show
	[ "$status" -eq 0 ]
	steps=$output
	[ "$(printf '%s\n' "$steps" | grep -c ' P=')" -eq 6 ]
	while read -r j s p; do
		n=$((n + 1))
		# Both nodes of the step computed the same port on their own.
		[ "$(printf '%s\n' "$steps" | grep -c " J=$j S=$s P=$p$")" -eq 2 ]
		[ "$p" -ge 29400 ]
		[ "$p" -le 29999 ]
		if [ "$p" -eq "$(public_port "$j" "$s")" ]; then public=$((public + 1)); fi
		# root, with the key, computes it on either node...
		for node in node1 node2; do
			run mc_exec "$node" -- "$helper" -c "$st/etc/ddp.conf" port "$j" "$s"
			show
			[ "$status" -eq 0 ]
			[ "$output" = "$p" ]
		done
		# ...the job's nodes' other users cannot: the key is root's.
		run mc_exec node1 --user ddptest -- "$helper" -c "$st/etc/ddp.conf" port "$j" "$s"
		[ "$status" -ne 0 ]
		[[ $output == *"port_key $key: Permission denied"* ]]
		[[ $output != *"$p"* ]]
	done < <(printf '%s\n' "$steps" | grep -oE 'J=[0-9]+ S=[0-9]+ P=[0-9]+' | sort -u | tr '=' ' ' | awk '{print $2, $4, $6}')
	[ "$n" -eq 3 ]
	# The public formula would give all three; chance gives each 1/600.
	echo "# steps whose port the public formula gives: $public of 3" >&3
	[ "$public" -le 1 ]
	run mc_exec node1 --user ddptest -- cat "$key"
	[ "$status" -ne 0 ]
}

@test "an unusable port_key fails srun --ddp naming the file, owner, mode and the fix; --ddp-port still runs" {
	local st key conf orig
	st=$(mc_state)
	key=$st/etc/ddp-port.key
	chmod 0644 "$key"
	run mc_run -- srun -N2 --ntasks-per-node=1 --ddp echo launched
	chmod 0600 "$key"
	show
	[ "$status" -ne 0 ]
	[[ $output == *"port_key $key: file owned by uid 0 with mode 0644: others can read or change it; use a regular file of 16-4096 random bytes, owner uid 0, mode 0600"* ]]
	[[ $output == *"head -c 32 /dev/urandom"* ]]
	[[ $output != *launched* ]]
	# A missing key (the plugin reads a copy of ddp.conf that names it:
	# config= is the plugin's own argument), then the overrides, which
	# need no key.
	conf=$st/etc/plugstack.conf
	orig=$(cat "$conf")
	printf '%s\n' "$(cat "$st/etc/ddp.conf")" "port_key = $st/etc/absent.key" |
		put_conf "$st/etc/ddp-absent-key.conf"
	echo "$orig config=$st/etc/ddp-absent-key.conf" >"$conf"
	run mc_run -- srun -N1 --ntasks-per-node=1 --ddp echo launched
	local s1=$status o1=$output
	run mc_run -- srun -N1 --ntasks-per-node=1 --ddp --ddp-port=29123 printenv MASTER_PORT
	local s2=$status o2=$output
	run mc_run -- env MASTER_PORT=29777 srun -N1 --ntasks-per-node=1 --ddp printenv MASTER_PORT
	echo "$orig" >"$conf"
	rm -f "$st/etc/ddp-absent-key.conf"
	printf '%s\n' "$o1" "$o2" >&2
	show
	[ "$s1" -ne 0 ]
	[[ $o1 == *"port_key $st/etc/absent.key: No such file or directory"* ]]
	[[ $o1 != *launched* ]]
	[ "$s2" -eq 0 ]
	[[ $o2 == *29123* ]]
	[ "$status" -eq 0 ]
	[[ $output == *29777* ]]
}

@test "node mode runs srun once for --ddp on its command line, twice when --ddp comes from sbatch" {
	local out
	run mc_run -- srun -N2 --gpus-per-node=2 --ddp --ddp-verbose printenv RANK
	show
	[ "$status" -eq 0 ]
	[[ $output == *"ddp: node mode: 2 ranks per node (SLURM_NTASKS_PER_NODE)"* ]]
	[[ $output != *"running srun again"* ]]
	[ "$(grep -xE '[0-9]+' <<<"$output" | sort -n | tr '\n' ' ')" = "0 1 2 3 " ]
	out=$(mktemp -d)
	chmod 0755 "$out"
	run mc_run -- sbatch --wait -N2 --exclusive --gpus-per-node=2 --ddp -o "$out/job.out" \
		--wrap 'srun --ddp-verbose printenv RANK'
	show
	cat "$out/job.out" >&2
	[ "$status" -eq 0 ]
	grep -q 'ddp: node mode: running srun again with --ntasks-per-node=2' "$out/job.out"
	[ "$(grep -xE '[0-9]+' "$out/job.out" | sort -n | tr '\n' ' ')" = "0 1 2 3 " ]
	rm -rf "$out"
}

@test "sbatch --ddp carries into srun and leaves the batch step alone" {
	local out
	out=$(mktemp -d)
	chmod 0755 "$out"
	run mc_run -- sbatch --wait -N2 --gpus-per-node=2 --ntasks-per-node=2 --ddp -o "$out/job.out" \
		--wrap 'echo "batch RANK=${RANK:-unset}"; srun printenv RANK'
	show
	cat "$out/job.out" >&2
	[ "$status" -eq 0 ]
	grep -qx 'batch RANK=unset' "$out/job.out"
	[ "$(grep -xE '[0-9]+' "$out/job.out" | sort -n | tr '\n' ' ')" = "0 1 2 3 " ]
	rm -rf "$out"
}

@test "bad input fails in srun before launch, naming the option" {
	run mc_run -- srun -N2 --ddp --ddp-port=99999 echo launched
	show
	[ "$status" -ne 0 ]
	[[ $output == *"--ddp-port=99999"*"1 to 65535"* ]]
	[[ $output != *launched* ]]
	run mc_run -- srun -N2 --ddp --ddp-bind=sideways echo launched
	show
	[ "$status" -ne 0 ]
	[[ $output == *"--ddp-bind=sideways"*"none, numa or core"* ]]
	[[ $output != *launched* ]]
	run mc_run -- srun -N2 --ddp echo launched
	show
	[ "$status" -ne 0 ]
	[[ $output == *"--gpus-per-node=G"* ]]
	[[ $output != *launched* ]]
}

@test "more ranks on a node than GPUs fails before launch (task and node mode)" {
	run mc_run -- srun -N2 --gpus-per-node=2 --ntasks-per-node=3 --ddp echo launched
	show
	[ "$status" -ne 0 ]
	[[ $output == *"3 ranks on a node but only 2 GPUs"* ]]
	[[ $output != *launched* ]]
	run mc_run -- srun -N2 -n7 --gpus-per-node=2 --ddp echo launched
	show
	[ "$status" -ne 0 ]
	[[ $output == *"4 ranks on a node but only 2 GPUs"* ]]
	run mc_run -- srun -N1 --gpus-per-node=9 --ddp echo launched
	show
	[ "$status" -ne 0 ]
	[[ $output != *launched* ]]
}

@test "a port_range inside the ephemeral range fails srun --ddp; a plugstack port_range or unknown key fails only --ddp" {
	local st conf orig s1 o1 s2 o2 s3 o3
	st=$(mc_state)
	conf=$st/etc/plugstack.conf
	orig=$(cat "$conf")
	printf '%s\n' "$(cat "$st/etc/ddp.conf")" "port_range = 40000-40100" |
		put_conf "$st/etc/ddp-ephemeral.conf"
	echo "$orig config=$st/etc/ddp-ephemeral.conf" | put_conf "$conf"
	run mc_run -- srun -N1 --ddp --ntasks-per-node=1 echo launched
	s1=$status o1=$output
	# The Prolog reads ddp.conf alone: ports set for the plugin alone
	# would be ports the Prolog never opened.
	echo "$orig port_range=30000-30100" | put_conf "$conf"
	run mc_run -- srun -N1 --ddp --ntasks-per-node=1 echo launched
	s3=$status o3=$output
	echo "$orig colour=blue" | put_conf "$conf"
	run mc_run -- srun -N1 --ntasks-per-node=1 --ddp echo launched
	s2=$status o2=$output
	run mc_run -- srun -N1 --ntasks-per-node=1 echo launched
	echo "$orig" | put_conf "$conf"
	rm -f "$st/etc/ddp-ephemeral.conf"
	printf '%s\n' "$o1" "$o3" "$o2" "$output" >&2
	[ "$s1" -ne 0 ]
	[[ $o1 == *"port_range 40000-40100 overlaps"* ]]
	[[ $o1 != *launched* ]]
	[ "$s3" -ne 0 ]
	[[ $o3 == *"plugstack argument 'port_range=30000-30100': port_range is read by the Prolog, Epilog and health check too, from ddp.conf alone: set it in $st/etc/ddp.conf, not in plugstack.conf"*"--ddp cannot run"* ]]
	[[ $o3 != *launched* ]]
	[ "$s2" -ne 0 ]
	[[ $o2 == *"unknown key 'colour'"*"--ddp cannot run until the admin fixes it"* ]]
	[[ $o2 != *launched* ]]
	# Without --ddp the broken argument is not the user's concern.
	[ "$status" -eq 0 ]
	[ "$output" = launched ]
}

@test "a typo in ddp.conf fails only --ddp (srun and sbatch), naming file, line and key" {
	local conf orig line out
	conf=$(mc_state)/etc/ddp.conf
	orig=$(cat "$conf")
	line=$(($(wc -l <"$conf") + 1))
	# sbatch --ddp is refused before anything is queued.
	echo "port_range = 29400-29999x" >>"$conf"
	run mc_run -- sbatch --ddp -N1 -o /dev/null --wrap true
	printf '%s\n' "$orig" | put_conf "$conf"
	show
	[ "$status" -ne 0 ]
	[[ $output == *"$conf:$line: port_range: invalid value '29400-29999x'"*"--ddp cannot run"* ]]
	[[ $output != *"Submitted batch job"* ]]
	# Steps of a running allocation (the prolog, which reads ddp.conf
	# too, ran before the typo): plain srun runs, srun --ddp is refused.
	# The file is restored before the job ends, for the epilog.
	run mc_run -- salloc -N2 bash -c '
		echo "port_range = 29400-29999x" >>"$1"
		srun -N2 hostname; echo "plain=$?"
		srun -N2 --ntasks-per-node=1 --ddp echo launched; echo "ddp=$?"
		printf "%s\n" "$2" >"$1"' _ "$conf" "$orig"
	out=$output
	printf '%s\n' "$orig" | put_conf "$conf"
	printf '%s\n' "$out" >&2
	[[ $out == *"plain=0"* ]]
	[ "$(grep -cE '^node[12]$' <<<"$out")" -eq 2 ]
	[[ $out == *"ddp: site configuration: $conf:$line: port_range: invalid value '29400-29999x'"* ]]
	[[ $out != *launched* ]]
	[[ $out =~ ddp=[1-9] ]]
}

@test "no NCCL variable by default; the site's nccl_socket_ifname reaches every rank only when it selects a live interface" {
	local conf orig s1 o1 s2 o2
	run mc_run -- srun -N2 --ntasks-per-node=2 --ddp bash -c 'echo "R=$RANK NCCL=${NCCL_IB_HCA-unset}/${NCCL_SOCKET_IFNAME-unset} NIC=$DDP_NIC"'
	show
	[ "$status" -eq 0 ]
	[ "$(grep -c 'NCCL=unset/unset ' <<<"$output")" -eq 4 ]
	conf=$(mc_state)/etc/ddp.conf
	orig=$(cat "$conf")
	printf '%s\n' "$orig" "nccl_socket_ifname = =eth0" | put_conf "$conf"
	run mc_run -- srun -N2 --ntasks-per-node=2 --ddp printenv NCCL_SOCKET_IFNAME
	s1=$status o1=$output
	printf '%s\n' "$orig" "nccl_socket_ifname = =ib0,ib1" | put_conf "$conf"
	run mc_run -- srun -N2 --ntasks-per-node=1 --ddp echo launched
	s2=$status o2=$output
	printf '%s\n' "$orig" | put_conf "$conf"
	printf '%s\n' "$o1" "$o2" >&2
	[ "$s1" -eq 0 ]
	[ "$(grep -cx '=eth0' <<<"$o1")" -eq 4 ]
	# The nodes have eth0 and lo only: NCCL would fail or hang there.
	[ "$s2" -ne 0 ]
	[[ $o2 == *"node"[12]": nccl_socket_ifname '=ib0,ib1' selects no interface of this node that is up with an address (up here: "*"eth0"* ]]
	[[ $o2 != *launched* ]]
}

@test "DDP_SHARED_DIR and DDP_SCRATCH_DIR are the user's own 0700 directories" {
	run mc_run --user ddptest -- srun -N2 --ntasks-per-node=1 --ddp bash -c \
		'echo "S=$DDP_SHARED_DIR C=$DDP_SCRATCH_DIR O=$(stat -c %U:%a "$DDP_SHARED_DIR" "$DDP_SCRATCH_DIR" | tr "\n" ,)"'
	show
	[ "$status" -eq 0 ]
	[ "$(field S | grep -cE "^$(mc_state)/shared/ddptest/[0-9]+$")" -eq 2 ]
	[ "$(field C | grep -cE "^$(mc_state)/scratch/[0-9]+$")" -eq 2 ]
	[ "$(field O | sort -u)" = "ddptest:700,ddptest:700," ]
}

@test "PyTorch's flight recorder: every rank dumps into the job's shared directory; the user's own values are kept" {
	local ranks list shared
	# Each rank shows its variables and writes where PyTorch dumps it
	# (the prefix and its global rank), unless it names its own file.
	ranks='echo "R=$RANK D=${TORCH_NCCL_DUMP_ON_TIMEOUT-unset} B=${TORCH_NCCL_TRACE_BUFFER_SIZE-unset} F=${TORCH_NCCL_DEBUG_INFO_TEMP_FILE-unset} S=$DDP_SHARED_DIR"
		[ -n "${TORCH_FR_DUMP_TEMP_FILE-}" ] || echo dump >"$TORCH_NCCL_DEBUG_INFO_TEMP_FILE$RANK"'
	list='cd "$DDP_SHARED_DIR/flight-recorder" && echo "L=$(ls | tr "\n" ,) O=$(stat -c %U:%a .)"'
	run mc_run --user ddptest -- salloc -N2 bash -c '
		srun --ntasks-per-node=1 --ddp bash -c "$1"
		srun -N1 -n1 --ddp bash -c "$2"
		TORCH_NCCL_DUMP_ON_TIMEOUT=0 TORCH_NCCL_TRACE_BUFFER_SIZE=64 \
			TORCH_FR_DUMP_TEMP_FILE=/tmp/own_ \
			srun --ntasks-per-node=1 --ddp bash -c "$1"' _ "$ranks" "$list"
	show
	[ "$status" -eq 0 ]
	shared=$(field S | sort -u)
	[[ $shared =~ ^$(mc_state)/shared/ddptest/[0-9]+$ ]]
	[ "$(grep -c " D=1 B=2000 F=$shared/flight-recorder/nccl_trace_rank_ " <<<"$output")" -eq 2 ]
	[ "$(field L)" = "nccl_trace_rank_0,nccl_trace_rank_1," ]
	[ "$(field O)" = ddptest:700 ]
	# The user's values win, and so does newer PyTorch's name for the file.
	[ "$(grep -c " D=0 B=64 F=unset " <<<"$output")" -eq 2 ]
}

@test "a job directory that is not the user's own 0700 (the plugin's config= with another shared_root) fails the step, naming path, owner and mode" {
	local st conf orig alt out
	st=$(mc_state)
	conf=$st/etc/plugstack.conf
	alt=$st/alt-shared
	orig=$(cat "$conf")
	rm -rf "$alt"
	mkdir -m 1777 "$alt"
	# A root the prolog never used (the plugin reads a copy of ddp.conf
	# that names it): the plugin alone decides.
	printf '%s\n' "$(cat "$st/etc/ddp.conf")" "shared_root = $alt" |
		put_conf "$st/etc/ddp-alt-shared.conf"
	echo "$orig config=$st/etc/ddp-alt-shared.conf" | put_conf "$conf"
	run mc_run --user ddptest -- salloc -N1 bash -c '
		a=$1 j=$SLURM_JOB_ID
		try() { srun -n1 --ddp printenv DDP_SHARED_DIR; echo "$1=$?"; }
		mkdir -m 0755 "$a/ddptest" "$a/ddptest/$j"
		try open
		chmod 0700 "$a/ddptest" "$a/ddptest/$j"
		try private
		# The plugin made the flight recorder folder in it.
		rm -r "$a/ddptest/$j"
		ln -s /tmp "$a/ddptest/$j"
		try symlink
		rm "$a/ddptest/$j"' _ "$alt"
	out=$output
	# The squat: another user made the victim'"'"'s directory first.
	rm -rf "$alt/ddptest"
	mkdir -m 0755 "$alt/ddptest"
	chown nobody "$alt/ddptest"
	run mc_run --user ddptest -- salloc -N1 bash -c \
		'srun -n1 --ddp printenv DDP_SHARED_DIR; echo "squat=$?"'
	echo "$orig" | put_conf "$conf"
	rm -rf "$alt" "$st/etc/ddp-alt-shared.conf"
	printf '%s\n' "$out" "$output" >&2
	[[ $out == *"$alt/ddptest has owner uid $(id -u ddptest), mode 0755, but a job directory must be owned by the job's user"*"chmod 0700"* ]]
	[[ $out =~ open=[1-9] ]]
	[[ $out == *"private=0"* ]]
	[ "$(grep -cE "^$alt/ddptest/[0-9]+$" <<<"$out")" -eq 1 ]
	[[ $out == *"$alt/ddptest/"*" is a symbolic link"* ]]
	[[ $out =~ symlink=[1-9] ]]
	[[ $output == *"$alt/ddptest has owner uid $(id -u nobody), mode 0755"*"the admin should remove it"* ]]
	[[ $output =~ squat=[1-9] ]]
	[[ $output != *"$alt/ddptest/"[0-9]* ]]
}

@test "PyTorch DDP (gloo, env://) trains on 2x2 ranks and all ranks end with equal weights" {
	[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import torch' 2>/dev/null ||
		skip "python3-torch is not installed"
	# USE_LIBUV=0: Debian's PyTorch in the newer Slurm roots (2.6, 2.14) is
	# built without libuv and refuses env:// otherwise; 1.13 ignores it.
	run mc_run -- env USE_LIBUV=0 srun --nodes=2 --ntasks-per-node=2 --ddp /usr/bin/python3 "$repo_root/examples/train.py"
	show
	[ "$status" -eq 0 ]
	[ "$(printf '%s\n' "$output" | grep -cE '^rank [0-3] local_rank [01] world 4 device [^ ]+ backend [a-z]+ checksum ')" -eq 4 ]
	[ "$(printf '%s\n' "$output" | grep '^rank ' | awk '{print $NF}' | sort -u | wc -l)" -eq 1 ]
}
