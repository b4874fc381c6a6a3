#!/usr/bin/env bats
# SPDX-License-Identifier: BSD-3-Clause
# The manual pages name everything a user or admin can type or call: every
# option of every binary (from its own --help) and every srun --ddp*
# option (from the plugin's option table) has an entry of its own in the
# page's OPTIONS (or COMMANDS) list, every ddp.conf key (from the parser,
# through ddp-nodectl show) one in its KEYS list, and every function
# libddp.so exports is named in libddp(3). A name that appears only in the
# synopsis or in prose elsewhere is not an entry: the reader looking the
# option up in the list does not find it.

setup() {
	repo=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	build=$repo/${BUILD:-build}
	docdir=$repo/doc
	tmp=$(mktemp -d)
}

teardown() {
	rm -rf "$tmp"
}

# page_text PAGE: the page's roff source with escapes undone, so that
# "\-\-time\-limit" and "\fB--time-limit\fR" read as --time-limit.
page_text() {
	sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' -e 's/\\(dq/"/g' "$docdir/$1"
}

# entries PAGE SECTION...: the tags of PAGE's entries in its .SH SECTIONs,
# escapes undone: the line after each .TP and the argument of each .IP,
# what a reader scanning the list finds.
entries() {
	local page=$1
	shift
	page_text "$page" | awk -v want="|$(IFS='|'; echo "$*")|" '
		/^\.SH / { sec = substr($0, 5); gsub(/"/, "", sec)
			inside = index(want, "|" sec "|") > 0; tag = 0; next }
		!inside { next }
		/^\.TP/ { tag = 1; next }
		tag { print; tag = 0; next }
		/^\.IP / { print substr($0, 5) }'
}

# missing_in FILE: the words on stdin that FILE does not contain as a
# whole word (one per line).
missing_in() {
	local word
	while IFS= read -r word; do
		[ -n "$word" ] || continue
		grep -qE -- "(^|[^A-Za-z0-9_-])${word}([^A-Za-z0-9_-]|$)" "$1" ||
			echo "$word"
	done
}

# missing_from PAGE: the words on stdin that PAGE does not contain.
missing_from() {
	page_text "$1" >"$tmp/page"
	missing_in "$tmp/page"
}

# missing_entries PAGE SECTION...: the words on stdin that no entry of
# PAGE's SECTIONs names.
missing_entries() {
	entries "$@" >"$tmp/entries"
	[ -s "$tmp/entries" ] || { echo "(no entries in $1's sections: $*)"; return 0; }
	missing_in "$tmp/entries"
}

# long_options PROGRAM ARGS...: the --options PROGRAM's help names, less
# srun's that it mentions ("usage: srun --ddp ddp-check", "srun
# --ddp-check gives").
long_options() {
	{ "$@" 2>&1 || true; } | tr '\n' ' ' |
		sed -E 's/srun[[:space:]]+--[a-z][a-z0-9-]*//g' |
		grep -oE -- '--[a-z][a-z0-9-]*' | sort -u
}

# check_binary PAGE SECTIONS PROGRAM ARGS...: every option PROGRAM ARGS'
# help names has an entry in PAGE's SECTIONS ("OPTIONS|COMMANDS").
check_binary() {
	local page=$1 sections=$2 missing
	shift 2
	[ -x "$1" ] || { echo "$1 is not built (make all)"; return 1; }
	local IFS='|'
	# shellcheck disable=SC2086 # the sections, split on |
	missing=$(long_options "$@" | missing_entries "$page" $sections)
	if [ -n "$missing" ]; then
		echo "$page has no entry in its $sections list for these options of $(basename "$1"):"
		echo "$missing"
		return 1
	fi
}

@test "ddp-check(1) has an OPTIONS entry for every option of ddp-check --help" {
	check_binary ddp-check.1 OPTIONS "$build/bin/ddp-check" --help
}

@test "ddp-plan(1) has an OPTIONS entry for every option of ddp-plan --help" {
	check_binary ddp-plan.1 OPTIONS "$build/bin/ddp-plan" --help
}

@test "ddp-prolog(8) has an OPTIONS or COMMANDS entry for every option and command of ddp-nodectl --help" {
	check_binary ddp-prolog.8 "OPTIONS|COMMANDS" "$build/bin/ddp-nodectl" --help
	local missing
	missing=$("$build/bin/ddp-nodectl" --help |
		sed -n 's/^  \([a-z][a-z-]*\) .*/\1/p' | missing_entries ddp-prolog.8 COMMANDS)
	[ -z "$missing" ] || { echo "ddp-prolog.8 has no COMMANDS entry for: $missing"; false; }
}

@test "spank-ddp(8) has an OPTIONS entry for every srun --ddp option of the plugin" {
	local options missing
	options=$(sed -n 's/^[[:space:]]*{"\(ddp[a-z-]*\)",.*/--\1/p' "$repo/plugin/spank_ddp.c")
	[ "$(printf '%s\n' "$options" | grep -c .)" -ge 4 ]
	missing=$(printf '%s\n' "$options" | missing_entries spank-ddp.8 OPTIONS)
	[ -z "$missing" ] || { echo "spank-ddp.8 has no OPTIONS entry for: $missing"; false; }
}

@test "ddp.conf(5) has a KEYS entry for every key the parser knows" {
	local keys missing
	: >"$tmp/empty.conf"
	keys=$("$build/bin/ddp-nodectl" -c "$tmp/empty.conf" show | sed -n 's/^\([a-z_]*\) *=.*/\1/p')
	[ "$(printf '%s\n' "$keys" | grep -c .)" -ge 20 ]
	missing=$(printf '%s\n' "$keys" | missing_entries ddp.conf.5 KEYS)
	[ -z "$missing" ] || { echo "ddp.conf.5 has no KEYS entry for: $missing"; false; }
}

# without_entry PAGE OPTION: PAGE copied into $tmp/doc with the .TP entry
# whose tag names OPTION removed, tag and text, up to the next entry or
# section; the synopsis and any other mention stay.
without_entry() {
	mkdir -p "$tmp/doc"
	awk -v opt="$2" '
		drop && /^\.(TP|SH|SS|PP|IP)/ { drop = 0 }
		/^\.TP/ { held = $0; next }
		held != "" { tag = $0; gsub(/\\-/, "-", tag)
			if (index(tag, opt)) { drop = 1; held = ""; next }
			print held; held = "" }
		!drop' "$repo/doc/$1" >"$tmp/doc/$1"
}

@test "an option whose OPTIONS entry is deleted is caught, though the synopsis still names it" {
	without_entry ddp-check.1 --time-limit
	run diff -q "$repo/doc/ddp-check.1" "$tmp/doc/ddp-check.1"
	[ "$status" -eq 1 ]
	# The deletion leaves --time-limit in the synopsis: the whole-page
	# search this list check replaced passed it.
	docdir=$tmp/doc
	page_text ddp-check.1 >"$tmp/page"
	[ -z "$(echo --time-limit | missing_in "$tmp/page")" ]
	run check_binary ddp-check.1 OPTIONS "$build/bin/ddp-check" --help
	echo "$output"
	[ "$status" -eq 1 ]
	[[ $output == *"no entry in its OPTIONS list"* ]]
	[ "$(printf '%s\n' "$output" | tail -n +2)" = --time-limit ]
}

@test "a srun option and a ddp.conf key whose entries are deleted are caught" {
	without_entry spank-ddp.8 --ddp-restart=
	without_entry ddp.conf.5 port_key
	docdir=$tmp/doc
	run missing_entries spank-ddp.8 OPTIONS <<<--ddp-restart
	[ "$output" = --ddp-restart ]
	run missing_entries ddp.conf.5 KEYS <<<port_key
	[ "$output" = port_key ]
	# Both names are still on the pages elsewhere.
	[ -z "$(echo --ddp-restart | missing_from spank-ddp.8)" ]
	[ -z "$(echo port_key | missing_from ddp.conf.5)" ]
}

@test "libddp(3) documents every function libddp.so exports" {
	local functions missing
	functions=$(nm -D --defined-only "$build/worker/libddp.so" |
		awk '$2 == "T" { sub(/@.*/, "", $3); print $3 }' | sort -u)
	[ "$(printf '%s\n' "$functions" | grep -c '^ddp_')" -ge 30 ]
	missing=$(printf '%s\n' "$functions" | missing_from libddp.3)
	[ -z "$missing" ] || { echo "libddp.3 misses: $missing"; false; }
}
