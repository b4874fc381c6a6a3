#!/usr/bin/env bats
# make deb builds packages that lintian accepts; they install with apt as a
# site installs them (the plugin into the machine's Slurm, its plugstack
# line linked into plugstack.conf.d), and installing, upgrading, removing
# and purging each leave srun working, on the machine and on the
# minicluster, whose plugstack.conf includes the machine's plugstack.conf.d
# for this file. `apt-get remove` takes the plugin's entry out (Slurm
# refuses to start while a required plugin is missing), says which Slurm the
# plugin was built for and how to rebuild, keeps the site's configuration
# and sets aside a site's own entry; `purge` leaves nothing. The packages go
# into the machine's /usr and /etc/slurm, so it runs in the cluster tier
# (one at a time on a machine, as root), not beside the other bats files;
# it purges whatever it installed at the end, and refuses to start when
# slurm-ddp packages or their run-time directories are already on the
# machine.
# shellcheck source=tests/cluster/common.bash
source "$BATS_TEST_DIRNAME/common.bash"

packages=(slurm-ddp-common slurm-ddp-plugin slurm-ddp-prolog slurm-ddp-check
	libddp1 libddp-dev libddp-nccl python3-slurm-ddp)

# The plugstack entry Slurm includes, and the package's line it links to.
entry=/etc/slurm/plugstack.conf.d/ddp.conf
line=/usr/share/slurm-ddp/plugstack.conf.d/ddp.conf

apt_quiet() {
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 -y -q \
		--no-install-recommends "$@"
}

installed() {
	dpkg-query -W -f='${db:Status-Status} ${Package}\n' "${packages[@]}" 2>/dev/null |
		awk '$1 != "not-installed" {print $2}'
}

setup_file() {
	export repo_root
	repo_root=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	[ "$(id -u)" -eq 0 ] || skip "needs root (installs packages)"
	local left
	left=$(installed)
	[ -z "$left" ] || {
		echo "slurm-ddp packages are already on this machine ($left): remove them first" >&2
		return 1
	}
	for d in /run/slurm-ddp /var/lib/slurm-ddp; do
		[ ! -e "$d" ] || {
			echo "$d exists: this machine runs slurm-ddp already; the test's purge would remove it" >&2
			return 1
		}
	done
	if [ -e "$entry" ] || [ -L "$entry" ] || [ -e "$entry.disabled" ]; then
		echo "$entry or $entry.disabled exists: this machine loads slurm-ddp already" >&2
		return 1
	fi
	export pkg_out="$BATS_FILE_TMPDIR/pkg"
	PKG_OUT=$pkg_out make -C "$repo_root" --no-print-directory deb >"$BATS_FILE_TMPDIR/deb.log" 2>&1 ||
		{ cat "$BATS_FILE_TMPDIR/deb.log" >&2; return 1; }
	mc_up --nodes 3 --gpus-per-node 4
	# The minicluster's srun and slurmstepd load what the machine's
	# plugstack.conf.d holds, as a site's nodes do (Debian's own
	# plugstack.conf is this include); put back at the end.
	cp "$(mc_state)/etc/plugstack.conf" "$BATS_FILE_TMPDIR/plugstack.conf.orig"
	echo "include /etc/slurm/plugstack.conf.d/*.conf" | put_conf "$(mc_state)/etc/plugstack.conf"
}

teardown_file() {
	local left
	if [ -f "$BATS_FILE_TMPDIR/plugstack.conf.orig" ]; then
		put_conf "$(mc_state)/etc/plugstack.conf" <"$BATS_FILE_TMPDIR/plugstack.conf.orig"
	fi
	left=$(installed)
	# shellcheck disable=SC2086 # one word per package
	[ -z "$left" ] || apt_quiet purge $left >/dev/null 2>&1 || true
	rm -rf /run/slurm-ddp /var/lib/slurm-ddp
	rm -f "$entry.disabled"
	if [ -L "$entry" ] && [ "$(readlink "$entry")" = "$line" ]; then rm -f "$entry"; fi
}

# machine_srun_help: srun --help as the machine's Slurm runs it (reads
# slurm.conf and plugstack.conf, loads the SPANK plugins, asks no daemon).
machine_srun_help() {
	local conf="$BATS_TEST_TMPDIR/slurm.conf"
	printf '%s\n' ClusterName=pkgtest SlurmctldHost=localhost \
		PlugStackConfig=/etc/slurm/plugstack.conf \
		'NodeName=n1 CPUs=1' 'PartitionName=p Nodes=n1' >"$conf"
	env SLURM_CONF="$conf" srun --help 2>&1
}

