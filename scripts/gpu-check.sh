#!/usr/bin/env bash
# GPU checks in two halves, because the GPU machine has no Go toolchain:
#
#   scripts/gpu-check.sh build   # here: compile the test binaries into gpu-check/
#   scripts/gpu-check.sh run     # on the GPU machine: run them, print the results
#
# Today the CUDA backend has only its driver slice (loading, errors, device
# discovery), so the run lists the GPUs and exercises that. Later slices add
# their test binaries here (kernels, bit-equality with sim, bandwidth).
set -euo pipefail
cd "$(dirname "$0")/.."
out=gpu-check

case "${1:-}" in
build)
  mkdir -p "$out"
  CGO_ENABLED=0 go test -c -o "$out/cuda.test" ./hw/cuda
  CGO_ENABLED=0 go build -o "$out/commsim" ./cmd/commsim
  echo "built: $(ls "$out")"
  ;;
run)
  "$out/commsim" devices
  "$out/cuda.test" -test.v -test.run . 2>&1
  ;;
*)
  echo "usage: $0 build|run" >&2
  exit 2
  ;;
esac
