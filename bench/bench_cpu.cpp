// CPU micro-benchmarks: dispatch overhead of a tiny op, pointwise and reduction bandwidth, sgemm
// and conv2d throughput. Counters report bytes/s or FLOP/s; compare sgemm with numpy through
// bench/numpy_baseline.py on the same machine.
#include <benchmark/benchmark.h>

#include <rtx/rtx.h>

namespace {

// A tiny add from C++: the whole front-end (promotion, broadcast, allocation, dispatch) per op.
void BM_DispatchTinyAdd(benchmark::State& state) {
  const rtx::Tensor a = rtx::ones({1}), b = rtx::ones({1});
  for (auto _ : state) benchmark::DoNotOptimize(rtx::add(a, b));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DispatchTinyAdd);

// The same with autograd recording: the forward records a node per op.
void BM_DispatchTinyMulRecorded(benchmark::State& state) {
  const rtx::Tensor a = rtx::ones({1}).requires_grad_(), b = rtx::ones({1});
  for (auto _ : state) benchmark::DoNotOptimize(rtx::mul(a, b));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DispatchTinyMulRecorded);

void BM_AddFloat32(benchmark::State& state) {
  const int64_t n = state.range(0);
  const rtx::Tensor a = rtx::rand({n}), b = rtx::rand({n});
  for (auto _ : state) benchmark::DoNotOptimize(rtx::add(a, b));
  state.SetBytesProcessed(state.iterations() * n * 3 * static_cast<int64_t>(sizeof(float)));
}
BENCHMARK(BM_AddFloat32)->Arg(1 << 24)->UseRealTime();

void BM_SumRowsFloat32(benchmark::State& state) {
  const int64_t n = state.range(0);
  const rtx::Tensor a = rtx::rand({n, n});
  for (auto _ : state) benchmark::DoNotOptimize(a.sum({1}));
  state.SetBytesProcessed(state.iterations() * n * n * static_cast<int64_t>(sizeof(float)));
}
BENCHMARK(BM_SumRowsFloat32)->Arg(4096)->UseRealTime();

void BM_Sgemm(benchmark::State& state) {
  const int64_t n = state.range(0);
  const rtx::Tensor a = rtx::rand({n, n}), b = rtx::rand({n, n});
  for (auto _ : state) benchmark::DoNotOptimize(rtx::mm(a, b));
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(n * n * n) * static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Sgemm)->Arg(1024)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Conv2d(benchmark::State& state) {
  const rtx::Tensor x = rtx::rand({64, 32, 28, 28}), w = rtx::rand({64, 32, 3, 3});
  for (auto _ : state) benchmark::DoNotOptimize(rtx::conv2d(x, w, {}, {1, 1}, {1, 1}));
  const double flops = 2.0 * 64 * 64 * 28 * 28 * 32 * 9;
  state.counters["FLOP/s"] = benchmark::Counter(flops * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Conv2d)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
