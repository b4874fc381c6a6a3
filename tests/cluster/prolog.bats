#!/usr/bin/env bats
# SPDX-License-Identifier: BSD-3-Clause
# The slurm-ddp Prolog/Epilog on the minicluster, installed as a site would:
# per-job firewall between the job's nodes only, shared dir and scratch,
# many jobs leaving nothing behind, drain on a missing share, reconcile.
# shellcheck source=tests/cluster/common.bash
source "$BATS_TEST_DIRNAME/common.bash"

setup_file() {
	mc_up --nodes 3 --gpus-per-node 4
}

setup() {
	require_prolog
	st=$(mc_state)
	# The staged helper sits next to the staged scripts the wrapper runs.
	local target
	target=$(sed -n "s/^exec '\(.*\)' \"\$@\"$/\1/p" "$st/etc/prolog")
	helper=$(dirname "$target")/../../sbin/ddp-nodectl
	[ -x "$helper" ] || skip "ddp-nodectl not staged next to $target"
	jobs_file=$BATS_FILE_TMPDIR/jobs.$BATS_TEST_NUMBER
	listener_pid=$BATS_FILE_TMPDIR/listener.$BATS_TEST_NUMBER
	wait_quiet
}

# A failed test must not leave its jobs (and so their firewall elements,
# scratch and nodes) to the next one: cancel what it started.
teardown() {
	local id
	if [ -s "$listener_pid" ]; then
		kill "$(cat "$listener_pid")" 2>/dev/null || true
	fi
	[ -s "$jobs_file" ] || return 0
	while read -r id; do
		mc_run -- scancel "$id" 2>/dev/null || true
	done <"$jobs_file"
	while read -r id; do
		wait_gone "$id" || echo "teardown: job $id still listed 30 s after scancel" >&2
	done <"$jobs_file"
	# A node a failed test left drained by the prolog ("ddp: ...").
	local node reason
	while read -r node reason; do
		[[ $reason == ddp:* ]] || continue
		echo "teardown: resuming $node, drained: $reason" >&2
		mc_run -- scontrol update NodeName="$node" State=RESUME || true
	done < <(mc_run -- sinfo -h -N -t drain,drained,draining -o '%N %E' 2>/dev/null)
}

# track JOBID: teardown cancels JOBID (works from a $(...) subshell).
track() { echo "$1" >>"$jobs_file"; }

# elements NODE [JOBID]: number of firewall elements on NODE tagged with
# JOBID, or with any job. An element serves every job that needs it and
# carries the comment of the lowest such job (nodectl.h, nc_fw_sync_script):
# a job's own tag shows only while no lower job with the same peers lives.
elements() {
	local tag="comment \"job=${2:+$2\"}"
	mc_exec "$1" -- nft list ruleset | grep -cF "$tag" || true
}

# wait_quiet: waits up to 30 s until no job is listed and no node has a
# job-tagged element (an earlier suite's or test's epilogs done), else fails
# naming what is left: every test here starts from an idle cluster. Once
# that failed in this file, later tests wait 2 s only.
wait_quiet() {
	local n left deadline=$((SECONDS + 30)) marker=$BATS_FILE_TMPDIR/not-quiet
	[ -e "$marker" ] && deadline=$((SECONDS + 2))
	while :; do
		left=$(mc_run -- squeue -h -o '%i %T %R' 2>/dev/null || echo "squeue failed")
		for n in $(mc_run -- sinfo -h -N -o %N 2>/dev/null | sort -u); do
			[ "$(elements "$n")" -eq 0 ] || left+=" $n:$(elements "$n")-elements"
		done
		[ -z "${left// /}" ] && return 0
		[ "$SECONDS" -lt "$deadline" ] || break
		sleep 0.2
	done
	echo "cluster not idle before the test: $left" >&2
	touch "$marker"
	return 1
}

# connect NODE HOST PORT: open, refused or timeout, from inside NODE.
connect() {
	mc_exec "$1" -- "$repo_root/tests/lib/tcp-probe" "$2" "$3"
}

