#!/usr/bin/env bash
# The proof on a GPU machine: builds rtx with CUDA (build/gpu), runs the whole C++ suite (every
# device-parametrized test runs on CUDA too), runs the CUDA tests under compute-sanitizer memcheck,
# and checks every CUDA op against PyTorch (tests/torch/parity.cpp) when torch is installed.
# Logs go to $OUT (or ./gpu-check-logs); a summary is printed last.
# The Python package is built into the same tree (build/gpu/python) and its pytest suite runs as
# part of ctest, with the torch DLPack round trips where torch is installed.
#   RTX_GPU_STAGES="build test sanitize parity bench pip train"   the stages to run (default: all but
#   bench, the host time of a bare launch, the side-by-side timings of bench/torch/compare.cpp and the
#   Python per-op overhead; pip, which installs the package offline with pip into a scratch prefix;
#   graphs, CUDA graphs beside PyTorch's (bench/python/cuda_graphs.py: tiny ops, MLP, LeNet and
#   GPT-2 steps eager and captured) and the bundled trainers with --cuda-graph; train, which runs the bundled trainers on the GPU and their
#   training throughput beside PyTorch's, on the GPU and on two CPU cores; ddp1, the GPT trainer under rtx-run on one GPU
#   (DistributedDataParallel over nccl) against the plain run; and multigpu, for two or more GPUs: the
#   distributed tests at that world size, all_reduce bandwidth and DDP GPT-2 on 1 and N GPUs (plain
#   and ZeRO) beside PyTorch, and the GPT trainer under rtx-run)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
LOGS=${OUT:-gpu-check-logs}
mkdir -p "$LOGS"
JOBS=${RTX_JOBS:-$(nproc)}
STAGES=${RTX_GPU_STAGES:-build test sanitize parity}
declare -a SUMMARY=()
FAILED=0

# stage <name> <log> <command...>
stage() {
  local name=$1 log=$2
  shift 2
  [[ " $STAGES " == *" $name "* ]] || return 0
  local t0=$SECONDS
  if "$@" > "$LOGS/$log" 2>&1; then
    SUMMARY+=("PASS  $name ($((SECONDS - t0))s)")
  else
    SUMMARY+=("FAIL  $name ($((SECONDS - t0))s, see $log)")
    FAILED=1
  fi
}

build() {
  cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DRTX_BUILD_TESTS=ON -DRTX_BUILD_EXAMPLES=ON -DRTX_BUILD_BENCH=ON -DRTX_BUILD_PYTHON=ON \
    -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" && cmake --build build/gpu --parallel "$JOBS" -- -k 0
}
sanitize() {
  # The out-of-memory test makes cudaMalloc fail on purpose, which memcheck would report. libnccl
  # probes its kernels with calls that fail by design (cudaFuncGetAttributes on images for other
  # GPUs), so the nccl tests run with API errors unreported (our own calls raise on any error).
  compute-sanitizer --tool memcheck --error-exitcode 1 build/gpu/tests/cpp/rtx_tests \
    --gtest_filter='*/cuda:CudaRuntime.*:CudaGraph.*-CudaRuntime.OutOfMemoryNamesTheRequest' --gtest_brief=1 &&
  NCCL_NVLS_ENABLE=0 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 1 \
    build/gpu/tests/cpp/rtx_tests --gtest_filter='DistributedNccl.*' --gtest_brief=1
}

pip_install() {
  # Offline, against the installed scikit-build-core and pybind11; the import runs outside the tree.
  local prefix; prefix=$(mktemp -d)
  CMAKE_ARGS="-DCMAKE_CUDA_ARCHITECTURES=90" CMAKE_BUILD_PARALLEL_LEVEL=$JOBS \
    python3 -m pip install --no-build-isolation --no-deps --target "$prefix" . &&
    (cd "$prefix" && PYTHONPATH="$prefix" python3 -c \
      'import rustytorch as rt; print(rt.__version__, rt.cuda.is_available(), (rt.ones(3, device="cuda") * 2).sum().item())')
}

