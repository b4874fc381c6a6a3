#!/usr/bin/env bats
# ddp-check on the minicluster (srun --ddp ddp-check): a healthy step passes
# with its table; a node whose link is throttled with tbf is named as slow;
# a node whose job ports are dropped by nftables is named as unreachable
# (by libddp's rendezvous, whose roster goes down a tree of ranks, or by
# the link test);
# --mode warn prints the problem and lets the program start; bad options
# fail with a message; a wedged munged ends at the time limit. Then the
# same through the plugin: srun --ddp-check runs it from every task before
# the program (fail ends the step, warn starts the program, a bad mode fails
# in srun, ddp.conf's check is the default, the check's rendezvous is not
# on the program's MASTER_PORT). Each test undoes its tc/nft
# and ddp.conf changes, so later suites find the cluster as it was.
# shellcheck source=tests/cluster/common.bash
source "$BATS_TEST_DIRNAME/common.bash"

# Links below this fraction of the typical one are slow (check_conf_file).
fraction=0.2

setup_file() {
	mc_up --nodes 3 --gpus-per-node 4
	check_conf_file "$fraction"
}

teardown_file() {
	check_conf_file_restore
}

setup() {
	require_plugin
	local stage=${MINICLUSTER_STAGE:-$repo_root/build/stage}
	check=$stage/usr/local/bin/ddp-check
	[ -x "$check" ] || skip "ddp-check is not in the staged install (run: make stage)"
}

teardown() {
	local node
	[ -z "${conf_saved:-}" ] || put_conf "$(mc_state)/etc/ddp.conf" <"$conf_saved"
	conf_saved=
	for node in node1 node2 node3; do
		unthrottle "$node"
		mc_exec "$node" -- nft delete table inet ddpcheck 2>/dev/null || true
	done
}

# block_job_ports NODE: drops new TCP connections from other hosts to the
# ports a job uses there (ddp.conf's port_range and the ephemeral range),
# as a wrong firewall would.
block_job_ports() {
	local range eph
	range=$(awk -F' *= *' '$1 == "port_range" { print $2 }' "$(mc_state)/etc/ddp.conf")
	eph=$(mc_exec "$1" -- sysctl -n net.ipv4.ip_local_port_range | awk '{ print $1 "-" $2 }')
	[ -n "$range" ] && [ -n "$eph" ]
	mc_exec "$1" -- nft -f - <<-EOF
		table inet ddpcheck {
			chain input {
				type filter hook input priority filter - 20; policy accept;
				iif != "lo" tcp dport { $range, $eph } ct state new drop
			}
		}
	EOF
}

# free_port: a TCP port nothing on this host listens on, below the
# ephemeral range, so that no outgoing connection takes it meanwhile.
free_port() {
	local low p _
	read -r low _ </proc/sys/net/ipv4/ip_local_port_range
	for _ in $(seq 100); do
		p=$((low - 10000 + RANDOM % 10000))
		[ -n "$(ss -Htln "sport = :$p")" ] || { echo "$p"; return 0; }
	done
	return 1
}

# elapsed START: seconds since START (date +%s.%N), two decimals.
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }'; }

# ar_kib: the allreduce size in KiB that ddp-check's rule
# (allreduce_elems in check/ddp-check.c) gives for the report in $output:
# 4 MiB, cut to what the slowest timed link of the table carries in 50 ms,
# shared out over the fullest node's ranks and the doublings of the
# ranks, halved down to a power of two (at least 1 KiB).
ar_kib() {
	printf '%s\n' "$output" | awk '
		BEGIN { slowest = -1; most = 1 }
		/^node +ranks +gpus +next +out GB\/s +back GB\/s +status$/ { table = 1; next }
		table && $1 ~ /^node[0-9]+$/ && NF >= 7 {
			n = 0
			k = split($2, part, ",")
			for (i = 1; i <= k; i++)
				n += split(part[i], ab, "-") == 2 ? ab[2] - ab[1] + 1 : 1
			if (n > most) most = n
			for (c = 5; c <= 6; c++)
				if ($c != "-" && (slowest < 0 || $c + 0 < slowest)) slowest = $c + 0
			next
		}
		{ table = 0 }
		/^allreduce: [0-9]+ ranks, / { world = $2 + 0 }
		END {
			if (!world) exit 1
			bytes = 4194304
			if (slowest >= 0 && slowest * 1e9 * 0.05 < bytes) bytes = slowest * 1e9 * 0.05
			d = 0
			for (i = 1; i < world; i *= 2) d++
			bytes /= most * (d > 1 ? d : 1)
			for (n = 1048576; n > 256 && n * 4 > bytes; n /= 2) ;
			print n * 4 / 1024
		}'
}

