# Shared helpers for the cluster tests (bats). Source it from a .bats file:
#   load common
# Each file brings the cluster up in setup_file with the shape it needs
# (`up` is idempotent, so files sharing a shape share one cluster) and leaves
# it up for the next file; the runner's last suite takes it down.

repo_root=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
# shellcheck disable=SC2034 # used by the .bats files
shared_dir=$(cd "$repo_root/.." && pwd)/shared
MC="$repo_root/tests/cluster/minicluster"

# mc_up [ARGS]: brings the cluster up, failing the file when it cannot.
mc_up() {
	"$MC" up "$@" >&3 2>&1 || {
		echo "minicluster up $* failed" >&2
		return 1
	}
}

# mc_run [--user U] -- CMD...: runs CMD on the login host (bats `run` it).
mc_run() { "$MC" run "$@"; }

# mc_exec NODE [--user U] -- CMD...: runs CMD inside one node.
mc_exec() { "$MC" exec "$@"; }

# mc_state: the cluster's state folder.
mc_state() { "$MC" state-dir; }

# require_plugin / require_prolog: skip (with the reason) when the staged
# installation lacks the part a test exercises.
require_plugin() {
	grep -q spank_ddp "$(mc_state)/etc/plugstack.conf" ||
		skip "spank_ddp.so is not in the staged install (run: make stage)"
}
require_prolog() {
	grep -q '^Prolog=' "$(mc_state)/etc/slurm.conf" ||
		skip "the ddp prolog is not in the staged install (run: make stage)"
}

# show: echoes bats' $output on failure, so a failing assertion explains itself.
# shellcheck disable=SC2154 # bats sets status and output
show() { printf '%s\n' "status=$status" "$output" >&2; }

# put_conf FILE: replaces FILE with standard input in one rename. The
# prolog and epilog of a job that just ended read ddp.conf while a test
# rewrites it: truncating in place lets them read an empty file, run with
# the defaults (another state_dir) and leave that job's firewall state.
put_conf() {
	local tmp
	tmp=$(mktemp "$1.XXXXXX") || return 1
	cat >"$tmp" && chmod 0644 "$tmp" && mv -f "$tmp" "$1"
}

# iface NODE: the node's interface on the cluster bridge (not lo).
iface() {
	mc_exec "$1" -- ip -o link show | awk -F': ' '$2 != "lo" { sub(/@.*/, "", $2); print $2; exit }'
}

# throttle NODE / unthrottle NODE: NODE's link limited to 50 Mbit/s with
# tbf, about 100x slower than a healthy link of the minicluster, and back.
throttle() {
	mc_exec "$1" -- tc qdisc add dev "$(iface "$1")" root tbf rate 50mbit burst 32kbit latency 400ms
}
unthrottle() {
	mc_exec "$1" -- tc qdisc del dev "$(iface "$1")" root 2>/dev/null || true
}

# check_conf_file FRACTION (setup_file) / check_conf_file_restore
# (teardown_file): ddp.conf with check_min_fraction = FRACTION for the
# file's tests, then as it was. The minicluster's nodes share two cores:
# healthy links differ by 2x from run to run, a throttled one is 100x
# slower.
check_conf_file() {
	local conf
	conf=$(mc_state)/etc/ddp.conf
	cp "$conf" "$BATS_FILE_TMPDIR/ddp.conf.orig"
	printf '%s\n' "check_min_fraction = $1" >>"$conf"
}
check_conf_file_restore() {
	put_conf "$(mc_state)/etc/ddp.conf" <"$BATS_FILE_TMPDIR/ddp.conf.orig"
}

# job_field JOB KEY: KEY=value from scontrol show job, or nothing.
job_field() {
	mc_run -- scontrol show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1
}

# wait_done JOB SECONDS: until the job completed or failed.
wait_done() {
	local state
	for _ in $(seq "$2"); do
		state=$(job_field "$1" JobState)
		case "$state" in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL) echo "$state"; return 0 ;; esac
		sleep 1
	done
	echo "still ${state:-unknown} after $2 s"
	return 1
}

# wait_line FILE REGEX SECONDS: waits until a line of FILE matches REGEX
# (grep -E), at most SECONDS; fails after that, printing the file.
wait_line() {
	local deadline=$((SECONDS + $3))
	until grep -qE -- "$2" "$1" 2>/dev/null; do
		if [ "$SECONDS" -ge "$deadline" ]; then
			echo "no line matching '$2' in $1 within $3 s:" >&2
			cat "$1" >&2 2>/dev/null || true
			return 1
		fi
		sleep 0.1
	done
}

# wait_listening NODE PORT SECONDS: waits until a process listens on TCP
# PORT inside NODE, at most SECONDS.
wait_listening() {
	local deadline=$((SECONDS + $3))
	until [ -n "$(mc_exec "$1" -- ss -Htln "sport = :$2")" ]; do
		if [ "$SECONDS" -ge "$deadline" ]; then
			echo "nothing listens on $1:$2 within $3 s" >&2
			return 1
		fi
		sleep 0.2
	done
}

# Ranks that must wait for the test start with "$GATE_WAIT" (a shell
# snippet, for bash -c): it waits until the file $GATE exists, which
# open_gate makes, at most 120 s. GATE is in the cluster's state folder,
# which every node sees.
# shellcheck disable=SC2016,SC2034 # expanded by the ranks' shell; used by the .bats files
GATE_WAIT='for _ in $(seq 1200); do [ -e "$GATE" ] && break; sleep 0.1; done; '
new_gate() { GATE=$(mc_state)/gate.$BATS_TEST_NUMBER.$$; rm -f "$GATE"; }
open_gate() { touch "$GATE"; }

# wait_no_jobs SECONDS: waits until squeue lists no job (every job's
# epilog has ended: a job stays listed, COMPLETING, until it has), at
# most SECONDS. A test that breaks ddp.conf waits so first: an epilog
# that reads the broken file leaves its job's firewall elements behind.
wait_no_jobs() {
	local deadline=$((SECONDS + $1))
	while [ -n "$(mc_run -- squeue -h -o %i)" ]; do
		if [ "$SECONDS" -ge "$deadline" ]; then
			echo "jobs still listed after $1 s: $(mc_run -- squeue -h -o '%i %T')" >&2
			return 1
		fi
		sleep 0.2
	done
}
