#!/usr/bin/env bats
# The path of a failed rank's report from its node's slurmstepd to srun
# (plugin/failure.c): srun reads every report connection at once, each on
# its own clock, so a connection that sends nothing hides no report; and
# slurmstepd dials only srun's own address (SLURM_SRUN_COMM_HOST, which
# slurmd sets), from a process of the job's user, never as root, whatever
# SLURM_DDP_FAILURE_REPORT the user sets.
# shellcheck source=tests/cluster/common.bash
source "$BATS_TEST_DIRNAME/common.bash"

setup_file() {
	mc_up --nodes 3 --gpus-per-node 4
}

setup() {
	require_plugin
	out=$(mktemp)
	# Where the job's user (ddptest) writes, seen by every host.
	dir=$(mc_state)/report.$BATS_TEST_NUMBER.$$
	rm -rf "$dir"
	mkdir -m 0700 "$dir"
	chown ddptest: "$dir"
	uid=$(id -u ddptest)
	holder_pid=
	listener_pid=
}

teardown() {
	local node pid
	[ -z "${srun_pid:-}" ] || kill "$srun_pid" 2>/dev/null || true
	for pid in "$holder_pid" "$listener_pid"; do
		[ -z "$pid" ] || kill "$pid" 2>/dev/null || true
	done
	for pid in "$dir"/*.pid; do
		[ ! -s "$pid" ] || kill "$(cat "$pid")" 2>/dev/null || true
	done
	for node in node1 node2 node3; do
		mc_exec "$node" -- nft delete table inet ddpreport 2>/dev/null || true
	done
	rm -rf "$out" "$dir" "${GATE:-}"
}

# first_failure_lines: srun's first-failure lines in $output.
first_failure_lines() { grep -E '\(first failure of step [0-9]+\.[0-9]+\)$' <<<"$output" || true; }

# wait_file FILE SECONDS: until FILE exists and is not empty.
wait_file() {
	local deadline=$((SECONDS + $2))
	until [ -s "$1" ]; do
		if [ "$SECONDS" -ge "$deadline" ]; then
			echo "no $1 within $2 s" >&2
			return 1
		fi
		sleep 0.1
	done
}

# start_listener NODE: a TCP listener on NODE that writes "PEER DATA" to
# $dir/listener.log for every connection it gets; sets lport (its port).
start_listener() {
	mc_exec "$1" -- python3 -c '
import os, socket, sys
d = sys.argv[1]
s = socket.socket()
s.bind(("", 0))
s.listen(16)
with open(d + "/listener.pid", "w") as f:
    f.write("%d\n" % os.getpid())
with open(d + "/listener.port.tmp", "w") as f:
    f.write("%d\n" % s.getsockname()[1])
os.rename(d + "/listener.port.tmp", d + "/listener.port")
while True:
    c, a = s.accept()
    c.settimeout(5)
    try:
        data = c.recv(4096)
    except OSError:
        data = b""
    with open(d + "/listener.log", "a") as f:
        f.write("%s %r\n" % (a[0], data))
    c.close()' "$dir" >/dev/null 2>&1 &
	listener_pid=$!
	wait_file "$dir/listener.port" 30
	lport=$(cat "$dir/listener.port")
	wait_listening "$1" "$lport" 10
}

# count_syns NODE PORT...: counts NODE's outgoing connection attempts to
# each PORT, by whether root's socket or the job user's made them.
count_syns() {
	local node=$1 port rules=
	shift
	for port in "$@"; do
		rules+="tcp dport $port tcp flags syn meta skuid 0 counter comment \"root $port\""$'\n'
		rules+="tcp dport $port tcp flags syn meta skuid $uid counter comment \"user $port\""$'\n'
	done
	mc_exec "$node" -- nft -f - <<-EOF
		table inet ddpreport {
			chain out {
				type filter hook output priority filter; policy accept;
				$rules
			}
		}
	EOF
}

# syns WHO PORT: the attempts count_syns counted (root or user), summed
# over the nodes.
syns() {
	local node n sum=0
	for node in node1 node2 node3; do
		n=$(mc_exec "$node" -- nft list table inet ddpreport 2>/dev/null |
			awk -v c="\"$1 $2\"" 'index($0, c) { for (i = 1; i < NF; i++) if ($i == "packets") print $(i + 1) }')
		sum=$((sum + ${n:-0}))
	done
	echo "$sum"
}

@test "an idle connection to srun's report port hides no report: srun still names rank 1 and writes DDP_RESTART_REPORT" {
	local addr rc=0 line port
	new_gate
	# Rank 0 says where srun listens; rank 1 fails once the gate opens.
	mc_run --user ddptest -- env GATE="$GATE" DIR="$dir" DDP_RESTART_REPORT="$dir/restart-report" \
		srun --nodes=3 --ntasks-per-node=1 --ddp bash -c '
			[ "$SLURM_PROCID" = 0 ] && echo "$SLURM_DDP_FAILURE_REPORT" >"$DIR/addr.tmp" && mv "$DIR/addr.tmp" "$DIR/addr"
			'"$GATE_WAIT"'[ "$SLURM_PROCID" = 1 ] && exit 1
			exec sleep 300' >"$out" 2>&1 &
	srun_pid=$!
	wait_file "$dir/addr" 120
	addr=$(cat "$dir/addr")
	port=${addr##*:}
	# Anyone (root, not the job's user) connects first and sends nothing
	# for 60 s: ahead of every report in srun's backlog.
	mc_run -- bash -c 'echo $$ >"$2/holder.pid"; exec 3<>"/dev/tcp/${1%:*}/${1##*:}"; exec sleep 60' \
		holder "$addr" "$dir" >/dev/null 2>&1 &
	holder_pid=$!
	for _ in $(seq 100); do
		[ -z "$(mc_run -- ss -Htn state established "dport = :$port")" ] || break
		sleep 0.1
	done
	[ -n "$(mc_run -- ss -Htn state established "dport = :$port")" ]
	open_gate
	wait "$srun_pid" || rc=$?
	srun_pid=
	output=$(cat "$out")
	status=$rc
	show
	[ "$status" -ne 0 ]
	line=$(cat "$dir/restart-report")
	echo "# $line" >&3
	[[ $line =~ ^rank=1\ node=node[0-9]+\ how=exit:1\  ]]
	output=$(first_failure_lines)
	[ "$(wc -l <<<"$output")" -eq 1 ]
	[[ $output == *"ddp: rank 1 on node"*" exited with status 1; the step was ended"* ]]
}

@test "slurmstepd reports to srun as the job's user, never as root, and --export cannot send the report elsewhere" {
	local addr rc=0 port
	start_listener node2
	new_gate
	# The user points the report at node2's listener: srun's plugin
	# overwrites the variable, and the report reaches srun.
	mc_run --user ddptest -- env GATE="$GATE" DIR="$dir" SLURM_DDP_FAILURE_REPORT="node2:$lport" \
		srun --nodes=3 --ntasks-per-node=1 --ddp --export="ALL,SLURM_DDP_FAILURE_REPORT=node2:$lport" bash -c '
			[ "$SLURM_PROCID" = 0 ] && echo "$SLURM_DDP_FAILURE_REPORT" >"$DIR/addr.tmp" && mv "$DIR/addr.tmp" "$DIR/addr"
			'"$GATE_WAIT"'[ "$SLURM_PROCID" = 1 ] && exit 1
			exec sleep 300' >"$out" 2>&1 &
	srun_pid=$!
	wait_file "$dir/addr" 120
	addr=$(cat "$dir/addr")
	port=${addr##*:}
	[ "$port" != "$lport" ]
	for node in node1 node2 node3; do
		count_syns "$node" "$port" "$lport"
	done
	open_gate
	wait "$srun_pid" || rc=$?
	srun_pid=
	output=$(cat "$out")
	status=$rc
	show
	[ "$status" -ne 0 ]
	output=$(first_failure_lines)
	[ "$(wc -l <<<"$output")" -eq 1 ]
	[[ $output == *"ddp: rank 1 on node"*" exited with status 1; the step was ended"* ]]
	echo "# to srun's port $port: $(syns root "$port") from root, $(syns user "$port") from uid $uid" >&3
	[ "$(syns root "$port")" -eq 0 ]
	[ "$(syns user "$port")" -ge 1 ]
	[ ! -s "$dir/listener.log" ] || { cat "$dir/listener.log" >&2; false; }
}

@test "a SLURM_DDP_FAILURE_REPORT that srun's plugin does not set (its option passed in the environment): slurmstepd never dials it, and never as root" {
	start_listener node2
	count_syns node1 "$lport"
	# No --ddp on srun's command line, but the option as srun hands it to
	# slurmstepd: srun's plugin exports nothing, slurmstepd's runs on
	# the user's variables.
	run mc_run --user ddptest -- env _SLURM_SPANK_OPTION_ddp_ddp= \
		SLURM_DDP_FAILURE_REPORT="node2:$lport" SLURM_DDP_FAILURE_NONCE=00000000000000000000000000000000 \
		srun --nodes=1 --nodelist=node1 --ntasks-per-node=1 bash -c 'echo "DDP_BIND=$DDP_BIND"; exit 3'
	show
	[ "$status" -ne 0 ]
	# The plugin ran in slurmstepd.
	[[ $output == *"DDP_BIND="[a-z]* ]]
	echo "# to node2's port $lport: $(syns root "$lport") from root, $(syns user "$lport") from uid $uid" >&3
	[ "$(syns root "$lport")" -eq 0 ]
	# slurmstepd tried: at srun's own host, as the user.
	[ "$(syns user "$lport")" -ge 1 ]
	[ ! -s "$dir/listener.log" ] || { cat "$dir/listener.log" >&2; false; }
}