@test "a healthy 3-node step passes and prints one row per node with both directions of its link" {
	run mc_run -- srun --nodes=3 --ntasks-per-node=2 --ddp "$check" --min-fraction "$fraction"
	show
	[ "$status" -eq 0 ]
	[[ $output == *"ddp-check: job "*": 3 nodes, 6 ranks joined node1:"*" (the step key)"* ]]
	[[ $output == *"node   ranks  gpus  next   out GB/s  back GB/s  status"* ]]
	# node, ranks, gpus, next, GB/s out, GB/s back, ok
	local node ranks next
	while read -r node ranks next; do
		printf '%s\n' "$output" | grep -qE "^$node +$ranks +- +$next +[0-9.e-]+ +[0-9.e-]+ +ok$"
	done <<-EOF
		node1 0-1 node2
		node2 2-3 node3
		node3 4-5 node1
	EOF
	[[ $output == *"links: 6 timed for 0.20 s each; typical "* ]]
	# 4 MiB shared out over a node's 2 ranks and the 3 doublings of 6
	# ranks, halved to a power of two: 512 KiB, less where a link of the
	# table is below 63 MB/s.
	local kib
	kib=$(ar_kib)
	echo "# allreduce of $kib KiB by the rule" >&3
	printf '%s\n' "$output" | grep -qE "^allreduce: 6 ranks, $kib KiB: "
	[[ $output == *"ddp-check: ok (network "* ]]
	[[ $output != *"problems:"* ]]
}

@test "2 nodes x 2 ranks: the network part takes at most 2 s; the fake GPUs are skipped with one line" {
	local start net
	start=$(date +%s.%N)
	run mc_run -- srun --nodes=2 --gpus-per-node=2 --ddp "$check" --min-fraction "$fraction"
	echo "# srun --nodes=2 --gpus-per-node=2 --ddp ddp-check: $(elapsed "$start") s" >&3
	show
	[ "$status" -eq 0 ]
	net=$(printf '%s\n' "$output" | sed -nE 's/^ddp-check: ok \(network ([0-9.]+) s, total ([0-9.]+) s\)$/\1/p')
	[ -n "$net" ]
	echo "# network part: $net s" >&3
	awk -v t="$net" 'BEGIN { exit !(t <= 2.0) }'
	[ "$(printf '%s\n' "$output" | grep -c '^gpu: ')" -eq 1 ]
	[[ $output == *"gpu: skipped: no CUDA driver (libcuda.so.1) on the step's nodes"* ]]
}

@test "node2's link throttled to 50 Mbit/s with tbf: node2 is named as slow, the others are ok" {
	throttle node2
	run mc_run -- srun --nodes=3 --ntasks-per-node=2 --ddp "$check" --min-fraction "$fraction" --time-limit 20
	show
	[ "$status" -eq 1 ]
	printf '%s\n' "$output" | grep -qE '^node2 +2-3 +- +node3 +[0-9.e-]+ +[0-9.e-]+ +slow-send'
	printf '%s\n' "$output" | grep -qE '^node1 +0-1 +- +node2 .* ok$'
	printf '%s\n' "$output" | grep -qE '^node3 +4-5 +- +node1 .* ok$'
	[[ $output == *"node2: slow sending: "*" GB/s to node3, "*" GB/s to node1 (below 0.20 x "* ]]
	[[ $output == *"ddp-check: FAIL: node2 (slow-send"* ]]
	# Every rank ends with the same status.
	[ "$(printf '%s\n' "$output" | grep -c 'Exited with exit code 1')" -eq 3 ]
}

