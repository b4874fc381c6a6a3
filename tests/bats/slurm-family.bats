#!/usr/bin/env bats
# SPDX-License-Identifier: BSD-3-Clause
# packaging/slurm-family, which debian/rules asks for the plugin directory
# and the Slurm dependency: Debian's libslurm-dev and SchedMD's
# slurm-smd-dev, told apart by the package dpkg-query -S names for
# spank.h (a fake dpkg-query here), with headers of a given release.

setup() {
	repo=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	sf=$repo/packaging/slurm-family
	inc=$BATS_TEST_TMPDIR/include
	bin=$BATS_TEST_TMPDIR/bin
	mkdir -p "$inc/slurm" "$bin"
	: >"$inc/slurm/spank.h"
	headers 0x180b02
	PATH=$bin:$PATH
}

# headers HEX: slurm_version.h of that SLURM_VERSION_NUMBER.
headers() {
	printf '#define SLURM_VERSION_NUMBER %s\n' "$1" >"$inc/slurm/slurm_version.h"
}

# owner LINE: dpkg-query -S answers LINE (nothing and exit 1 when empty).
owner() {
	if [ -n "$1" ]; then
		printf '#!/bin/sh\necho "%s"\n' "$1" >"$bin/dpkg-query"
	else
		printf '#!/bin/sh\necho "dpkg-query: no path found" >&2\nexit 1\n' >"$bin/dpkg-query"
	fi
	chmod 0755 "$bin/dpkg-query"
}

sf() { run "$sf" --include "$inc" --multiarch x86_64-linux-gnu "$@"; }

@test "Debian's libslurm-dev: family debian, PluginDir slurm-wlm" {
	owner "libslurm-dev: $inc/slurm/spank.h"
	sf family
	[ "$status" -eq 0 ] && [ "$output" = debian ]
	sf plugindir
	[ "$status" -eq 0 ] && [ "$output" = /usr/lib/x86_64-linux-gnu/slurm-wlm ]
}

@test "SchedMD's slurm-smd-dev (an arch-qualified answer too): family smd, PluginDir slurm" {
	owner "slurm-smd-dev:amd64: $inc/slurm/spank.h"
	sf family
	[ "$status" -eq 0 ] && [ "$output" = smd ]
	sf plugindir
	[ "$status" -eq 0 ] && [ "$output" = /usr/lib/x86_64-linux-gnu/slurm ]
}

@test "the multiarch triplet comes from DEB_HOST_MULTIARCH without --multiarch" {
	owner "slurm-smd-dev: $inc/slurm/spank.h"
	DEB_HOST_MULTIARCH=aarch64-linux-gnu run "$sf" --include "$inc" plugindir
	[ "$status" -eq 0 ] && [ "$output" = /usr/lib/aarch64-linux-gnu/slurm ]
}

@test "release and depends: this release only, an alternative for each family" {
	owner "libslurm-dev: $inc/slurm/spank.h"
	sf release
	[ "$status" -eq 0 ] && [ "$output" = 24.11 ]
	sf depends
	[ "$status" -eq 0 ]
	[ "$output" = "slurm-wlm-basic-plugins (>= 24.11) | slurm-smd (>= 24.11), slurm-wlm-basic-plugins (<< 24.12) | slurm-smd (<< 24.12)" ]
	headers 0x160508
	sf depends
	[[ $output == *"(>= 22.05)"*"(<< 22.06)"* ]]
}

@test "headers of no package, of another package, or none at all: exit 1 naming the problem" {
	owner ""
	sf plugindir
	[ "$status" -eq 1 ] && [[ $output == *"belongs to no package"* ]]
	[[ $output == *"libslurm-dev"*"slurm-smd-dev"* ]]
	owner "slurm-ohpc-dev: $inc/slurm/spank.h"
	sf family
	[ "$status" -eq 1 ] && [[ $output == *"belongs to slurm-ohpc-dev"* ]]
	rm "$inc/slurm/spank.h"
	sf family
	[ "$status" -eq 1 ] && [[ $output == *"no $inc/slurm/spank.h"* ]]
	: >"$inc/slurm/spank.h"
	owner "libslurm-dev: $inc/slurm/spank.h"
	: >"$inc/slurm/slurm_version.h"
	sf release
	[ "$status" -eq 1 ] && [[ $output == *"no SLURM_VERSION_NUMBER"* ]]
}

@test "usage error: exit 2" {
	sf nonsense
	[ "$status" -eq 2 ] && [[ $output == *usage:* ]]
}
