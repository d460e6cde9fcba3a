#!/usr/bin/env bash
# GPU checks in two halves, because the GPU machine has no Go toolchain:
#
#   scripts/gpu-check.sh build   # here: compile the test binaries into gpu-check/
#   scripts/gpu-check.sh run     # on the GPU machine: run them, print a summary
#
# `run` takes well under 10 minutes on one H200 (each part has its own time
# limit, listed below) and ends with one line per part, PASS, FAIL or SKIP,
# followed by the bandwidth figures the tests logged. A part is SKIP when
# its tests skipped the GPU (no driver, no GPU): read its log for why. Full
# logs are in gpu-check/logs/.
#
# Parts:
#   devices      commsim devices: the driver loads and lists the GPUs
#   driver       device discovery, buffers, every kernel against hw.ReduceBytes
#                and hw.DivideBytes (special values, aligned and unaligned)
#   streams      send/recv (receive first, FIFO, peers), events and timing,
#                failures naming ranks, Abort, deadlock detection, bad arguments
#   equivalence  sim vs cuda (virtual ranks) bit for bit: every algorithm x op x
#                dtype x reduce op for p = 2..8, then 200 generated cases
#   bandwidth    reduce kernels vs a device-to-device copy; ring all-reduce busbw
#   cli          commsim bench --backend cuda on 4 virtual ranks, ring, --check
#   nccl         NCCL sanity and algorithm native through ops.Executor, one rank
#                per GPU (every test of cuda.test named *NCCL*); SKIP, with the
#                reason, when a test could not reach NCCL or a GPU (no
#                libnccl.so.2: set COMMSIM_NCCL_LIBRARY to its path)
set -uo pipefail
cd "$(dirname "$0")/.."
out=gpu-check

build() {
  set -e
  mkdir -p "$out"
  CGO_ENABLED=0 go test -c -o "$out/cuda.test" ./hw/cuda
  CGO_ENABLED=0 go build -o "$out/commsim" ./cmd/commsim
  echo "built: $(ls "$out")"
}

declare -a names results

# part NAME SECONDS COMMAND...: runs COMMAND under a time limit into
# logs/NAME.log and records PASS, FAIL or SKIP.
part() {
  local name=$1 limit=$2
  shift 2
  local log="$out/logs/$name.log"
  echo "== $name (limit ${limit}s): $*"
  local start=$SECONDS
  timeout --kill-after=10 "$limit" "$@" >"$log" 2>&1
  local rc=$?
  local result=PASS
  if [ $rc -ne 0 ]; then
    result=FAIL
    [ $rc -eq 124 ] && result="FAIL (timed out after ${limit}s)"
    grep -q 'no usable NVIDIA driver' "$log" && result="SKIP (no driver)"
  elif [ "$name" = devices ]; then
    grep -qE '^cuda: +none' "$log" && result=SKIP
  elif [ "$name" = nccl ]; then
    # Most NCCL tests need neither NCCL nor a GPU and pass anywhere; the
    # ones that do skip, after a line with the reason. Any such skip
    # means NCCL itself was not (fully) checked. The C stand-in's tests
    # (TestNCCLFake*) skip only for want of a C compiler: not a GPU matter.
    local skips total why
    skips=$(grep -E -- '^--- SKIP: Test' "$log" | grep -vc -- 'TestNCCLFake')
    total=$(grep -cE -- '^--- (PASS|SKIP): Test' "$log")
    if [ "$skips" -gt 0 ]; then
      why=$(awk '/^--- SKIP: Test/ && $3 !~ /^TestNCCLFake/ { sub(/^ +[a-z_]+\.go:[0-9]+: /, "", prev); print substr(prev, 1, 160); exit }
        { prev = $0 }' "$log")
      result="SKIP ($skips of $total tests skipped: $why)"
    fi
  elif grep -qE -- '--- SKIP: Test[A-Za-z]+(/gpu)? ' "$log" && ! grep -qE -- '--- PASS: Test[A-Za-z]+/gpu ' "$log"; then
    result=SKIP
  fi
  tail -n 40 "$log"
  echo "-- $name: $result ($((SECONDS - start))s)"
  names+=("$name")
  results+=("$result")
}

run() {
  mkdir -p "$out/logs"
  local t="$out/cuda.test"
  if [ ! -x "$t" ]; then
    echo "no $t: run '$0 build' on a machine with Go first" >&2
    exit 2
  fi
  part devices 60 "$out/commsim" devices
  part driver 180 "$t" -test.v -test.timeout 170s \
    -test.run '^(TestDevices|TestBufferRoundTrip|TestKernelsMatchReduceBytes|TestDivideMatchesDivideBytes|TestCopy)$'
  part streams 120 "$t" -test.v -test.timeout 110s \
    -test.run '^(TestSendRecv|TestRecvMismatchFailsNamingRanks|TestEventsOrderAndTime|TestAbortUnblocks|TestDeadlockDetected|TestBadArgumentsOnGPU)$'
  part equivalence 240 "$t" -test.v -test.timeout 230s \
    -test.run '^(TestEquivalenceWithSimGrid|TestEquivalenceWithSimGenerated)$/gpu'
  part bandwidth 120 "$t" -test.v -test.timeout 110s \
    -test.run '^(TestReduceBandwidth|TestRingAllReduceBusBW)$/gpu'

  part cli 120 "$out/commsim" bench --backend cuda --ranks 4 --placement virtual \
    --op allreduce --algo ring -b 1KiB -e 64MiB -f 8 --check

  # ---- NCCL sanity --------------------------------------------------------
  # The NCCL tests live in the same test binary (hw/cuda/nccl*_test.go and
  # native_gpu_test.go); this part runs every test named *NCCL*. Those that
  # need NCCL and a GPU skip without them, and part reports SKIP then.
  local nccl_tests
  nccl_tests=$("$t" -test.list 'NCCL' 2>/dev/null || true)
  if [ -n "$nccl_tests" ]; then
    part nccl 120 "$t" -test.v -test.timeout 110s -test.run 'NCCL'
  else
    names+=(nccl)
    results+=("SKIP (no NCCL tests in cuda.test)")
  fi
  # ---- end of NCCL sanity -------------------------------------------------

  echo
  echo "== summary"
  local failed=0
  for i in "${!names[@]}"; do
    printf '%-12s %s\n' "${names[$i]}" "${results[$i]}"
    case "${results[$i]}" in FAIL*) failed=1 ;; esac
  done
  echo
  echo "== bandwidth (GB/s = 1e9 bytes/s, bytes read + written)"
  grep -hE 'GB/s|busbw|^\s+equiv_test.go:[0-9]+: +[0-9]+ +[0-9]+ ' "$out/logs/bandwidth.log" 2>/dev/null |
    sed -E 's/^\s+equiv_test.go:[0-9]+: //' || true
  grep -hE 'cases, [0-9]+ failed' "$out/logs/equivalence.log" 2>/dev/null | sed -E 's/^\s+equiv_test.go:[0-9]+: /equivalence grid: /' || true
  return $failed
}

case "${1:-}" in
build) build ;;
run) run ;;
*)
  echo "usage: $0 build|run" >&2
  exit 2
  ;;
esac