@test "256 ranks, node2's link throttled: node2 and only node2 is named, with no rank taken for hung" {
	local start kib
	throttle node2
	start=$(date +%s.%N)
	# The time limit leaves 256 ranks on two loaded cores room for the
	# check's work; libddp's waits for a peer are planned from the timed
	# links, not from it.
	run mc_run -- srun --nodes=3 --ntasks=256 --overcommit --ddp "$check" --min-fraction "$fraction" --time-limit 60
	echo "# srun -n 256 --ddp ddp-check, node2 throttled: $(elapsed "$start") s" >&3
	show
	[ "$status" -eq 1 ]
	printf '%s\n' "$output" | grep -qE '^node2 +[0-9]+-[0-9]+ +- +node3 +[0-9.e-]+ +[0-9.e-]+ +slow-send'
	printf '%s\n' "$output" | grep -qE '^node1 +0-[0-9]+ +- +node2 .* ok$'
	printf '%s\n' "$output" | grep -qE '^node3 +[0-9]+-255 +- +node1 .* ok$'
	# The verdict names node2 alone; every rank got through the
	# collectives after the link test.
	printf '%s\n' "$output" | grep -qE '^ddp-check: FAIL: node2 \(slow-send[a-z,-]*\)$'
	kib=$(ar_kib)
	echo "# allreduce of $kib KiB by the rule" >&3
	printf '%s\n' "$output" | grep -qE "^allreduce: 256 ranks, $kib KiB: "
	[[ $output != *"hang: "* ]]
	[[ $output != *"timed out after"* ]]
	[[ $output != *" limit of "*" reached"* ]]
}

@test "node3's job ports dropped: node1 names node3 unreachable" {
	block_job_ports node3
	run mc_run -- srun --nodes=3 --ntasks-per-node=2 --ddp "$check" --min-fraction "$fraction" --time-limit 10
	show
	[ "$status" -eq 1 ]
	# Rank 0 hands the rendezvous's roster to node3's ranks, so the join
	# already fails there; were the roster through, the link test would
	# name node3 in its problems the same way.
	printf '%s\n' "$output" | grep -qE '^(  |ddp-check: FAIL: )rank 0 on node1 cannot reach node3:[0-9]+ \(timed out\)$'
	printf '%s\n' "$output" | grep -qE '^ddp-check: FAIL: .*node3'
	[[ $output != *"FAIL: "*"node2"* ]]
}

@test "node2's job ports dropped: libddp's rendezvous cannot complete, and rank 0 names node2" {
	local start
	block_job_ports node2
	start=$(date +%s.%N)
	# The join waits up to its limit for ranks still starting: that bounds
	# how soon an unreachable node is named.
	run mc_run -- srun --nodes=3 --ntasks-per-node=2 --ddp "$check" --min-fraction "$fraction" --join-limit 6 --time-limit 30
	local took
	took=$(elapsed "$start")
	echo "# failed after $took s (join limit 6 s)" >&3
	show
	[ "$status" -eq 1 ]
	# Rank 0 hands the roster to node2's ranks and times out.
	printf '%s\n' "$output" | grep -qE '^ddp-check: FAIL: .*cannot reach node2:[0-9]+ \(timed out\)$'
	# The join limit ended it, not the time limit, which no rank reached.
	[[ $output != *"time limit of 30 s reached"* ]]
	awk -v t="$took" 'BEGIN { exit !(t < 30) }'
}

# json_agrees FILE VERDICT [NODE KIND]: FILE parses as JSON, its verdict
# is VERDICT, it counts every rank of $output's header as joined, and
# where NODE is given it holds a finding of KIND about NODE with figures.
json_agrees() {
	python3 - "$@" "$output" <<-'EOF'
		import json, re, sys
		path, verdict = sys.argv[1], sys.argv[2]
		node, kind = (sys.argv[3], sys.argv[4]) if len(sys.argv) > 5 else (None, None)
		printed = sys.argv[-1]
		with open(path) as f:
		    r = json.load(f)
		assert r["verdict"] == verdict, r["verdict"]
		m = re.search(r"^ddp-check: job \S+ step \S+: \d+ nodes?, (\d+) ranks? joined", printed, re.M)
		assert m and r["ranks"] == r["ranks_joined"] == int(m.group(1)), r
		assert [n["node"] for n in r["nodes"]] == re.findall(r"^(node\d) ", printed, re.M), r["nodes"]
		assert r["timings"]["total_s"] >= r["timings"]["network_s"] >= r["timings"]["join_s"] >= 0, r
		if node is None:
		    assert r["findings"] == [] and r["problems"] == [] and r["error"] is None, r
		else:
		    f = [x for x in r["findings"] if x["node"] == node and x["kind"] == kind]
		    assert f and f[0]["value"] > 0 and f[0]["median"] > 0 and f[0]["unit"] == "GB/s", r["findings"]
		    assert all(p in printed for p in r["problems"]), r["problems"]
	EOF
}

