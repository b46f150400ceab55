// CUDA micro-benchmarks of the kernels the workload suite (bench/compare_torch.py) measures against
// PyTorch: each iteration is timed with CUDA events around the op alone (manual time), after a
// 256 MiB write that evicts the inputs from the L2 cache; counters give bytes/s (the bytes the op
// must move at least) or FLOP/s. Without a GPU every benchmark is skipped with the reason.
#include <benchmark/benchmark.h>

#include <cmath>
#include <functional>
#include <string>

#include <rtx/rtx.h>

namespace {

using rtx::Tensor;

// Skips the benchmark (returning false) when there is no usable GPU.
bool have_gpu(benchmark::State& state) {
  if (rtx::cuda::is_available()) return true;
  state.SkipWithError(("no CUDA device: " + rtx::cuda::unavailable_reason()).c_str());
  return false;
}

Tensor randn_on_gpu(const rtx::Shape& shape, rtx::DType dtype = rtx::kFloat32) {
  return rtx::randn(shape, rtx::TensorOptions(rtx::kFloat32, rtx::Device(rtx::kCUDA, 0))).to(dtype);
}

// Times op() per iteration with CUDA events, the L2 cache flushed before each.
void run_timed(benchmark::State& state, const std::function<void()>& op) {
  static Tensor flush = rtx::empty({64 << 20}, rtx::TensorOptions(rtx::kFloat32, rtx::Device(rtx::kCUDA, 0)));
  op();  // warm-up: plans, workspaces, cached blocks
  for (auto _ : state) {
    flush.fill_(1.0);
    rtx::cuda::Event start(true), end(true);
    start.record();
    op();
    end.record();
    end.synchronize();
    state.SetIterationTime(start.elapsed_time(end) / 1e3);
  }
}

void set_bytes(benchmark::State& state, double bytes) {
  state.counters["bytes/s"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
}
void set_flops(benchmark::State& state, double flops) {
  state.counters["FLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_CudaAddFloat32(benchmark::State& state) {
  if (!have_gpu(state)) return;
  const int64_t n = state.range(0);
  const Tensor a = randn_on_gpu({n}), b = randn_on_gpu({n});
  run_timed(state, [&] { benchmark::DoNotOptimize(rtx::add(a, b)); });
  set_bytes(state, 3.0 * 4 * n);
}
BENCHMARK(BM_CudaAddFloat32)->Arg(1 << 28)->UseManualTime()->Unit(benchmark::kMicrosecond);

// gelu(tanh) forward and backward on bf16: x, y; g, x, dx.
void BM_CudaGeluTanhForwardBackwardBF16(benchmark::State& state) {
  if (!have_gpu(state)) return;
  const Tensor x = randn_on_gpu({65536, 4096}, rtx::kBFloat16).requires_grad_();
  const Tensor g = randn_on_gpu({65536, 4096}, rtx::kBFloat16);
  run_timed(state, [&] { benchmark::DoNotOptimize(rtx::autograd::grad({rtx::gelu(x, "tanh")}, {x}, {g})); });
  set_bytes(state, 5.0 * 2 * x.numel());
}
BENCHMARK(BM_CudaGeluTanhForwardBackwardBF16)->UseManualTime()->Unit(benchmark::kMicrosecond);

void BM_CudaLayerNormForwardBF16(benchmark::State& state) {
  if (!have_gpu(state)) return;
  const int64_t rows = state.range(0), n = state.range(1);
  const Tensor x = randn_on_gpu({rows, n}, rtx::kBFloat16);
  const Tensor w = randn_on_gpu({n}, rtx::kBFloat16), b = randn_on_gpu({n}, rtx::kBFloat16);
  run_timed(state, [&] { benchmark::DoNotOptimize(rtx::layer_norm(x, {n}, w, b)); });
  set_bytes(state, 2.0 * 2 * rows * n);
}
BENCHMARK(BM_CudaLayerNormForwardBF16)->Args({8192, 8192})->Args({65536, 4096})->UseManualTime()->Unit(benchmark::kMicrosecond);

void BM_CudaSoftmaxBF16(benchmark::State& state) {
  if (!have_gpu(state)) return;
  const Tensor x = randn_on_gpu({65536, 4096}, rtx::kBFloat16);
  run_timed(state, [&] { benchmark::DoNotOptimize(rtx::softmax(x, 1)); });
  set_bytes(state, 2.0 * 2 * x.numel());
}
BENCHMARK(BM_CudaSoftmaxBF16)->UseManualTime()->Unit(benchmark::kMicrosecond);

// Cross-entropy forward and backward on bf16 logits: the logits read twice, their gradient written.
void BM_CudaCrossEntropyForwardBackwardBF16(benchmark::State& state) {
  if (!have_gpu(state)) return;
  const Tensor logits = randn_on_gpu({16384, 50304}, rtx::kBFloat16).requires_grad_();
  const Tensor target = rtx::randint(0, 50304, {16384}, rtx::TensorOptions(rtx::kInt64, rtx::Device(rtx::kCUDA, 0)));
  run_timed(state, [&] {
    benchmark::DoNotOptimize(rtx::autograd::grad({rtx::cross_entropy(logits, target)}, {logits}));
  });
  set_bytes(state, 3.0 * 2 * logits.numel());
}
BENCHMARK(BM_CudaCrossEntropyForwardBackwardBF16)->UseManualTime()->Unit(benchmark::kMicrosecond);

// [m, k] @ [k, n]: the GPT-2 shapes in bf16, and 4096^3 in exact float32.
void BM_CudaMatmul(benchmark::State& state) {
  if (!have_gpu(state)) return;
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const rtx::DType dtype = state.range(3) != 0 ? rtx::kBFloat16 : rtx::kFloat32;
  const Tensor a = randn_on_gpu({m, k}, dtype), b = randn_on_gpu({k, n}, dtype);
  run_timed(state, [&] { benchmark::DoNotOptimize(rtx::matmul(a, b)); });
  set_flops(state, 2.0 * m * k * n);
}
BENCHMARK(BM_CudaMatmul)
    ->ArgNames({"m", "k", "n", "bf16"})
    ->Args({8192, 768, 3072, 1})
    ->Args({8192, 3072, 768, 1})
    ->Args({8192, 768, 50304, 1})
    ->Args({4096, 4096, 4096, 0})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// Causal attention forward and backward in bf16, [batch, heads, T, D]: 3.5 of the 4 T^2 D FLOPs of
// a full head forward, times the causal half, forward plus a backward of 2.5 forwards.
void BM_CudaCausalAttentionForwardBackwardBF16(benchmark::State& state) {
  if (!have_gpu(state)) return;
  const rtx::Shape shape{state.range(0), state.range(1), state.range(2), state.range(3)};
  const Tensor q = randn_on_gpu(shape, rtx::kBFloat16).requires_grad_();
  const Tensor k = randn_on_gpu(shape, rtx::kBFloat16).requires_grad_();
  const Tensor v = randn_on_gpu(shape, rtx::kBFloat16).requires_grad_();
  const Tensor g = randn_on_gpu(shape, rtx::kBFloat16);
  run_timed(state, [&] {
    const Tensor out = rtx::scaled_dot_product_attention(q, k, v, {}, 0.0, true);
    benchmark::DoNotOptimize(rtx::autograd::grad({out}, {q, k, v}, {g}));
  });
  const double t = static_cast<double>(shape[2]);
  set_flops(state, 7.0 * shape[0] * shape[1] * t * t * shape[3]);
}
BENCHMARK(BM_CudaCausalAttentionForwardBackwardBF16)
    ->ArgNames({"B", "H", "T", "D"})
    ->Args({8, 12, 1024, 64})
    ->Args({4, 16, 4096, 128})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
