#!/usr/bin/env bash
# Builds tests/torch/parity.cpp against the rtx build in build/gpu (made by scripts/gpu_check.sh) and
# the libtorch of the installed torch wheel, and runs it: every CUDA op of rtx against PyTorch's on
# the same GPU. Needs python3 with torch (CUDA) and a GPU.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${RTX_BUILD_DIR:-build/gpu}
TORCH=$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')
ABI=$(python3 -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
mkdir -p "$BUILD/torch"
g++ -O1 -std=c++17 -D_GLIBCXX_USE_CXX11_ABI="$ABI" tests/torch/parity.cpp -o "$BUILD/torch/parity" \
  -Iinclude -I"$BUILD/include" -isystem "$TORCH/include" -isystem "$TORCH/include/torch/csrc/api/include" \
  -L"$BUILD" -lrtx -L"$TORCH/lib" -ltorch -ltorch_cpu -ltorch_cuda -lc10 -lc10_cuda \
  -Wl,-rpath,"$(pwd)/$BUILD" -Wl,-rpath,"$TORCH/lib" -Wl,--no-as-needed
"$BUILD/torch/parity"