# slurm_works [ddp|noddp]: srun --help on the machine and on the
# minicluster succeeds, with or without --ddp among its options, and a
# real job runs on two nodes of the minicluster.
slurm_works() {
	local want=$1 out
	out=$(machine_srun_help) || { echo "machine: srun --help failed: $out" >&2; return 1; }
	check_ddp_option "$want" "machine" "$out" || return 1
	out=$(mc_run -- srun --help 2>&1) || { echo "minicluster: srun --help failed: $out" >&2; return 1; }
	check_ddp_option "$want" "minicluster" "$out" || return 1
	out=$(mc_run -- srun -N2 --ntasks-per-node=1 hostname 2>&1) ||
		{ echo "minicluster: srun -N2 hostname failed: $out" >&2; return 1; }
	[ "$(grep -cE '^node[0-9]+$' <<<"$out")" -eq 2 ] ||
		{ echo "minicluster: srun -N2 hostname: $out" >&2; return 1; }
}
check_ddp_option() {
	case $1 in
	ddp) [[ $3 == *"--ddp"* ]] || { echo "$2: no --ddp in srun --help: $3" >&2; return 1; } ;;
	noddp) [[ $3 != *"--ddp"* ]] || { echo "$2: srun --help still has --ddp" >&2; return 1; } ;;
	esac
}

@test "make deb builds every package, lintian-clean" {
	for p in "${packages[@]}"; do
		[ "$p" != libddp-nccl ] || continue # its own test, below
		ls "$pkg_out/${p}"_*.deb >/dev/null
	done
	# Errors and warnings fail make deb; its log has what lintian said.
	run grep -E '^[EW]: ' "$pkg_out/lintian.log"
	[ "$status" -eq 1 ]
}

# packaging/build-packages builds libddp-nccl only where CUDA_HOME has
# nccl.h and cuda_runtime.h (make deps installs them). Without them this
# says so as a skip, which tests/run counts as a failure: only a missing
# GPU may skip, and the headers are a build dependency, not a GPU.
@test "make deb builds libddp-nccl, the NCCL backend, from CUDA_HOME's headers" {
	local cuda=${CUDA_HOME:-/usr/local/cuda}
	[ -f "$cuda/include/nccl.h" ] && [ -f "$cuda/include/cuda_runtime.h" ] ||
		skip "no nccl.h and cuda_runtime.h under $cuda: libddp-nccl cannot be built (make deps installs them)"
	ls "$pkg_out"/libddp-nccl_*.deb >/dev/null
	run dpkg-deb -c "$pkg_out"/libddp-nccl_*.deb
	echo "$output"
	[[ $output == *"/slurm-ddp/libddp-nccl.so"* ]]
}

@test "the plugin depends on the Slurm release it was built for" {
	local release
	release=$(dpkg-query -W -f='${Version}' libslurm-dev | cut -d. -f1,2)
	run dpkg-deb -f "$pkg_out"/slurm-ddp-plugin_*.deb Depends
	[[ $output == *"slurm-wlm-basic-plugins (>= $release)"* ]]
	[[ $output == *"slurm-wlm-basic-plugins (<< "* ]]
}

@test "ddp.conf is a conffile; the plugin's plugstack line is no conffile, linked in and out by its scripts" {
	local ctl="$BATS_TEST_TMPDIR/ctl" release
	dpkg-deb -e "$pkg_out"/slurm-ddp-common_*.deb "$ctl"
	grep -qx /etc/slurm/ddp.conf "$ctl/conffiles"
	rm -rf "$ctl"
	dpkg-deb -e "$pkg_out"/slurm-ddp-plugin_*.deb "$ctl"
	[ ! -e "$ctl/conffiles" ]
	run dpkg-deb -c "$pkg_out"/slurm-ddp-plugin_*.deb
	[[ $output == *" ./usr/share/slurm-ddp/plugstack.conf.d/ddp.conf"* ]]
	[[ $output != *" ./etc/"* ]]
	grep -q 'plugstack-entry enable' "$ctl/postinst"
	release=$(dpkg-query -W -f='${Version}' libslurm-dev | cut -d. -f1,2)
	grep -q "plugstack-entry disable '$release'" "$ctl/prerm"
}

