#!/usr/bin/env bash
# Golden tests of the rank placement: runs ddp-plan on every hwloc XML in
# tests/topologies with several rank counts and options, and diffs each
# case against tests/golden/placement/<topology>.out, where cases sit under
# "# label" headers. UPDATE=1 rewrites the expected files instead.
# As root, every case runs a second time through the plugin's topology
# cache (ddp-plan --cache: the XML written as the cache and read back
# through its checks) and must give the same expected output.
# Then, on every topology, one rank per GPU: every rank gets the same NCCL_*
# variables, exactly the site's (tests/golden/nccl.conf), and none without
# a site setting.
set -euo pipefail
cd "$(dirname "$0")/../.."
top=$PWD
plan=$top/${BUILD:-build}/bin/ddp-plan
topodir=$top/tests/topologies
expdir=$top/tests/golden/placement
ncclconf=$top/tests/golden/nccl.conf
n=0 bad=0

tap() { # tap STATUS NAME
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; bad=1; fi
}

if [ ! -x "$plan" ]; then
	echo "not ok 1 - ddp-plan not built at $plan (run make)"
	echo "1..1"
	exit 1
fi
if [ ! -d "$topodir" ]; then
	echo "ok 1 - # skip no topology fixtures at $topodir"
	echo "1..1"
	exit 0
fi

# Cases: label and ddp-plan arguments (the topology is added, and an
# empty site configuration unless the case names one). --gpus and
# --cuda-visible-devices are SLURM_STEP_GPUS and CUDA_VISIBLE_DEVICES as
# Slurm sets them: those cases run the plugin's own GPU choice.
cases=(
	"ranks=1|--ranks 1"
	"ranks=2|--ranks 2"
	"ranks=3|--ranks 3"
	"ranks=4|--ranks 4"
	"ranks=8|--ranks 8"
	"ranks=4 bind=numa|--ranks 4 --bind numa"
	"ranks=4 bind=none|--ranks 4 --bind none"
	"ranks=2 gpus=1,2|--ranks 2 --gpus 1,2"
	"ranks=4 gpus=4-7 visible=0 (device cgroup, --gpus-per-task)|--ranks 4 --gpus 4-7 --cuda-visible-devices 0"
	"ranks=4 gpus=4-7 visible=5 (no cgroup, --gpus-per-task)|--ranks 4 --gpus 4-7 --cuda-visible-devices 5"
	"ranks=2 gpus=3,1 visible=0,1 (device cgroup)|--ranks 2 --gpus 3,1 --cuda-visible-devices 0,1"
	"ranks=2 visible=2,3 (no SLURM_STEP_GPUS)|--ranks 2 --cuda-visible-devices 2,3"
	"ranks=2 gpus=1,0 visible=UUIDs (env_uuid)|--ranks 2 --gpus 1,0 --cuda-visible-devices GPU-0a1b,GPU-2c3d"
	"ranks=1 gpus=0,1 visible=1 UUID (env_uuid, --gpus-per-task)|--ranks 1 --gpus 0,1 --cuda-visible-devices GPU-2c3d"
	"ranks=2 gpus=0,1 visible=1 UUID (env_uuid, --gpus-per-task)|--ranks 2 --gpus 0,1 --cuda-visible-devices GPU-2c3d"
	"ranks=3 gpus=0,1 (more ranks than GPUs)|--ranks 3 --gpus 0,1"
	"ranks=2 slurm-cores=0-3|--ranks 2 --slurm-cores 0-3"
	"ranks=2 cpus=1-3|--ranks 2 --cpus 1-3"
	"ranks=64|--ranks 64"
	"ranks=4 config=nccl.conf|--ranks 4 --config $ncclconf"
)

# The cache needs a root-owned directory (the plugin trusts only root's).
cachedir=""
if [ "$(id -u)" -eq 0 ]; then
	cachedir=$(mktemp -d)
	trap 'rm -rf "$cachedir"' EXIT
else
	tap 0 "# skip the cached-topology runs: the cache is trusted only from root"
fi

