#!/usr/bin/env bats
# SPDX-License-Identifier: BSD-3-Clause
# ddp-nodectl doctor without a cluster: a temporary slurm.conf, plugstack,
# ddp.conf, port key and fake nft laid out as a healthy node has them, then
# broken one piece at a time; each broken piece is named with its fix.

setup() {
	repo=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	helper=$repo/${BUILD:-build}/bin/ddp-nodectl
	[ -x "$helper" ] || skip "ddp-nodectl not built ($helper)"
	[ "$(id -u)" -eq 0 ] || skip "needs root (the port key and roots must be root's)"
	tmp=$(mktemp -d /tmp/ddp-doctor.XXXXXX)
	chmod 0755 "$tmp"
	mkdir -p "$tmp/etc/plugstack.conf.d" "$tmp/lib" "$tmp/libexec" \
		"$tmp/bin" "$tmp/state" "$tmp/scratch" "$tmp/shared"
	chmod 0755 "$tmp/etc" "$tmp/state" "$tmp/scratch"
	: >"$tmp/lib/spank_ddp.so"
	local s
	for s in ddp-prolog ddp-epilog; do
		printf '#!/bin/sh\nexit 0\n' >"$tmp/libexec/$s"
		chmod 0755 "$tmp/libexec/$s"
	done
	# nft that knows table inet ddp.
	cat >"$tmp/bin/nft" <<'EOF2'
#!/bin/sh
[ "$*" = "list tables inet" ] && echo "table inet ddp"
exit 0
EOF2
	chmod 0755 "$tmp/bin/nft"
	(umask 077 && head -c 32 /dev/urandom >"$tmp/etc/port.key")
	cat >"$tmp/etc/slurm.conf" <<EOF2
ClusterName=doctor
# PlugStackConfig unset: plugstack.conf beside slurm.conf.
Prolog=$tmp/libexec/ddp-prolog
Epilog=$tmp/libexec/ddp-epilog
PrologFlags=Alloc,DeferBatch
EOF2
	echo "include $tmp/etc/plugstack.conf.d/*.conf" >"$tmp/etc/plugstack.conf"
	echo "required $tmp/lib/spank_ddp.so config=$tmp/etc/ddp.conf" \
		>"$tmp/etc/plugstack.conf.d/ddp.conf"
	cat >"$tmp/etc/ddp.conf" <<EOF2
port_key = $tmp/etc/port.key
state_dir = $tmp/state
scratch_root = $tmp/scratch
nft_path = $tmp/bin/nft
firewall = on
EOF2
	export DDP_CONF=$tmp/etc/ddp.conf
	unset SLURM_CONF
}

teardown() {
	[ -n "${tmp:-}" ] && rm -rf "$tmp"
	return 0
}

doctor() { run "$helper" doctor --slurm-conf "$tmp/etc/slurm.conf"; echo "$output"; }

# line VERDICT WHAT: the output has exactly one line of WHAT, with that
# verdict, and a fix when it is not ok.
line() {
	local got
	got=$(grep -E "^(ok|FAIL|warn) $2: " <<<"$output")
	[ "$(wc -l <<<"$got")" -eq 1 ] || { echo "want one '$2' line, got: $got" >&2; return 1; }
	[[ $got == "$1 $2: "* ]] || { echo "want '$1 $2', got: $got" >&2; return 1; }
	[ "$1" = ok ] || [[ $got == *"; fix: "* ]] || { echo "no fix in: $got" >&2; return 1; }
}

@test "a healthy node: every check ok, exit 0" {
	doctor
	[ "$status" -eq 0 ]
	for what in slurm.conf plugstack Prolog Epilog PrologFlags ddp.conf port_key shared_root firewall state_dir scratch_root; do
		line ok "$what"
	done
	[ "$(grep -cvE '^ok ' <<<"$output" || true)" -eq 0 ]
}

@test "slurm.conf comes from SLURM_CONF without --slurm-conf; the plugin through PluginDir" {
	echo "PluginDir=/nonexistent:$tmp/lib" >>"$tmp/etc/slurm.conf"
	echo "optional spank_ddp.so" >"$tmp/etc/plugstack.conf.d/ddp.conf"
	SLURM_CONF=$tmp/etc/slurm.conf run "$helper" doctor
	echo "$output"
	[ "$status" -eq 0 ]
	line ok plugstack
	[[ $output == *"loads $tmp/lib/spank_ddp.so"* ]]
}

@test "a Prolog wrapper that runs ddp-prolog is ok" {
	printf '#!/bin/sh\nexec %s "$@"\n' "$tmp/libexec/ddp-prolog" >"$tmp/etc/prolog"
	chmod 0755 "$tmp/etc/prolog"
	sed -i "s|^Prolog=.*|Prolog=$tmp/etc/prolog|" "$tmp/etc/slurm.conf"
	doctor
	[ "$status" -eq 0 ]
	line ok Prolog
	[[ $output == *"(a wrapper)"* ]]
}