@test "apt installs the packages; the files are where the site and Slurm look" {
	apt_quiet install "$pkg_out"/*.deb >"$BATS_TEST_TMPDIR/apt.log" 2>&1 ||
		{ cat "$BATS_TEST_TMPDIR/apt.log" >&2; false; }
	local plugindir
	plugindir=$(dirname "$(dpkg -L slurm-wlm-basic-plugins | grep -m1 '/libslurmfull.so$')")
	[ -f "$plugindir/spank_ddp.so" ]
	[ "$(readlink "$entry")" = "$line" ]
	grep -qE "^required $plugindir/spank_ddp.so config=/etc/slurm/ddp.conf$" "$line"
	[ -x /usr/bin/ddp-plan ] && [ -x /usr/bin/ddp-check ] && [ -x /usr/sbin/ddp-nodectl ]
	[ -x /usr/libexec/slurm-ddp/ddp-prolog ] && [ -x /usr/libexec/slurm-ddp/ddp-epilog ]
	for m in spank-ddp.8 ddp-plan.1 ddp-prolog.8 ddp-epilog.8 ddp-nodectl.8 ddp-check.1 libddp.3; do
		ls /usr/share/man/man"${m##*.}"/"$m".gz >/dev/null
	done
	# The helpers read the packaged ddp.conf, and it names the packaged check.
	run /usr/sbin/ddp-nodectl show
	[ "$status" -eq 0 ]
	[[ $output == *"check_path = /usr/bin/ddp-check"* ]]
	# Nothing the defaults do not: no shared root to drain nodes over.
	[[ $output == *$'\nshared_root = \n'* ]]
	# The system's python3 imports the packaged module, from the package.
	run env -u PYTHONPATH /usr/bin/python3 -c 'import slurm_ddp.stop as s; print(s.__file__, s.STOP_EXIT_STATUS)'
	[ "$output" = "/usr/lib/python3/dist-packages/slurm_ddp/stop.py 75" ]
}

@test "the machine's Slurm and the minicluster load the packaged plugin through plugstack.conf.d; jobs run" {
	slurm_works ddp
}

@test "ddp-nodectl's boot unit runs install before slurmd; slurmd's drop-in pulls reconcile" {
	local unitdir
	unitdir=$(dirname "$(dpkg -L slurm-ddp-prolog | grep -m1 '/ddp-nodectl-install.service$')")
	grep -qx 'ExecStart=/usr/sbin/ddp-nodectl install' "$unitdir/ddp-nodectl-install.service"
	grep -qx 'Before=slurmd.service' "$unitdir/ddp-nodectl-install.service"
	grep -qx 'ExecStart=/usr/sbin/ddp-nodectl reconcile --squeue' "$unitdir/ddp-nodectl-reconcile.service"
	grep -qx 'Before=slurmd.service' "$unitdir/ddp-nodectl-reconcile.service"
	grep -q '^Wants=.*ddp-nodectl-reconcile.service' "$unitdir/slurmd.service.d/ddp.conf"
	# Enabled for the next boot.
	[ -L /etc/systemd/system/multi-user.target.wants/ddp-nodectl-install.service ]
}

@test "a program builds against the packaged libddp with pkg-config and runs" {
	local src="$BATS_TEST_TMPDIR/prog.c"
	printf '%s\n' '#include <ddp.h>' '#include <stdio.h>' \
		'int main(void) { puts(ddp_strerror(DDP_OK)); return 0; }' >"$src"
	# shellcheck disable=SC2046 # pkg-config prints several words
	cc -o "$BATS_TEST_TMPDIR/prog" "$src" $(pkg-config --cflags --libs ddp)
	run "$BATS_TEST_TMPDIR/prog"
	[ "$status" -eq 0 ]
	[ -n "$output" ]
	ldd "$BATS_TEST_TMPDIR/prog" | grep -qE "libddp.so.1 => (/usr)?/lib/"
}

@test "apt-get remove slurm-ddp-plugin takes its entry out: srun works, and the admin is told what to rebuild" {
	local release
	release=$(dpkg-query -W -f='${Version}' libslurm-dev | cut -d. -f1,2)
	# apt takes the plugin with the Slurm it was built for: a Slurm upgrade
	# that breaks its versioned dependency removes it the same way, through
	# the same prerm (simulated, nothing changes here).
	run apt-get -s remove slurm-wlm-basic-plugins
	[[ $output == *"Remv slurm-ddp-plugin "* ]] || { echo "$output" >&2; false; }
	apt_quiet remove slurm-ddp-plugin >"$BATS_TEST_TMPDIR/apt.log" 2>&1 ||
		{ cat "$BATS_TEST_TMPDIR/apt.log" >&2; false; }
	run cat "$BATS_TEST_TMPDIR/apt.log"
	[[ $output == *"slurm-ddp-plugin: spank_ddp.so (built for Slurm $release) is removed"* ]]
	[[ $output == *"rebuild slurm-ddp for the Slurm now installed (make deb"* ]]
	[ ! -e "$entry" ] && [ ! -L "$entry" ]
	run grep -rls spank_ddp /etc/slurm/plugstack.conf /etc/slurm/plugstack.conf.d
	[ -z "$output" ]
	slurm_works noddp
	# Back for the next tests.
	apt_quiet install "$pkg_out"/slurm-ddp-plugin_*.deb >"$BATS_TEST_TMPDIR/apt.log" 2>&1 ||
		{ cat "$BATS_TEST_TMPDIR/apt.log" >&2; false; }
	[ "$(readlink "$entry")" = "$line" ]
	slurm_works ddp
}

@test "a site's own entry is kept by an upgrade, set aside by removal and put back by reinstalling" {
	rm -f "$entry"
	sed 's/config=/default_bind=numa config=/' "$line" >"$entry"
	apt_quiet install --reinstall "$pkg_out"/slurm-ddp-plugin_*.deb >"$BATS_TEST_TMPDIR/apt.log" 2>&1 ||
		{ cat "$BATS_TEST_TMPDIR/apt.log" >&2; false; }
	[ ! -L "$entry" ] && grep -q 'default_bind=numa' "$entry"
	slurm_works ddp
	apt_quiet remove slurm-ddp-plugin >"$BATS_TEST_TMPDIR/apt.log" 2>&1 ||
		{ cat "$BATS_TEST_TMPDIR/apt.log" >&2; false; }
	grep -q "moved to $entry.disabled" "$BATS_TEST_TMPDIR/apt.log"
	[ ! -e "$entry" ] && grep -q 'default_bind=numa' "$entry.disabled"
	slurm_works noddp
	apt_quiet install "$pkg_out"/slurm-ddp-plugin_*.deb >"$BATS_TEST_TMPDIR/apt.log" 2>&1 ||
		{ cat "$BATS_TEST_TMPDIR/apt.log" >&2; false; }
	[ ! -L "$entry" ] && grep -q 'default_bind=numa' "$entry" && [ ! -e "$entry.disabled" ]
	slurm_works ddp
	# The package's link again, for the next tests.
	rm -f "$entry"
	apt_quiet install --reinstall "$pkg_out"/slurm-ddp-plugin_*.deb >/dev/null 2>&1
	[ "$(readlink "$entry")" = "$line" ]
}

# old_plugin DIR MODIFIED: the plugin package as version 1.0 shipped it,
# rebuilt from this one: the same files, but the plugstack entry as a
# conffile in /etc and no maintainer script but the purge one (MODIFIED=1:
# the site then edits the conffile).
old_plugin() {
	local dir=$1/old
	dpkg-deb -R "$pkg_out"/slurm-ddp-plugin_*.deb "$dir"
	sed -i -e 's/^Version: .*/Version: 1.0/' "$dir/DEBIAN/control"
	rm -f "$dir/DEBIAN/postinst" "$dir/DEBIAN/prerm"
	mkdir -p "$dir/etc/slurm/plugstack.conf.d"
	cp "$dir$line" "$dir$entry"
	rm -rf "$dir/usr/share/slurm-ddp/plugstack.conf.d" "$dir/usr/libexec"
	echo "$entry" >"$dir/DEBIAN/conffiles"
	(cd "$dir" && find usr -type f -exec md5sum {} + >DEBIAN/md5sums)
	dpkg-deb -b "$dir" "$1/slurm-ddp-plugin_1.0.deb" >/dev/null
}

