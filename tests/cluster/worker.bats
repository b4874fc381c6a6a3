#!/usr/bin/env bats
# libddp on the minicluster: examples/train converges with equal checksums
# under srun --ddp (TCP backend, no GPU), a SIGKILLed rank ends the step
# within the timeout, and another user (ddptest) cannot join a root job:
# not as a rank, not by squatting MASTER_PORT and relaying, and a flood of
# connections only costs rank 0 a few lines of stderr; the job completes.
# shellcheck source=tests/cluster/common.bash
source "$BATS_TEST_DIRNAME/common.bash"

setup_file() {
	mc_up --nodes 3 --gpus-per-node 4
}

setup() {
	require_plugin
	local stage=${MINICLUSTER_STAGE:-$repo_root/build/stage}
	train=$stage${MINICLUSTER_PREFIX:-/usr/local}/libexec/slurm-ddp/examples/train
	[ -x "$train" ] || train=$repo_root/build/examples/train
	[ -x "$train" ] || skip "examples/train is not built (run: make stage)"
}

# crcs: the params_crc values printed, one per line.
crcs() { printf '%s\n' "$output" | grep -oE '^rank [0-9]+ params_crc=[0-9a-f]+$' | sed 's/.*=//'; }

@test "srun --nodes=2 --gpus-per-node=2 --ddp train --synthetic 2048 --epochs 3: loss falls, checksums agree" {
	run mc_run -- env DDP_TIMEOUT=60 srun --nodes=2 --gpus-per-node=2 --ddp \
		"$train" --synthetic 2048 --epochs 3
	show
	[ "$status" -eq 0 ]
	[ "$(crcs | wc -l)" -eq 4 ]
	[ "$(crcs | sort -u | wc -l)" -eq 1 ]
	# Where the nodes' GPUs compute, every rank names its own; elsewhere
	# (a node without a GPU driver is normal) rank 0 says it once, with
	# no CUDA error text unless DDP_DEBUG asks for it.
	if grep -q ': backend nccl, ' <<<"$output"; then
		[ "$(grep -cE '^train: rank [0-3] on [^ ]+: backend nccl, GPU ' <<<"$output")" -eq 4 ]
	else
		[ "$(grep -c '^train: 4 ranks on the CPU over TCP: ' <<<"$output")" -eq 1 ]
		[ "$(grep -c '^train: ' <<<"$output")" -eq 2 ]
		[[ $output != *CUDA* ]]
	fi
	local first last
	first=$(printf '%s\n' "$output" | grep -oE '^epoch 1 loss [0-9.]+' | awk '{print $4}')
	last=$(printf '%s\n' "$output" | grep -oE '^epoch 3 loss [0-9.]+' | awk '{print $4}')
	[ -n "$first" ] && [ -n "$last" ]
	awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }'
}

@test "train --no-overlap (sync after the whole backward) ends with the same weights" {
	run mc_run -- env DDP_TIMEOUT=60 srun --nodes=2 --ntasks-per-node=2 --ddp \
		"$train" --synthetic 1024 --epochs 2
	show
	[ "$status" -eq 0 ]
	local with_overlap
	with_overlap=$(crcs | sort -u)
	[ "$(printf '%s\n' "$with_overlap" | wc -l)" -eq 1 ]
	[[ $output == *"step_ms "* ]]
	run mc_run -- env DDP_TIMEOUT=60 srun --nodes=2 --ntasks-per-node=2 --ddp \
		"$train" --synthetic 1024 --epochs 2 --no-overlap
	show
	[ "$status" -eq 0 ]
	[ "$(crcs | wc -l)" -eq 4 ]
	[ "$(crcs | sort -u)" = "$with_overlap" ]
}

