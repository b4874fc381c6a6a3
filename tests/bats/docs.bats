#!/usr/bin/env bats
# SPDX-License-Identifier: BSD-3-Clause
# The manual pages name everything a user or admin can type or call: every
# option of every binary (from its own --help), every srun --ddp* option
# (from the plugin's option table), every ddp.conf key (from the parser,
# through ddp-nodectl show) and every function libddp.so exports.

setup() {
	repo=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	build=$repo/${BUILD:-build}
	tmp=$(mktemp -d)
}

teardown() {
	rm -rf "$tmp"
}

# page_text PAGE: the page's roff source with escapes undone, so that
# "\-\-time\-limit" and "\fB--time-limit\fR" read as --time-limit.
page_text() {
	sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' -e 's/\\(dq/"/g' "$repo/doc/$1"
}

# missing_from PAGE: the words on stdin that PAGE does not contain as a
# whole word (one per line).
missing_from() {
	local word
	page_text "$1" >"$tmp/page"
	while IFS= read -r word; do
		[ -n "$word" ] || continue
		grep -qE -- "(^|[^A-Za-z0-9_-])${word}([^A-Za-z0-9_-]|$)" "$tmp/page" ||
			echo "$word"
	done
}

# long_options PROGRAM ARGS...: the --options PROGRAM's help names.
long_options() {
	{ "$@" 2>&1 || true; } | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u
}

check_binary() {
	local page=$1 missing
	shift
	[ -x "$1" ] || { echo "$1 is not built (make all)"; return 1; }
	missing=$(long_options "$@" | missing_from "$page")
	if [ -n "$missing" ]; then
		echo "$page does not document these options of $(basename "$1"):"
		echo "$missing"
		return 1
	fi
}

@test "ddp-check(1) documents every option of ddp-check --help" {
	check_binary ddp-check.1 "$build/bin/ddp-check" --help
}

@test "ddp-plan(1) documents every option of ddp-plan --help" {
	check_binary ddp-plan.1 "$build/bin/ddp-plan" --help
}

@test "ddp-prolog(8) documents every option and command of ddp-nodectl --help" {
	check_binary ddp-prolog.8 "$build/bin/ddp-nodectl" --help
	local missing
	missing=$("$build/bin/ddp-nodectl" --help |
		sed -n 's/^  \([a-z][a-z-]*\) .*/\1/p' | missing_from ddp-prolog.8)
	[ -z "$missing" ] || { echo "ddp-prolog.8 misses commands: $missing"; false; }
}

@test "spank-ddp(8) documents every srun --ddp option of the plugin" {
	local options missing
	options=$(sed -n 's/^[[:space:]]*{"\(ddp[a-z-]*\)",.*/--\1/p' "$repo/plugin/spank_ddp.c")
	[ "$(printf '%s\n' "$options" | grep -c .)" -ge 4 ]
	missing=$(printf '%s\n' "$options" | missing_from spank-ddp.8)
	[ -z "$missing" ] || { echo "spank-ddp.8 misses: $missing"; false; }
}

@test "ddp.conf(5) documents every key the parser knows" {
	local keys missing
	: >"$tmp/empty.conf"
	keys=$("$build/bin/ddp-nodectl" -c "$tmp/empty.conf" show | sed -n 's/^\([a-z_]*\) *=.*/\1/p')
	[ "$(printf '%s\n' "$keys" | grep -c .)" -ge 20 ]
	missing=$(printf '%s\n' "$keys" | missing_from ddp.conf.5)
	[ -z "$missing" ] || { echo "ddp.conf.5 misses keys: $missing"; false; }
}

@test "libddp(3) documents every function libddp.so exports" {
	local functions missing
	functions=$(nm -D --defined-only "$build/worker/libddp.so" |
		awk '$2 == "T" { sub(/@.*/, "", $3); print $3 }' | sort -u)
	[ "$(printf '%s\n' "$functions" | grep -c '^ddp_')" -ge 30 ]
	missing=$(printf '%s\n' "$functions" | missing_from libddp.3)
	[ -z "$missing" ] || { echo "libddp.3 misses: $missing"; false; }
}
