#!/usr/bin/env bats
# A site without MUNGE: the minicluster on Slurm 26.05 with AuthType=auth/slurm,
# CredType=cred/slurm and a shared slurm.key, and no munged on any host.
# srun --ddp runs libddp's examples/train on the step key (equal checksums),
# --ddp-check joins with it too, and DDP_AUTH=munge fails naming munged.
# A Slurm root the registry did not serve skips each test, naming why;
# tests/run counts such a skip as a failure (only a missing GPU may skip).
# shellcheck source=tests/cluster/common.bash
source "$BATS_TEST_DIRNAME/common.bash"

version=26.05

setup_file() {
	local out
	if ! out=$("$repo_root/tests/lib/slurm-root" status "$version"); then
		case "$out" in
		unavailable*) return 0 ;; # setup skips each test, naming why
		*)
			echo "Slurm $version: ${out#missing }; this machine can build it: run make deps" >&2
			return 1
			;;
		esac
	fi
	mc_up --nodes 2 --gpus-per-node 2 --slurm "$version" --auth slurm
}

setup() {
	local out
	out=$("$repo_root/tests/lib/slurm-root" status "$version") ||
		skip "Slurm $version is unavailable here: ${out#unavailable }"
	require_plugin
	local stage=${MINICLUSTER_STAGE:-$repo_root/build/stage}
	train=$stage${MINICLUSTER_PREFIX:-/usr/local}/libexec/slurm-ddp/examples/train
	[ -x "$train" ] || skip "examples/train is not staged at $train (run: make stage)"
}

# crcs: the params_crc values printed, one per line.
crcs() { printf '%s\n' "$output" | grep -oE '^rank [0-9]+ params_crc=[0-9a-f]+$' | sed 's/.*=//'; }

@test "auth/slurm: Slurm authenticates with slurm.key and no munged runs for the cluster" {
	local st
	st=$(mc_state)
	grep -qx 'AuthType=auth/slurm' "$st/etc/slurm.conf"
	grep -qx 'CredType=cred/slurm' "$st/etc/slurm.conf"
	[ "$(stat -c '%u %a' "$st/etc/slurm.key")" = "0 600" ]
	# No munged serves this cluster, and no host sees a munge socket.
	[ "$(pgrep -a munged | grep -cF "$st/" || true)" -eq 0 ]
	local node
	for node in node1 node2; do
		run mc_exec "$node" -- sh -c 'ls -A /run/munge | wc -l'
		[ "$status" -eq 0 ]
		[ "$output" -eq 0 ]
	done
	run mc_run -- sinfo -h -N -o '%N %T'
	show
	[ "$status" -eq 0 ]
	[ "$(grep -c ' idle$' <<<"$output")" -eq 2 ]
}

@test "auth/slurm: srun -N2 -n4 --ddp examples/train joins on the step key, checksums agree" {
	run mc_run -- env DDP_TIMEOUT=60 srun -N2 -n4 --ddp \
		bash -c 'echo "rank $RANK key=${DDP_STEP_KEY_FILE:-none}"; exec "$0" --synthetic 512 --epochs 2' "$train"
	show
	[ "$status" -eq 0 ]
	[ "$(grep -cE "^rank [0-3] key=$(mc_state)/ddp-state/step-keys/[0-9]+\.0\.[0-9]+$" <<<"$output")" -eq 4 ]
	[ "$(crcs | wc -l)" -eq 4 ]
	[ "$(crcs | sort -u | wc -l)" -eq 1 ]
}

@test "auth/slurm: --ddp-check joins on the step key" {
	run mc_run -- srun -N2 -n4 --ddp-check hostname
	show
	[ "$status" -eq 0 ]
	[[ $output == *"ddp-check: job "*": 2 nodes, 4 ranks joined node1:"*" (the step key)"* ]]
	[[ $output == *"ddp-check: ok"* ]]
}

@test "auth/slurm: DDP_AUTH=munge fails at once naming munged" {
	run mc_run -- env DDP_TIMEOUT=20 DDP_AUTH=munge srun -N2 -n2 --ddp "$train" --synthetic 64 --epochs 1
	show
	[ "$status" -ne 0 ]
	[[ $output == *"authentication failed): munged does not answer on /run/munge/munge.socket.2"* ]]
}