@test "--ntasks-per-node=2: the hierarchical allreduce is used, and gives what the flat algorithms give" {
	local hier_crc hier_losses ring_losses
	run mc_run -- env DDP_TIMEOUT=60 DDP_DEBUG=1 srun --nodes=2 --ntasks-per-node=2 --ddp \
		"$train" --synthetic 1024 --epochs 2
	show
	[ "$status" -eq 0 ]
	# Chosen from the host map: every rank says so, with its place.
	[ "$(grep -cE 'rank [0-3] \(node[0-9]+\): hierarchical allreduce: 2 nodes, 2 ranks on this one \(local [01]\), 2 stripes' <<<"$output")" -eq 4 ]
	# DDP_DEBUG also gives each CPU rank's reason for not using a GPU.
	if ! grep -q ': backend nccl, ' <<<"$output"; then
		[ "$(grep -cE '^train: rank [0-3] on node[0-9]+: backend tcp, CPU \(.+\)$' <<<"$output")" -eq 4 ]
	fi
	[ "$(crcs | wc -l)" -eq 4 ]
	[ "$(crcs | sort -u | wc -l)" -eq 1 ]
	# Every bucket through it: node sums of 2 ranks, then the 2 nodes'
	# sums added, which is recursive doubling's order on 2 x 2 ranks, so
	# the weights are bit for bit those of DDP_TCP_ALGO=rd.
	run mc_run -- env DDP_TIMEOUT=60 DDP_TCP_ALGO=hier srun --nodes=2 --ntasks-per-node=2 --ddp \
		"$train" --synthetic 1024 --epochs 2
	show
	[ "$status" -eq 0 ]
	hier_crc=$(crcs | sort -u)
	[ "$(printf '%s\n' "$hier_crc" | wc -l)" -eq 1 ]
	hier_losses=$(grep -oE '^epoch [0-9]+ loss [0-9.]+' <<<"$output")
	[ -n "$hier_losses" ]
	run mc_run -- env DDP_TIMEOUT=60 DDP_DEBUG=1 DDP_TCP_ALGO=rd srun --nodes=2 \
		--ntasks-per-node=2 --ddp "$train" --synthetic 1024 --epochs 2
	show
	[ "$status" -eq 0 ]
	[[ $output != *"hierarchical allreduce:"* ]]
	[ "$(crcs | wc -l)" -eq 4 ]
	[ "$(crcs | sort -u)" = "$hier_crc" ]
	# The ring adds in another order: the same losses at the precision
	# train prints.
	run mc_run -- env DDP_TIMEOUT=60 DDP_TCP_ALGO=ring srun --nodes=2 \
		--ntasks-per-node=2 --ddp "$train" --synthetic 1024 --epochs 2
	show
	[ "$status" -eq 0 ]
	ring_losses=$(grep -oE '^epoch [0-9]+ loss [0-9.]+' <<<"$output")
	[ "$hier_losses" = "$ring_losses" ]
	# An exactly checkable allreduce (ddp-check's: the sum of rank + 1)
	# passes with the hierarchical algorithm across the two nodes.
	local check=${MINICLUSTER_STAGE:-$repo_root/build/stage}${MINICLUSTER_PREFIX:-/usr/local}/bin/ddp-check
	[ -x "$check" ] || return 0
	run mc_run -- env DDP_TIMEOUT=60 DDP_DEBUG=1 srun --nodes=2 --ntasks-per-node=2 --ddp "$check"
	show
	[ "$status" -eq 0 ]
	[ "$(grep -c 'hierarchical allreduce: 2 nodes' <<<"$output")" -eq 4 ]
	[[ $output == *"ddp-check: ok"* ]]
}

