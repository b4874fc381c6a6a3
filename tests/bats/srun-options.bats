#!/usr/bin/env bats
# SPDX-License-Identifier: BSD-3-Clause
# The plugin's scan of srun's command line (plugin/args.c) against the srun
# of every Slurm version slurm-ddp supports: this machine's own (22.05 on
# Debian bookworm) and each of tests/lib/slurm-root (24.11, 26.05), run in
# its root file system. Every option that a version's srun --help lists is
# put to that srun as "srun OPTION --help": srun prints its help only when
# OPTION left the next word alone, so srun's own getopt says which options
# take the next word as their value (the help text alone does not: it shows
# --bcast=<dest_path> although the value is optional, and 22.05 shows
# --container without its value). The scan (tests/bats/srun-optscan) must
# agree on each. srun reads no cluster for this, only a minimal slurm.conf.
# A root the registry did not serve is skipped in one line; a missing one
# fails.

setup() {
	repo=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	optscan=$repo/${BUILD:-build}/tests/bats/srun-optscan
	roots_tool=$repo/tests/lib/slurm-root
	tmp=$(mktemp -d /tmp/ddp-srun-options.XXXXXX)
	conf_in_root=
}

teardown() {
	[ -z "${conf_in_root:-}" ] || rm -rf "$conf_in_root"
	[ -z "${tmp:-}" ] || rm -rf "$tmp"
}

# write_conf DIR: the least slurm.conf srun --help needs (without one srun
# looks for its controller in DNS and stops), and no SPANK plugin, so that
# no plugin's options join the list.
write_conf() {
	printf 'ClusterName=srunoptions\nSlurmctldHost=localhost\nPlugStackConfig=%s/plugstack.conf\n' \
		"$2" >"$1/slurm.conf"
	: >"$1/plugstack.conf"
}

# use_own_srun: srun_cmd runs this machine's srun.
use_own_srun() {
	command -v srun >/dev/null || {
		echo "srun is not installed (make deps installs slurm-client)" >&2
		return 1
	}
	write_conf "$tmp" "$tmp"
	srun_cmd=(env -i PATH=/usr/bin:/bin SLURM_CONF="$tmp/slurm.conf" srun)
}

# use_root_srun VERSION: srun_cmd runs VERSION's srun in its root file
# system, or the test is skipped (registry) or fails (missing root).
use_root_srun() {
	local out root inner
	if ! out=$("$roots_tool" status "$1"); then
		case "$out" in
		unavailable*) skip "Slurm $1 is unavailable here: ${out#unavailable }" ;;
		*)
			echo "Slurm $version: ${out#missing }; this machine can build it: run make deps" >&2
			return 1
			;;
		esac
	fi
	root=${out#ready }
	[ "$(id -u)" -eq 0 ] || {
		echo "running Slurm $1's srun in $root needs root (chroot)" >&2
		return 1
	}
	conf_in_root=$(mktemp -d "$root/tmp/ddp-srun-options.XXXXXX")
	inner=${conf_in_root#"$root"}
	write_conf "$conf_in_root" "$inner"
	srun_cmd=(chroot "$root" env -i PATH=/usr/bin:/bin SLURM_CONF="$inner/slurm.conf" srun)
}

# srun_answer OPTION: "value" when srun takes the word after OPTION as its
# value, "none" when it does not, "unknown" when srun refuses OPTION
# although its help lists it (--power on 24.11 and 26.05).
srun_answer() {
	local first
	first=$(timeout 20 "${srun_cmd[@]}" "$1" --help 2>&1 </dev/null | head -n 1) || true
	case "$first" in
	"Usage: srun "*) echo none ;;
	*"unrecognized option"* | *"invalid option"*) echo unknown ;;
	*) echo value ;;
	esac
}

