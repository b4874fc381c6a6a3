#!/usr/bin/env bats
# SPDX-License-Identifier: BSD-3-Clause
# tests/run itself: a suite counts by the TAP it prints, and one that dies
# part-way fails even when the lines it printed are all "ok" and it exits
# 0: its plan (1..N) must match the results it printed. The suites are
# planted as the unit tier's test programs of a copy of tests/run, so that
# nothing of the real tiers runs.

setup() {
	repo=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	tmp=$(mktemp -d)
	mkdir -p "$tmp/tests" "$tmp/build/tests/unit"
	cp "$repo/tests/run" "$tmp/tests/run"
}

teardown() {
	rm -rf "$tmp"
}

# suite NAME STATUS LINE...: a planted unit test program that prints the
# LINEs and exits with STATUS.
suite() {
	local name=$1 status=$2 f
	shift 2
	f=$tmp/build/tests/unit/test-$name
	{
		echo '#!/bin/sh'
		printf "printf '%%s\\\\n'"
		printf " '%s'" "$@"
		echo
		echo "exit $status"
	} >"$f"
	chmod +x "$f"
}

@test "a suite whose plan matches its results passes, plan first or last" {
	suite first 0 1..2 'ok 1 - one' 'ok 2 - two'
	suite last 0 'ok 1 - one' 'ok 2 - two' 1..2
	run env -u TESTS -u BUILD "$tmp/tests/run" unit
	echo "$output"
	[ "$status" -eq 0 ]
	[[ $output == *"4 passed, 0 failed, 0 skipped"* ]]
}

@test "a suite that dies after 2 of its 5 planned tests fails, though it exits 0 with every line ok" {
	suite dies 0 1..5 'ok 1 - one' 'ok 2 - two'
	run env -u TESTS -u BUILD "$tmp/tests/run" unit
	echo "$output"
	[ "$status" -eq 1 ]
	[[ $output == *"2 passed, 1 failed, 0 skipped"* ]]
	[[ $output == *"unit/test-dies: planned 5 tests and printed 2 results, exit status 0: it stopped part-way"* ]]
}

@test "a suite killed before its plan at the end fails, named as such" {
	suite killed 137 'ok 1 - one' 'ok 2 - two'
	run env -u TESTS -u BUILD "$tmp/tests/run" unit
	echo "$output"
	[ "$status" -eq 1 ]
	[[ $output == *"unit/test-killed: printed no TAP plan (1..N) with its 2 results, exit status 137"* ]]
}

@test "a suite with a failing line that stops part-way counts both" {
	suite fails 1 1..4 'ok 1 - one' 'not ok 2 - two'
	run env -u TESTS -u BUILD "$tmp/tests/run" unit
	echo "$output"
	[ "$status" -eq 1 ]
	[[ $output == *"1 passed, 2 failed, 0 skipped"* ]]
	[[ $output == *"unit/test-fails: 2 - two"* ]]
	[[ $output == *"unit/test-fails: planned 4 tests and printed 2 results"* ]]
}

@test "a suite that prints more results than it planned fails" {
	suite more 0 1..1 'ok 1 - one' 'ok 2 - two'
	run env -u TESTS -u BUILD "$tmp/tests/run" unit
	echo "$output"
	[ "$status" -eq 1 ]
	[[ $output == *"unit/test-more: planned 1 tests and printed 2 results"* ]]
}