@test "a rank killed with SIGKILL mid-training ends every other rank within the timeout + 5 s" {
	local timeout=20 killed end host
	# -K0: libddp's own detection, without the plugin ending the step.
	# Rank 2 is killed once training is under way: rank 0 opens the gate
	# when it prints the first epoch's line.
	new_gate
	run mc_run -- env DDP_TIMEOUT=$timeout GATE="$GATE" srun -K0 --nodes=2 --gpus-per-node=2 --ddp \
		bash -c 'set -o pipefail
			case $RANK in
			0) "$0" --synthetic 2048 --epochs 500 |
				awk -v gate="$GATE" "{ print; fflush() } /^epoch 1 / && !opened { opened = 1; printf \"\" >gate; close(gate) }"
				exit ;;
			2) ( '"$GATE_WAIT"'echo "KILLED_AT $(date +%s.%N) ON $(hostname)" >&2; kill -9 $$ ) & ;;
			esac
			exec "$0" --synthetic 2048 --epochs 500' "$train"
	end=$(date +%s.%N)
	rm -f "$GATE"
	show
	[ "$status" -ne 0 ]
	killed=$(printf '%s\n' "$output" | grep -oE 'KILLED_AT [0-9.]+' | awk '{print $2}')
	[ -n "$killed" ]
	echo "# step ended $(awk -v a="$killed" -v b="$end" 'BEGIN { printf "%.2f", b - a }') s after the kill" >&3
	awk -v a="$killed" -v b="$end" -v t=$timeout 'BEGIN { exit !(b - a < t + 5) }'
	# The three survivors say which rank died and where (Slurm may pick
	# any two of the cluster's nodes).
	host=$(printf '%s\n' "$output" | sed -n 's/.*KILLED_AT [0-9.]* ON \([a-z0-9]*\).*/\1/p')
	[ -n "$host" ]
	[ "$(printf '%s\n' "$output" | grep -c "communication failed: .*lost rank 2 ($host)")" -eq 3 ]
	[ "$(printf '%s\n' "$output" | grep -c 'params_crc=')" -eq 0 ]
}

# job_step: "JOB STEP" of the running srun --ddp step (what squeue shows
# anyone), waiting for it to appear.
job_step() {
	local id _
	for _ in $(seq 1 50); do
		id=$(mc_run -- squeue -h -s -o %i | grep -E '^[0-9]+\.[0-9]+$' | head -n 1 || true)
		if [ -n "$id" ]; then
			echo "${id%.*} ${id#*.}"
			return 0
		fi
		sleep 0.2
	done
	return 1
}

# intruder MODE: a root job (DDP_AUTH=MODE) whose ranks 1-3 join only
# after the intruder (user ddptest, on one of the job's nodes) knocked at
# rank 0, which listens by then, naming the job and step it read from
# squeue and, with the key, the job's key file. Leaves the intruder's
# output in $intruder and the job's in $output.
intruder() {
	local mode=$1 port=29577 out job step keyfile=""
	out=$(mktemp)
	new_gate
	mc_run -- env MASTER_PORT=$port DDP_TIMEOUT=60 DDP_AUTH="$mode" GATE="$GATE" srun --nodes=2 --gpus-per-node=2 --ddp \
		bash -c 'echo "KEYFILE $RANK ${DDP_STEP_KEY_FILE:-none}"; [ "$RANK" = 0 ] || { '"$GATE_WAIT"'}; exec "$0" --synthetic 512 --epochs 2' "$train" \
		>"$out" 2>&1 &
	local pid=$!
	read -r job step < <(job_step)
	[ -n "$job" ]
	wait_listening node1 "$port" 60
	# The key directories are named after the step (state_dir is shared
	# by the nodes of the minicluster): the intruder takes one.
	if [ "$mode" != munge ]; then
		keyfile=$(find "$(mc_state)/ddp-state/step-keys" -maxdepth 1 -name "$job.$step.*" | head -n 1)
	fi
	run mc_exec node2 --user ddptest -- env RANK=1 WORLD_SIZE=4 MASTER_ADDR=node1 \
		MASTER_PORT=$port SLURM_JOB_ID="$job" SLURM_STEP_ID="$step" DDP_TIMEOUT=3 \
		DDP_AUTH="$mode" DDP_STEP_KEY_FILE="$keyfile" "$train" --synthetic 64 --epochs 1
	show
	intruder_status=$status intruder=$output
	open_gate
	local rc=0
	wait "$pid" || rc=$?
	rm -f "$GATE"
	output=$(cat "$out")
	rm -f "$out"
	status=$rc
	show
}

