# SPDX-License-Identifier: BSD-3-Clause
# Ranks of a libddp or PyTorch program on this machine, without Slurm:
# the env:// variables srun --ddp sets (DDP_AUTH=none on loopback). The
# caller sets python (the interpreter that finds a free port) and tmp
# (where each rank's output goes), and kills what is left in pids in its
# teardown.
# shellcheck disable=SC2154 # python and tmp are the caller's

free_port() {
	"$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_ranks WORLD TAG CMD...: WORLD ranks of CMD in the background, each
# rank's output in $tmp/TAG.RANK, their pids in pids.
start_ranks() {
	local world=$1 tag=$2 r port
	shift 2
	port=$(free_port)
	pids=()
	for r in $(seq 0 $((world - 1))); do
		RANK=$r WORLD_SIZE=$world LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 \
			MASTER_PORT=$port DDP_AUTH=none DDP_BACKEND=tcp \
			DDP_TIMEOUT=60 "$@" >"$tmp/$tag.$r" 2>&1 &
		pids+=("$!")
	done
}

# wait_ranks: waits for the ranks of start_ranks; fails when one failed.
wait_ranks() {
	local p rc=0
	for p in "${pids[@]}"; do
		wait "$p" || rc=1
	done
	pids=()
	return "$rc"
}

# run_ranks WORLD TAG CMD...: start_ranks and wait_ranks; on failure shows
# what the ranks said.
run_ranks() {
	start_ranks "$@"
	wait_ranks || {
		tail -n 5 "$tmp/$2".*
		return 1
	}
}