@test "upgrading from 1.0, whose entry was a conffile: unmodified it becomes the link, modified it stays the site's" {
	local mod
	for mod in 0 1; do
		rm -rf "$BATS_TEST_TMPDIR/v$mod"
		mkdir -p "$BATS_TEST_TMPDIR/v$mod"
		old_plugin "$BATS_TEST_TMPDIR/v$mod"
		apt_quiet purge slurm-ddp-plugin >/dev/null 2>&1
		[ ! -e "$entry" ] && [ ! -L "$entry" ]
		apt_quiet install --allow-downgrades "$BATS_TEST_TMPDIR/v$mod/slurm-ddp-plugin_1.0.deb" \
			>"$BATS_TEST_TMPDIR/apt.log" 2>&1 || { cat "$BATS_TEST_TMPDIR/apt.log" >&2; false; }
		[ -f "$entry" ] && [ ! -L "$entry" ]
		[ "$mod" -eq 0 ] || echo "# site edit" >>"$entry"
		apt_quiet install "$pkg_out"/slurm-ddp-plugin_*.deb >"$BATS_TEST_TMPDIR/apt.log" 2>&1 ||
			{ cat "$BATS_TEST_TMPDIR/apt.log" >&2; false; }
		if [ "$mod" -eq 0 ]; then
			[ "$(readlink "$entry")" = "$line" ]
		else
			[ ! -L "$entry" ] && grep -qx '# site edit' "$entry"
			grep -q "kept the site's own $entry" "$BATS_TEST_TMPDIR/apt.log"
		fi
		slurm_works ddp
	done
	# The package's link again, for the next tests.
	apt_quiet purge slurm-ddp-plugin >/dev/null 2>&1
	apt_quiet install "$pkg_out"/slurm-ddp-plugin_*.deb >/dev/null 2>&1
	[ "$(readlink "$entry")" = "$line" ]
}

