#!/usr/bin/env bats
# slurm-ddp on the other Slurm versions it supports (24.11, 26.05), each on a
# minicluster running that version's daemons and clients from its root file
# system (tests/lib/slurm-root, made by make deps) with the plugin built
# against its headers: node mode sets the rank environment on every rank
# (srun once when --ddp is on its command line, run again when it comes from
# sbatch), the prolog and epilog prepare and clean each node, libddp's
# examples/train and the PyTorch proof examples/train.py train across the
# nodes, and down leaves nothing behind. A version the registry did
# not serve is skipped in one line; one that is missing although this
# machine could build it fails.
# shellcheck source=tests/cluster/common.bash
source "$BATS_TEST_DIRNAME/common.bash"

roots_tool="$repo_root/tests/lib/slurm-root"

# on VERSION: brings the cluster up on VERSION (2 nodes x 2 GPUs), or skips
# or fails the test as the state of VERSION's root says.
on() {
	local out
	if ! out=$("$roots_tool" status "$1"); then
		case "$out" in
		unavailable*) skip "Slurm $1 is unavailable here: ${out#unavailable }" ;;
		*)
			echo "Slurm $1: ${out#missing }; this machine can build it: run make deps" >&2
			return 1
			;;
		esac
	fi
	version_root=${out#ready }
	mc_up --nodes 2 --gpus-per-node 2 --slurm "$1"
}

# The variables every rank prints, one line per rank.
vars='echo "$(hostname) RANK=$RANK WORLD_SIZE=$WORLD_SIZE LOCAL_RANK=$LOCAL_RANK LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE NODE_RANK=$NODE_RANK MASTER_ADDR=$MASTER_ADDR MASTER_PORT=$MASTER_PORT CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES SLURM_PROCID=$SLURM_PROCID SLURM_NODEID=$SLURM_NODEID"'

# field NAME: the values of NAME=... in $output, one per line.
field() { printf '%s\n' "$output" | grep -oE "(^| )$1=[^ ]*" | sed "s/^ *$1=//"; }

# runs_version VERSION: the cluster's clients, daemons and plugin are VERSION's.
runs_version() {
	run mc_run -- srun --version
	show
	[[ $output == "slurm-wlm $1."* ]]
	run mc_exec node2 -- slurmd -V
	show
	[[ $output == "slurm-wlm $1."* ]]
	grep -q "/slurm-$1/plugin/spank_ddp.so " "$(mc_state)/etc/plugstack.conf"
	run mc_run -- srun --help
	[[ $output == *"--ddp"* ]]
}

# rank_env VERSION: node mode on 2 nodes x 2 GPUs gives 4 real Slurm tasks
# with the whole rank environment, srun running once.
rank_env() {
	run mc_run -- srun --nodes=2 --gpus-per-node=2 --ddp --ddp-verbose bash -c "$vars"
	show
	[ "$status" -eq 0 ]
	[[ $output == *"node mode: 2 ranks per node (SLURM_NTASKS_PER_NODE)"* ]]
	[ "$(printf '%s\n' "$output" | grep -c ' RANK=')" -eq 4 ]
	[ "$(field RANK | sort -n | tr '\n' ' ')" = "0 1 2 3 " ]
	[ "$(field WORLD_SIZE | sort -u)" = 4 ]
	[ "$(field LOCAL_WORLD_SIZE | sort -u)" = 2 ]
	[ "$(field LOCAL_RANK | sort | tr '\n' ' ')" = "0 0 1 1 " ]
	[ "$(field MASTER_ADDR | sort -u)" = node1 ]
	[ "$(field MASTER_PORT | sort -u | wc -l)" -eq 1 ]
	[ "$(field CUDA_VISIBLE_DEVICES | sort -u)" = 0,1 ]
	while read -r line; do
		[[ $line =~ \ RANK=([0-9]+).*SLURM_PROCID=([0-9]+) ]]
		[ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ]
		[[ $line =~ NODE_RANK=([0-9]+).*SLURM_NODEID=([0-9]+) ]]
		[ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ]
	done < <(printf '%s\n' "$output" | grep ' RANK=')
}

# prolog VERSION: during a --ddp job each node has the job's firewall
# elements and the user's own job directories; after it, neither.
prolog() {
	local job st
	st=$(mc_state)
	# shellcheck disable=SC2016 # expanded in the job
	run mc_run -- srun -N2 --ntasks-per-node=1 --ddp bash -c \
		'echo "$(hostname) job=$SLURM_JOB_ID elements=$(nft list ruleset | grep -c "comment \"job=$SLURM_JOB_ID") shared=$DDP_SHARED_DIR scratch=$DDP_SCRATCH_DIR"'
	show
	[ "$status" -eq 0 ]
	[ "$(printf '%s\n' "$output" | grep -cE '^node[12] job=[0-9]+ elements=[1-9][0-9]* shared=/.+ scratch=/.+$')" -eq 2 ]
	job=$(field job | sort -u)
	[[ $job =~ ^[0-9]+$ ]]
	# As the test user: directories that are the user's own, mode 0700.
	# shellcheck disable=SC2016 # expanded in the job
	run mc_run --user ddptest -- srun -N2 --ntasks-per-node=1 --ddp bash -c \
		'stat -c "%U %a" "$DDP_SHARED_DIR" "$DDP_SCRATCH_DIR"'
	show
	[ "$status" -eq 0 ]
	[ "$(printf '%s\n' "$output" | grep -c '^ddptest 700$')" -eq 4 ]
	# The epilog removes the job's firewall elements and scratch.
	local n
	for _ in $(seq 50); do
		n=$(mc_exec node1 -- nft list ruleset | grep -c "comment \"job=$job" || true)
		[ "$n" -eq 0 ] && [ ! -e "$st/nodes/node1/scratch/$job" ] && break
		sleep 0.2
	done
	[ "$n" -eq 0 ]
	[ ! -e "$st/nodes/node1/scratch/$job" ]
}

