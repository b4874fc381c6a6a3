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
