#!/usr/bin/env bash
# The main job: installs what is needed, builds rtx (Release) and trains the bundled C++ MLP example.
# Extra arguments go to the trainer, e.g. scripts/train.sh --steps 3000 --seed 1
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
JOBS=${RTX_JOBS:-2}

scripts/install_deps.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DRTX_BUILD_EXAMPLES=ON > build-configure.log 2>&1 \
  || { cat build-configure.log; exit 1; }
rm -f build-configure.log
cmake --build build/release --parallel "${JOBS}" --target train_mlp
exec build/release/examples/train_mlp "$@"
