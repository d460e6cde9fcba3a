#!/usr/bin/env bash
# The GPU check, in two halves, because the GPU machine has no Go toolchain.
#
# Here, with Go:
#   scripts/gpu-check.sh build
# writes gpu-check/: cuda.test (hw/cuda's tests) and commsim, both static
# (CGO_ENABLED=0 GOOS=linux GOARCH=amd64) and stripped, about 30 MB in all;
# the build fails if the folder would not fit a 64 MiB carry.
#
# Take the folder to the GPU machine's checkout of the same commit. It is
# git-ignored, so it must be carried explicitly: copy it
# (rsync -a gpu-check/ gpu-host:commsim/gpu-check/), or, with this project's
# device tool, name it: carry ["gpu-check"]. There, from the repository
# root, with only bash, coreutils, grep, sed and python3:
#   scripts/gpu-check.sh run                 # the check
#   scripts/gpu-check.sh run --allow-skip    # a dry run where there is no GPU
#
# run exits 0 only when every part passed; a part that skipped (no driver,
# no GPU, no NCCL) fails the run unless --allow-skip, and a part that failed
# fails it always: a failure is never relabelled. It writes its logs,
# summary.txt and summary.json (parts, timings, figures: kernel and copy
# GB/s, busbw per size, the simulator's prediction beside the CLI's
# measurement, equivalence cases) to $OUT when that is set, else to
# gpu-check/. Each part is its own process with its own time limit, so a
# sticky GPU fault or a hang in one part does not take the next ones down;
# the limits add up to 475 s.
#
# Parts:
#   devices      commsim devices: the driver and NCCL load, the GPUs are listed
#   driver       device discovery, buffers, every kernel against hw.ReduceBytes
#                and hw.DivideBytes (special values, aligned and unaligned)
#   streams      send/recv, events and timing, failures naming ranks, Abort,
#                deadlock detection, bad arguments, the hw conformance suite
#   equivalence  sim vs cuda (virtual ranks) bit for bit: every algorithm x op x
#                dtype x reduce op for p = 2..8 (5,684 cases), then 200 drawn
#   bandwidth    reduce kernels vs a device-to-device copy (1 GiB); ring
#                all-reduce busbw on 2, 4 and 8 virtual ranks; a small
#                message's latency between virtual ranks
#   cli          commsim bench --backend cuda, 4 virtual ranks, ring, --check,
#                with --sim-topo h200-virtual:4's prediction per size
#   backtoback   the same ranks' ring broadcast (a chain) timed as one run and
#                as twenty back to back (-n 20), each beside its prediction:
#                whether the GPU overlaps a chain's runs as the simulator does
#   nccl         NCCL: one rank per GPU in one process, ncclCommInitRank over
#                the TCP rendezvous, algorithm native through ops
#   launcher     commsim bench --backend cuda --algo native started once per
#                GPU as torchrun would (RANK, WORLD_SIZE, LOCAL_RANK,
#                MASTER_ADDR, MASTER_PORT), --check
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
self=scripts/gpu-check.sh # from the repository root, where the script now runs
bin=${GPU_CHECK_DIR:-gpu-check}
carry_limit=$((64 << 20))

usage() {
  echo "usage: $0 build | run [--allow-skip]" >&2
  exit 2
}

build() {
  set -e
  rm -rf "$bin"
  mkdir -p "$bin"
  local flags=(-trimpath -ldflags='-s -w')
  CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go test -c "${flags[@]}" -o "$bin/cuda.test" ./hw/cuda
  CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build "${flags[@]}" -o "$bin/commsim" ./cmd/commsim
  local bytes
  bytes=$(du -sb "$bin" | cut -f1)
  echo "built $bin/: $(ls "$bin" | tr '\n' ' ')($bytes bytes; a carry holds $((carry_limit >> 20)) MiB)"
  if [ "$bytes" -gt "$carry_limit" ]; then
    echo "$bin/ is $bytes bytes, over the $((carry_limit >> 20)) MiB a carry may hold" >&2
    exit 1
  fi
}

