#!/usr/bin/env bash
# Compiles every CUDA source of rtx (kernels/cuda/*.cu, kernels/cuda/*.cpp and the runtime code in src/backend/cuda)
# with hipcc for an AMD GPU (gfx90a), compile only: proves the sources stay portable through
# kernels/cuda/compat.h. The cuBLASLt and cuDNN wrappers are left out: on AMD their place is taken
# by other libraries (hipBLASLt, MIOpen), not by the same source. Needs hipcc (apt-get install hipcc) and a configured build dir for the
# generated rtx/config.h (first argument, default build/release).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${1:-build/release}
OUT_DIR="$BUILD/hip-check"
mkdir -p "$OUT_DIR"
command -v hipcc > /dev/null || { echo "hipcc not found: apt-get install hipcc"; exit 1; }
FAILED=0
HAVE_HIPCUB=0
echo '#include <hipcub/hipcub.hpp>' | hipcc -x hip -fsyntax-only - 2> /dev/null && HAVE_HIPCUB=1
for src in kernels/cuda/*.cu kernels/cuda/*.cpp src/backend/cuda/*.cpp; do
  case "$src" in */unavailable.cpp | */caching_allocator.cpp | */cuda/linalg.cpp | */cuda/conv.cpp) continue ;; esac
  if [[ $HAVE_HIPCUB == 0 ]] && grep -q "RTX_CUB_HEADER" "$src"; then
    echo "skip  $src (needs hipCUB, which this system does not have)"
    continue
  fi
  # Syntax and semantics of host and device code, templates instantiated; no code generation.
  if hipcc -x hip --offload-arch=gfx90a -std=c++17 -fsyntax-only "$src" \
       -DRTX_USE_HIP -DSPDLOG_FMT_EXTERNAL -Iinclude -I"$BUILD/include" -Isrc -I. 2> "$OUT_DIR/$(basename "$src").log"; then
    echo "ok    $src"
  else
    echo "FAIL  $src"
    head -20 "$OUT_DIR/$(basename "$src").log"
    FAILED=1
  fi
done
exit $FAILED
