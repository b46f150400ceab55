#!/usr/bin/env bash
# Bounded fuzzing of the file readers, from the seed corpora in tests/fuzz/corpus:
#   tests/fuzz/run.sh cpp               builds build/fuzz with clang (libFuzzer, ASan, UBSan) and runs
#                                       rtx_fuzz_idx (the IDX reader) and rtx_fuzz_bpe (the BPE format)
#   tests/fuzz/run.sh python <pkgdir>   runs fuzz_load.py (atheris: safetensors, checkpoints, PyTorch
#                                       zip files) on the rustytorch package in <pkgdir>
#   tests/fuzz/run.sh --have-libfuzzer  exits 0 when clang++ can build a libFuzzer target
# Each target runs RTX_FUZZ_SECONDS (default 60). New inputs go to build/fuzz/corpus/<target> (the
# repository's corpus is only read); findings to build/fuzz/findings (crash-*, oom-*, timeout-*;
# replay one by passing it to the target, e.g. build/fuzz/rtx_fuzz_idx build/fuzz/findings/crash-...).
# Prints each target's executions and findings; exits non-zero when a target found anything.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$(pwd)
OUT="${ROOT}/build/fuzz"
SECONDS_EACH=${RTX_FUZZ_SECONDS:-60}
FLAGS=(-max_total_time="${SECONDS_EACH}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
       -artifact_prefix="${OUT}/findings/")

have_libfuzzer() {
  command -v clang++ > /dev/null || return 1
  local probe
  probe=$(mktemp -d)
  echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' > "${probe}/p.cpp"
  clang++ -fsanitize=fuzzer,address "${probe}/p.cpp" -o "${probe}/p" > /dev/null 2>&1
  local rc=$?
  rm -rf "${probe}"
  return ${rc}
}

# run_target <corpus name> <command...>: one bounded run; prints its executions and findings.
run_target() {
  local name=$1
  shift
  mkdir -p "${OUT}/corpus/${name}" "${OUT}/findings"
  local log="${OUT}/${name}.log" before after
  before=$(find "${OUT}/findings" -type f | wc -l)
  "$@" "${FLAGS[@]}" "${OUT}/corpus/${name}" "${ROOT}/tests/fuzz/corpus/${name}" > "${log}" 2>&1
  local rc=$?
  after=$(find "${OUT}/findings" -type f | wc -l)
  local runs
  runs=$(grep -a -o 'Done [0-9]* runs in [0-9]* second' "${log}" | tail -1)
  echo "fuzz ${name}: ${runs:-no summary} (exit ${rc}), $((after - before)) findings; log ${log}"
  if [[ ${rc} -ne 0 || ${after} -ne ${before} ]]; then
    grep -a -m 20 -E 'ERROR|Uncaught|SUMMARY|Traceback|Error:' "${log}"
    return 1
  fi
}

case "${1:-}" in
  --have-libfuzzer)
    have_libfuzzer
    ;;
  cpp)
    mkdir -p "${OUT}"
    cmake -S "${ROOT}/tests/fuzz" -B "${OUT}" -G Ninja -DCMAKE_CXX_COMPILER=clang++ > "${OUT}/configure.log" 2>&1 ||
      { cat "${OUT}/configure.log"; exit 1; }
    nice cmake --build "${OUT}" --parallel "${RTX_JOBS:-2}" || exit 1
    # The two targets (one process each) run side by side unless RTX_JOBS is 1; reports in order.
    run_target idx "${OUT}/rtx_fuzz_idx" -malloc_limit_mb=256 > "${OUT}/idx.report" 2>&1 &
    idx=$!
    if [[ ${RTX_JOBS:-2} -lt 2 ]]; then wait ${idx}; idx_rc=$?; fi
    run_target bpe "${OUT}/rtx_fuzz_bpe" > "${OUT}/bpe.report" 2>&1
    bpe_rc=$?
    if [[ ${RTX_JOBS:-2} -ge 2 ]]; then wait ${idx}; idx_rc=$?; fi
    cat "${OUT}/idx.report" "${OUT}/bpe.report"
    [[ ${idx_rc} -eq 0 && ${bpe_rc} -eq 0 ]]
    ;;
  python)
    [[ $# -eq 2 ]] || { echo "usage: $0 python <directory holding the rustytorch package>" >&2; exit 2; }
    PYTHONPATH="$2" run_target load python3 "${ROOT}/tests/fuzz/fuzz_load.py" -dict="${ROOT}/tests/fuzz/load.dict"
    ;;
  *)
    echo "usage: $0 cpp | python <package dir> | --have-libfuzzer" >&2
    exit 2
    ;;
esac
