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
	for what in slurm.conf plugstack Prolog Epilog PrologFlags ddp.conf port_key shared_root firewall state_dir 'step keys' scratch_root; do
		line ok "$what"
	done
	[[ $output == *"ok step keys: $tmp/state keeps POSIX ACLs"* ]]
	# The probe is gone.
	[ -z "$(ls -A "$tmp/state")" ]
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

@test "a state_dir without POSIX ACLs (ramfs) is named with the fix, and nothing is left in it" {
	mount -t ramfs -o mode=0755 ddp-doctor-test "$tmp/state"
	doctor
	local left
	left=$(ls -A "$tmp/state")
	umount "$tmp/state"
	[ "$status" -eq 1 ]
	line FAIL 'step keys'
	[[ $output == *"FAIL step keys: $tmp/state keeps no POSIX ACLs"*"; fix: put state_dir on tmpfs"*'or set port_key = "" for munge'* ]]
	line ok state_dir
	[ -z "$left" ]
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

@test "plugstack.conf without the include of plugstack.conf.d (SchedMD's, OpenHPC's Slurm): the include line is the fix" {
	echo "optional $tmp/lib/other.so" >"$tmp/etc/plugstack.conf"
	doctor
	[ "$status" -eq 1 ]
	line FAIL plugstack
	[[ $output == *"$tmp/etc/plugstack.conf.d has a line loading spank_ddp.so, but $tmp/etc/plugstack.conf does not include it; fix: add the line 'include $tmp/etc/plugstack.conf.d/*.conf' to $tmp/etc/plugstack.conf"* ]]
	rm "$tmp/etc/plugstack.conf"
	doctor
	[ "$status" -eq 1 ]
	line FAIL plugstack
	[[ $output == *"cannot read $tmp/etc/plugstack.conf"*"fix: create it with the line 'include $tmp/etc/plugstack.conf.d/*.conf'"* ]]
}

# traced_doctor: doctor (under `timeout 60`: a hang fails) traced by
# strace, every file it opens listed in $tmp/trace.
traced_doctor() {
	run strace -f -qq -e trace=open,openat -o "$tmp/trace" \
		timeout 60 "$helper" doctor --slurm-conf "$tmp/etc/slurm.conf"
	echo "$output"
}

# opens PATH: how many times the traced doctor opened PATH.
opens() { grep -cF "\"$1\"" "$tmp/trace" || true; }

@test "plugstack files that include each other (5): each read once, the loop named" {
	mkdir "$tmp/etc/loop"
	local f
	for f in a b c d e; do
		echo "include $tmp/etc/loop/*.conf" >"$tmp/etc/loop/$f.conf"
	done
	echo "include $tmp/etc/loop/*.conf" >>"$tmp/etc/plugstack.conf"
	traced_doctor
	[ "$status" -eq 1 ]
	for f in a b c d e; do
		[ "$(opens "$tmp/etc/loop/$f.conf")" -eq 1 ] || { echo "$f.conf opened $(opens "$tmp/etc/loop/$f.conf") times" >&2; return 1; }
	done
	[[ $output == *"FAIL plugstack: include loop: $tmp/etc/loop/a.conf -> $tmp/etc/loop/a.conf ($tmp/etc/loop/a.conf:1 includes $tmp/etc/loop/a.conf again), which slurmd would follow without end; fix: change the include at $tmp/etc/loop/a.conf:1 so that it matches none of these files"* ]]
	[[ $output == *"FAIL plugstack: include loop: $tmp/etc/loop/a.conf -> $tmp/etc/loop/b.conf -> $tmp/etc/loop/a.conf ($tmp/etc/loop/b.conf:1 includes $tmp/etc/loop/a.conf again), "* ]]
	# 15 include lines close a loop: the first 8 are named, one per
	# line, the rest counted.
	[ "$(grep -c '^FAIL plugstack: include loop: ' <<<"$output")" -eq 8 ]
	[[ $output == *"FAIL plugstack: 7 more problems like those above in these files (the first 8 are named); fix: as above"* ]]
	# The plugin's own line is still found and judged.
	[[ $output == *"ok plugstack: $tmp/etc/plugstack.conf.d/ddp.conf:1 loads $tmp/lib/spank_ddp.so"* ]]
}

@test "a plugstack file that is a link to /dev/zero is named and skipped" {
	ln -s /dev/zero "$tmp/etc/plugstack.conf.d/zero.conf"
	# On a doctor that reads it, the limit ends the growing line.
	run timeout 60 bash -c 'ulimit -v 600000 && exec "$@"' doctor \
		"$helper" doctor --slurm-conf "$tmp/etc/slurm.conf"
	echo "$output"
	[ "$status" -eq 1 ]
	[[ $output == *"FAIL plugstack: $tmp/etc/plugstack.conf.d/zero.conf (included by $tmp/etc/plugstack.conf:1) is a character device, not a regular file: skipped (slurmd would read it without end); fix: remove it"* ]]
	[[ $output == *"ok plugstack: $tmp/etc/plugstack.conf.d/ddp.conf:1 loads"* ]]
	line ok Prolog
}

@test "a FIFO among the plugstack files is named and skipped, never opened" {
	mkfifo "$tmp/etc/plugstack.conf.d/fifo.conf"
	traced_doctor
	[ "$status" -eq 1 ]
	[ "$(opens "$tmp/etc/plugstack.conf.d/fifo.conf")" -eq 0 ]
	[[ $output == *"FAIL plugstack: $tmp/etc/plugstack.conf.d/fifo.conf (included by $tmp/etc/plugstack.conf:1) is a FIFO, not a regular file: skipped (slurmd would block reading it); fix: remove it"* ]]
	[[ $output == *"ok plugstack: $tmp/etc/plugstack.conf.d/ddp.conf:1 loads"* ]]
	line ok Prolog
}

@test "an overlong plugstack line and an oversized plugstack file are named and skipped" {
	{
		head -c 5000 /dev/zero | tr '\0' x
		echo
		echo "required $tmp/lib/spank_ddp.so"
	} >"$tmp/etc/plugstack.conf.d/long.conf"
	head -c 1100000 /dev/zero | tr '\0' '\n' >"$tmp/etc/plugstack.conf.d/big.conf"
	run timeout 60 "$helper" doctor --slurm-conf "$tmp/etc/slurm.conf"
	echo "$output"
	[[ $output == *"warn plugstack: $tmp/etc/plugstack.conf.d/long.conf:1 is longer than 4096 bytes: skipped; fix: "* ]]
	[[ $output == *"FAIL plugstack: $tmp/etc/plugstack.conf.d/big.conf (included by $tmp/etc/plugstack.conf:1) is 1100000 bytes, more than doctor reads (1048576): skipped; fix: "* ]]
	# The line after the long one is read: two lines name the plugin.
	[[ $output == *"warn plugstack: 2 lines name spank_ddp.so"* ]]
}

@test "slurm.conf files that include each other: the loop named, doctor ends" {
	echo "Include $tmp/etc/b.conf" >>"$tmp/etc/slurm.conf"
	echo "Include $tmp/etc/slurm.conf" >"$tmp/etc/b.conf"
	run timeout 60 "$helper" doctor --slurm-conf "$tmp/etc/slurm.conf"
	echo "$output"
	[ "$status" -eq 2 ]
	line FAIL slurm.conf
	[[ $output == *"Include loop: $tmp/etc/slurm.conf -> $tmp/etc/b.conf -> $tmp/etc/slurm.conf ($tmp/etc/b.conf:1 includes $tmp/etc/slurm.conf again)"* ]]
}
