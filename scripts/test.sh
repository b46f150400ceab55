#!/usr/bin/env bash
# Builds and tests rtx:
#   1. build/release  Release build (CUDA when available, tests, bench, examples, the Python
#                     package) + ctest, which runs the C++ tests and pytest on the same library
#   2. hip            every CUDA source compiled with hipcc for an AMD GPU (compile only)
#   3. build/asan     AddressSanitizer + UndefinedBehaviorSanitizer build (CPU only) + ctest
#   4. build/fuzz     bounded fuzzing of the file readers (tests/fuzz/run.sh): the IDX and BPE
#                     readers with libFuzzer + ASan (clang), the safetensors / checkpoint / PyTorch
#                     readers with atheris on build/release's package; skipped when the tool is missing
# Prints a summary and exits non-zero if any step failed.
#
# Environment:
#   RTX_JOBS=N        parallel build/test jobs (default 2)
#   RTX_SKIP_DEPS=1   do not run scripts/install_deps.sh
#   RTX_SKIP_ASAN=1   skip the sanitizer build
#   RTX_ASAN_OPT="-O0 -g"  optimization/debug flags of the sanitizer build
#                     (-O1 catches the same bugs but compiles about 3x slower
#                     with GCC's ASan+UBSan instrumentation)
#   RTX_SKIP_FUZZ=1   skip the fuzzing
#   RTX_FUZZ_SECONDS=N  seconds each fuzz target runs (default 60)
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
JOBS=${RTX_JOBS:-2}

declare -a SUMMARY=()
FAILED=0
START=$SECONDS

# step <name> <command...>: runs a command, records PASS/FAIL and its duration.
step() {
  local name=$1
  shift
  local t0=$SECONDS
  echo
  echo "==> ${name}"
  echo "    \$ $*"
  if "$@"; then
    SUMMARY+=("PASS  ${name} ($((SECONDS - t0))s)")
    return 0
  else
    local rc=$?
    SUMMARY+=("FAIL  ${name} (exit ${rc}, $((SECONDS - t0))s)")
    FAILED=1
    return 1
  fi
}

skip() {
  SUMMARY+=("SKIP  $1")
}

finish() {
  echo
  echo "================ rtx test summary ================"
  local line
  for line in "${SUMMARY[@]}"; do
    echo "  ${line}"
  done
  echo "  total time: $((SECONDS - START))s"
  if [[ ${FAILED} -ne 0 ]]; then
    echo "RESULT: FAILED"
    exit 1
  fi
  echo "RESULT: OK"
  exit 0
}

# configure_build_test <label> <build dir> <cmake args...>
configure_build_test() {
  local label=$1 dir=$2
  shift 2
  if ! step "${label}: configure" cmake -S "${ROOT}" -B "${dir}" -G Ninja "$@"; then
    skip "${label}: build"
    skip "${label}: ctest"
    return
  fi
  if ! step "${label}: build" nice cmake --build "${dir}" --parallel "${JOBS}"; then
    skip "${label}: ctest"
    return
  fi
  step "${label}: ctest" ctest --test-dir "${dir}" --output-on-failure -j "${JOBS}" || true
}

if ! step "install dependencies" scripts/install_deps.sh; then
  finish
fi

# 1. Release build with everything enabled.
configure_build_test release "${ROOT}/build/release" \
  -DCMAKE_BUILD_TYPE=Release \
  -DRTX_BUILD_TESTS=ON \
  -DRTX_BUILD_BENCH=ON \
  -DRTX_BUILD_EXAMPLES=ON \
  -DRTX_BUILD_PYTHON=ON \
  -DRTX_SANITIZE=

# 2. Every CUDA source compiles for AMD GPUs through the HIP alias header (compile only).
if command -v hipcc > /dev/null; then
  step "hip: compile kernels with hipcc" scripts/hip_check.sh "${ROOT}/build/release" || true
else
  skip "hip: (hipcc not installed)"
fi

# 3. Sanitized CPU-only build of the library and the unit tests.
if [[ "${RTX_SKIP_ASAN:-0}" == "1" ]]; then
  skip "asan: (RTX_SKIP_ASAN=1)"
else
  export ASAN_OPTIONS="${ASAN_OPTIONS:-halt_on_error=1:abort_on_error=0:detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:print_summary=1}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1:print_summary=1}"
  export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=${ROOT}/cmake/lsan.supp:print_suppressions=0}"
  configure_build_test asan "${ROOT}/build/asan" \
    -DCMAKE_BUILD_TYPE=Debug \
    "-DCMAKE_CXX_FLAGS_DEBUG=${RTX_ASAN_OPT:--O0 -g}" \
    -DRTX_SANITIZE=address,undefined \
    -DRTX_WITH_CUDA=OFF \
    -DRTX_BUILD_TESTS=ON \
    -DRTX_BUILD_BENCH=OFF \
    -DRTX_BUILD_EXAMPLES=OFF
fi

# 4. Bounded fuzzing of the file readers, from the seed corpora in tests/fuzz/corpus.
if [[ "${RTX_SKIP_FUZZ:-0}" == "1" ]]; then
  skip "fuzz: (RTX_SKIP_FUZZ=1)"
else
  if tests/fuzz/run.sh --have-libfuzzer; then
    step "fuzz: IDX and BPE readers (libFuzzer, ASan, UBSan)" tests/fuzz/run.sh cpp || true
  else
    echo "SKIP fuzz: IDX and BPE readers: clang++ with libFuzzer is not installed (apt-get install clang)"
    skip "fuzz: IDX and BPE readers (clang++ with libFuzzer not installed)"
  fi
  if ! python3 -c "import atheris" 2> /dev/null; then
    echo "SKIP fuzz: safetensors and checkpoint readers: atheris is not installed (pip install atheris)"
    skip "fuzz: safetensors and checkpoint readers (atheris not installed)"
  elif [[ ! -d "${ROOT}/build/release/python/rustytorch" ]]; then
    skip "fuzz: safetensors and checkpoint readers (no Python package in build/release)"
  else
    step "fuzz: safetensors and checkpoint readers (atheris)" \
      tests/fuzz/run.sh python "${ROOT}/build/release/python" || true
  fi
fi

finish
