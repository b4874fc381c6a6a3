#!/usr/bin/env bats
# make rpm builds slurm-ddp.spec's packages (rpmbuild -bb, Debian's rpm)
# against the build's Slurm headers, split as the Debian packages are, and
# rpmlint reports no error.

setup_file() {
	export repo_root
	repo_root=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	command -v rpmbuild >/dev/null || skip "rpmbuild is not installed (make deps)"
	export pkg_out="$BATS_FILE_TMPDIR/pkg"
	PKG_OUT=$pkg_out make -C "$repo_root" --no-print-directory rpm >"$BATS_FILE_TMPDIR/rpm.log" 2>&1 ||
		{ cat "$BATS_FILE_TMPDIR/rpm.log" >&2; return 1; }
}

@test "make rpm builds every package of the split" {
	for p in slurm-ddp-common slurm-ddp-plugin slurm-ddp-prolog slurm-ddp-check libddp1 libddp-devel; do
		ls "$pkg_out/$p"-[0-9]*.rpm >/dev/null
	done
	if [ -f /usr/local/cuda/include/nccl.h ]; then
		ls "$pkg_out"/libddp-nccl-[0-9]*.rpm >/dev/null
	fi
}

@test "rpmlint reports no error" {
	command -v rpmlint >/dev/null || skip "rpmlint is not installed (make deps)"
	run grep -E ' [0-9]+ errors' "$pkg_out/rpmlint.log"
	[[ $output == *" 0 errors"* ]] || { cat "$pkg_out/rpmlint.log" >&2; false; }
}

@test "the plugin requires the Slurm release it was built for" {
	local release
	release=$(dpkg-query -W -f='${Version}' libslurm-dev | cut -d. -f1,2)
	run rpm -qp --requires "$pkg_out"/slurm-ddp-plugin-[0-9]*.rpm
	[[ $output == *"slurm(x86-64) >= $release"* ]] || [[ $output == *"slurm >= $release"* ]]
	[[ $output == *"slurm"*" < "* ]]
}

@test "ddp.conf is a configuration file; the plugin's plugstack line is linked in and taken out by its scriptlets" {
	local release
	run rpm -qpc "$pkg_out"/slurm-ddp-common-[0-9]*.rpm
	[ "$output" = /etc/slurm/ddp.conf ]
	run rpm -qpc "$pkg_out"/slurm-ddp-plugin-[0-9]*.rpm
	[ -z "$output" ]
	run rpm -qpl "$pkg_out"/slurm-ddp-plugin-[0-9]*.rpm
	[[ $output == *"/usr/share/slurm-ddp/plugstack.conf.d/ddp.conf"* ]]
	[[ $output == *"/slurm-ddp/plugstack-entry"* ]]
	release=$(dpkg-query -W -f='${Version}' libslurm-dev | cut -d. -f1,2)
	run rpm -qp --scripts "$pkg_out"/slurm-ddp-plugin-[0-9]*.rpm
	[[ $output == *"posttrans scriptlet"*"plugstack-entry enable"* ]]
	[[ $output == *"preuninstall scriptlet"*"plugstack-entry disable $release"* ]]
}

@test "the prolog package carries the boot units and slurmd's drop-in" {
	run rpm -qpl "$pkg_out"/slurm-ddp-prolog-[0-9]*.rpm
	[[ $output == *"/systemd/system/ddp-nodectl-install.service"* ]]
	[[ $output == *"/systemd/system/ddp-nodectl-reconcile.service"* ]]
	[[ $output == *"/systemd/system/slurmd.service.d/ddp.conf"* ]]
}
