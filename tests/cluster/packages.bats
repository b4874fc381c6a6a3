#!/usr/bin/env bats
# make deb builds packages that lintian accepts; they install with apt as a
# site installs them (the plugin into the machine's Slurm, enabled through
# plugstack.conf.d), `apt-get remove` keeps the site's configuration and
# `purge` leaves nothing. The packages go into the machine's /usr and
# /etc/slurm, so it runs in the cluster tier (one at a time on a machine,
# as root), not beside the other bats files; it purges whatever it
# installed at the end, and refuses to start when slurm-ddp packages or
# their run-time directories are already on the machine.

packages=(slurm-ddp-common slurm-ddp-plugin slurm-ddp-prolog slurm-ddp-check
	libddp1 libddp-dev libddp-nccl)

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
	export pkg_out="$BATS_FILE_TMPDIR/pkg"
	PKG_OUT=$pkg_out make -C "$repo_root" --no-print-directory deb >"$BATS_FILE_TMPDIR/deb.log" 2>&1 ||
		{ cat "$BATS_FILE_TMPDIR/deb.log" >&2; return 1; }
}

teardown_file() {
	local left
	left=$(installed)
	# shellcheck disable=SC2086 # one word per package
	[ -z "$left" ] || apt_quiet purge $left >/dev/null 2>&1 || true
	rm -rf /run/slurm-ddp /var/lib/slurm-ddp
}

@test "make deb builds every package, lintian-clean" {
	for p in "${packages[@]}"; do
		[ "$p" != libddp-nccl ] || [ -f /usr/local/cuda/include/nccl.h ] || continue
		ls "$pkg_out/${p}"_*.deb >/dev/null
	done
	# Errors and warnings fail make deb; its log has what lintian said.
	run grep -E '^[EW]: ' "$pkg_out/lintian.log"
	[ "$status" -eq 1 ]
}

@test "the plugin depends on the Slurm release it was built for" {
	local release
	release=$(dpkg-query -W -f='${Version}' libslurm-dev | cut -d. -f1,2)
	run dpkg-deb -f "$pkg_out"/slurm-ddp-plugin_*.deb Depends
	[[ $output == *"slurm-wlm-basic-plugins (>= $release)"* ]]
	[[ $output == *"slurm-wlm-basic-plugins (<< "* ]]
}

@test "ddp.conf and the plugstack.conf.d entry are conffiles" {
	local ctl="$BATS_TEST_TMPDIR/ctl"
	dpkg-deb -e "$pkg_out"/slurm-ddp-common_*.deb "$ctl"
	grep -qx /etc/slurm/ddp.conf "$ctl/conffiles"
	rm -rf "$ctl"
	dpkg-deb -e "$pkg_out"/slurm-ddp-plugin_*.deb "$ctl"
	grep -qx /etc/slurm/plugstack.conf.d/ddp.conf "$ctl/conffiles"
}

@test "apt installs the packages; the files are where the site and Slurm look" {
	apt_quiet install "$pkg_out"/*.deb >"$BATS_TEST_TMPDIR/apt.log" 2>&1 ||
		{ cat "$BATS_TEST_TMPDIR/apt.log" >&2; false; }
	local plugindir
	plugindir=$(dirname "$(dpkg -L slurm-wlm-basic-plugins | grep -m1 '/libslurmfull.so$')")
	[ -f "$plugindir/spank_ddp.so" ]
	grep -qE "^required $plugindir/spank_ddp.so config=/etc/slurm/ddp.conf$" \
		/etc/slurm/plugstack.conf.d/ddp.conf
	[ -x /usr/bin/ddp-plan ] && [ -x /usr/bin/ddp-check ] && [ -x /usr/sbin/ddp-nodectl ]
	[ -x /usr/libexec/slurm-ddp/ddp-prolog ] && [ -x /usr/libexec/slurm-ddp/ddp-epilog ]
	for m in spank-ddp.8 ddp-plan.1 ddp-prolog.8 ddp-epilog.8 ddp-nodectl.8 ddp-check.1 libddp.3; do
		ls /usr/share/man/man"${m##*.}"/"$m".gz >/dev/null
	done
	# The helpers read the packaged ddp.conf, and it names the packaged check.
	run /usr/sbin/ddp-nodectl show
	[ "$status" -eq 0 ]
	[[ $output == *"check_path = /usr/bin/ddp-check"* ]]
}

@test "the machine's Slurm loads the packaged plugin through plugstack.conf.d" {
	local conf="$BATS_TEST_TMPDIR/slurm.conf"
	# srun --help reads slurm.conf and plugstack.conf and loads the SPANK
	# plugins; it asks no daemon.
	printf '%s\n' ClusterName=pkgtest SlurmctldHost=localhost \
		PlugStackConfig=/etc/slurm/plugstack.conf \
		'NodeName=n1 CPUs=1' 'PartitionName=p Nodes=n1' >"$conf"
	run env SLURM_CONF="$conf" srun --help
	[[ $output == *"--ddp"* ]] || { echo "$output" >&2; false; }
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

@test "apt-get remove keeps the site's configuration" {
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
	[ -f /etc/slurm/plugstack.conf.d/ddp.conf ]
	run dpkg-query -W -f='${db:Status-Abbrev}\n' slurm-ddp-common
	[ "$output" = "rc " ]
}

@test "apt-get purge leaves nothing" {
	local left
	left=$(installed)
	[ -n "$left" ] # removed packages still have their configuration
	# shellcheck disable=SC2086 # one word per package
	apt_quiet purge $left >"$BATS_TEST_TMPDIR/apt.log" 2>&1 ||
		{ cat "$BATS_TEST_TMPDIR/apt.log" >&2; false; }
	[ -z "$(installed)" ]
	[ ! -e /etc/slurm/ddp.conf ] && [ ! -e /etc/slurm/plugstack.conf.d/ddp.conf ]
	[ ! -e /var/lib/slurm-ddp ] && [ ! -e /run/slurm-ddp ]
	run find /etc /usr /var/lib/systemd -name '*ddp-nodectl*' -o -name 'spank_ddp.so' \
		-o -name 'libddp*' -o -path '*/slurm-ddp*'
	[ -z "$output" ] || { echo "left after purge: $output" >&2; false; }
	# The machine's own Slurm configuration is as it was.
	[ -f /etc/slurm/plugstack.conf ] && [ -d /etc/slurm/plugstack.conf.d ]
}
