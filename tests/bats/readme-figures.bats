#!/usr/bin/env bats
# SPDX-License-Identifier: BSD-3-Clause
# tests/lint/readme-figures: every figure of README.md's Performance
# section and of bench/README.md is in the results file its paragraph
# names, within the rounding the text shows; a near miss is named with
# its line.
#
# The near misses planted below are the slips a writer makes: a digit
# dropped (200.7x as 20.7x), a decimal point moved (0.06 s as 0.6 s, 3.0
# ms as 30 ms), two digits swapped (0.39x as 0.93x, 11.2 s as 12.1 s).
# The lint before it checked a figure against the file its paragraph
# names (tests/lint/readme-figures up to commit f12f21b took any number
# of the same unit in any results file, and read README.md only) passed
# 20.7x, 0.6 s, 0.93x, 30 ms, 0.37 s, 1.48 GB/s and 75 s in README.md,
# and 12.1 s, 0.72 s and 8.6 s in the README.md figures of that time,
# and never read bench/README.md; every plant below fails the lint now.

setup() {
	repo=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	lint=$repo/tests/lint/readme-figures
	tmp=$(mktemp -d)
}

teardown() {
	rm -rf "$tmp"
}

# plant DOC FROM TO: DOC (README.md or bench/README.md) with its one
# occurrence of the text FROM written TO, in $tmp/doc.md; echoes the
# number of the line TO is on.
plant() {
	python3 - "$repo/$1" "$2" "$3" "$tmp/doc.md" <<-'EOF'
		import sys
		doc, old, new, out = sys.argv[1:]
		text = open(doc).read()
		if text.count(old) != 1:
		    sys.exit("%s holds %r %d times, not once" % (doc, old, text.count(old)))
		text = text.replace(old, new)
		open(out, "w").write(text)
		print(text[:text.index(new)].count("\n") + 1)
	EOF
}

# caught DOC FROM TO FIGURE: the lint, on DOC with FROM written TO, names
# FIGURE ("number 20.7 ×") on TO's line and exits 1.
caught() {
	local line section=""
	line=$(plant "$1" "$2" "$3")
	[ -n "$line" ]
	[ "$1" = README.md ] && section=:Performance
	cd "$repo" || return
	run "$lint" "$tmp/doc.md$section"
	echo "$output"
	[ "$status" -eq 1 ]
	[[ $output == *"$tmp/doc.md:$line: $4 is not in bench/results/"* ]]
}

@test "every figure of README.md's Performance section and of bench/README.md is in the file it names" {
	cd "$repo" || return
	run "$lint"
	echo "$output"
	[ "$status" -eq 0 ]
}

@test "near miss: 200.7x written 20.7x (recovery.md)" {
	caught README.md '200.7x as long' '20.7x as long' "number 20.7 ×"
}

@test "near miss: srun names the failure after 0.06 s written 0.6 s (recovery.md has 0.60 s)" {
	caught README.md 'failure after 0.06 s' 'failure after 0.6 s' "number 0.6 s"
}

@test "near miss: 0.39× torchrun's launch written 0.93×" {
	caught README.md 'allreduce in 0.39×' 'allreduce in 0.93×' "number 0.93 ×"
}

@test "near miss: +3.0 ms written +30 ms" {
	caught README.md '+3.0 ms median' '+30 ms median' "number 30 ms"
}

@test "near miss: 0.73 s written 0.37 s" {
	caught README.md 'reduces again 0.73 s' 'reduces again 0.37 s' "number 0.37 s"
}

@test "near miss: 11.2 s under srun written 12.1 s (a later batch's ddp-check had 12.110)" {
	caught bench/README.md '| 1,024 | 11.2 s (10.9) |' '| 1,024 | 12.1 s (10.9) |' "number 12.1 s"
}

@test "near miss: 7.46 s under srun written 7.64 s" {
	caught README.md 'first allreduce in 7.46 s' 'first allreduce in 7.64 s' "number 7.64 s"
}

@test "near miss: 0.27 s at 64 ranks written 0.72 s (srun's runs at 64 ranks had 0.72)" {
	caught bench/README.md '| 64 | 0.27 s (0.23);' '| 64 | 0.72 s (0.23);' "number 0.72 s"
}

@test "near miss: 0.19 s at 64 ranks written 0.91 s" {
	caught README.md '64 ranks in 0.19 s' '64 ranks in 0.91 s' "number 0.91 s"
}

@test "near miss: 6.8 s at 1,024 ranks written 8.6 s (the next batch had 8.555)" {
	caught bench/README.md '| 1,024 | 6.8 s (6.8) |' '| 1,024 | 8.6 s (6.8) |' "number 8.6 s"
}

@test "near miss: 9.37 s at 1,024 ranks written 9.73 s" {
	caught README.md 'allreduce in 9.37 s' 'allreduce in 9.73 s' "number 9.73 s"
}

@test "near miss: 1.84 GB/s in the busbw table written 1.48" {
	caught README.md '| 1.84 (1.44) GB/s |' '| 1.48 (1.44) GB/s |' "number 1.48 GB/s"
}

@test "near miss: 4,096 ranks' 61 s written 16 s" {
	caught README.md '  in 61 s (one run)' '  in 16 s (one run)' "number 16 s"
}

@test "near miss: a figure of another row of the same file, 75 s at 1,024 ranks (75 s is a 4,096-rank run's)" {
	caught README.md 'allreduce in 9.37 s' 'allreduce in 75 s' "number 75 s"
}

@test "near miss in bench/README.md: the munge table's 0.058 s written 0.58 s" {
	caught bench/README.md '| 8.7 s (8.5) | 0.058 s |' '| 8.7 s (8.5) | 0.58 s |' "number 0.58 s"
}

@test "near miss in bench/README.md: the small-message table's 0.72x written 0.27x" {
	caught bench/README.md '| 41.2 | 0.72x (0.83x) |' '| 41.2 | 0.27x (0.83x) |' "number 0.27 ×"
}

@test "a range no results file writes is named, with its line" {
	caught README.md '1.59–2.02× Gloo' '1.59–2.20× Gloo' "range 1.59–2.20 ×"
}

@test "a figure in a paragraph that names no results file is named" {
	local line
	line=$(plant README.md '## Performance
' '## Performance

A planted paragraph: it takes 1.23 s.
')
	line=$((line + 2))
	cd "$repo" || return
	run "$lint" "$tmp/doc.md:Performance"
	echo "$output"
	[ "$status" -eq 1 ]
	[[ $output == *"$tmp/doc.md:$line: number 1.23 s: its paragraph names no results file"* ]]
}

@test "a name whose file or lines are not there is named" {
	local line
	line=$(plant README.md '`bench/results/recovery.md`, the' '`bench/results/recovery.md#L900-L999`, the')
	cd "$repo" || return
	run "$lint" "$tmp/doc.md:Performance"
	echo "$output"
	[ "$status" -eq 1 ]
	[[ $output == *"names bench/results/recovery.md#L900-L999, which is not there"* ]]
}
