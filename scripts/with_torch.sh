#!/usr/bin/env bash
# Builds one C++ program that uses both rtx (the CUDA build in build/gpu, made by scripts/gpu_check.sh)
# and the libtorch of the installed torch wheel, and runs it with the remaining arguments:
#   scripts/with_torch.sh tests/torch/parity.cpp         every CUDA op of rtx against PyTorch's
#   scripts/with_torch.sh bench/torch/compare.cpp [reps] side-by-side timings
# Needs python3 with a CUDA build of torch, and a GPU.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SOURCE=$1
shift
BUILD=${RTX_BUILD_DIR:-build/gpu}
TORCH=$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')
ABI=$(python3 -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
BIN="$BUILD/torch/$(basename "${SOURCE%.cpp}")"
mkdir -p "$BUILD/torch"
g++ -O2 -std=c++17 -D_GLIBCXX_USE_CXX11_ABI="$ABI" "$SOURCE" -o "$BIN" \
  -Iinclude -I"$BUILD/include" -isystem "$TORCH/include" -isystem "$TORCH/include/torch/csrc/api/include" \
  -L"$BUILD" -lrtx -L"$TORCH/lib" -Wl,--no-as-needed -ltorch -ltorch_cpu -ltorch_cuda -lc10 -lc10_cuda \
  -Wl,-rpath,"$(pwd)/$BUILD" -Wl,-rpath,"$TORCH/lib"
"$BIN" "$@"
