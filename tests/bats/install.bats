#!/usr/bin/env bats
# `make install` lays slurm-ddp out as a site expects and honours PREFIX,
# DESTDIR and SLURM_PLUGINDIR; the installed objects export only their API.

setup_file() {
	export repo_root
	repo_root=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	export dest
	dest=$(mktemp -d)
	make -C "$repo_root" --no-print-directory install DESTDIR="$dest" \
		PREFIX=/opt/slurm-ddp SLURM_PLUGINDIR=/opt/slurm-plugins >"$dest.log" 2>&1 ||
		{ cat "$dest.log" >&2; return 1; }
}

teardown_file() {
	rm -rf "$dest" "$dest.log"
}

@test "the SPANK plugin goes to SLURM_PLUGINDIR" {
	[ -f "$dest/opt/slurm-plugins/spank_ddp.so" ]
}

@test "the plugin exports only slurm_spank_* and plugin_* symbols" {
	run nm -D --defined-only "$dest/opt/slurm-plugins/spank_ddp.so"
	[ "$status" -eq 0 ]
	local bad
	bad=$(printf '%s\n' "$output" | awk '{print $NF}' | grep -vE '^(slurm_spank_|plugin_)' || true)
	[ -z "$bad" ] || { echo "unexpected exports: $bad" >&2; false; }
}

@test "libddp, its header and its pkg-config file go under PREFIX" {
	ls "$dest"/opt/slurm-ddp/lib/libddp.so* >/dev/null
	[ -f "$dest/opt/slurm-ddp/lib/libddp.a" ]
	[ -f "$dest/opt/slurm-ddp/include/ddp.h" ]
	pc=$(find "$dest/opt/slurm-ddp" -name ddp.pc | head -n 1)
	[ -n "$pc" ]
	grep -qx 'prefix=/opt/slurm-ddp' "$pc"
}

@test "libddp exports only ddp_* symbols" {
	lib=$(ls "$dest"/opt/slurm-ddp/lib/libddp.so.* | head -n 1)
	run nm -D --defined-only "$lib"
	[ "$status" -eq 0 ]
	local bad
	# LIBDDP_1.0 is the version node of the linker script, not a symbol.
	bad=$(printf '%s\n' "$output" | awk '{print $NF}' | grep -vE '^(ddp_|LIBDDP_[0-9.]+$)' || true)
	[ -z "$bad" ] || { echo "unexpected exports: $bad" >&2; false; }
}

@test "the Prolog and Epilog scripts go to the libexec directory, executable" {
	[ -x "$dest/opt/slurm-ddp/libexec/slurm-ddp/ddp-prolog" ]
	[ -x "$dest/opt/slurm-ddp/libexec/slurm-ddp/ddp-epilog" ]
}

@test "the health check and the NHC check name the installed ddp-nodectl" {
	[ -x "$dest/opt/slurm-ddp/libexec/slurm-ddp/ddp-healthcheck" ]
	grep -q 'helper="/opt/slurm-ddp/sbin/ddp-nodectl"' "$dest/opt/slurm-ddp/share/slurm-ddp/nhc/ddp.nhc"
	grep -q '"/opt/slurm-ddp/sbin/ddp-nodectl"' "$dest/opt/slurm-ddp/libexec/slurm-ddp/ddp-healthcheck"
}

@test "man pages are installed" {
	[ -f "$dest/opt/slurm-ddp/share/man/man8/spank-ddp.8" ]
	[ -f "$dest/opt/slurm-ddp/share/man/man8/ddp-prolog.8" ]
	[ -f "$dest/opt/slurm-ddp/share/man/man3/libddp.3" ]
	[ -f "$dest/opt/slurm-ddp/share/man/man5/ddp.conf.5" ]
}

@test "installed man pages name this installation's paths, not /usr/local" {
	run grep -rl /usr/local "$dest/opt/slurm-ddp/share/man"
	[ "$status" -eq 1 ]
	grep -q /opt/slurm-ddp/libexec/slurm-ddp/ddp-prolog "$dest/opt/slurm-ddp/share/man/man8/ddp-prolog.8"
}

@test "the Python module slurm_ddp goes to PREFIX/lib/python3/dist-packages and imports from there" {
	local dir="$dest/opt/slurm-ddp/lib/python3/dist-packages"
	[ -f "$dir/slurm_ddp/__init__.py" ]
	[ -f "$dir/slurm_ddp/stop.py" ]
	[ "$(stat -c %a "$dir/slurm_ddp/stop.py")" = 644 ]
	run env PYTHONPATH="$dir" python3 -c 'import slurm_ddp, slurm_ddp.stop as s; print(s.__file__, slurm_ddp.STOP_EXIT_STATUS)'
	[ "$status" -eq 0 ]
	[ "$output" = "$dir/slurm_ddp/stop.py 75" ]
}