# wait_state JOBID STATE: waits up to 30 s for the job to reach STATE.
wait_state() {
	local i
	for i in $(seq 150); do
		[ "$(mc_run -- squeue -h -j "$1" -o %T 2>/dev/null)" = "$2" ] && return 0
		sleep 0.2
	done
	return 1
}

# wait_elements NODE JOBID: waits up to 30 s for the job's firewall
# elements on NODE (the prolog may still run when the job is RUNNING).
wait_elements() {
	local i
	for i in $(seq 150); do
		[ "$(elements "$1" "$2")" -ge 1 ] && return 0
		sleep 0.2
	done
	echo "$1: no firewall element for job $2 after 30 s" >&2
	return 1
}

# wait_gone JOBID: waits up to 30 s until squeue no longer lists the job.
wait_gone() {
	local i
	for i in $(seq 150); do
		[ -z "$(mc_run -- squeue -h -j "$1" -o %T 2>/dev/null)" ] && return 0
		sleep 0.2
	done
	return 1
}

# wait_no_scratch NODE JOBID: waits up to 30 s until NODE has no scratch
# directory for the job.
wait_no_scratch() {
	local i
	for i in $(seq 150); do
		mc_exec "$1" -- test -e "$st/scratch/$2" || return 0
		sleep 0.2
	done
	echo "$1: $st/scratch/$2 still there" >&2
	return 1
}

# wait_epilog NODE JOBID: waits up to 30 s for the job's epilog on NODE
# to end: it removes the job's scratch directory last, once the job's
# firewall elements are gone.
wait_epilog() { wait_no_scratch "$@"; }

# listen_node1: a listener on node1:29500 that accepts (so its queue never
# fills) for at most 40 s, started before it returns; SO_REUSEADDR, since
# an earlier test's connections may hold the port in TIME_WAIT. teardown
# ends it by its pid.
listen_node1() {
	mc_exec node1 -- python3 -c '
import os, socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 29500)); s.listen(8); s.settimeout(0.5)
with open(sys.argv[1] + ".tmp", "w") as f: f.write(str(os.getpid()))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
end = time.time() + 40
while time.time() < end:
    try: s.accept()[0].close()
    except socket.timeout: pass' "$listener_pid" >/dev/null 2>&1 3>&- &
	for _ in $(seq 100); do
		[ -s "$listener_pid" ] && break
		sleep 0.1
	done
	[ -s "$listener_pid" ]
}

submit() { # submit SBATCH-ARGS...: prints the job id, tracked for teardown
	local id
	id=$(mc_run --user ddptest -- sbatch --parsable -o /dev/null "$@") || return 1
	track "$id"
	echo "$id"
}

@test "job peers reach the master port, a node outside the job is refused" {
	local id
	id=$(submit -N2 -w 'node[1-2]' --wrap 'srun sleep 60')
	wait_state "$id" RUNNING
	# RUNNING comes with reason "Prolog" while the prolog still runs:
	# wait for its openings on both nodes.
	wait_elements node1 "$id"
	wait_elements node2 "$id"
	listen_node1
	run connect node2 node1 29500
	show
	[ "$output" = open ]
	run connect node3 node1 29500
	show
	[ "$output" = refused ]
	mc_run -- scancel "$id"
	wait_gone "$id"
	wait_epilog node1 "$id"
	wait_epilog node2 "$id"
	[ "$(elements node1 "$id")" -eq 0 ]
	[ "$(elements node2 "$id")" -eq 0 ]
	run connect node2 node1 29500
	show
	[ "$output" = refused ]
}

# has_state NODE JOBID: NODE's prolog recorded JOBID's firewall state.
has_state() {
	# shellcheck disable=SC2016 # expanded inside the node
	mc_exec "$1" -- sh -c 'test -f "$1/ddp-state/net-$(stat -L -c %i /proc/self/ns/net)/job.$2"' \
		sh "$st" "$2"
}

