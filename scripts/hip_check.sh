#!/usr/bin/env bash
# Compiles every CUDA source of rtx (kernels/cuda/*.cu, kernels/cuda/*.cpp and the runtime code in src/backend/cuda)
# with hipcc for an AMD GPU (gfx90a), compile only: proves the sources stay portable through
# kernels/cuda/compat.h. The cuBLASLt and cuDNN wrappers are left out: on AMD their place is taken
# by other libraries (hipBLASLt, MIOpen), not by the same source. Needs hipcc (apt-get install hipcc) and a configured build dir for the
# generated rtx/config.h (first argument, default build/release). RTX_JOBS files compile at a time
# (default 2); the results print in source order.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${1:-build/release}
OUT_DIR="$BUILD/hip-check"
mkdir -p "$OUT_DIR"
command -v hipcc > /dev/null || { echo "hipcc not found: apt-get install hipcc"; exit 1; }
HAVE_HIPCUB=0
echo '#include <hipcub/hipcub.hpp>' | hipcc -x hip -fsyntax-only - 2> /dev/null && HAVE_HIPCUB=1

# check_one <source>: compiles it (syntax and semantics of host and device code, templates
# instantiated; no code generation) and writes its result line to $OUT_DIR/<name>.result.
check_one() {
  local src=$1 name
  name=$(basename "$src")
  if [[ $HAVE_HIPCUB == 0 ]] && grep -q "RTX_CUB_HEADER" "$src"; then
    echo "skip  $src (needs hipCUB, which this system does not have)" > "$OUT_DIR/$name.result"
  elif hipcc -x hip --offload-arch=gfx90a -std=c++17 -fsyntax-only "$src" \
         -DRTX_USE_HIP -DSPDLOG_FMT_EXTERNAL -Iinclude -I"$BUILD/include" -Isrc -I. 2> "$OUT_DIR/$name.log"; then
    echo "ok    $src" > "$OUT_DIR/$name.result"
  else
    { echo "FAIL  $src"; head -20 "$OUT_DIR/$name.log"; } > "$OUT_DIR/$name.result"
  fi
}
export -f check_one
export BUILD OUT_DIR HAVE_HIPCUB

sources=()
for src in kernels/cuda/*.cu kernels/cuda/*.cpp src/backend/cuda/*.cpp; do
  case "$src" in */unavailable.cpp | */caching_allocator.cpp | */cuda/linalg.cpp | */cuda/conv.cpp) continue ;; esac
  sources+=("$src")
done
rm -f "$OUT_DIR"/*.result
printf '%s\0' "${sources[@]}" | xargs -0 -n 1 -P "${RTX_JOBS:-2}" bash -c 'check_one "$0"'
FAILED=0
for src in "${sources[@]}"; do
  result="$OUT_DIR/$(basename "$src").result"
  if [[ ! -f $result ]]; then
    echo "FAIL  $src (no result)"
    FAILED=1
    continue
  fi
  cat "$result"
  grep -q "^FAIL" "$result" && FAILED=1
done
exit $FAILED