@test "a non-root user's process claiming the job's rank 1 never gets to send a credential (munge); the job completes" {
	intruder munge
	[ "$intruder_status" -ne 0 ]
	# munged refuses to decode rank 0's proof for any other uid.
	[[ $intruder == *"did not prove it is rank 0 of this job (invalid munge credential: Unauthorized credential for client UID="* ]]
	[ "$status" -eq 0 ]
	[[ $output == *"rank 0 refused connection from "*"closed after rank 0's proof, without a hello"* ]]
	[ "$(crcs | wc -l)" -eq 4 ]
	[ "$(crcs | sort -u | wc -l)" -eq 1 ]
}

@test "with the step key: the job's key file is root's, read by the job's user alone, another user cannot read it, nor join; the key is gone after the step" {
	intruder auto
	local keyfile
	keyfile=$(sed -nE 's/^KEYFILE 1 (.*)$/\1/p' <<<"$output" | head -n 1)
	[[ $keyfile == "$(mc_state)/ddp-state/step-keys/"+([0-9]).+([0-9]).+([0-9]) ]]
	[ "$intruder_status" -ne 0 ]
	[[ $intruder == *"step key $(mc_state)/ddp-state/step-keys/"*": Permission denied (DDP_STEP_KEY_FILE names the key srun --ddp makes"* ]]
	[ "$status" -eq 0 ]
	[ "$(crcs | wc -l)" -eq 4 ]
	[ "$(crcs | sort -u | wc -l)" -eq 1 ]
	# slurmstepd removed every node's key of the step.
	[ ! -e "$keyfile" ]
	[ -z "$(find "$(mc_state)/ddp-state/step-keys" -mindepth 1 -maxdepth 1)" ]
	# As the user of the job: root's, 0400 with the ACL u:UID:r (stat
	# shows 0440, the mask), in root's 0711 step-keys; the user reads it,
	# and ddp-check's and libddp's ranks join on it (DDP_AUTH=key: no
	# munge).
	run mc_run --user ddptest -- env DDP_AUTH=key DDP_TIMEOUT=60 srun --nodes=2 --ntasks-per-node=2 --ddp --ddp-check \
		bash -c 'k=$DDP_STEP_KEY_FILE; echo "KEY $(id -u) $(stat -c "%u %a %s" "$k") $(stat -c "%u %a" "${k%/*}") $(head -c 64 "$k" | wc -c)"; exec "$0" --synthetic 512 --epochs 1' "$train"
	show
	[ "$status" -eq 0 ]
	local uid
	uid=$(id -u ddptest)
	[ "$(grep -c "^KEY $uid 0 440 32 0 711 32$" <<<"$output")" -eq 4 ]
	[[ $output == *"ddp-check: job "*" ranks joined "*" (the step key)"* ]]
	[ "$(crcs | wc -l)" -eq 4 ]
	[ "$(crcs | sort -u | wc -l)" -eq 1 ]
}

# The squatter of issue 10 (F1), as user ddptest on rank 0's node: binds
# MASTER_PORT before the job, captures what the first rank sends, lets the
# port go (keeping that rank's connection), replays the capture to the real
# rank 0 and relays both ways. Prints the message types rank 0 sent it and
# SECRET 1 when they include a welcome or the roster.
squatter_py='
import select, socket, struct, sys, time
port = int(sys.argv[1])
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("0.0.0.0", port))
l.listen(64)
print("SQUATTING", flush=True)
l.settimeout(60)
w, _ = l.accept()
w.settimeout(1.0)
cap = b""
try:
    while True:
        d = w.recv(65536)
        if not d:
            break
        cap += d
except socket.timeout:
    pass
print("CAPTURED", len(cap), flush=True)
l.close()
r = None
for _ in range(200):
    try:
        r = socket.create_connection(("127.0.0.1", port), timeout=2)
        break
    except OSError:
        time.sleep(0.05)
