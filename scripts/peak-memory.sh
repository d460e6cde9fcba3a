#!/usr/bin/env bash
# peak-memory.sh: the peak memory (maximum resident set size) of the largest
# case at each documented limit, one process at a time. The rule (issue #17):
# every documented limit runs within 8 GB, or the limit is lowered to what
# does. Not run by CI: the cases take minutes and gigabytes.
#
#   scripts/peak-memory.sh            every case
#   scripts/peak-memory.sh CASE...    the named cases (see the list below)
#
# Each case runs under `ulimit -v` of MAX_GB (default 12) so a runaway case
# fails instead of taking the machine; it prints the case, its peak RSS,
# wall time, exit status and the command. Needs GNU time (/usr/bin/time).
set -euo pipefail

cd "$(dirname "$0")/.."
MAX_GB=${MAX_GB:-12}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/commsim" ./cmd/commsim
commsim=$work/commsim

# model FILE LAYERS NAMEBYTES LINEBYTES: a profile of LAYERS equal layers,
# each line padded with a comment to LINEBYTES.
model() {
	python3 - "$@" <<'EOF'
import sys
path, layers, name_bytes, line_bytes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
with open(path, "w") as f:
    f.write("name: deep\nlayers:\n")
    for i in range(layers):
        name = ("l%d-" % i).ljust(name_bytes, "x")
        line = "  - {name: %s, params: 100000, dtype: bf16, forward: 10us, backward: 20us}" % name
        if len(line) + 3 < line_bytes:
            line += " # " + "p" * (line_bytes - len(line) - 4)
        f.write(line + "\n")
EOF
}

# measure NAME COMMAND...: run one case and print its peak memory.
measure() {
	local name=$1
	shift
	local status=0
	(
		ulimit -v $((MAX_GB * 1024 * 1024))
		/usr/bin/time -v -o "$work/time.txt" "$@" >"$work/out" 2>"$work/err"
	) || status=$?
	local rss wall
	rss=$(awk -F': ' '/Maximum resident set size/ {printf "%.2f GB", $2 / 1e6}' "$work/time.txt")
	wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$work/time.txt")
	printf '%-28s %10s %10s  exit %-3s %s\n' "$name" "$rss" "$wall" "$status" "${*/#$work\//}"
	if [ "$status" != 0 ]; then
		head -c 300 "$work/err" | sed 's/^/    /'
	fi
}

declare -A cases=(
	# topology.MaxNodes (1,048,576) and the issue's cluster:512x512 (524,801 nodes).
	[export-max-nodes]="$commsim topo export switch:1048575"
	[export-cluster-512x512]="$commsim topo export cluster:512x512"
	# topology.MaxLinks (4,194,304): the largest mesh under it, 4,191,960 links.
	[export-max-links]="$commsim topo export mesh:2896"
	# topology.MaxYAMLBytes (256 MiB): reading back the largest export, mesh:2896 (about 200 MB).
	[load-max-links]="$commsim topo validate $work/mesh.yaml"
	# model.MaxLayers (100,000) with --sharded on 64 ranks, mirrored (the default) and every rank simulated.
	[train-max-layers-sharded]="$commsim train --model $work/deep.yaml --topo switch:64 --sharded"
	[train-max-layers-every-rank]="$commsim train --model $work/deep.yaml --topo switch:64 --sharded --symmetry=false"
	# model.MaxLayers with --trace on 4 ranks: refused at the default --trace-max of 1 GiB.
	[train-max-layers-trace]="$commsim train --model $work/deep.yaml --topo switch:4 --trace $work/trace.json"
	# model.MaxYAMLBytes (64 MiB): 100,000 layers with 256-byte names, padded to 64 MiB less a little.
	[load-max-model]="$commsim train --model $work/wide.yaml --topo switch:2"
	# ops.MaxRanks (262,144): an all-reduce over as many ranks as a switch takes, timing only.
	[bench-max-ranks]="$commsim bench --topo switch:262143 -b 1MiB -e 1MiB --timing-only"
	# sim.DefaultMaxDataBytes (4 GiB): the largest data-carrying all-reduce bench allows
	# (it counts input, output and scratch: 3 x 170 MiB x 8 ranks).
	[bench-max-data]="$commsim bench --topo switch:8 -b 170MiB -e 170MiB --data"
)
order=(export-max-nodes export-cluster-512x512 export-max-links load-max-links train-max-layers-sharded
	train-max-layers-every-rank train-max-layers-trace load-max-model bench-max-ranks bench-max-data)

selected=("$@")
if [ ${#selected[@]} = 0 ]; then
	selected=("${order[@]}")
fi
printf '%-28s %10s %10s  %s\n' case "peak RSS" wall command
for name in "${selected[@]}"; do
	if [ -z "${cases[$name]+x}" ]; then
		echo "peak-memory.sh: unknown case $name (want one of: ${order[*]})" >&2
		exit 2
	fi
	case $name in
	load-max-links) [ -s "$work/mesh.yaml" ] || "$commsim" topo export mesh:2896 >"$work/mesh.yaml" ;;
	train-*) [ -s "$work/deep.yaml" ] || model "$work/deep.yaml" 100000 8 0 ;;
	load-max-model) [ -s "$work/wide.yaml" ] || model "$work/wide.yaml" 100000 256 671 ;;
	esac
	# shellcheck disable=SC2086 # the case's words are its arguments
	measure "$name" ${cases[$name]}
done
