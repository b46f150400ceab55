// rtx's CUDA ops side by side with PyTorch's (libtorch) in one process on one GPU (their agreement is
// checked by tests/torch/parity.cpp). Each workload is timed with CUDA events on the default stream,
// interleaving the two libraries, median of many repetitions, on random inputs far larger than L2.
// Prints one row per workload: both times, the ratio torch / rtx (above 1: rtx is faster) and
// rtx's throughput as a fraction of the physical floor
// (HBM3e 4.8 TB/s for memory-bound work, the datasheet rate for matrix products).
// Built and run by scripts/with_torch.sh bench/torch/compare.cpp [repetitions [name filter]].
#include <ATen/Context.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "rtx/rtx.h"

namespace {

constexpr double kHbmBytesPerSecond = 4.8e12;

struct Workload {
  std::string name;
  double bytes = 0;  // the fewest bytes the op must move (0: compute-bound, use flops)
  double flops = 0;
  double peak_flops = 0;  // datasheet rate for this precision
  std::function<void()> ours;
  std::function<void()> theirs;
};

// Median milliseconds of fn over reps runs, timed with events on the default stream.
struct Timer {
  rtx::cuda::Event start{true};
  rtx::cuda::Event stop{true};
  float once(const std::function<void()>& fn) {
    start.record();
    fn();
    stop.record();
    stop.synchronize();
    return start.elapsed_time(stop);
  }
};

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

torch::Tensor mirror(const rtx::Tensor& t) {
  const rtx::Tensor host = t.cpu().contiguous();
  std::vector<int64_t> sizes(host.sizes().begin(), host.sizes().end());
  torch::ScalarType type = torch::kFloat32;
  if (host.dtype() == rtx::kBFloat16) type = torch::kBFloat16;
  if (host.dtype() == rtx::kInt64) type = torch::kInt64;
  return torch::from_blob(host.data_ptr(), sizes, torch::TensorOptions().dtype(type)).clone().to(torch::kCUDA);
}

void run(const Workload& w, int reps) {
  Timer timer;
  for (int i = 0; i < 3; ++i) {
    w.ours();
    w.theirs();
  }
  std::vector<float> ours, theirs;
  for (int i = 0; i < reps; ++i) {
    ours.push_back(timer.once(w.ours));
    theirs.push_back(timer.once(w.theirs));
  }
  const double o = median(ours), t = median(theirs);
  double rate, floor_fraction;
  const char* unit;
  if (w.bytes > 0) {
    rate = w.bytes / (o * 1e-3) / 1e12;
    floor_fraction = rate * 1e12 / kHbmBytesPerSecond;
    unit = "TB/s";
  } else {
    rate = w.flops / (o * 1e-3) / 1e12;
    floor_fraction = rate * 1e12 / w.peak_flops;
    unit = "TFLOP/s";
  }
  std::printf("%-34s %9.3f ms %9.3f ms %7.2fx %9.2f %-7s %5.1f%%\n", w.name.c_str(), o, t, t / o, rate, unit,
              100 * floor_fraction);
  std::fflush(stdout);
}

// Host time per op of tiny ops: each batch of 256 is queued and timed before the GPU is drained, so
// the launch queue never fills and the figure is the CPU's cost, not the GPU's rate.
void tiny_ops() {
  rtx::Tensor a = rtx::ones({1}, rtx::TensorOptions(rtx::kFloat32, rtx::Device(rtx::kCUDA)));
  torch::Tensor b = torch::ones({1}, torch::TensorOptions().device(torch::kCUDA));
  constexpr int kBatch = 256, kBatches = 80;
  auto per_op_us = [&](const std::function<void()>& fn) {
    fn();
    rtx::cuda::synchronize();
    std::vector<float> runs;
    for (int r = 0; r < 7; ++r) {
      double total = 0;
      for (int k = 0; k < kBatches; ++k) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < kBatch; ++i) fn();
        total += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
        rtx::cuda::synchronize();
      }
      runs.push_back(static_cast<float>(total / (kBatch * kBatches)));
    }
    return median(runs);
  };
  const float o = per_op_us([&] { (void)(a + a); });
  const float t = per_op_us([&] { (void)(b + b); });
  std::printf("%-34s %9.2f us %9.2f us %7.2fx   (host time per op, C++ both)\n", "tiny add (1 element)", o, t, t / o);
  const float oi = per_op_us([&] { a.add_(a); });
  const float ti = per_op_us([&] { b.add_(b); });
  std::printf("%-34s %9.2f us %9.2f us %7.2fx   (host time per op, C++ both)\n", "tiny add_ in place (1 element)", oi, ti,
              ti / oi);

  const uint64_t before = rtx::cuda::memory_stats().num_raw_allocs;
  const float alloc = per_op_us([] { (void)rtx::empty({256}, rtx::TensorOptions(rtx::kFloat32, rtx::Device(rtx::kCUDA))); });
  const float talloc = per_op_us([] { (void)torch::empty({256}, torch::TensorOptions().device(torch::kCUDA)); });
  std::printf("%-34s %9.2f us %9.2f us %7.2fx   (cudaMalloc calls during the loop: %llu)\n",
              "empty+free 1 KiB (cached)", alloc, talloc, talloc / alloc,
              static_cast<unsigned long long>(rtx::cuda::memory_stats().num_raw_allocs - before));
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 30;
  if (!rtx::cuda::is_available() || !torch::cuda::is_available()) {
    std::printf("bench: needs a GPU visible to both rtx and torch\n");
    return 1;
  }
  const rtx::cuda::DeviceProperties props = rtx::cuda::get_device_properties();
  std::printf("rtx vs torch %s on %s, median of %d, ratio = torch time / rtx time\n", TORCH_VERSION,
              props.name.c_str(), reps);
  std::printf("%-34s %12s %12s %8s %17s %6s\n", "workload", "rtx", "torch", "ratio", "rtx rate", "floor");
  rtx::manual_seed(0);
  const rtx::TensorOptions f32(rtx::kFloat32, rtx::Device(rtx::kCUDA));
  std::vector<Workload> all;

  {  // device copy, 1 GiB
    const rtx::Tensor x = rtx::randn({1 << 28}, f32);
    const torch::Tensor tx = torch::randn({1 << 28}, torch::TensorOptions().device(torch::kCUDA));
    all.push_back({"copy fp32 1 GiB", 2.0 * 4 * (1 << 28), 0, 0, [x] { (void)x.clone(); }, [tx] { (void)tx.clone(); }});
  }
  {  // pointwise add
    const int64_t n = int64_t{1} << 26;
    const rtx::Tensor a = rtx::randn({n}, f32), b = rtx::randn({n}, f32);
    const torch::Tensor ta = mirror(a), tb = mirror(b);
    all.push_back({"add fp32 2^26", 3.0 * 4 * n, 0, 0, [a, b] { (void)(a + b); }, [ta, tb] { (void)(ta + tb); }});
  }
  for (rtx::DType dt : {rtx::kFloat32, rtx::kBFloat16}) {
    const std::string tag = dt == rtx::kFloat32 ? "fp32" : "bf16";
    const double es = dt == rtx::kFloat32 ? 4 : 2;
    const rtx::Tensor x = rtx::randn({8192, 8192}, f32).to(dt);
    const torch::Tensor tx = mirror(x);
    all.push_back({"softmax rows 8192x8192 " + tag, 2 * es * 8192 * 8192, 0, 0, [x] { (void)rtx::softmax(x, 1); },
                   [tx] { (void)torch::softmax(tx, 1); }});
    const rtx::Tensor w = rtx::randn({8192}, f32).to(dt), b = rtx::randn({8192}, f32).to(dt);
    const torch::Tensor tw = mirror(w), tb = mirror(b);
    all.push_back({"layer_norm 8192x8192 " + tag, 2 * es * 8192 * 8192, 0, 0,
                   [x, w, b] { (void)rtx::layer_norm(x, {8192}, w, b); },
                   [tx, tw, tb] { (void)torch::layer_norm(tx, {8192}, tw, tb); }});
  }
  {  // row sum
    const rtx::Tensor x = rtx::randn({8192, 8192}, f32);
    const torch::Tensor tx = mirror(x);
    all.push_back({"row sum fp32 8192x8192", 4.0 * 8192 * 8192, 0, 0, [x] { (void)x.sum({1}); },
                   [tx] { (void)tx.sum(1); }});
  }
  {  // cross-entropy forward + backward over a GPT-2 sized vocabulary
    const int64_t n = 16384, v = 50304;
    rtx::Tensor logits = rtx::randn({n, v}, f32).to(rtx::kBFloat16).requires_grad_();
    const rtx::Tensor target = rtx::randint(0, v, {n}, rtx::TensorOptions(rtx::kInt64, rtx::Device(rtx::kCUDA)));
    torch::Tensor tlogits = mirror(logits.detach()).requires_grad_();
    const torch::Tensor ttarget = mirror(target);
    all.push_back({"cross_entropy fwd+bwd 16384x50304 bf16", 3.0 * 2 * n * v, 0, 0,
                   [logits, target]() mutable {
                     logits.set_grad(rtx::Tensor());
                     rtx::cross_entropy(logits, target).backward();
                   },
                   [tlogits, ttarget]() mutable {
                     tlogits.mutable_grad() = torch::Tensor();
                     torch::nn::functional::cross_entropy(tlogits, ttarget).backward();
                   }});
  }
  for (const char* mode : {"bf16", "tf32", "fp32"}) {
    const int64_t n = 8192;
    const bool bf16 = std::string(mode) == "bf16";
    const rtx::Tensor a = rtx::randn({n, n}, f32).to(bf16 ? rtx::kBFloat16 : rtx::kFloat32);
    const rtx::Tensor b = rtx::randn({n, n}, f32).to(a.dtype());
    const torch::Tensor ta = mirror(a), tb = mirror(b);
    const std::string precision = std::string(mode) == "tf32" ? "high" : "highest";
    const double peak = bf16 ? 989e12 : (precision == "high" ? 494e12 : 67e12);
    all.push_back({std::string("matmul 8192^3 ") + mode, 0, 2.0 * n * n * n, peak,
                   [a, b, precision] {
                     rtx::set_float32_matmul_precision(precision);
                     (void)rtx::matmul(a, b);
                   },
                   [ta, tb, precision] {
                     at::globalContext().setFloat32MatmulPrecision(precision);
                     (void)torch::matmul(ta, tb);
                   }});
  }
  const std::string only = argc > 2 ? argv[2] : "";
  for (const Workload& w : all) {
    if (w.name.find(only) == std::string::npos) continue;
    try {
      run(w, reps);
    } catch (const std::exception& e) {
      std::printf("%-34s failed: %s\n", w.name.c_str(), e.what());
    }
  }
  if (only.empty() || only == "tiny") tiny_ops();
  return 0;
}