r.sendall(cap)
print("REPLAYED", flush=True)
w.settimeout(None)
seen = b""
end = time.time() + 20
done = False
while time.time() < end and not done:
    rd, _, _ = select.select([r, w], [], [], 0.5)
    for s in rd:
        try:
            d = s.recv(65536)
        except OSError:
            d = b""
        if not d:
            done = True
            break
        if s is r:
            seen += d
        try:
            (w if s is r else r).sendall(d)
        except OSError:
            done = True
types, off = [], 0
while len(seen) - off >= 12 and struct.unpack_from("<I", seen, off)[0] == 0x52504444:
    types.append(struct.unpack_from("<H", seen, off + 6)[0])
    off += 12 + struct.unpack_from("<I", seen, off + 8)[0]
print("FROM_RANK0", types, flush=True)
print("SECRET", int(2 in types or 4 in types), flush=True)
'

@test "another user squatting MASTER_PORT captures, replays and relays a rank's first message: no roster for it, the job completes" {
	local port=29578 out sq
	out=$(mktemp)
	sq=$(mktemp)
	mc_exec node1 --user ddptest -- python3 -c "$squatter_py" "$port" >"$sq" 2>&1 &
	local spid=$!
	wait_line "$sq" '^SQUATTING$' 30
	run mc_run -- env MASTER_PORT=$port DDP_TIMEOUT=60 srun --nodes=2 --gpus-per-node=2 --ddp \
		"$train" --synthetic 512 --epochs 2
	show
	local job_status=$status job_output=$output
	wait "$spid" || true
	output=$(cat "$sq")
	rm -f "$sq" "$out"
	status=0
	show
	echo "# squatter: $(printf '%s\n' "$output" | grep -E '^(CAPTURED|FROM_RANK0)' | tr '\n' ' ')" >&3
	[[ $output == *"REPLAYED"* ]]
	[[ $output == *"SECRET 0"* ]]
	status=$job_status output=$job_output
	[ "$status" -eq 0 ]
	[[ $output == *"rank 0: port $port (MASTER_PORT) is held by another process"* ]]
	[[ $output == *"did not prove it is rank 0 of this job"* ]]
	[ "$(crcs | wc -l)" -eq 4 ]
	[ "$(crcs | sort -u | wc -l)" -eq 1 ]
}

# A flood of connections to 127.0.0.1:PORT for SECONDS, as fast as Python
# goes, holding the latest 256, every fourth sending garbage; resets, so no
# TIME_WAIT runs the ports out.
flood_py='
import socket, struct, sys, time
port, secs = int(sys.argv[1]), float(sys.argv[2])
ring, made = [], 0
end = time.time() + secs
while time.time() < end:
    s = socket.socket()
    s.setblocking(False)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    try:
        s.connect(("127.0.0.1", port))
    except BlockingIOError:
        pass
    except OSError:
        s.close()
        time.sleep(0.001)
        continue
    made += 1
    if made % 4 == 0:
        try:
            s.send(b"GARBAGEgarbage!!")
        except OSError:
            pass
    ring.append(s)
    if len(ring) > 256:
        ring.pop(0).close()
    if made == 256:
        print("FLOODING", flush=True)
print("FLOOD", made, flush=True)
'