@test "a second job on the same nodes takes over the elements it shares with the first, and keeps them when the first ends" {
	local a b n i
	a=$(submit -N2 -w 'node[1-2]' --wrap 'srun sleep 60')
	wait_state "$a" RUNNING
	wait_elements node1 "$a"
	n=$(elements node1 "$a")
	b=$(submit -N2 -w 'node[1-2]' --wrap 'srun sleep 60')
	wait_state "$b" RUNNING
	for i in $(seq 150); do
		has_state node1 "$b" && break
		sleep 0.2
	done
	has_state node1 "$b"
	# One element per peer and range, owned by the job whose opening
	# expires last: the second.
	wait_elements node1 "$b"
	[ "$(elements node1 "$b")" -eq "$n" ]
	[ "$(elements node1 "$a")" -eq 0 ]
	mc_run -- scancel "$a"
	wait_gone "$a"
	wait_epilog node1 "$a"
	# The first job's epilog leaves them with the second.
	[ "$(elements node1 "$b")" -eq "$n" ]
	[ "$(elements node1 "$a")" -eq 0 ]
	mc_run -- scancel "$b"
	wait_gone "$b"
	for i in $(seq 150); do
		[ "$(elements node1)" -eq 0 ] && break
		sleep 0.2
	done
	[ "$(elements node1)" -eq 0 ]
}

@test "two jobs on the same nodes: the first one's end leaves the second one's peer open" {
	local a b
	# Same nodes, same ports: on node1 both need the same element.
	a=$(submit -N2 -w 'node[1-2]' --wrap 'srun sleep 60')
	b=$(submit -N2 -w 'node[1-2]' --wrap 'srun sleep 60')
	wait_state "$a" RUNNING
	wait_state "$b" RUNNING
	wait_elements node1 "$b"
	listen_node1
	mc_run -- scancel "$a"
	wait_gone "$a"
	wait_epilog node1 "$a"
	[ "$(elements node1 "$a")" -eq 0 ]
	[ "$(elements node1 "$b")" -ge 1 ]
	run connect node2 node1 29500
	show
	[ "$output" = open ]
	mc_run -- scancel "$b"
	wait_gone "$b"
	wait_epilog node1 "$b"
	wait_epilog node2 "$b"
	[ "$(elements node1)" -eq 0 ]
	run connect node2 node1 29500
	show
	[ "$output" = refused ]
}

@test "shared dir is the user's, mode 0700, during the job; scratch gone after" {
	run mc_run --user ddptest -- srun -N2 -w 'node[1-2]' bash -c \
		'stat -c "%U %a" "'"$st"'/shared/ddptest/$SLURM_JOB_ID" "'"$st"'/scratch/$SLURM_JOB_ID"; echo "job $SLURM_JOB_ID"'
	show
	[ "$status" -eq 0 ]
	[ "$(printf '%s\n' "$output" | grep -cx 'ddptest 700')" -eq 4 ]
	local id
	id=$(printf '%s\n' "$output" | sed -n 's/^job //p' | head -n 1)
	[ -d "$st/shared/ddptest/$id" ]
	# The epilog (the job's end, after srun returns) removes scratch
	# last, once the firewall elements are gone.
	wait_no_scratch node1 "$id"
	wait_no_scratch node2 "$id"
}

@test "20 jobs in a row and 5 at once leave no element, scratch or lock" {
	local i pids=() n
	for i in $(seq 20); do
		mc_run --user ddptest -- srun -N2 -w 'node[1-2]' true
	done
	for i in $(seq 5); do
		mc_run --user ddptest -- srun -N3 true & pids+=($!)
	done
	for i in "${pids[@]}"; do wait "$i"; done
	for n in node1 node2 node3; do
		# Scratch goes last in each epilog: once none is left, every
		# epilog is done.
		for i in $(seq 150); do
			[ -z "$(mc_exec "$n" -- ls -A "$st/scratch")" ] && break
			sleep 0.2
		done
		run mc_exec "$n" -- ls -A "$st/scratch"
		show
		[ -z "$output" ]
		[ "$(elements "$n")" -eq 0 ]
		run mc_exec "$n" -- sh -c \
			'flock -n "$1/ddp-state/net-$(stat -L -c %i /proc/self/ns/net)/lock" true' sh "$st"
		show
		[ "$status" -eq 0 ]
	done
}

