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

# planted SED: README.md with SED applied, in $tmp/README.md; fails when
# SED changed nothing (the figure moved: update the test).
planted() {
	sed "$1" "$repo/README.md" >"$tmp/README.md"
	! cmp -s "$repo/README.md" "$tmp/README.md"
}

@test "every figure of README.md's Performance section is in bench/results/" {
	cd "$repo"
	run "$lint"
	echo "$output"
	[ "$status" -eq 0 ]
}

@test "a range no results file writes is named, with its line" {
	planted 's/1\.7–2\.1× Gloo/1.8–2.1× Gloo/'
	cd "$repo"
	run "$lint" "$tmp/README.md"
	echo "$output"
	[ "$status" -eq 1 ]
	[[ $output == *"$tmp/README.md:"*": range 1.8–2.1 × is in no file under bench/results/"* ]]
}

@test "a time, a percentage and a range of percentages no results file gives are named" {
	planted 's/takes 23\.6 s/takes 26.3 s/; s/130 % of what/140 % of what/; s/86–90 %/84–90 %/'
	cd "$repo"
	run "$lint" "$tmp/README.md"
	echo "$output"
	[ "$status" -eq 1 ]
	[[ $output == *"number 26.3 s is in no file"* ]]
	[[ $output == *"number 140 % is in no file"* ]]
	[[ $output == *"range 84–90 % is in no file"* ]]
}
