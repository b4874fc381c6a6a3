#!/usr/bin/env bats
# SPDX-License-Identifier: BSD-3-Clause
# The shipped site configuration (examples/ddp.conf, installed as
# /etc/slurm/ddp.conf by the packages) activates nothing the parser does
# not default to: a node whose admin sets Prolog= before editing it gets no
# shared-root check that drains it, no other ports, no other directories.

setup() {
	repo=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	helper=$repo/${BUILD:-build}/bin/ddp-nodectl
	[ -x "$helper" ] || skip "ddp-nodectl not built ($helper)"
}

@test "examples/ddp.conf's effective configuration is the parser's defaults" {
	local empty=$BATS_TEST_TMPDIR/empty.conf
	: >"$empty"
	run "$helper" -c "$empty" show
	[ "$status" -eq 0 ]
	local defaults=$output
	# Every key is shown, so a difference in any of them is seen.
	[ "$(grep -c ' = ' <<<"$defaults")" -ge 25 ]
	run "$helper" -c "$repo/examples/ddp.conf" show
	[ "$status" -eq 0 ]
	[ "$output" = "$defaults" ] || {
		diff <(echo "$defaults") <(echo "$output") >&2
		false
	}
}

@test "examples/ddp.conf shows each key it leaves at its default, commented out, and names no key twice" {
	local conf=$repo/examples/ddp.conf keys
	# A commented example that does not parse would mislead the admin who
	# uncomments it: every "#key = value" line is a valid setting.
	sed -n 's/^#\([a-z_]* = .*\)$/\1/p' "$conf" >"$BATS_TEST_TMPDIR/uncommented.conf"
	[ -s "$BATS_TEST_TMPDIR/uncommented.conf" ]
	run "$helper" -c "$BATS_TEST_TMPDIR/uncommented.conf" show
	[ "$status" -eq 0 ] || { echo "$output" >&2; false; }
	keys=$(sed -n 's/^#\{0,1\}\([a-z_]*\) = .*$/\1/p' "$conf" | sort)
	[ -z "$(uniq -d <<<"$keys")" ]
	# shared_root's example is the one value that is not the default.
	grep -qx '#shared_root = /shared/ddp' "$conf"
	run grep -E '^shared_root|^port_range|^firewall|^scratch_root|^check_drain' "$conf"
	[ "$status" -eq 1 ]
}
