#!/usr/bin/env bash
# The main job: installs what is needed, builds the library and its Python package (Release), and
# runs the bundled trainer: by default the CNN on Fashion-MNIST (on the GPU when there is one).
# Arguments replace the default, e.g.
#   scripts/train.sh mlp --epochs 5
#   scripts/train.sh gpt --preset cpu
#   scripts/train.sh --help
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
JOBS=${RTX_JOBS:-2}

scripts/install_deps.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DRTX_BUILD_PYTHON=ON > build-configure.log 2>&1 \
  || { cat build-configure.log; exit 1; }
rm -f build-configure.log
echo "train: building the library and the Python package (a few minutes the first time)"
cmake --build build/release --parallel "${JOBS}" --target rtx_python
[[ $# -eq 0 ]] && set -- cnn
PYTHONPATH="$(pwd)/build/release/python${PYTHONPATH:+:${PYTHONPATH}}" exec python3 -m rustytorch.train "$@"