@test "another user flooding MASTER_PORT while the ranks join: the job completes, rank 0 logs a few lines" {
	local port=29579 out fl
	out=$(mktemp)
	fl=$(mktemp)
	new_gate
	# Ranks 1-3 join once rank 0 listens and the flood is under way.
	mc_run -- env MASTER_PORT=$port DDP_TIMEOUT=60 GATE="$GATE" srun --nodes=2 --gpus-per-node=2 --ddp \
		bash -c '[ "$RANK" = 0 ] || { '"$GATE_WAIT"'}; exec "$0" --synthetic 512 --epochs 2' "$train" \
		>"$out" 2>&1 &
	local pid=$!
	wait_listening node1 "$port" 60
	mc_exec node1 --user ddptest -- python3 -c "$flood_py" "$port" 8 >"$fl" 2>&1 &
	local fpid=$!
	wait_line "$fl" '^FLOODING$' 30 || true
	open_gate
	wait "$fpid" || true
	local rc=0
	wait "$pid" || rc=$?
	rm -f "$GATE"
	output=$(cat "$fl")
	status=0
	show
	local made
	made=$(printf '%s\n' "$output" | awk '/^FLOOD /{print $2}')
	echo "# $made connections in 8 s" >&3
	[ "${made:-0}" -ge 1000 ]
	output=$(cat "$out")
	rm -f "$out" "$fl"
	status=$rc
	show
	[ "$status" -eq 0 ]
	[ "$(crcs | wc -l)" -eq 4 ]
	[ "$(crcs | sort -u | wc -l)" -eq 1 ]
	local lines
	lines=$(printf '%s\n' "$output" | grep -c 'refused' || true)
	echo "# rank 0 wrote $lines lines about refusals, ${#output} bytes in all" >&3
	[ "$lines" -le 12 ]
	[[ $output == *"rank 0 refused "*" more connections in the last "* ]]
	[ "${#output}" -lt 65536 ]
}

# Binds every port of LOW-HIGH it can on all addresses and listens, as
# another user would to deny every rendezvous of a node; prints the count,
# then holds them until its stdin closes (at most SECONDS). SO_REUSEADDR,
# as rank 0 has it, so that ports in TIME_WAIT from earlier tests are held
# too.
squat_range_py='
import signal, socket, sys
lo, hi, secs = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
signal.alarm(secs)
held = []
for p in range(lo, hi + 1):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("0.0.0.0", p))
        s.listen(1)
        held.append(s)
    except OSError:
        s.close()
print("HELD", len(held), flush=True)
sys.stdin.read()
'

@test "another user holding all of port_range on rank 0's node: the step fails at the timeout naming the port and what to do; --ddp-port runs" {
	local sq fifo hold
	sq=$(mktemp)
	fifo=$(mktemp -u)
	mkfifo -m 0600 "$fifo"
	# The squatter lives inside node1, beyond the reach of a kill of its
	# wrapper: it ends when this test closes the fifo it reads.
	mc_exec node1 --user ddptest -- python3 -c "$squat_range_py" 29400 29999 60 <"$fifo" >"$sq" 2>&1 &
	local spid=$!
	exec {hold}>"$fifo"
	local tries=50
	while [ "$tries" -gt 0 ] && ! grep -q '^HELD' "$sq"; do
		tries=$((tries - 1))
		sleep 0.2
	done
	run mc_run -- env DDP_TIMEOUT=4 srun --nodes=2 --ntasks-per-node=1 --ddp "$train" --synthetic 256 --epochs 1
	local s1=$status o1=$output
	run mc_run -- env DDP_TIMEOUT=30 srun --nodes=2 --ntasks-per-node=1 --ddp --ddp-port=29123 "$train" --synthetic 256 --epochs 1
	exec {hold}>&-
	wait "$spid" || true
	local held
	held=$(awk '/^HELD/{print $2}' "$sq")
	rm -f "$sq" "$fifo"
	printf '%s\n' "$o1" >&2
	show
	echo "# the other user held $held of 600 ports" >&3
	[ "${held:-0}" -eq 600 ]
	[ "$s1" -ne 0 ]
	[[ $o1 =~ rank\ 0:\ port\ (29[4-9][0-9][0-9])\ \(MASTER_PORT\)\ is\ held\ by\ another\ process ]]
	local port=${BASH_REMATCH[1]}
	[[ $o1 == *"rank 0 cannot listen on port $port: another process held it for the whole timeout"* ]]
	[[ $o1 == *"ss -ltnp 'sport = :$port'"* ]]
	[[ $o1 == *"--ddp-port=N picks another port; ExclusiveUser=YES keeps other users off a job's nodes"* ]]
	[ "$status" -eq 0 ]
	[ "$(crcs | wc -l)" -eq 2 ]
}