# batch VERSION: sbatch --ddp carries into the script's srun, which runs
# itself again in node mode (--ddp is not on its command line).
batch() {
	local out
	out=$(mktemp /tmp/ddp-versions.XXXXXX)
	# shellcheck disable=SC2016 # expanded in the job
	run mc_run -- sbatch --wait -N2 --exclusive --gpus-per-node=2 --ddp --ddp-verbose -o "$out" \
		--wrap 'srun bash -c "echo \$(hostname) RANK=\$RANK WORLD_SIZE=\$WORLD_SIZE"'
	show
	output=$(cat "$out")
	rm -f "$out"
	show
	[ "$status" -eq 0 ]
	[[ $output == *"node mode: running srun again with --ntasks-per-node=2"* ]]
	[ "$(field RANK | sort -n | tr '\n' ' ')" = "0 1 2 3 " ]
	[ "$(field WORLD_SIZE | sort -u)" = 4 ]
}

# train VERSION: libddp's examples/train (munge-authenticated rendezvous,
# TCP collectives) across the nodes: the loss falls, the weights agree.
train() {
	local stage=${MINICLUSTER_STAGE:-$repo_root/build/stage} prog first last
	prog=$stage/usr/local/libexec/slurm-ddp/examples/train
	[ -x "$prog" ] || {
		echo "examples/train is not staged at $prog (run: make stage)" >&2
		return 1
	}
	run mc_run -- env DDP_TIMEOUT=60 srun --nodes=2 --gpus-per-node=2 --ddp \
		"$prog" --synthetic 2048 --epochs 3
	show
	[ "$status" -eq 0 ]
	[ "$(printf '%s\n' "$output" | grep -cE '^rank [0-3] params_crc=')" -eq 4 ]
	[ "$(printf '%s\n' "$output" | grep -oE '^rank [0-9]+ params_crc=[0-9a-f]+$' | sed 's/.*=//' | sort -u | wc -l)" -eq 1 ]
	first=$(printf '%s\n' "$output" | grep -oE '^epoch 1 loss [0-9.]+' | awk '{print $4}')
	last=$(printf '%s\n' "$output" | grep -oE '^epoch 3 loss [0-9.]+' | awk '{print $4}')
	[ -n "$first" ] && [ -n "$last" ]
	awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }'
}

# train_py VERSION [VAR=VALUE...]: the PyTorch proof, examples/train.py
# (gloo, env://) with the root's python3-torch, on 2x2 ranks: all ranks end
# with equal weights. Debian's python3-torch in trixie (2.6) and sid (2.14)
# is built without libuv, which TCPStore asks for by default since 2.4
# ("use_libuv was requested but PyTorch was built without libuv support"):
# every env:// job with those builds needs USE_LIBUV=0, with or without
# slurm-ddp.
train_py() {
	shift
	run mc_run -- env "$@" srun --nodes=2 --ntasks-per-node=2 --ddp python3 "$repo_root/examples/train.py"
	show
	[ "$status" -eq 0 ]
	[ "$(printf '%s\n' "$output" | grep -c '^rank [0-3] .* world 4 device cpu backend gloo checksum ')" -eq 4 ]
	[ "$(printf '%s\n' "$output" | grep '^rank ' | awk '{print $NF}' | sort -u | wc -l)" -eq 1 ]
}

# down_clean VERSION: down leaves no namespace, process or mount, and no
# process of this cluster inside the root (other clusters on this machine,
# MINICLUSTER_NAME, may run from the same root: they are told apart by
# their network namespaces).
down_clean() {
	local name=${MINICLUSTER_NAME:-ddpmc} pid left="" inodes ino
	inodes=$({ stat -L -c %i /run/netns/"$name"-* 2>/dev/null || true; } | sort -u | tr '\n' ' ')
	[ -n "${inodes// /}" ]
	"$MC" down
	[ "$(ip netns list | grep -c "^$name-" || true)" -eq 0 ]
	for pid in /proc/[0-9]*; do
		[ "$(readlink "$pid/root" 2>/dev/null)" = "$version_root" ] || continue
		ino=$(stat -L -c %i "$pid/ns/net" 2>/dev/null) || continue
		case " $inodes " in *" $ino "*) left+=" ${pid#/proc/}" ;; esac
	done
	[ -z "$left" ] || {
		echo "processes left in $version_root:$left" >&2
		return 1
	}
	! grep -q " $version_root/" /proc/mounts
}

# One test per version, so that a version this machine cannot have is one
# skipped line; a failure names the step (function) that failed.
@test "Slurm 24.11: daemons, clients and plugin from its root; srun and sbatch --ddp set every rank's environment; prolog and epilog run; libddp and examples/train.py train across nodes; down leaves nothing" {
	on 24.11
	runs_version 24.11
	rank_env 24.11
	prolog 24.11
	batch 24.11
	train 24.11
	train_py 24.11 USE_LIBUV=0
	down_clean 24.11
}

@test "Slurm 26.05: daemons, clients and plugin from its root; srun and sbatch --ddp set every rank's environment; prolog and epilog run; libddp and examples/train.py train across nodes; down leaves nothing" {
	on 26.05
	runs_version 26.05
	rank_env 26.05
	prolog 26.05
	batch 26.05
	train 26.05
	train_py 26.05 USE_LIBUV=0
	down_clean 26.05
}
