#!/usr/bin/env bats
# SPDX-License-Identifier: BSD-3-Clause
# tests/lint/readme-figures: README.md's performance figures are found in
# bench/results/, and a figure no results file gives is named.

setup() {
	repo=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	lint=$repo/tests/lint/readme-figures
	tmp=$(mktemp -d)
}

teardown() {
	rm -rf "$tmp"
}

# planted TEXT: README.md with a line TEXT added at the top of its
# Performance section, in $tmp/README.md; echoes that line's number. The
# figures planted are far from any benchmark's (97× Gloo, 8765.4 s), so
# no results file gives them whatever a rerun of make bench wrote.
planted() {
	sed "/^## Performance\$/a $1" "$repo/README.md" >"$tmp/README.md"
	grep -nxF -- "$1" "$tmp/README.md" | cut -d: -f1
}

@test "every figure of README.md's Performance section is in bench/results/" {
	cd "$repo"
	run "$lint"
	echo "$output"
	[ "$status" -eq 0 ]
}

@test "a range no results file writes is named, with its line" {
	local line
	line=$(planted 'A planted figure: 97.1–97.9× Gloo.')
	[ -n "$line" ]
	cd "$repo"
	run "$lint" "$tmp/README.md"
	echo "$output"
	[ "$status" -eq 1 ]
	[[ $output == *"$tmp/README.md:$line: range 97.1–97.9 × is in no file under bench/results/"* ]]
}

@test "a time, a percentage and a range of percentages no results file gives are named" {
	local line
	line=$(planted 'Planted: it takes 8765.4 s, 987 % of what it had, and 61.7–62.9 % busy.')
	[ -n "$line" ]
	cd "$repo"
	run "$lint" "$tmp/README.md"
	echo "$output"
	[ "$status" -eq 1 ]
	[[ $output == *"$tmp/README.md:$line: number 8765.4 s is in no file"* ]]
	[[ $output == *"$tmp/README.md:$line: number 987 % is in no file"* ]]
	[[ $output == *"$tmp/README.md:$line: range 61.7–62.9 % is in no file"* ]]
}
