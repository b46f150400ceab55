#!/usr/bin/env bash
# Builds rtx on the GPU machine and runs the whole C++ suite there (CUDA cases included once the
# CUDA backend registers kernels). Logs go to $OUT (or ./gpu-check-logs); a summary is printed last.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
LOGS=${OUT:-gpu-check-logs}
mkdir -p "$LOGS"
JOBS=${RTX_JOBS:-$(nproc)}

cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DRTX_BUILD_TESTS=ON -DRTX_BUILD_EXAMPLES=ON -DRTX_BUILD_BENCH=ON > "$LOGS/configure.log" 2>&1
cfg=$?
build=1
tests=1
if [[ $cfg -eq 0 ]]; then
  cmake --build build/gpu --parallel "$JOBS" > "$LOGS/build.log" 2>&1
  build=$?
fi
if [[ $build -eq 0 ]]; then
  ctest --test-dir build/gpu --output-on-failure -j "$JOBS" > "$LOGS/ctest.log" 2>&1
  tests=$?
fi
echo "==== gpu_check summary ===="
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
echo "configure rc=$cfg build rc=$build ctest rc=$tests"
[[ $build -ne 0 ]] && grep -E "error|FAILED" "$LOGS/build.log" | head -20
[[ -f "$LOGS/ctest.log" ]] && grep -E "tests passed|tests failed|Failed|\(Failed\)|\*\*\*" "$LOGS/ctest.log" | head -40
exit $(( cfg || build || tests ))
