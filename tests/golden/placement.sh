#!/usr/bin/env bash
# Golden tests of the rank placement: runs ddp-plan on every hwloc XML in
# ../shared/topologies with several rank counts and options, and diffs each
# case against tests/golden/placement/<topology>.out, where cases sit under
# "# label" headers. UPDATE=1 rewrites the expected files instead.
set -euo pipefail
cd "$(dirname "$0")/../.."
top=$PWD
plan=$top/${BUILD:-build}/bin/ddp-plan
topodir=$(cd "$top/.." && pwd)/shared/topologies
expdir=$top/tests/golden/placement
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

# Cases: label and ddp-plan arguments (the topology is added).
cases=(
	"ranks=1|--ranks 1"
	"ranks=2|--ranks 2"
	"ranks=3|--ranks 3"
	"ranks=4|--ranks 4"
	"ranks=8|--ranks 8"
	"ranks=4 bind=numa|--ranks 4 --bind numa"
	"ranks=4 bind=none|--ranks 4 --bind none"
	"ranks=2 gpus=1,2|--ranks 2 --gpus 1,2"
	"ranks=2 slurm-cores=0-3|--ranks 2 --slurm-cores 0-3"
	"ranks=2 cpus=1-3|--ranks 2 --cpus 1-3"
	"ranks=64|--ranks 64"
)

# section FILE LABEL: prints the lines under "# LABEL" up to the next header.
section() {
	awk -v want="# $2" '
		/^# / { on = ($0 == want); next }
		on { print }
	' "$1"
}

for xml in "$topodir"/*.xml; do
	name=$(basename "$xml" .xml)
	exp=$expdir/$name.out
	new=$(mktemp)
	for c in "${cases[@]}"; do
		label=${c%%|*}
		read -r -a args <<<"${c#*|}"
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
	done
	if [ "${UPDATE:-0}" = 1 ]; then
		mv "$new" "$exp"
		tap 0 "$name: expected output rewritten"
	else
		rm -f "$new"
	fi
done
echo "1..$n"
exit "$bad"
