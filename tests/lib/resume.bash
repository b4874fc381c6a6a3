# SPDX-License-Identifier: BSD-3-Clause
# The resume checks of slurm-ddp's tests: a run of examples/train or
# examples/train.py killed and started again goes on from where the killed
# run was, and no epoch it finished is trained twice. Ending with the
# parameters of an uninterrupted run proves neither: both programs are
# deterministic, so a run that starts over, or from an older checkpoint,
# ends with the same parameters.
#
# Both print on rank 0 (and flush before going on):
#   PROG: checkpoint of epoch N in DIR/FILE   once N epochs done are saved
#   PROG: resuming from FILE (restart R): S of M epochs done[, step G]
#   epoch K loss ...                          after each epoch trained
# ", step G" when an agreed stop saved step G in the middle of epoch S + 1
# ("PROG: checkpoint at step G in DIR/FILE"): the resumed run finishes
# that epoch first, so its next epoch line is S + 1 as after a whole one.
# with K the epochs done (train) or the epoch's index from 0 (train.py,
# K = done - 1). An epoch is finished when its checkpoint line is out:
# train prints its epoch line with it; train.py prints its epoch line just
# before saving, so a kill between the two may train that epoch again.

# epochs_done FILE: the most epochs done that a checkpoint line of FILE
# reports, 0 when there is none.
epochs_done() {
	awk '/^train(\.py)?: checkpoint of epoch [0-9]+ in / { n = $5 + 0; if (n > m) m = n }
		END { print m + 0 }' "$1"
}

# resume_check PROG FILE EPOCHS REACHED [RESUMES]: the output of the runs
# of PROG (train or train.py), in the order they ran, in FILE, is that of
# a run of EPOCHS epochs killed after REACHED epochs were done and started
# again RESUMES times (default 1), each time from its checkpoint:
# - each start again says "resuming from ...: S of EPOCHS epochs done"
#   (", step G" after a stop in the middle of an epoch) with S > 0 (or
#   a step), S >= REACHED (the first) and S >= every epoch a checkpoint
#   line before it reported: no finished epoch is trained again; after a
#   step, G is the step a "checkpoint at step G" line saved last;
# - each run trains its epochs in order from the one after the epochs its
#   resume line names (the first run from epoch 1): a run that says it
#   resumes but starts over fails here;
# - no epoch's checkpoint line appears twice, and the last run ends with
#   epoch EPOCHS.
# On failure it prints which rule failed and the line.
resume_check() {
	local off=0
	[ "$1" = train.py ] && off=1
	awk -v prog="$1" -v epochs="$3" -v reached="$4" -v want="${5:-1}" -v off="$off" '
		function fail(why) { printf "resume check: %s:%d: %s: %s\n", FILENAME, FNR, why, $0; bad = 1 }
		$0 ~ "^" prog ": checkpoint of epoch [0-9]+ in " {
			n = $5 + 0
			if (n in saved) fail("epoch " n " was saved twice: it was trained again")
			saved[n] = 1
			if (n > finished) finished = n
		}
		$0 ~ "^" prog ": checkpoint at step [0-9]+ in " {
			stopped_at = $5 + 0
		}
		$0 ~ "^" prog ": resuming from .*: [0-9]+ of [0-9]+ epochs done(, step [0-9]+)?$" {
			line = $0
			at = -1
			if (line ~ /, step [0-9]+$/) {
				at = $NF + 0
				sub(/, step [0-9]+$/, "", line)
			}
			n = split(line, f, " ")
			s = f[n - 4] + 0
			resumes++
			if (f[n - 2] + 0 != epochs) fail("not a run of " epochs " epochs")
			if (s <= 0 && at < 0) fail("resumed with no epoch done")
			if (at >= 0 && at != stopped_at) fail("resumed at step " at ", but the last stop saved step " stopped_at)
			if (resumes == 1 && s < reached) fail("resumed at epoch " s ", but " reached " were done when the run was killed")
			if (s < finished) fail("resumed at epoch " s ", but epoch " finished " was finished and saved")
			last = s
		}
		/^epoch [0-9]+ loss / {
			d = $2 + off
			if (d != last + 1) fail("epoch " d " trained after epoch " last)
			last = d
		}
		END {
			if (resumes != want) { printf "resume check: %s: %d resume lines of %s, want %d\n", FILENAME, resumes, prog, want; bad = 1 }
			if (last != epochs) { printf "resume check: %s: the last run ended at epoch %d of %d\n", FILENAME, last, epochs; bad = 1 }
			exit bad
		}' "$2"
}