res= # where logs and summaries go
gpus=0

# record NAME RESULT REASON SECONDS LIMIT RC appends a part's outcome.
record() {
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "${3//$'\t'/ }" "$4" "$5" "$6" >>"$res/parts.tsv"
  echo "-- $1: $2${3:+ ($3)} in $4s"
}

# first_skip_reason LOG prints what the first skipped test logged last
# (what t.Skip said): go test -v prints a test's log lines after its
# "=== RUN" line, and a subtest's "--- SKIP" line only later, with its
# parent's.
first_skip_reason() {
  local name
  name=$(grep -m1 -oE -- '--- SKIP: [^ ]+' "$1" | sed 's/^--- SKIP: //')
  [ -n "$name" ] || return 0
  awk -v run="=== RUN   $name" '
    $0 == run { on = 1; next }
    on && /^(=== |--- )/ { exit }
    on && /^ +[A-Za-z_0-9]+\.go:[0-9]+: / { sub(/^ +[A-Za-z_0-9]+\.go:[0-9]+: /, ""); said = $0 }
    END { print substr(said, 1, 200) }' "$1"
}

# judge_gotest LOG RC LIMIT TESTS... sets result and reason for a part of
# go tests: each named test must PASS, and nothing in the part may SKIP.
judge_gotest() {
  local log=$1 rc=$2 limit=$3
  shift 3
  result=PASS reason=
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    result=FAIL reason="timed out after ${limit}s, in $(grep -E '^=== (RUN|CONT)' "$log" | tail -n1 | sed -E 's/^=== [A-Z]+ +//')"
    return
  fi
  if grep -q '^panic: test timed out' "$log"; then
    result=FAIL reason="$(grep -m1 '^panic: test timed out' "$log" | sed 's/^panic: //'), in $(grep -A1 'running tests:' "$log" | tail -n1 | tr -d '\t')"
    return
  fi
  if [ "$rc" -ne 0 ]; then
    local failed
    failed=$(grep -oE -- '--- FAIL: [^ ]+' "$log" | sed 's/--- FAIL: //' | head -n5 | tr '\n' ' ')
    result=FAIL reason="exit $rc${failed:+: $failed}"
    [ -z "$failed" ] && reason="exit $rc: $(grep -v '^\s*$' "$log" | tail -n1 | cut -c1-200)"
    return
  fi
  if grep -q 'testing: warning: no tests to run' "$log"; then
    result=FAIL reason="no test matched: were tests renamed?"
    return
  fi
  local t
  for t in "$@"; do
    if ! grep -qE -- "^--- (PASS|SKIP): $t " "$log"; then
      result=FAIL reason="$t did not run"
      return
    fi
  done
  if grep -qE -- '--- SKIP: ' "$log"; then
    result=SKIP reason="$(grep -cE -- '--- SKIP: ' "$log") skipped: $(first_skip_reason "$log")"
  fi
}

# gotest NAME LIMIT PATTERN TESTS... runs cuda.test's tests matching
# PATTERN as one part.
gotest() {
  local name=$1 limit=$2 pattern=$3
  shift 3
  local log="$res/logs/$name.log" start=$SECONDS
  echo "== $name (limit ${limit}s): cuda.test -test.run '$pattern'"
  COMMSIM_FIGURES="$res/figures.jsonl" timeout --kill-after=5 "$limit" \
    "$bin/cuda.test" -test.v -test.count=1 -test.timeout "$((limit - 5))s" -test.run "$pattern" >"$log" 2>&1
  local rc=$?
  judge_gotest "$log" "$rc" "$limit" "$@"
  record "$name" "$result" "$reason" "$((SECONDS - start))" "$limit" "$rc"
}