@test "a rank that starts late: rank 0 names its node while it waits; --json writes the report that was printed" {
	local out json pid rc=0 st=0
	out=$BATS_TEST_TMPDIR/late.out
	json=$(mc_state)/check.$BATS_TEST_NUMBER.$$.json
	rm -f "$json"
	new_gate
	# Rank 2 (node3) starts once the test has seen rank 0 wait for it.
	mc_run -- env GATE="$GATE" srun --nodes=3 --ntasks-per-node=1 --ddp \
		bash -c '[ "$RANK" != 2 ] || { '"$GATE_WAIT"'}; exec "$0" --min-fraction "$1" --json "$2"' \
		"$check" "$fraction" "$json" >"$out" 2>&1 &
	pid=$!
	wait_line "$out" '^ddp-check: 2 of 3 ranks joined; waiting for node3$' 30 || rc=1
	open_gate
	wait "$pid" || st=$?
	rm -f "$GATE"
	output=$(cat "$out")
	status=$st
	show
	[ "$rc" -eq 0 ]
	[ "$status" -eq 0 ]
	[[ $output == *"ddp-check: ok (network "* ]]
	json_agrees "$json" ok
	rm -f "$json"
}

@test "--json with node2 throttled: the file's verdict and findings are the printed FAIL's; a bad FILE is named" {
	local json
	json=$(mc_state)/check.$BATS_TEST_NUMBER.$$.json
	rm -f "$json"
	throttle node2
	run mc_run -- srun --nodes=3 --ntasks-per-node=1 --ddp "$check" --min-fraction "$fraction" --time-limit 20 --json "$json"
	show
	[ "$status" -eq 1 ]
	[[ $output == *"ddp-check: FAIL: node2 (slow-send"* ]]
	[[ $output != *"ranks joined; waiting for"* ]]
	json_agrees "$json" fail node2 link-send
	rm -f "$json"
	run "$check" --json /nonexistent/check.json
	[ "$status" -eq 2 ]
	[ "$output" = "ddp-check: --json /nonexistent/check.json: cannot write it: /nonexistent is not a directory (No such file or directory)" ]
}

@test "--json when a rank never joins: the file says fail, with the failure rank 0 printed" {
	local json error
	json=$(mc_state)/check.$BATS_TEST_NUMBER.$$.json
	rm -f "$json"
	# -K0: the program is bash, not ddp-check, so without it the plugin
	# would end the step at rank 0's exit 1 and srun would return 137.
	run mc_run -- srun -K0 --nodes=2 --ntasks-per-node=1 --ddp \
		bash -c '[ "$RANK" != 1 ] || exec sleep 5; exec "$0" --join-limit 3 --json "$1"' "$check" "$json"
	show
	[ "$status" -eq 1 ]
	error=$(python3 - "$json" <<-'EOF'
		import json, sys
		with open(sys.argv[1]) as f:
		    r = json.load(f)
		assert r["verdict"] == "fail" and r["ranks"] == 2 and r["ranks_joined"] == 0, r
		assert r["nodes"] == [] and r["findings"] == [] and r["timings"]["join_s"] is None, r
		print(r["error"])
	EOF
	)
	[ -n "$error" ]
	[[ $output == *"ddp-check: $error"* ]] || [[ $output == *"ddp-check: FAIL: $error"* ]]
	rm -f "$json"
}

@test "--mode warn: the problem is printed, every rank exits 0 and the program starts" {
	block_job_ports node3
	run mc_run -- srun --nodes=3 --ntasks-per-node=1 --ddp \
		bash -c '"$0" --mode warn --time-limit 10 && echo "rank $RANK: program started"' "$check"
	show
	[ "$status" -eq 0 ]
	[[ $output == *"rank 0 on node1 cannot reach node3:"*"(timed out)"* ]]
	[[ $output == *"ddp-check: WARN: node3 (unreachable); going on (--mode warn)"* ]]
	[ "$(printf '%s\n' "$output" | grep -c '^rank [0-2]: program started$')" -eq 3 ]
}

