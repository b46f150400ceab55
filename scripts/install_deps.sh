#!/usr/bin/env bash
# Installs the system packages needed to build and test rtx (Debian/Ubuntu), then the Python
# packages the Python tests need (pip). Idempotent: apt and pip are skipped when everything is there.
# Set RTX_SKIP_DEPS=1 to skip this step.
set -euo pipefail

if [[ "${RTX_SKIP_DEPS:-0}" == "1" ]]; then
  echo "install_deps: skipped (RTX_SKIP_DEPS=1)"
  exit 0
fi

# Needed to configure, build and test; the last two are the trainers' data (Fashion-MNIST and the
# King James Bible).
required=(cmake ninja-build g++ pkg-config libgtest-dev libbenchmark-dev
          libfmt-dev libspdlog-dev libopenblas-dev zlib1g-dev python3 pybind11-dev
          dataset-fashion-mnist bible-kjv)
# Nice to have: the build works without them (libdnnl-dev: oneDNN's CPU convolutions; libgloo-dev: the
# gloo backend of rustytorch.distributed; hipcc: the AMD compile check of the CUDA sources; clang with
# compiler-rt: the libFuzzer targets of the file readers).
optional=(ccache python3-numpy libdnnl-dev libgloo-dev hipcc clang libclang-rt-14-dev)

is_installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

missing_required=()
missing_optional=()
for pkg in "${required[@]}"; do
  is_installed "$pkg" || missing_required+=("$pkg")
done
for pkg in "${optional[@]}"; do
  is_installed "$pkg" || missing_optional+=("$pkg")
done

# The Python packages of the trainers and the tests, into the python3 on PATH (the one the build
# binds to).
# atheris (the fuzzer of the Python file readers) is optional: the fuzz step skips without it.
python_deps() {
  if ! python3 -c 'import numpy, pytest, safetensors, tqdm, matplotlib' 2>/dev/null; then
    echo "install_deps: installing numpy, pytest, safetensors, tqdm and matplotlib with pip"
    python3 -m pip install --quiet numpy pytest safetensors tqdm matplotlib
  fi
  if ! python3 -c 'import atheris' 2>/dev/null; then
    echo "install_deps: installing atheris with pip"
    python3 -m pip install --quiet --only-binary=:all: atheris ||
      echo "install_deps: warning: could not install atheris; the Python readers will not be fuzzed" >&2
  fi
}

missing=("${missing_required[@]}" "${missing_optional[@]}")
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install_deps: all packages present"
  python_deps
  exit
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install_deps: apt-get not available; please install: ${missing[*]}" >&2
  [[ ${#missing_required[@]} -eq 0 ]] && exit 0 || exit 1
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
  else
    echo "install_deps: not root and no sudo; please install: ${missing[*]}" >&2
    [[ ${#missing_required[@]} -eq 0 ]] && exit 0 || exit 1
  fi
fi

echo "install_deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if "${sudo[@]}" apt-get update \
   && "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"; then
  python_deps
  exit
fi

# apt failed (e.g. no network). Only a missing required package is fatal.
still_missing=()
for pkg in "${missing_required[@]}"; do
  is_installed "$pkg" || still_missing+=("$pkg")
done
if [[ ${#still_missing[@]} -gt 0 ]]; then
  echo "install_deps: failed to install required packages: ${still_missing[*]}" >&2
  exit 1
fi
echo "install_deps: warning: could not install optional packages: ${missing_optional[*]}" >&2
python_deps