# section FILE LABEL: prints the lines under "# LABEL" up to the next header.
section() {
	awk -v want="# $2" '
		/^# / { on = ($0 == want); next }
		on { print }
	' "$1"
}

# nccl_vars: "nccl:" and the NCCL_* assignments of each "env" line of
# ddp-plan's output on stdin, one line per rank.
nccl_vars() {
	awk '/^env rank=/ { v = "nccl:"; for (i = 3; i <= NF; i++) if ($i ~ /^NCCL_/) v = v " " $i; print v }'
}

# nccl_same XML NAME: one rank per GPU (at least 2); with the site's NCCL
# keys every rank has exactly them, without any no rank has an NCCL_*.
nccl_same() {
	local gpus ranks out want
	gpus=$("$plan" --topology "$1" --ranks 1 --config /dev/null | sed -n 's/^plan gpus=\([0-9]*\).*/\1/p')
	ranks=$((gpus > 1 ? gpus : 2))
	want="nccl: NCCL_IB_HCA?==mlx5_0:1,mlx5_1:1 NCCL_SOCKET_IFNAME?=^docker,lo"
	out=$("$plan" --topology "$1" --ranks "$ranks" --config "$ncclconf" | nccl_vars)
	if [ "$(grep -c . <<<"$out")" -eq "$ranks" ] && [ "$(sort -u <<<"$out")" = "$want" ]; then
		tap 0 "$2: all $ranks ranks get the site's NCCL variables, identical"
	else
		tap 1 "$2: all $ranks ranks get the site's NCCL variables, identical"
		sort <<<"$out" | uniq -c | sed 's/^/# /'
	fi
	out=$("$plan" --topology "$1" --ranks "$ranks" --config /dev/null | nccl_vars)
	if [ "$(grep -cx 'nccl:' <<<"$out")" -eq "$ranks" ]; then
		tap 0 "$2: no NCCL variable on any of $ranks ranks without a site setting"
	else
		tap 1 "$2: no NCCL variable on any of $ranks ranks without a site setting"
		sort <<<"$out" | uniq -c | sed 's/^/# /'
	fi
}

for xml in "$topodir"/*.xml; do
	name=$(basename "$xml" .xml)
	exp=$expdir/$name.out
	new=$(mktemp)
	for c in "${cases[@]}"; do
		label=${c%%|*}
		read -r -a args <<<"${c#*|}"
		[[ " ${args[*]} " == *" --config "* ]] || args+=(--config /dev/null)
		got=$("$plan" --topology "$xml" "${args[@]}" 2>&1) || got="$got
exit status $?"
		printf '# %s\n%s\n' "$label" "$got" >>"$new"
		if [ "${UPDATE:-0}" = 1 ]; then
			continue
		fi
		if [ ! -f "$exp" ]; then
			tap 1 "$name $label: no expected file $exp (UPDATE=1 creates it)"
			continue
		fi
		if diff -u <(section "$exp" "$label") <(printf '%s\n' "$got") >/dev/null; then
			tap 0 "$name $label"
		else
			tap 1 "$name $label"
			diff -u <(section "$exp" "$label") <(printf '%s\n' "$got") | sed 's/^/# /' || true
		fi
		[ -n "$cachedir" ] || continue
		cached=$("$plan" --topology "$xml" --cache "$cachedir/topology.xml" "${args[@]}" 2>&1) || cached="$cached
exit status $?"
		if [ "$cached" = "$got" ] && diff -u <(section "$exp" "$label") <(printf '%s\n' "$cached") >/dev/null; then
			tap 0 "$name $label, through the topology cache"
		else
			tap 1 "$name $label, through the topology cache"
			diff -u <(section "$exp" "$label") <(printf '%s\n' "$cached") | sed 's/^/# /' || true
		fi
	done
	if [ "${UPDATE:-0}" = 1 ]; then
		mv "$new" "$exp"
		tap 0 "$name: expected output rewritten"
	else
		rm -f "$new"
	fi
	nccl_same "$xml" "$name"
done
echo "1..$n"
exit "$bad"
