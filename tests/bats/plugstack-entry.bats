#!/usr/bin/env bats
# SPDX-License-Identifier: BSD-3-Clause
# packaging/plugstack-entry, which the plugin package's maintainer scripts
# run: the package's plugstack line is linked in on install and taken out
# on removal, a site's own entry is never lost, and removal says which
# Slurm the plugin was built for and how to rebuild. In a temporary root
# (--root); tests/cluster/packages.bats runs it through apt.

setup() {
	repo=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	pe=$repo/packaging/plugstack-entry
	root=$BATS_TEST_TMPDIR/root
	entry=$root/etc/slurm/plugstack.conf.d/ddp.conf
	line=/usr/share/slurm-ddp/plugstack.conf.d/ddp.conf
	mkdir -p "$root"
}

@test "enable links the package's line in, once; disable takes it out and says what to rebuild" {
	run "$pe" --root "$root" enable
	[ "$status" -eq 0 ] && [ -z "$output" ]
	[ "$(readlink "$entry")" = "$line" ]
	run "$pe" --root "$root" enable
	[ "$status" -eq 0 ] && [ -z "$output" ]
	[ "$(readlink "$entry")" = "$line" ]
	run "$pe" --root "$root" disable 22.05
	[ "$status" -eq 0 ]
	[ ! -e "$entry" ] && [ ! -L "$entry" ] && [ ! -e "$entry.disabled" ]
	[[ $output == *"built for Slurm 22.05"*"srun, sbatch, salloc and slurmd run without --ddp"* ]]
	[[ $output == *"make deb"*"install the new slurm-ddp-plugin"* ]]
	# Nothing left for Slurm's include of plugstack.conf.d/*.conf.
	[ -z "$(find "$root/etc/slurm/plugstack.conf.d" -name '*.conf')" ]
}

@test "a site's own entry is kept on install, set aside on removal, put back on reinstall" {
	mkdir -p "$(dirname "$entry")"
	echo "required /usr/lib/slurm/spank_ddp.so config=/etc/slurm/ddp.conf default_bind=numa" >"$entry"
	run "$pe" --root "$root" enable
	[ "$status" -eq 0 ]
	[[ $output == *"kept the site's own $entry"* ]]
	[ ! -L "$entry" ] && grep -q 'default_bind=numa' "$entry"
	run "$pe" --root "$root" disable 24.11
	[ "$status" -eq 0 ]
	[[ $output == *"moved to $entry.disabled"* ]]
	[[ $output == *"built for Slurm 24.11"* ]]
	[ ! -e "$entry" ] && grep -q 'default_bind=numa' "$entry.disabled"
	run "$pe" --root "$root" enable
	[ "$status" -eq 0 ]
	[[ $output == *"put the site's own $entry back"* ]]
	[ ! -L "$entry" ] && grep -q 'default_bind=numa' "$entry" && [ ! -e "$entry.disabled" ]
}

@test "a site's entry that loads no spank_ddp.so is left alone by removal" {
	mkdir -p "$(dirname "$entry")"
	printf '%s\n' "# required /usr/lib/slurm/spank_ddp.so" "optional /usr/lib/slurm/other.so" >"$entry"
	run "$pe" --root "$root" disable 22.05
	[ "$status" -eq 0 ]
	[ -f "$entry" ] && [ ! -e "$entry.disabled" ]
}

@test "usage errors exit 2; disable needs the release" {
	run "$pe" --root "$root" frobnicate
	[ "$status" -eq 2 ]
	run "$pe" --root "$root" disable
	[ "$status" -ne 0 ]
	[ ! -e "$root/etc" ] || [ -z "$(ls -A "$root/etc/slurm/plugstack.conf.d" 2>/dev/null)" ]
}