@test "the plugstack line missing is named, exit 1" {
	echo "# required $tmp/lib/spank_ddp.so" >"$tmp/etc/plugstack.conf.d/ddp.conf"
	doctor
	[ "$status" -eq 1 ]
	line FAIL plugstack
	[[ $output == *"no required or optional line names spank_ddp.so in $tmp/etc/plugstack.conf"* ]]
	line ok Prolog
}

@test "a plugstack line naming a plugin that is not there is named" {
	rm "$tmp/lib/spank_ddp.so"
	doctor
	[ "$status" -eq 1 ]
	line FAIL plugstack
	[[ $output == *"$tmp/etc/plugstack.conf.d/ddp.conf:1 names $tmp/lib/spank_ddp.so, which is not there"* ]]
}

@test "Prolog unset is named, with the script to set" {
	sed -i '/^Prolog=/d' "$tmp/etc/slurm.conf"
	doctor
	[ "$status" -eq 1 ]
	line FAIL Prolog
	[[ $output == *"FAIL Prolog: not set in slurm.conf; fix: Prolog=/"*"/ddp-prolog in slurm.conf"* ]]
	line ok Epilog
}

@test "PrologFlags without Alloc is named" {
	sed -i 's/^PrologFlags=.*/PrologFlags=DeferBatch/' "$tmp/etc/slurm.conf"
	doctor
	[ "$status" -eq 1 ]
	line FAIL PrologFlags
}

@test "a world-readable port key is named" {
	chmod 0644 "$tmp/etc/port.key"
	doctor
	[ "$status" -eq 1 ]
	line FAIL port_key
	[[ $output == *"mode 0644"* ]]
	[[ $output == *"fix: chown root:root $tmp/etc/port.key && chmod 0600 $tmp/etc/port.key"* ]]
}

@test "shared_root not mounted is named" {
	printf '%s\n' "shared_root = $tmp/shared" "shared_mount = $tmp/shared" >>"$tmp/etc/ddp.conf"
	doctor
	[ "$status" -eq 1 ]
	line FAIL shared_root
	[[ $output == *"FAIL shared_root: $tmp/shared not mounted; fix: mount it"* ]]
}

@test "the nft table missing with firewall on is named" {
	printf '#!/bin/sh\nexit 0\n' >"$tmp/bin/nft"
	doctor
	[ "$status" -eq 1 ]
	line FAIL firewall
	[[ $output == *"table inet ddp missing; fix: run 'ddp-nodectl install'"* ]]
}

@test "a group-writable state_dir is named; a missing scratch_root is a warning" {
	chmod 0775 "$tmp/state"
	rmdir "$tmp/scratch"
	doctor
	[ "$status" -eq 1 ]
	line FAIL state_dir
	line warn scratch_root
	# Reported, never made.
	[ ! -e "$tmp/scratch" ]
}

@test "a ddp.conf that does not parse is named, exit 2" {
	echo "firewall = maybe" >>"$tmp/etc/ddp.conf"
	doctor
	[ "$status" -eq 2 ]
	line FAIL ddp.conf
	[[ $output == *"ddp.conf:6: firewall: invalid value 'maybe'"*"(so its settings were not checked)"* ]]
	[[ $output != *"port_key:"* ]]
	line ok Prolog
}

@test "an unreadable slurm.conf and unknown arguments exit 2" {
	run "$helper" doctor --slurm-conf "$tmp/none"
	[ "$status" -eq 2 ]
	line FAIL slurm.conf
	run "$helper" doctor --no-such-option
	[ "$status" -eq 2 ]
	[[ $output == *"usage: ddp-nodectl"* ]]
	run "$helper" doctor extra
	[ "$status" -eq 2 ]
}

@test "a Prolog that is missing or not executable is named" {
	sed -i "s|^Prolog=.*|Prolog=$tmp/libexec/gone/ddp-prolog|" "$tmp/etc/slurm.conf"
	chmod 0644 "$tmp/libexec/ddp-epilog"
	doctor
	[ "$status" -eq 1 ]
	[[ $output == *"FAIL Prolog: $tmp/libexec/gone/ddp-prolog is missing; fix: "* ]]
	[[ $output == *"FAIL Epilog: $tmp/libexec/ddp-epilog is not executable; fix: chmod 0755 $tmp/libexec/ddp-epilog"* ]]
}

@test "slurm.conf's Include files are read; Prolog through a glob is a warning" {
	grep -v '^Prolog=' "$tmp/etc/slurm.conf" >"$tmp/etc/main.conf"
	echo "Include prolog.conf" >>"$tmp/etc/main.conf"
	echo "Prolog=$tmp/libexec/ddp-pro*" >"$tmp/etc/prolog.conf"
	run "$helper" doctor --slurm-conf "$tmp/etc/main.conf"
	echo "$output"
	[ "$status" -eq 0 ]
	line warn Prolog
	[[ $output == *"through a glob; fix: point Prolog= at the script itself"* ]]
}