@test "bad option values fail at once with a message naming the option and what works" {
	run mc_run -- srun --nodes=2 --ntasks-per-node=1 --ddp "$check" --min-fraction 1.5
	show
	[ "$status" -eq 2 ]
	[ "$(printf '%s\n' "$output" | grep -c "^ddp-check: --min-fraction: invalid value '1.5' (use a number in (0, 1\], e.g. 0.5)$")" -eq 2 ]
	run "$check" --mode maybe
	[ "$status" -eq 2 ]
	[ "$output" = "ddp-check: --mode: invalid value 'maybe' (use fail, warn or off)" ]
	run "$check" --time-limit 0
	[ "$status" -eq 2 ]
	[[ $output == *"--time-limit: invalid value '0' (use whole seconds from 1 to 3600"* ]]
	run "$check" --gpu maybe
	[ "$status" -eq 2 ]
	run "$check" --link-ms=
	[ "$status" -eq 2 ]
	run "$check" --mode off
	[ "$status" -eq 0 ]
	[ -z "$output" ]
}

@test "a wedged munged: rank 0 hangs inside munge, and the join limit ends it" {
	local sock start took holder port r1
	port=$(free_port)
	sock=$(mktemp -u "$BATS_TEST_TMPDIR/munge.XXXXXX")
	r1=$BATS_TEST_TMPDIR/rank1
	# A socket that accepts and never answers, as a hung munged does.
	python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(64)
c = []
while True: c.append(s.accept()[0])' "$sock" &
	holder=$!
	for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done
	# Two ranks on this host: rank 1 joins, rank 0 asks munge for the
	# proof of itself it owes rank 1, and munge never answers.
	export WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port DDP_MUNGE_SOCKET=$sock
	RANK=1 "$check" --join-limit 2 --time-limit 30 >"$r1" 2>&1 &
	local rank1=$!
	start=$(date +%s.%N)
	run env RANK=0 "$check" --join-limit 2 --time-limit 30
	took=$(elapsed "$start")
	wait "$rank1" || true
	show
	cat "$r1" >&2
	if [ "$status" -eq 1 ] && [[ $output == *"ddp-check: rank 0 on "*": join limit of 2 s reached while joining the rendezvous"* ]]; then
		# --mode warn: the same hang ends with status 0, so the program starts.
		RANK=1 "$check" --join-limit 1 --mode warn >"$r1" 2>&1 &
		rank1=$!
		run env RANK=0 "$check" --join-limit 1 --mode warn
		wait "$rank1" || true
		show
	else
		status=99
	fi
	kill "$holder"
	wait "$holder" 2>/dev/null || true
	[ "$status" -eq 0 ]
	[[ $output == *"join limit of 1 s reached while joining the rendezvous"* ]]
	echo "# rank 0 ended after $took s (join limit 2 s)" >&3
	# At the join limit, not before (the process's start rounds a little),
	# and ended by it: the time limit (30 s) never came.
	awk -v t="$took" 'BEGIN { exit !(t >= 1.9 && t < 30) }'
}

# started: how many ranks printed "rank N: program started".
started() { printf '%s\n' "$output" | grep -c '^rank [0-9]*: program started$' || true; }

@test "srun --ddp-check: every rank checks before the program; the table, then the program on every rank" {
	local start
	start=$(date +%s.%N)
	run mc_run -- srun --nodes=3 --ntasks-per-node=2 --ddp-check hostname
	echo "# srun --nodes=3 --ntasks-per-node=2 --ddp-check hostname: $(elapsed "$start") s" >&3
	show
	[ "$status" -eq 0 ]
	[[ $output == *"ddp-check: job "*": 3 nodes, 6 ranks joined node1:"*" (the step key)"* ]]
	[[ $output == *"node   ranks  gpus  next   out GB/s  back GB/s  status"* ]]
	[[ $output == *"ddp-check: ok (network "* ]]
	local node
	for node in node1 node2 node3; do
		[ "$(printf '%s\n' "$output" | grep -c "^$node$")" -eq 2 ]
	done
	# (srun interleaves the nodes' output: another node's hostname may
	# come before rank 0's table, but never before the check ended.)
}

@test "--ddp-check rendezvous on a port of its own, in port_range, never the program's MASTER_PORT" {
	local checked master range
	run mc_run -- srun --nodes=2 --ntasks-per-node=1 --ddp-check --ddp-verbose \
		bash -c 'echo "rank $RANK: MASTER_PORT=$MASTER_PORT"'
	show
	[ "$status" -eq 0 ]
	# The port ddp-check's rank 0 listened on, as its report names it.
	checked=$(sed -nE 's/^ddp-check: job .* joined node1:([0-9]+) \(.*$/\1/p' <<<"$output")
	master=$(sed -nE 's/^rank 0: MASTER_PORT=([0-9]+)$/\1/p' <<<"$output")
	echo "# ddp-check listened on $checked, the program got MASTER_PORT=$master" >&3
	[ -n "$checked" ] && [ -n "$master" ]
	[ "$checked" -ne "$master" ]
	[ "$(grep -c "^rank [01]: MASTER_PORT=$master$" <<<"$output")" -eq 2 ]
	[[ $output == *"master=node1:$master check_port=$checked"* ]]
	# Both in port_range, which the Prolog opens to the job's nodes.
	range=$(awk -F' *= *' '$1 == "port_range" { print $2 }' "$(mc_state)/etc/ddp.conf")
	[ -n "$range" ]
	[ "$checked" -ge "${range%-*}" ] && [ "$checked" -le "${range#*-}" ]
	[ "$master" -ge "${range%-*}" ] && [ "$master" -le "${range#*-}" ]
}

