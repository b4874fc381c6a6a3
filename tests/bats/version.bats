#!/usr/bin/env bats
# SPDX-License-Identifier: BSD-3-Clause
# One release number, VERSION's, everywhere: the packages' version
# (debian/changelog, slurm-ddp.spec), the pkg-config file, the man pages,
# libddp's ddp_version() and every installed program's --version.

setup() {
	repo=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	build=$repo/${BUILD:-build}
	version=$(cat "$repo/VERSION")
}

# prints PROGRAM [ARGS]: PROGRAM --version exits 0 and its first line is
# "NAME VERSION".
prints() {
	local name=$1
	shift
	run "$@" --version
	echo "$output"
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "$name $version" ]
}

@test "VERSION is one line, a release number" {
	[ "$(wc -l <"$repo/VERSION")" -eq 1 ]
	[[ $version =~ ^[0-9]+(\.[0-9]+)+$ ]]
}

@test "debian/changelog's newest entry is VERSION's release" {
	[ "$(sed -n '1s/^slurm-ddp (\([^)]*\)).*/\1/p' "$repo/debian/changelog")" = "$version" ]
}

@test "slurm-ddp.spec's Version is VERSION's, by default and from build-packages" {
	grep -qx 'Version: *%{ddp_version}' "$repo/slurm-ddp.spec"
	# A plain rpmbuild falls back to this default.
	[ "$(sed -n 's/^%{!?ddp_version:%global ddp_version \(.*\)}$/\1/p' "$repo/slurm-ddp.spec")" = "$version" ]
	# build-packages defines it from VERSION (the text of its lines).
	# shellcheck disable=SC2016
	grep -q '^version=$(cat "$repo/VERSION")' "$repo/packaging/build-packages"
	# shellcheck disable=SC2016
	grep -q -- '--define "ddp_version $version"' "$repo/packaging/build-packages"
}

@test "the pkg-config file's Version is VERSION's" {
	grep -qx 'Version: @VERSION@' "$repo/worker/ddp.pc.in"
	[ -f "$build/worker/ddp.pc" ] || skip "libddp not built ($build/worker/ddp.pc)"
	grep -qx "Version: $version" "$build/worker/ddp.pc"
}

@test "every man page's .TH line names slurm-ddp VERSION" {
	local page n=0
	for page in "$repo"/doc/*.[0-9]; do
		grep -q "^\.TH .* \"slurm-ddp $version\" " "$page" ||
			{ echo "$page: $(grep '^\.TH' "$page")" >&2; false; }
		n=$((n + 1))
	done
	[ "$n" -ge 5 ]
}

@test "ddp-nodectl --version" {
	[ -x "$build/bin/ddp-nodectl" ] || skip "ddp-nodectl not built"
	prints ddp-nodectl "$build/bin/ddp-nodectl"
	# Before or after -c and -v, and whatever ddp.conf holds.
	prints ddp-nodectl "$build/bin/ddp-nodectl" -v -c /nonexistent/ddp.conf
}

@test "ddp-check --version, also among other options" {
	[ -x "$build/bin/ddp-check" ] || skip "ddp-check not built"
	prints ddp-check "$build/bin/ddp-check"
	prints ddp-check "$build/bin/ddp-check" --mode warn
}

@test "ddp-plan --version" {
	[ -x "$build/bin/ddp-plan" ] || skip "ddp-plan not built"
	prints ddp-plan "$build/bin/ddp-plan"
	run "$build/bin/ddp-plan" --help
	[[ $output == *"ddp-plan -h|--help|--version"* ]]
}

@test "ddp-healthcheck --version names the release of the helper it runs" {
	[ -x "$build/bin/ddp-nodectl" ] || skip "ddp-nodectl not built"
	DDP_NODECTL=$build/bin/ddp-nodectl prints ddp-healthcheck "$repo/prolog/ddp-healthcheck"
}

@test "libddp.so exports ddp_version" {
	[ -f "$build/worker/libddp.so" ] || skip "libddp not built"
	nm -D --defined-only "$build/worker/libddp.so" | grep -qE ' T ddp_version@@LIBDDP_'
}