train() {
  # Checkpoints stay on the machine (GPT-2's are 1.5 GB); metrics, plots and logs go to $LOGS/runs.
  # RTX_FASHION_MNIST_DIR and RTX_KJV_TEXT point at the data where the Debian packages are missing.
  local runs=/tmp/rtx-runs py=(env PYTHONPATH=build/gpu/python python3)
  local mnist=(${RTX_FASHION_MNIST_DIR:+--data-dir "$RTX_FASHION_MNIST_DIR"}) text=(${RTX_KJV_TEXT:+--text "$RTX_KJV_TEXT"})
  rm -rf "$runs" && mkdir -p "$LOGS/runs" &&
  "${py[@]}" -m rustytorch.train cnn "${mnist[@]}" --out "$runs/cnn" &&
  "${py[@]}" -m rustytorch.train mlp "${mnist[@]}" --out "$runs/mlp" &&
  "${py[@]}" -m rustytorch.train gpt "${text[@]}" --preset gpt2 --batch-size 8 --max-steps 300 --eval-every 150 --out "$runs/gpt2" &&
  "${py[@]}" bench/python/train_throughput.py gpt --preset gpt2 --batch 8 &&
  "${py[@]}" bench/python/train_throughput.py mlp --batch 128 &&
  "${py[@]}" bench/python/train_throughput.py cnn --batch 128 &&
  OMP_NUM_THREADS=2 taskset -c 0,1 "${py[@]}" bench/python/train_throughput.py mlp --batch 128 --device cpu &&
  OMP_NUM_THREADS=2 taskset -c 0,1 "${py[@]}" bench/python/train_throughput.py cnn --batch 128 --device cpu
  local rc=$?
  for run in "$runs"/*; do
    mkdir -p "$LOGS/runs/${run##*/}" && cp "$run"/*.json* "$run"/*.png "$LOGS/runs/${run##*/}/" 2>/dev/null
  done
  return $rc
}

multigpu() {
  # NVLink multicast (NVLS) stays off on the lent machines.
  local n py=(env NCCL_NVLS_ENABLE=0 PYTHONPATH=build/gpu/python python3) run
  n=$(nvidia-smi -L | wc -l)
  run=("${py[@]}" -m rustytorch.distributed.run --nproc-per-node)
  [[ $n -ge 2 ]] || { echo "multigpu: $n GPU(s); this stage needs 2 or more"; return 1; }
  ctest --test-dir build/gpu -R "Distributed|DataParallel" --output-on-failure --timeout 300 &&
  "${py[@]}" -m pytest -q tests/python/test_distributed_nccl.py tests/python/test_ddp.py \
    tests/python/test_zero_redundancy.py &&
  "${run[@]}" "$n" bench/python/multi_gpu.py allreduce --json "$LOGS/allreduce_$n.json" &&
  "${run[@]}" 1 bench/python/multi_gpu.py ddp --batch 8 --json "$LOGS/ddp_1.json" &&
  "${run[@]}" 1 bench/python/multi_gpu.py ddp --batch $((8 * n)) --only ours --json "$LOGS/ddp_1_b$((8 * n)).json" &&
  "${run[@]}" "$n" bench/python/multi_gpu.py ddp --batch 8 --json "$LOGS/ddp_$n.json" &&
  "${run[@]}" "$n" bench/python/multi_gpu.py ddp --batch 8 --zero --json "$LOGS/ddp_zero_$n.json" &&
  "${py[@]}" bench/python/multi_gpu_report.py "$LOGS" &&
  # The GPT trainer on N GPUs, then resumed on one at the same global batch.
  rm -rf /tmp/rtx-ddp && "${run[@]}" "$n" -m rustytorch.train gpt --preset gpt2 --batch-size 8 --max-steps 300 \
    --eval-every 150 --out /tmp/rtx-ddp &&
  "${py[@]}" -m rustytorch.train gpt --preset gpt2 --batch-size $((8 * n)) --max-steps 320 --eval-every 20 \
    --out /tmp/rtx-ddp --resume
}

