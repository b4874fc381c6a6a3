# SPDX-License-Identifier: BSD-3-Clause
# The checks of an agreed stop (common/stop.h) in slurm-ddp's cluster
# tests: the output of a batch job whose examples/train or examples/train.py
# was stopped (the time limit, a preemption, a signal), checkpointed,
# requeued and resumed, in the order the runs wrote it. Both programs
# print (PROG is train or train.py):
#   PROG: rank R stopped after step G (WHY)      every rank, at the stop
#   PROG: checkpoint at step G in DIR/FILE       rank 0, the stop's checkpoint
#   PROG: resuming from FILE (restart R): S of M epochs done, step G
# and at the end every rank its parameters' digest: train
# "rank R params_crc=HEX", train.py "params_sha256 HEX rank R".

# stop_check PROG FILE RANKS: every stop in FILE was agreed and resumed:
# - each stop has one line from each of the RANKS ranks, all after the
#   same step G, and rank 0's checkpoint (if it says a step) is at G;
# - the run after it says it resumes at step G or G - 1: the step in
#   flight at most is run twice, no step is skipped;
# - at least one stop, each followed by its resume.
# Prints "stops=N twice=T steps=G1,G2..." on success, else which rule
# failed and the line.
stop_check() {
	awk -v prog="$1" -v ranks="$3" '
		function fail(why) { printf "stop check: %s:%d: %s: %s\n", FILENAME, FNR, why, $0; bad = 1 }
		$0 ~ "^" prog ": rank [0-9]+ stopped after step [0-9]+ \\(" {
			r = $3 + 0; g = $7 + 0
			if (!open) { open = 1; stops++; n = 0; at = g; split("", seen); steps = steps (stops > 1 ? "," : "") g }
			if (r in seen) fail("rank " r " stopped twice in one stop")
			seen[r] = 1; n++
			if (g != at) fail("rank " r " stopped after step " g ", another rank after step " at)
		}
		$0 ~ "^" prog ": checkpoint at step [0-9]+ in " {
			if (!open) fail("a stop checkpoint with no stop")
			else if ($5 + 0 != at) fail("checkpoint at step " $5 ", the ranks stopped after step " at)
		}
		$0 ~ "^" prog ": resuming from .*, step [0-9]+$" {
			s = $NF + 0
			if (!open) fail("resumed with no stop before it")
			else {
				if (n != ranks) fail(n " of " ranks " ranks said they stopped after step " at)
				if (s > at) fail("resumed at step " s ", past the stop after step " at)
				if (at - s > 1) fail("resumed at step " s ": " at - s " steps after it run twice")
				twice += at - s
			}
			open = 0
		}
		END {
			if (stops < 1) { printf "stop check: %s: no rank of %s said it stopped\n", FILENAME, prog; bad = 1 }
			if (open) { printf "stop check: %s: the stop after step %d was not resumed\n", FILENAME, at; bad = 1 }
			if (!bad) printf "stops=%d twice=%d steps=%s\n", stops, twice, steps
			exit bad
		}' "$2"
}

# stop_whys PROG FILE: "R WHY" for each rank's stop line of FILE, in order.
stop_whys() {
	sed -nE "s/^$1: rank ([0-9]+) stopped after step [0-9]+ \(([^)]*)\).*/\1 \2/p" "$2"
}

# digest_of PROG FILE: the one parameter digest the ranks of FILE's last
# run printed (train's params_crc, train.py's params_sha256); nothing, or
# several lines, when they differ.
digest_of() {
	if [ "$1" = train ]; then
		sed -nE 's/^rank [0-9]+ params_crc=([0-9a-f]+)$/\1/p' "$2" | sort -u
	else
		sed -nE 's/^params_sha256 ([0-9a-f]+) rank [0-9]+$/\1/p' "$2" | sort -u
	fi
}

# digest_count PROG FILE: how many ranks printed their digest in FILE.
digest_count() {
	if [ "$1" = train ]; then
		grep -cE '^rank [0-9]+ params_crc=[0-9a-f]+$' "$2"
	else
		grep -cE '^params_sha256 [0-9a-f]+ rank [0-9]+$' "$2"
	fi
}

# epoch_seconds FILE: the seconds per epoch in FILE, whose lines start
# with the time they were read (stamp_lines), from its first and last
# "epoch N ..." lines; fails with fewer than two.
epoch_seconds() {
	awk '$2 == "epoch" { n++; if (n == 1) { t0 = $1; e0 = $3 } t1 = $1; e1 = $3 }
		END { if (n < 2 || e1 == e0) exit 1; printf "%.4f\n", (t1 - t0) / (e1 - e0) }' "$1"
}

# stamp_lines: each line of standard input, preceded by the time it was
# read (seconds since the epoch).
stamp_lines() {
	local line
	while IFS= read -r line; do
		printf '%s %s\n' "${EPOCHREALTIME/,/.}" "$line"
	done
}

# epochs_for SECONDS SECS_PER_EPOCH: the epochs that last SECONDS.
epochs_for() {
	awk -v s="$1" -v e="$2" 'BEGIN { n = int(s / e) + 1; if (n < 4) n = 4; print n }'
}

# wait_gone PID SECONDS: until process PID (started by another process of
# the suite, such as setup_file's) has ended, at most SECONDS.
wait_gone() {
	local deadline=$((SECONDS + $2))
	while kill -0 "$1" 2>/dev/null; do
		[ "$SECONDS" -lt "$deadline" ] || return 1
		sleep 0.2
	done
}