@test "nothing is installed outside DESTDIR" {
	run find "$dest" -mindepth 1 -maxdepth 1
	[ "$output" = "$dest/opt" ]
}

@test "a C program builds against the installed libddp through pkg-config" {
	local pcdir="$dest/opt/slurm-ddp/lib/pkgconfig" src="$BATS_TEST_TMPDIR/prog.c"
	printf '%s\n' '#include <ddp.h>' '#include <stdio.h>' \
		'int main(void) { puts(ddp_strerror(DDP_OK)); return 0; }' >"$src"
	run env PKG_CONFIG_PATH="$pcdir" PKG_CONFIG_SYSROOT_DIR="$dest" \
		pkg-config --cflags --libs ddp
	[ "$status" -eq 0 ]
	[[ $output == *"-I$dest/opt/slurm-ddp/include"* ]]
	# shellcheck disable=SC2086 # pkg-config output is a list of flags
	cc -o "$BATS_TEST_TMPDIR/prog" "$src" $output
	run env LD_LIBRARY_PATH="$dest/opt/slurm-ddp/lib" "$BATS_TEST_TMPDIR/prog"
	[ "$status" -eq 0 ]
	[ -n "$output" ]
}

@test "the plugstack.conf.d snippet names the installed plugin" {
	local snippet="$dest/opt/slurm-ddp/share/slurm-ddp/examples/plugstack.conf.d/ddp.conf"
	grep -qE '^required /opt/slurm-plugins/spank_ddp.so config=/etc/slurm/ddp.conf$' "$snippet"
}

@test "ddp.pc names libdir and includedir relative to prefix" {
	pc=$(find "$dest/opt/slurm-ddp" -name ddp.pc | head -n 1)
	grep -qx 'libdir=${prefix}/lib' "$pc"
	grep -qx 'includedir=${prefix}/include' "$pc"
}

@test "the shipped example builds against the installed libddp alone (pkg-config) and runs" {
	local pcdir ex out
	pcdir=$(dirname "$(find "$dest/opt/slurm-ddp" -name ddp.pc | head -n 1)")
	ex=$dest/opt/slurm-ddp/share/slurm-ddp/examples
	[ -f "$ex/train.c" ] && [ -f "$ex/train_ckpt.c" ] && [ -f "$ex/train_ckpt.h" ]
	out=$(mktemp -d)
	# shellcheck disable=SC2046 # pkg-config prints several words
	cc -std=gnu11 -Wall -Wextra -Werror -o "$out/train" "$ex/train.c" "$ex/train_ckpt.c" \
		$(PKG_CONFIG_PATH=$pcdir pkg-config --define-variable=prefix="$dest/opt/slurm-ddp" --cflags --libs ddp) -ldl -lm
	run env LD_LIBRARY_PATH="$dest/opt/slurm-ddp/lib" WORLD_SIZE=1 DDP_AUTH=none \
		"$out/train" --synthetic 64 --epochs 1
	rm -rf "$out"
	[ "$status" -eq 0 ]
	[[ $output == *"params_crc="* ]]
}

# make CFLAGS=... (what packaging does) keeps what each target needs: the
# static libddp's plugin directory, the reductions' -O3, the plugin tests'
# include path.
@test "make CFLAGS=-g keeps the per-target flags" {
	local b
	b=$(mktemp -d)
	make -C "$repo_root" --no-print-directory BUILD="$b" CFLAGS=-g \
		"$b/worker/comm.o" "$b/worker/reduce.o" >/dev/null
	strings "$b/worker/comm.o" | grep -qx '/usr/local/lib/libddp-nccl.so'
	readelf --debug-dump=info "$b/worker/reduce.o" | grep -m1 DW_AT_producer | grep -q -- '-O3'
	rm -rf "$b"
}

@test "make CFLAGS=-O0 builds and passes the plugin's unit test" {
	local b
	b=$(mktemp -d)
	make -C "$repo_root" --no-print-directory BUILD="$b" CFLAGS=-O0 \
		"$b/tests/unit/test-plugin-args" >/dev/null
	run "$b/tests/unit/test-plugin-args"
	rm -rf "$b"
	[ "$status" -eq 0 ]
}

@test "the admin guide, README, LICENSE and train.sbatch go to PREFIX/share/doc/slurm-ddp" {
	local d=$dest/opt/slurm-ddp/share/doc/slurm-ddp f
	for f in admin-guide.md README.md LICENSE examples/train.sbatch; do
		[ -f "$d/$f" ] || { echo "missing $d/$f" >&2; return 1; }
	done
	grep -q 'BSD 3-Clause' "$d/LICENSE"
}