@test "shared root not mounted: drained with the reason, job requeued held" {
	local id conf=$st/etc/ddp.conf
	cp "$conf" "$BATS_FILE_TMPDIR/ddp.conf.saved"
	grep -qx "shared_mount = $st/shared" "$conf"
	# Unmount the share in node3 only, keeping a hold on it there (each
	# node has its own mount namespace) to put it back afterwards.
	mc_exec node3 -- mkdir -p "$st/nodes/node3/held-shared"
	mc_exec node3 -- mount --bind "$st/shared" "$st/nodes/node3/held-shared"
	mc_exec node3 -- umount "$st/shared"
	id=$(submit -N1 -w node3 --wrap true)
	local i reason=""
	for i in $(seq 100); do
		reason=$(mc_run -- sinfo -h -n node3 -o '%E')
		[[ $reason == ddp:* ]] && break
		sleep 0.2
	done
	# Restore the share in node3 and the configuration before asserting.
	mc_exec node3 -- mount --bind "$st/nodes/node3/held-shared" "$st/shared"
	mc_exec node3 -- umount "$st/nodes/node3/held-shared"
	put_conf "$conf" <"$BATS_FILE_TMPDIR/ddp.conf.saved"
	echo "reason: $reason" >&2
	[ "$reason" = "ddp: $st/shared not mounted" ]
	run mc_run -- sinfo -h -n node3 -o '%T'
	show
	[[ $output == drain* ]]
	for i in $(seq 50); do
		run mc_run -- squeue -h -j "$id" -o '%T %r'
		[[ $output == *held* ]] && break
		sleep 0.2
	done
	show
	[[ $output == "PENDING "*held* ]]
	mc_run -- scancel "$id"
	mc_run -- scontrol update NodeName=node3 State=RESUME
	# The epilog of that job, run twice by hand, succeeds both times.
	run mc_exec node3 -- env SLURM_JOB_ID="$id" SLURMD_NODENAME=node3 "$st/etc/epilog"
	[ "$status" -eq 0 ]
	run mc_exec node3 -- env SLURM_JOB_ID="$id" SLURMD_NODENAME=node3 "$st/etc/epilog"
	[ "$status" -eq 0 ]
}

@test "reconcile removes elements planted for a job that is not running" {
	mc_exec node1 -- env DDP_CONF="$st/etc/ddp.conf" "$helper" install
	mc_exec node1 -- nft add element inet ddp peers4 \
		'{ 172.30.77.13 . 29400-29999 timeout 1h comment "job=99999" }'
	[ "$(elements node1 99999)" -eq 1 ]
	run mc_exec node1 -- env DDP_CONF="$st/etc/ddp.conf" SLURM_CONF="$st/etc/slurm.conf" \
		"$helper" reconcile --listpids
	show
	[ "$status" -eq 0 ]
	[ "$(elements node1 99999)" -eq 0 ]
}

# reconcile_on NODE ARGS...: ddp-nodectl reconcile inside NODE with the
# cluster's configuration (bats `run` it).
reconcile_on() {
	local node=$1
	shift
	mc_exec "$node" -- env DDP_CONF="$st/etc/ddp.conf" SLURM_CONF="$st/etc/slurm.conf" \
		"$helper" reconcile "$@"
}