@test "apt-get remove keeps the site's configuration, takes the plugstack entry out; Slurm works" {
	# What the node makes at boot (in a network namespace of its own, so
	# the machine's firewall is untouched; the port key is missing here,
	# so it exits 1 after making the directories).
	unshare --net /usr/sbin/ddp-nodectl install >/dev/null 2>&1 || true
	[ -d /var/lib/slurm-ddp ] && [ -d /run/slurm-ddp ]
	echo '# site edit' >>/etc/slurm/ddp.conf
	apt_quiet remove "${packages[@]}" >"$BATS_TEST_TMPDIR/apt.log" 2>&1 ||
		{ cat "$BATS_TEST_TMPDIR/apt.log" >&2; false; }
	[ ! -e /usr/sbin/ddp-nodectl ] && [ ! -e /usr/bin/ddp-check ]
	run find /usr -name 'spank_ddp.so' -o -name 'libddp*' -o -path '*slurm-ddp*'
	[ -z "$output" ] || { echo "left after remove: $output" >&2; false; }
	grep -qx '# site edit' /etc/slurm/ddp.conf
	[ ! -e "$entry" ] && [ ! -L "$entry" ]
	run dpkg-query -W -f='${db:Status-Abbrev}\n' slurm-ddp-common
	[ "$output" = "rc " ]
	slurm_works noddp
}

@test "apt-get purge leaves nothing; Slurm works" {
	local left
	left=$(installed)
	[ -n "$left" ] # removed packages still have their configuration
	# shellcheck disable=SC2086 # one word per package
	apt_quiet purge $left >"$BATS_TEST_TMPDIR/apt.log" 2>&1 ||
		{ cat "$BATS_TEST_TMPDIR/apt.log" >&2; false; }
	[ -z "$(installed)" ]
	[ ! -e /etc/slurm/ddp.conf ] && [ ! -e "$entry" ] && [ ! -L "$entry" ] && [ ! -e "$entry.disabled" ]
	[ ! -e /var/lib/slurm-ddp ] && [ ! -e /run/slurm-ddp ]
	run find /etc /usr /var/lib/systemd -name '*ddp-nodectl*' -o -name 'spank_ddp.so' \
		-o -name 'libddp*' -o -path '*/slurm-ddp*'
	[ -z "$output" ] || { echo "left after purge: $output" >&2; false; }
	# The machine's own Slurm configuration is as it was.
	[ -f /etc/slurm/plugstack.conf ] && [ -d /etc/slurm/plugstack.conf.d ]
	slurm_works noddp
}
