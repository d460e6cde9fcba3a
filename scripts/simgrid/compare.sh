#!/usr/bin/env bash
# Times SimGrid's SMPI and commsim on the same timing-only ring all-reduce
# of 1 MiB over switch:N (default 1024), and prints both predicted times.
#
#   apt-get install simgrid libsimgrid-dev   # SimGrid is not a dependency
#   scripts/simgrid/compare.sh [N]
#
# The SimGrid side models the fabric of commsim's switch:N: every GPU has a
# private split-duplex link of 100 GB/s and 1 us to a non-blocking switch.
# It uses SMPI's ring all-reduce ("lr": reduce-scatter then all-gather
# around a logical ring, unpipelined, as commsim's ring), the plain
# latency-plus-size/bandwidth network model (CM02, no TCP window, no
# cross-traffic), no simulated computation (commsim's switch:N reduces for
# free) and shared buffers, so neither side moves data.
set -euo pipefail
n=${1:-1024}
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
command -v smpicc >/dev/null || { echo "smpicc not found: apt-get install simgrid libsimgrid-dev" >&2; exit 1; }
smpicc -O2 -o "$work/allreduce" scripts/simgrid/allreduce.c
cat >"$work/switch.xml" <<XML
<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
  <cluster id="switch" prefix="gpu" suffix="" radical="0-$((n - 1))" speed="1Gf"
           bw="100GBps" lat="1us" sharing_policy="SPLITDUPLEX"
           bb_bw="1000000GBps" bb_lat="0us" bb_sharing_policy="FATPIPE"/>
</platform>
XML
seq 0 $((n - 1)) | sed 's/^/gpu/' >"$work/hosts"
go build -o "$work/commsim" ./cmd/commsim

echo "== SimGrid SMPI, $n ranks"
/usr/bin/time -f "wall %e s, peak %M KB" smpirun -np "$n" -platform "$work/switch.xml" -hostfile "$work/hosts" \
	--cfg=smpi/allreduce:lr --cfg=network/model:CM02 --cfg=network/crosstraffic:0 \
	--cfg=network/TCP-gamma:0 --cfg=smpi/simulate-computation:no "$work/allreduce" 2>&1 | grep -v '^\['
echo "== commsim, switch:$n (out-of-place and in-place: two collectives)"
/usr/bin/time -f "wall %e s, peak %M KB" "$work/commsim" bench --topo "switch:$n" --op allreduce --algo ring \
	-b 1MiB -e 1MiB --timing-only --format csv