@test "reconcile keeps running jobs' scratch and elements on a node where they have no step" {
	local batch alloc n_batch n_alloc
	# A batch job runs its script on node1 only; an salloc job without a
	# shell runs nothing anywhere. Neither has a step on node2.
	batch=$(submit -N2 -w 'node[1-2]' --wrap 'sleep 120')
	run mc_run --user ddptest -- salloc --no-shell -N2 -w 'node[2-3]' -t 5
	show
	alloc=$(printf '%s\n' "$output" | sed -n 's/.*Granted job allocation \([0-9]*\).*/\1/p')
	[ -n "$alloc" ]
	track "$alloc"
	wait_state "$batch" RUNNING
	wait_state "$alloc" RUNNING
	wait_elements node2 "$batch"
	wait_elements node2 "$alloc"
	n_batch=$(elements node2 "$batch")
	n_alloc=$(elements node2 "$alloc")
	[ "$n_batch" -ge 1 ]
	[ "$n_alloc" -ge 1 ]
	mc_exec node2 -- test -d "$st/scratch/$batch"
	mc_exec node2 -- test -d "$st/scratch/$alloc"
	run reconcile_on node2 --listpids --grace 0
	show
	[ "$status" -eq 0 ]
	run mc_exec node2 -- test -d "$st/scratch/$batch"
	[ "$status" -eq 0 ]
	run mc_exec node2 -- test -d "$st/scratch/$alloc"
	[ "$status" -eq 0 ]
	[ "$(elements node2 "$batch")" -eq "$n_batch" ]
	[ "$(elements node2 "$alloc")" -eq "$n_alloc" ]
	# slurmctld cannot be asked: nothing goes either.
	run mc_exec node2 -- env DDP_CONF="$st/etc/ddp.conf" SLURM_CONF=/nonexistent/slurm.conf \
		"$helper" reconcile --squeue --grace 0
	show
	[ "$status" -eq 1 ]
	[[ $output == *"cannot tell which jobs run on node2: nothing removed"* ]]
	[ "$(elements node2 "$alloc")" -eq "$n_alloc" ]
	run mc_exec node2 -- test -d "$st/scratch/$alloc"
	[ "$status" -eq 0 ]
	# The allocation's next step still reaches across its nodes.
	run mc_run --user ddptest -- srun --jobid "$alloc" -N2 -w 'node[2-3]' \
		bash -c 'test -d "'"$st"'/scratch/$SLURM_JOB_ID" && echo scratch-ok'
	show
	[ "$(printf '%s\n' "$output" | grep -c scratch-ok)" -eq 2 ]
	mc_run -- scancel "$batch" "$alloc"
	wait_gone "$batch"
	wait_gone "$alloc"
	wait_epilog node2 "$batch"
	wait_epilog node2 "$alloc"
	[ "$(elements node2 "$batch")" -eq 0 ]
	[ "$(elements node2 "$alloc")" -eq 0 ]
}

@test "a shared user dir open to others: no job dir made in it, the job runs, no drain" {
	local saved=""
	if [ -e "$st/shared/ddptest" ]; then
		saved=$st/shared/ddptest.saved.$$
		mv "$st/shared/ddptest" "$saved"
	fi
	mkdir -m 0700 "$st/shared/ddptest"
	chown ddptest: "$st/shared/ddptest"
	chmod go+w "$st/shared/ddptest"
	run mc_run --user ddptest -- srun -N1 -w node1 echo ran
	local out=$output rc=$status entries state
	entries=$(ls -A "$st/shared/ddptest")
	state=$(mc_run -- sinfo -h -n node1 -o %T)
	rm -rf "$st/shared/ddptest"
	[ -z "$saved" ] || mv "$saved" "$st/shared/ddptest"
	echo "srun: $rc $out; entries '$entries'; node1 $state" >&2
	[ "$rc" -eq 0 ]
	[[ $out == *ran* ]]
	[ -z "$entries" ]
	[[ $state != drain* ]]
}

# The job's user on their step's key file (T5-1 of issue 34): they try to
# open it for writing and appending, to chmod it, to grow it until the
# file system of state_dir (the minicluster's 16 MiB tmpfs, as a site's
# /run) is full, and to hold it open under a read lease, which made the
# next Prolog's truncation fail (EWOULDBLOCK) while the user's descriptor
# kept the blocks. SIGIO is ignored: a lease break must not end the
# holder. Prints one line per attempt, the key's owner and size, READY,
# then waits for the gate with the key open.
# shellcheck disable=SC2016 # python, not shell
keyhold_py='
import errno, fcntl, os, signal, sys, time
k = os.environ["DDP_STEP_KEY_FILE"]
signal.signal(signal.SIGIO, signal.SIG_IGN)
def attempt(what, fn):
    try:
        r = fn()
        print(what, "ok", flush=True)
        return r
    except OSError as e:
        print(what, errno.errorcode[e.errno], flush=True)
        return None
fd = attempt("write", lambda: os.open(k, os.O_WRONLY))
if fd is not None:
    os.close(fd)
attempt("chmod", lambda: os.chmod(k, 0o600))
fd = attempt("append", lambda: os.open(k, os.O_WRONLY | os.O_APPEND))
if fd is not None:
    try:
        while True:
            os.write(fd, b"\0" * (1 << 20))
    except OSError as e:
        print("grown until", errno.errorcode[e.errno], flush=True)
    os.close(fd)