# cmdpart NAME LIMIT COMMAND... runs a commsim command as one part: PASS
# when it exits 0 and printed at least one JSON record. Without a GPU it
# does not run (the driver part says why), and is SKIP.
cmdpart() {
  local name=$1 limit=$2
  shift 2
  local log="$res/logs/$name.log" start=$SECONDS
  echo "== $name (limit ${limit}s): $*"
  if [ "$gpus" -eq 0 ]; then
    echo "not run: commsim devices lists no GPU (see devices.log)" >"$log"
    record "$name" SKIP "no GPU" 0 "$limit" 0
    return
  fi
  COMMSIM_FIGURES="$res/figures.jsonl" timeout --kill-after=5 "$limit" "$@" >"$log" 2>&1
  local rc=$?
  result=PASS reason=
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    result=FAIL reason="timed out after ${limit}s"
  elif [ "$rc" -ne 0 ]; then
    result=FAIL reason="exit $rc: $(grep -v '^\s*$' "$log" | tail -n1 | cut -c1-200)"
  elif ! grep -q '^{' "$log"; then
    result=FAIL reason="no results printed"
  fi
  record "$name" "$result" "$reason" "$((SECONDS - start))" "$limit" "$rc"
}

# devices runs commsim devices and counts the GPUs it lists.
devices() {
  local log="$res/logs/devices.log" start=$SECONDS limit=15
  echo "== devices (limit ${limit}s): $bin/commsim devices"
  timeout --kill-after=5 "$limit" "$bin/commsim" devices >"$log" 2>&1
  local rc=$?
  result=PASS reason=
  gpus=$(sed -nE 's/^cuda: +([0-9]+) GPU.*/\1/p' "$log" | head -n1)
  gpus=${gpus:-0}
  if [ "$rc" -ne 0 ]; then
    result=FAIL reason="exit $rc: $(tail -n1 "$log")"
    gpus=0
  elif grep -qE '^cuda: +none' "$log"; then
    result=SKIP reason="$(grep -E '^cuda: +none' "$log" | sed -E 's/^cuda: +none: //' | cut -c1-200)"
  elif [ "$gpus" -eq 0 ]; then
    result=FAIL reason="no cuda line in the listing"
  fi
  cat "$log"
  record devices "$result" "$reason" "$((SECONDS - start))" "$limit" "$rc"
}

# launch N starts `commsim bench --backend cuda --algo native` N times, as
# torchrun would (one process per GPU), and waits for all of them. Rank 0's
# report goes to stdout, the others' output to stderr.
launch() {
  local n=$1 port=$((29500 + RANDOM % 2000)) r
  local -a pids
  for ((r = 0; r < n; r++)); do
    RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port COMMSIM_TIMEOUT=30s COMMSIM_NCCL_TIMEOUT=30s \
      "$bin/commsim" bench --backend cuda --algo native --op allreduce -b 1KiB -e 16MiB -f 16 --check --format json \
      >"$res/logs/launcher.rank$r.out" 2>&1 &
    pids+=($!)
  done
  local rc=0
  for ((r = 0; r < n; r++)); do
    wait "${pids[$r]}" || { rc=$?; echo "rank $r: exit $rc: $(tail -n1 "$res/logs/launcher.rank$r.out")" >&2; }
  done
  cat "$res/logs/launcher.rank0.out"
  return $rc
}