@test "--ddp-check with node2 throttled: the step ends non-zero naming node2, the program never starts; warn starts it" {
	throttle node2
	run mc_run -- srun --nodes=3 --ntasks-per-node=2 --ddp-check \
		bash -c 'echo "rank $RANK: program started"'
	show
	[ "$status" -ne 0 ]
	printf '%s\n' "$output" | grep -qE '^node2 +2-3 +- +node3 +[0-9.e-]+ +[0-9.e-]+ +slow-send'
	[[ $output == *"ddp-check: FAIL: node2 (slow-send"* ]]
	[[ $output == *"ddp: node"[123]": --ddp-check found a problem (see the report): the program was not started"* ]]
	[ "$(started)" -eq 0 ]

	run mc_run -- srun --nodes=3 --ntasks-per-node=2 --ddp-check=warn \
		bash -c 'echo "rank $RANK: program started"'
	show
	[ "$status" -eq 0 ]
	[[ $output == *"ddp-check: WARN: node2 (slow-send"*"; going on (--mode warn)"* ]]
	[ "$(started)" -eq 6 ]
}

@test "--ddp-check=maybe fails in srun before anything launches, naming the option and what works" {
	run mc_run -- srun --nodes=2 --ntasks-per-node=1 --ddp-check=maybe \
		bash -c 'echo "rank $RANK: program started"'
	show
	[ "$status" -ne 0 ]
	[[ $output == *"--ddp-check=maybe: unknown mode; use --ddp-check (fail: end the step on a problem), --ddp-check=requeue (as fail, and a batch job that may be requeued starts again without the bad node), --ddp-check=warn (report it and start the program) or --ddp-check=off"* ]]
	[ "$(started)" -eq 0 ]
	[[ $output != *"ddp-check: job "* ]]
}

@test "ddp.conf's check is the default of --ddp steps; --ddp-check=off overrides it; a bad value fails in srun" {
	local conf
	conf=$(mc_state)/etc/ddp.conf
	conf_saved=$BATS_TEST_TMPDIR/ddp.conf
	cp "$conf" "$conf_saved"
	printf '%s\n' "check = warn" "check_min_fraction = 0.25" "check_time_limit = 10" >>"$conf"
	run mc_run -- srun --nodes=2 --ntasks-per-node=1 --ddp \
		bash -c 'echo "rank $RANK: program started"'
	show
	[ "$status" -eq 0 ]
	[[ $output == *"node   ranks  gpus  next   out GB/s  back GB/s  status"* ]]
	[[ $output == *"below 0.25 x"* || $output == *"ddp-check: ok (network "* ]]
	[ "$(started)" -eq 2 ]

	run mc_run -- srun --nodes=2 --ntasks-per-node=1 --ddp --ddp-check=off \
		bash -c 'echo "rank $RANK: program started"'
	show
	[ "$status" -eq 0 ]
	[[ $output != *"ddp-check"* ]]
	[ "$(started)" -eq 2 ]

	# Steps without --ddp are not checked.
	run mc_run -- srun --nodes=2 --ntasks-per-node=1 bash -c 'echo "rank ${RANK:-none}"'
	show
	[ "$status" -eq 0 ]
	[[ $output != *"ddp-check"* ]]

	wait_no_jobs 60
	printf '%s\n' "check = maybe" >>"$conf"
	run mc_run -- srun --nodes=2 --ntasks-per-node=1 --ddp \
		bash -c 'echo "rank $RANK: program started"'
	show
	[ "$status" -ne 0 ]
	[[ $output == *"ddp.conf:"*": check: invalid value 'maybe': expected fail, requeue, warn or off"* ]]
	[ "$(started)" -eq 0 ]
}