# check_scan [VERSION]: every option that srun --help lists gets the same
# answer from srun and from the plugin's scan; srun is VERSION's when given.
check_scan() {
	local version help short long shown opt answer scan scans n_value=0 bad=0
	local -A shown_as=() srun_says=()
	[ -x "$optscan" ] || {
		echo "$optscan is not built (make all)" >&2
		return 1
	}
	version=$("${srun_cmd[@]}" --version 2>&1) || {
		printf 'srun --version failed: %s\n' "$version" >&2
		return 1
	}
	version=${version#slurm-wlm }
	[ -z "${1:-}" ] || [[ $version == "$1".* ]] || {
		echo "the srun of Slurm $1's root is $version" >&2
		return 1
	}
	help=$("${srun_cmd[@]}" --help 2>&1) || {
		printf 'Slurm %s: srun --help failed:\n%s\n' "$version" "$help" >&2
		return 1
	}
	# "  -n, --ntasks=ntasks ...", "      --tres-bind=...", 22.05's
	# "  -B  --extra-node-info=...", "      --exclusive[=type]"; the lines
	# that go on describing an option start further right.
	while IFS='|' read -r short long shown; do
		for opt in ${short:+"-$short"} "--$long"; do
			case "$opt" in
			--help | --usage | --version | -h | -V) continue ;;
			esac
			shown_as[$opt]=${shown:-none}
			srun_says[$opt]=$(srun_answer "$opt")
		done
	done < <(printf '%s\n' "$help" |
		sed -nE 's/^  (-([A-Za-z0-9]),? +|    )--([A-Za-z0-9_-]+)(\[=|=)?.*/\2|\3|\4/p')
	scans=$(printf '%s\n' "${!srun_says[@]}" | sort | "$optscan")
	while read -r opt scan; do
		answer=${srun_says[$opt]}
		case "$answer" in
		value) n_value=$((n_value + 1)) ;;
		unknown) continue ;;
		esac
		if [ "${shown_as[$opt]}" = "[=" ] && [ "$answer" = value ]; then
			echo "Slurm $version: srun --help shows ${opt}[=...] but '${srun_cmd[*]} $opt --help' did not print the help: the probe is broken" >&2
			bad=$((bad + 1))
		elif [ "$answer" = value ] && [ "$scan" != value ]; then
			echo "Slurm $version: srun takes the word after $opt as its value, the plugin's scan does not (plugin/args.c: long_with_arg or short_with_arg)" >&2
			bad=$((bad + 1))
		elif [ "$answer" = none ] && [ "$scan" = value ]; then
			case "${shown_as[$opt]}" in
			=) shown="$opt=..." ;;
			"[=") shown="${opt}[=...]" ;;
			*) shown=$opt ;;
			esac
			echo "Slurm $version: srun takes no separate value after $opt (its help shows $shown), the plugin's scan takes the next word" >&2
			bad=$((bad + 1))
		fi
	done <<<"$scans"
	echo "Slurm $version: ${#srun_says[@]} options listed, $n_value take the next word as their value, $bad disagree"
	# A srun that never printed its help would call every option
	# value-taking; one that always did, none.
	if [ "$n_value" -lt 50 ] || [ "$n_value" -ge "${#srun_says[@]}" ]; then
		echo "Slurm $version: implausible count of value-taking options: the probe does not work here" >&2
		return 1
	fi
	[ "$bad" -eq 0 ]
}

@test "scan of srun's options: this machine's Slurm" {
	use_own_srun
	check_scan
}

@test "scan of srun's options: Slurm 24.11" {
	use_root_srun 24.11
	check_scan 24.11
}

@test "scan of srun's options: Slurm 26.05" {
	use_root_srun 26.05
	check_scan 26.05
}

@test "every Slurm version of tests/lib/slurm-root has its test here" {
	run "$roots_tool" versions
	[ "$status" -eq 0 ]
	[ "$(printf '%s\n' "$output" | tr '\n' ' ')" = "24.11 26.05 " ]
}
