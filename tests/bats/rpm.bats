#!/usr/bin/env bats
# make rpm builds slurm-ddp.spec's packages (rpmbuild -bb, Debian's rpm)
# against the build's Slurm headers, split as the Debian packages are, and
# rpmlint reports no error; the -debuginfo package holds each binary's
# .debug file (debugedit's find-debuginfo). Their Slurm dependencies are ones SchedMD's
# packages and OpenHPC's both satisfy. The unit tier the spec's %check
# runs is left out here (PKG_NOCHECK=1): tests/run unit runs it.

setup_file() {
	export repo_root
	repo_root=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	# setup skips each test, naming why (bats skips nothing from here).
	command -v rpmbuild >/dev/null || return 0
	export pkg_out="$BATS_FILE_TMPDIR/pkg"
	PKG_OUT=$pkg_out PKG_NOCHECK=1 make -C "$repo_root" --no-print-directory rpm >"$BATS_FILE_TMPDIR/rpm.log" 2>&1 ||
		{ cat "$BATS_FILE_TMPDIR/rpm.log" >&2; return 1; }
}

setup() {
	command -v rpmbuild >/dev/null || skip "rpmbuild is not installed (make deps installs it)"
}

@test "make rpm builds every package of the split" {
	for p in slurm-ddp-common slurm-ddp-plugin slurm-ddp-prolog slurm-ddp-check libddp1 libddp-devel python3-slurm-ddp; do
		ls "$pkg_out/$p"-[0-9]*.rpm >/dev/null
	done
	# The Python module in the distribution's site-packages.
	run rpm -qpl "$pkg_out"/python3-slurm-ddp-[0-9]*.rpm
	[[ $output =~ /usr/lib/python3[.0-9]*/site-packages/slurm_ddp/stop.py ]]
}

# packaging/build-packages builds libddp-nccl only where CUDA_HOME has
# nccl.h and cuda_runtime.h (make deps installs them). Without them this
# says so as a skip, which tests/run counts as a failure: only a missing
# GPU may skip, and the headers are a build dependency, not a GPU.
@test "make rpm builds libddp-nccl, the NCCL backend, from CUDA_HOME's headers" {
	local cuda=${CUDA_HOME:-/usr/local/cuda}
	[ -f "$cuda/include/nccl.h" ] && [ -f "$cuda/include/cuda_runtime.h" ] ||
		skip "no nccl.h and cuda_runtime.h under $cuda: libddp-nccl cannot be built (make deps installs them)"
	ls "$pkg_out"/libddp-nccl-[0-9]*.rpm >/dev/null
	run rpm -qpl "$pkg_out"/libddp-nccl-[0-9]*.rpm
	echo "$output"
	[[ $output == *"/usr/lib64/slurm-ddp/libddp-nccl.so"* ]]
}

@test "make rpm builds the -debuginfo package with a .debug file for every binary" {
	local f missing=""
	ls "$pkg_out"/slurm-ddp-debuginfo-[0-9]*.rpm >/dev/null
	run rpm -qpl "$pkg_out"/slurm-ddp-debuginfo-[0-9]*.rpm
	[ "$status" -eq 0 ]
	for f in /usr/bin/ddp-check /usr/bin/ddp-plan /usr/sbin/ddp-nodectl /usr/lib64/libddp.so.1 /usr/lib64/slurm/spank_ddp.so; do
		grep -qE "^/usr/lib/debug$f-[^/]*\.debug$" <<<"$output" || missing+=" $f"
	done
	[ -z "$missing" ] || { echo "no .debug file for:$missing" >&2; false; }
	# The debugging sections are in -debuginfo alone.
	run rpm -qpl "$pkg_out"/slurm-ddp-check-[0-9]*.rpm
	[[ $output != *"/usr/lib/debug/"* ]]
}

@test "rpmlint reports no error" {
	command -v rpmlint >/dev/null || skip "rpmlint is not installed (make deps)"
	run grep -E ' [0-9]+ errors' "$pkg_out/rpmlint.log"
	[[ $output == *" 0 errors"* ]] || { cat "$pkg_out/rpmlint.log" >&2; false; }
}

@test "the plugin requires the libslurm of the release it was built for; the prolog Slurm's commands, by path" {
	local soname
	soname=$(objdump -p "$(gcc -print-file-name=libslurm.so)" | sed -n 's/^ *SONAME *//p')
	[ -n "$soname" ]
	run rpm -qp --requires "$pkg_out"/slurm-ddp-plugin-[0-9]*.rpm
	[[ $output == *"$soname()(64bit)"* ]]
	# No package name: SchedMD's is slurm, OpenHPC's slurm-ohpc.
	[ -z "$(grep -E '^slurm(\(|$| )' <<<"$output")" ]
	run rpm -qp --requires "$pkg_out"/slurm-ddp-prolog-[0-9]*.rpm
	[[ $output == *"/usr/bin/scontrol"* ]] && [[ $output == *"/usr/bin/squeue"* ]]
	[ -z "$(grep -E '^slurm(\(|$| )' <<<"$output")" ]
}

@test "the boot units' scriptlets are systemd's (preset, disable, daemon-reload), not an enable of their own" {
	run rpm -qp --scripts "$pkg_out"/slurm-ddp-prolog-[0-9]*.rpm
	[[ $output == *"postinstall scriptlet"*"preset ddp-nodectl-install.service"* ]]
	[[ $output == *"preuninstall scriptlet"*"disable"*"ddp-nodectl-install.service"* ]]
	[[ $output != *"systemctl enable"* ]]
}

@test "every package but the shared libraries' and -debuginfo carries the licence; slurm-ddp-common the admin guide, the README and train.sbatch" {
	local rpm
	for rpm in "$pkg_out"/*.rpm; do
		# rpmlint's library policy: libddp1 and libddp-nccl hold the library alone;
		# -debuginfo holds what find-debuginfo puts there, as on RPM systems.
		case "$(basename "$rpm")" in libddp1-* | libddp-nccl-* | slurm-ddp-debuginfo-*) continue ;; esac
		run rpm -qpL "$rpm"
		[[ $output == *"/LICENSE"* ]] || { echo "no licence in $rpm" >&2; return 1; }
	done
	run rpm -qpd "$pkg_out"/slurm-ddp-common-[0-9]*.rpm
	[[ $output == *"/admin-guide.md"* ]] && [[ $output == *"/README.md"* ]]
	[[ $output == *"/examples/train.sbatch"* ]]
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