# The GPT trainer's text: RTX_KJV_TEXT, else (no King James Bible on the machine) the project's docs.
gpt_text() {
  if [[ -n ${RTX_KJV_TEXT:-} ]]; then echo "$RTX_KJV_TEXT"; else cat README.md docs/*.md > /tmp/rtx-docs.txt && echo /tmp/rtx-docs.txt; fi
}

graphs() {
  # CUDA graphs beside PyTorch's, then the bundled trainers with --cuda-graph (each prints its hit rate last).
  local py=(env PYTHONPATH=build/gpu/python python3)
  local mnist=(${RTX_FASHION_MNIST_DIR:+--data-dir "$RTX_FASHION_MNIST_DIR"})
  "${py[@]}" bench/python/cuda_graphs.py --gpt --json "$LOGS/cuda_graphs.json" &&
  rm -rf /tmp/rtx-graph && "${py[@]}" -m rustytorch.train gpt --preset gpt2 --batch-size 8 --max-steps 30 \
    --log-every 10 --text "$(gpt_text)" --cuda-graph --out /tmp/rtx-graph/gpt &&
  "${py[@]}" -m rustytorch.train mlp "${mnist[@]}" --max-steps 400 --cuda-graph --out /tmp/rtx-graph/mlp &&
  "${py[@]}" -m rustytorch.train cnn "${mnist[@]}" --max-steps 400 --cuda-graph --out /tmp/rtx-graph/cnn
}

ddp1() {
  # One GPU: the GPT trainer under the launcher (a process group of one, DDP over nccl) against the
  # plain run: the same losses, bit for bit.
  local py=(env PYTHONPATH=build/gpu/python python3)
  local args=(gpt --preset gpt2 --batch-size 8 --max-steps 20 --log-every 5 --text "$(gpt_text)")
  rm -rf /tmp/rtx-plain /tmp/rtx-ddp1 &&
  "${py[@]}" -m rustytorch.train "${args[@]}" --out /tmp/rtx-plain &&
  "${py[@]}" -m rustytorch.distributed.run --nproc-per-node 1 -m rustytorch.train "${args[@]}" --out /tmp/rtx-ddp1 &&
  "${py[@]}" -c 'import json, sys
rows = [[(r["step"], r["loss"]) for r in map(json.loads, open(d + "/metrics.jsonl")) if r["split"] == "train"]
        for d in sys.argv[1:]]
print("ddp1 losses plain", rows[0], "ddp", rows[1])
sys.exit(rows[0] != rows[1])' /tmp/rtx-plain /tmp/rtx-ddp1
}

stage build build.log build || true
[[ " ${SUMMARY[*]} " == *"FAIL  build"* ]] && STAGES=""  # nothing to test without a build
stage test ctest.log ctest --test-dir build/gpu --output-on-failure -j "$JOBS" --timeout 300
if python3 -c 'import torch' 2>/dev/null; then
  stage parity parity.log scripts/with_torch.sh tests/torch/parity.cpp
  stage bench bench.log bash -c 'build/gpu/bench/rtx_launch_floor && scripts/with_torch.sh bench/torch/compare.cpp \
    && PYTHONPATH=build/gpu/python python3 bench/python/overhead.py cuda \
    && PYTHONPATH=build/gpu/python python3 bench/python/overhead.py cpu'
fi
stage sanitize sanitizer.log sanitize
stage graphs graphs.log graphs
stage pip pip.log pip_install
stage train train.log train
stage ddp1 ddp1.log ddp1
stage multigpu multigpu.log multigpu

echo "==== gpu_check summary ===="
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
for line in "${SUMMARY[@]}"; do echo "  $line"; done
[[ -f "$LOGS/build.log" ]] && grep -E "error|FAILED" "$LOGS/build.log" | head -30
[[ -f "$LOGS/ctest.log" ]] && grep -E "tests passed|tests failed" "$LOGS/ctest.log"
[[ -f "$LOGS/ctest.log" ]] && grep -E "^=+ .*(passed|failed).* =+$" build/gpu/Testing/Temporary/LastTest.log | tail -1
[[ -f "$LOGS/pip.log" ]] && tail -1 "$LOGS/pip.log"
[[ -f "$LOGS/sanitizer.log" ]] && grep -E "ERROR SUMMARY|PASSED|FAILED" "$LOGS/sanitizer.log" | tail -3
[[ -f "$LOGS/parity.log" ]] && tail -1 "$LOGS/parity.log"
[[ -f "$LOGS/bench.log" ]] && cat "$LOGS/bench.log"
[[ -f "$LOGS/train.log" ]] && grep -E "accuracy|validation loss|^best|^GPT|^(mlp|cnn|gpt) " "$LOGS/train.log"
[[ -f "$LOGS/graphs.log" ]] && grep -E "^(tiny|mlp|lenet|gpt2|ratios|  )|^cuda graph:" "$LOGS/graphs.log"
[[ -f "$LOGS/ddp1.log" ]] && grep -E "^ddp1" "$LOGS/ddp1.log"
[[ -f "$LOGS/multigpu.log" ]] && grep -E "^\[rank 0\]|^(scaling|zero|allreduce)" "$LOGS/multigpu.log"
exit $FAILED
