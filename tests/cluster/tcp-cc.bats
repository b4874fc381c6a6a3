#!/usr/bin/env bats
# minicluster up --tcp-cc ALG: every node's network namespace uses that
# TCP congestion control (bench/run's BENCH_TCP_CC), and up without it
# gives them the machine's again.

load common

# A congestion control of this kernel other than the one namespaces get
# by default, one the namespaces may not pick yet if there is one (so up
# has to allow it); empty when there is none.
other_cc() {
	local dflt allowed cc pick=""
	dflt=$(cat /proc/sys/net/ipv4/tcp_congestion_control)
	allowed=" $(cat /proc/sys/net/ipv4/tcp_allowed_congestion_control) "
	for cc in $(cat /proc/sys/net/ipv4/tcp_available_congestion_control); do
		[ "$cc" != "$dflt" ] || continue
		[[ $allowed == *" $cc "* ]] || { echo "$cc"; return 0; }
		[ -n "$pick" ] || pick=$cc
	done
	echo "$pick"
}

@test "up --tcp-cc gives every node that congestion control, and up without it the machine's again" {
	local cc dflt
	cc=$(other_cc)
	[ -n "$cc" ] || skip "this kernel has one congestion control only: $(cat /proc/sys/net/ipv4/tcp_available_congestion_control)"
	dflt=$(cat /proc/sys/net/ipv4/tcp_congestion_control)
	mc_up --nodes 2 --gpus-per-node 2 --tcp-cc "$cc"
	[ "$(mc_exec node1 -- cat /proc/sys/net/ipv4/tcp_congestion_control)" = "$cc" ]
	[ "$(mc_exec node2 -- cat /proc/sys/net/ipv4/tcp_congestion_control)" = "$cc" ]
	[[ " $(cat /proc/sys/net/ipv4/tcp_allowed_congestion_control) " == *" $cc "* ]]
	# A connection between the nodes runs with it, at both ends.
	(timeout 15 "$MC" exec node2 -- iperf3 -s -1 -p 5992 >/dev/null 2>&1 &)
	local _
	for _ in $(seq 100); do
		[ -z "$(mc_exec node2 -- ss -Htln 'sport = :5992')" ] || break
		sleep 0.1
	done
	run timeout 10 "$MC" exec node1 -- iperf3 -c node2 -p 5992 -t 1 -J
	[ "$status" -eq 0 ] || { show; false; }
	[[ $output == *"\"sender_tcp_congestion\":"*"\"$cc\""* ]] || { show; false; }
	[[ $output == *"\"receiver_tcp_congestion\":"*"\"$cc\""* ]] || { show; false; }
	mc_up --nodes 2 --gpus-per-node 2
	[ "$(mc_exec node1 -- cat /proc/sys/net/ipv4/tcp_congestion_control)" = "$dflt" ]
}