@test "nodes with different port keys: the step fails at the timeout, and both sides name port_key" {
	local st nodectl
	st=$(mc_state)
	nodectl=$(dirname "$(dirname "$train")")/../../sbin/ddp-nodectl
	[ -x "$nodectl" ] || skip "ddp-nodectl is not staged next to $train"
	(umask 077 && head -c 32 /dev/urandom >"$st/etc/other.key")
	# node2's own mount namespace sees another key at the same path.
	mc_exec node2 -- mount --bind "$st/etc/other.key" "$st/etc/ddp-port.key"
	local p1 p2 tries=2
	p1=$(mc_exec node1 -- "$nodectl" -c "$st/etc/ddp.conf" port 5 0) || true
	p2=$(mc_exec node2 -- "$nodectl" -c "$st/etc/ddp.conf" port 5 0) || true
	# Two keys give the same port 1 time in 600: then the step runs, and
	# the next job (another id) is tried.
	while [ "$tries" -gt 0 ]; do
		tries=$((tries - 1))
		# -K0: both sides fail by themselves and say why.
		run mc_run -- env DDP_TIMEOUT=4 srun -K0 -N2 -w 'node[1-2]' --ntasks-per-node=1 --ddp \
			"$train" --synthetic 256 --epochs 1
		[ "$status" -eq 0 ] || break
	done
	mc_exec node2 -- umount "$st/etc/ddp-port.key"
	rm -f "$st/etc/other.key"
	show
	echo "# job 5 step 0 would get port $p1 on node1, $p2 on node2" >&3
	[ -n "$p1" ]
	[ -n "$p2" ]
	[ "$status" -ne 0 ]
	[[ $output == *"rank 0 timed out after 4 s waiting for ranks to join"*"(srun --ddp: every node needs the same port_key; \`ddp-nodectl port JOB STEP\` on each compares them)"* ]]
	[[ $output == *"rank 1 could not reach rank 0 at node1:"*"(srun --ddp: the same port_key on every node)"* ]]
}

@test "two jobs whose MASTER_PORTs collide both complete: the later job's ranks take the other rank 0 for a stranger and connect again" {
	local port=29613 a b rc=0 brc=0
	a=$(mktemp)
	b=$(mktemp)
	new_gate
	# Job A's rank 0 holds the port on node1, and its rank 1 joins only
	# once job B, on the same nodes and port, found the port held and
	# its rank 1 was refused by A's rank 0.
	mc_run -- env MASTER_PORT=$port DDP_TIMEOUT=60 GATE="$GATE" srun -w node1,node2 --nodes=2 --ntasks-per-node=1 --ddp \
		bash -c '[ "$RANK" = 0 ] || { '"$GATE_WAIT"'}; exec "$0" --synthetic 256 --epochs 1' "$train" \
		>"$a" 2>&1 &
	local pid=$!
	wait_listening node1 "$port" 60
	mc_run -- env MASTER_PORT=$port DDP_TIMEOUT=60 srun -w node1,node2 --nodes=2 --ntasks-per-node=1 --ddp \
		"$train" --synthetic 256 --epochs 1 >"$b" 2>&1 &
	local bpid=$!
	wait_line "$b" 'is held by another process' 60 || true
	wait_line "$b" 'refused before proving it is rank 0 of this job' 60 || true
	open_gate
	wait "$bpid" || brc=$?
	output=$(cat "$b")
	status=$brc
	rm -f "$b" "$GATE"
	show
	[ "$status" -eq 0 ]
	[ "$(crcs | wc -l)" -eq 2 ]
	[ "$(crcs | sort -u | wc -l)" -eq 1 ]
	[[ $output == *"is held by another process"* ]]
	[[ $output == *"refused before proving it is rank 0 of this job"*"connecting again"* ]]
	wait "$pid" || rc=$?
	output=$(cat "$a")
	rm -f "$a"
	status=$rc
	show
	[ "$status" -eq 0 ]
	[ "$(crcs | wc -l)" -eq 2 ]
}