rfd = os.open(k, os.O_RDONLY)
attempt("lease", lambda: fcntl.fcntl(rfd, fcntl.F_SETLEASE, fcntl.F_RDLCK))
st = os.fstat(rfd)
print("owner", st.st_uid, "size", st.st_size, flush=True)
print("READY", flush=True)
while not os.path.exists(os.environ["GATE"]):
    time.sleep(0.1)
'

@test "the job's user cannot write, grow, chmod or lease the step key (root's); another job's Prolog on the node succeeds while the step runs" {
	local out a b i state="" reason="" rc=0
	out=$BATS_FILE_TMPDIR/keyhold.$BATS_TEST_NUMBER
	new_gate
	mc_run --user ddptest -- env GATE="$GATE" srun -N1 -w node1 -n1 --ddp \
		python3 -c "$keyhold_py" >"$out" 2>&1 &
	local holder=$!
	wait_line "$out" '^READY' 60
	a=$(mc_run -- squeue -h -u ddptest -o %i | head -n 1)
	track "$a"
	# Another job on the node while the step holds its key: root's, so
	# that it is another user's.
	b=$(mc_run -- sbatch --parsable -o /dev/null -N2 -w 'node[1-2]' --wrap 'srun true')
	track "$b"
	for i in $(seq 300); do
		state=$(job_field "$b" JobState)
		reason=$(mc_run -- sinfo -h -n node1 -o %E)
		[ "$state" = COMPLETED ] || [[ $reason == ddp:* ]] && break
		sleep 0.2
	done
	open_gate
	wait "$holder" || rc=$?
	rm -f "$GATE"
	echo "job $b: $state; node1: $reason; the step's user (srun $rc):" >&2
	cat "$out" >&2
	[[ $reason != ddp:* ]]
	[ "$state" = COMPLETED ]
	[ "$rc" -eq 0 ]
	grep -qx 'write EACCES' "$out"
	grep -qx 'chmod EPERM' "$out"
	grep -qx 'append EACCES' "$out"
	grep -qx 'lease EACCES' "$out"
	grep -qx 'owner 0 size 32' "$out"
	[ "$(grep -c '^grown' "$out")" -eq 0 ]
}

# reserve NODE: the size of the Prolog's reserve in NODE's state
# directory, or "none".
reserve() {
	# shellcheck disable=SC2016 # expanded inside the node
	mc_exec "$1" -- sh -c 'stat -c %s "$1/ddp-state/net-$(stat -L -c %i /proc/self/ns/net)/reserve" 2>/dev/null || echo none' sh "$st"
}

@test "state_dir's file system full: the Prolog writes its firewall state on its reserve, the job runs, no drain; the next Prolog with room makes the reserve anew" {
	local a b state reason filler=$st/ddp-state/filler.$$
	mc_run --user ddptest -- srun -N2 -w 'node[1-2]' true
	[ "$(reserve node1)" = 1048576 ]
	[ "$(reserve node2)" = 1048576 ]
	# Root (or anything) fills it: the Prolog must still write its own.
	run dd if=/dev/zero of="$filler" bs=1M
	[ "$(df --output=avail "$st/ddp-state" | tail -n 1)" -eq 0 ]
	a=$(submit -N2 -w 'node[1-2]' --wrap 'srun true')
	state=$(wait_done "$a" 60) || true
	reason=$(mc_run -- sinfo -h -n 'node[1-2]' -o %E | sort -u | tr '\n' ' ')
	# The first Prolog takes its reserve; the other one may find that
	# room and keep its own.
	local left
	left="$(reserve node1) $(reserve node2)"
	rm -f "$filler"
	echo "job $a: $state; node1-2: $reason; reserves: $left" >&2
	[ "$state" = COMPLETED ]
	[[ $reason != *ddp:* ]]
	[[ $left == *none* ]]
	b=$(submit -N2 -w 'node[1-2]' --wrap 'srun true')
	state=$(wait_done "$b" 60) || true
	[ "$state" = COMPLETED ]
	[ "$(reserve node1)" = 1048576 ]
	[ "$(reserve node2)" = 1048576 ]
}