run() {
  local allow_skip=0
  case "${1:-}" in
  "") ;;
  --allow-skip) allow_skip=1 ;;
  *) usage ;;
  esac
  if [ ! -x "$bin/cuda.test" ] || [ ! -x "$bin/commsim" ]; then
    echo "no $bin/cuda.test or $bin/commsim: run '$0 build' on a machine with Go, then carry $bin/ here" >&2
    exit 2
  fi
  res=${OUT:-$bin}
  rm -rf "$res/logs" "$res/parts.tsv" "$res/figures.jsonl" "$res/summary.json" "$res/summary.txt"
  mkdir -p "$res/logs"
  : >"$res/parts.tsv"
  local started
  started=$(date -u +%Y-%m-%dT%H:%M:%SZ)

  devices
  gotest driver 40 '^(TestDevices|TestBufferRoundTrip|TestKernelsMatchReduceBytes|TestDivideMatchesDivideBytes|TestCopy)$/^gpu$' \
    TestDevices TestBufferRoundTrip TestKernelsMatchReduceBytes TestDivideMatchesDivideBytes TestCopy
  gotest streams 40 '^(TestSendRecv|TestRecvMismatchFailsNamingRanks|TestEventsOrderAndTime|TestAbortUnblocks|TestDeadlockDetected|TestBadArgumentsOnGPU|TestConformance)$/^gpu$' \
    TestSendRecv TestRecvMismatchFailsNamingRanks TestEventsOrderAndTime TestAbortUnblocks TestDeadlockDetected TestBadArgumentsOnGPU TestConformance
  gotest equivalence 170 '^(TestEquivalenceWithSimGrid|TestEquivalenceWithSimGenerated)$/^gpu$' \
    TestEquivalenceWithSimGrid TestEquivalenceWithSimGenerated
  gotest bandwidth 60 '^(TestReduceBandwidth|TestRingAllReduceBusBW|TestVirtualMessageLatency)$/^gpu$' \
    TestReduceBandwidth TestRingAllReduceBusBW TestVirtualMessageLatency
  cmdpart cli 40 "$bin/commsim" bench --backend cuda --ranks 4 --placement virtual --op allreduce --algo ring \
    -b 1KiB -e 16MiB -f 8 --check --sim-topo h200-virtual:4 --format json
  cmdpart backtoback 25 sh -c "for n in 1 20; do \"$bin/commsim\" bench --backend cuda --ranks 4 --placement virtual --op broadcast --algo ring \
    -b 64KiB -e 16MiB -f 16 -n \$n --sim-topo h200-virtual:4 --format json || exit; done"
  gotest nccl 45 '^(TestNCCLSanity|TestNCCLInitRankRendezvous|TestNCCLUniqueID|TestNCCLNativeOps|TestNCCLNativeRefusesVirtualRanks|TestNCCLJoinNative)$' \
    TestNCCLSanity TestNCCLInitRankRendezvous TestNCCLUniqueID TestNCCLNativeOps TestNCCLNativeRefusesVirtualRanks TestNCCLJoinNative
  cmdpart launcher 40 "$self" _launch "$gpus" "$res"

  local status=pass
  grep -q $'\tFAIL\t' "$res/parts.tsv" && status=fail
  if [ "$allow_skip" -eq 0 ] && grep -q $'\tSKIP\t' "$res/parts.tsv"; then
    status=fail
  fi
  {
    echo "== summary ($status$([ "$allow_skip" -eq 1 ] && echo ', skips allowed'))"
    # A tab is whitespace to read, so an empty reason would shift the
    # fields after it: split on a unit separator instead.
    while IFS=$'\037' read -r name result reason secs limit rc; do
      printf '%-12s %-4s %4ss of %3ss  %s\n' "$name" "$result" "$secs" "$limit" "$reason"
    done < <(tr '\t' '\037' <"$res/parts.tsv")
  } | tee "$res/summary.txt"
  if command -v python3 >/dev/null; then
    python3 scripts/gpu-check-summary.py "$res" "$status" "$allow_skip" "$started" | tee -a "$res/summary.txt" ||
      { echo "writing summary.json failed" >&2; status=fail; }
  else
    echo "python3 not found: no summary.json" | tee -a "$res/summary.txt" >&2
    status=fail
  fi
  echo "logs and summary.json in $res/"
  [ "$status" = pass ]
}

case "${1:-}" in
build) build ;;
run)
  shift
  run "$@"
  ;;
_launch)
  res=$3
  launch "$2"
  ;;
*) usage ;;
esac
