// CUDA graphs: replays give the eager results bit for bit (pointwise ops, matmuls, random ops drawing
// the eager sequence), the private pool keeps memory freed during a capture for the graph and reset
// gives it back, pools are shared between graphs, and each operation a capture cannot record raises
// GraphCaptureError without breaking the capture.
#include <gtest/gtest.h>

#include <sstream>
#include <thread>

#include "rtx/rtx.h"
#include "test_utils.h"

using namespace rtx;
using namespace rtx::testing;

namespace {

#define SKIP_WITHOUT_CUDA() RTX_SKIP_IF_UNAVAILABLE(Device(kCUDA, 0))

TensorOptions gpu(DType t = kFloat32) { return TensorOptions(t, Device(kCUDA, 0)); }

// A stream from the pool other than `not_this` (the pool hands its streams out round robin).
cuda::Stream another_stream(const cuda::Stream& not_this) {
  cuda::Stream s = cuda::Stream::create();
  while (s == not_this) s = cuda::Stream::create();
  return s;
}

// Runs fn once on a side stream (the warm-up PyTorch asks for), then captures it into g on that stream.
template <typename Fn>
void warm_up_and_capture(cuda::CUDAGraph& g, const Fn& fn, cuda::MempoolId pool = {0, 0}) {
  const cuda::Stream side = cuda::Stream::create();
  {
    cuda::StreamGuard guard(side);
    fn();
  }
  cuda::GraphCapture capture(g, pool, &side);
  fn();
  capture.finish();
}

TEST(CudaGraph, PointwiseOpsAndMatmulsReplayAsEager) {
  SKIP_WITHOUT_CUDA();
  manual_seed(1);
  Tensor x = randn({256, 384}, gpu());
  const Tensor w = randn({384, 128}, gpu());
  Tensor out;
  auto step = [&] { out = ((x * 2.0 + 1.0).relu().matmul(w)).tanh().sum({1}); };
  cuda::CUDAGraph g;
  warm_up_and_capture(g, step);
  EXPECT_TRUE(g.captured());
  EXPECT_GE(g.kernel_count(), 5);
  for (int i = 0; i < 3; ++i) {
    x.copy_(randn({256, 384}, gpu()));  // new values in the graph's input
    g.replay();
    const Tensor eager = ((x * 2.0 + 1.0).relu().matmul(w)).tanh().sum({1});
    EXPECT_TRUE(same_bytes(out, eager)) << "replay " << i;
  }
}

TEST(CudaGraph, KernelCountIsTheCapturedKernels) {
  SKIP_WITHOUT_CUDA();
  const Tensor x = ones({1024}, gpu());
  Tensor y;
  cuda::CUDAGraph g;
  warm_up_and_capture(g, [&] { y = (x + 1.0) * 3.0; });
  EXPECT_EQ(g.kernel_count(), 2);
  g.replay();
  EXPECT_TRUE(all_close(y, full({1024}, 6.0, kFloat64), 0, 0));
}

// Each replay draws fresh counters from the default generator: the values an uncaptured run from the
// same seed draws, different between replays; the capture itself draws nothing.
TEST(CudaGraph, ReplaysDrawTheEagerRandomSequence) {
  SKIP_WITHOUT_CUDA();
  const Tensor x = ones({4096}, gpu());
  Tensor u, mask;
  auto step = [&] {
    u = rand({3000}, gpu());
    mask = dropout(x, 0.5, true);
  };
  cuda::CUDAGraph g;
  warm_up_and_capture(g, step);
  manual_seed(7);
  std::vector<Tensor> replayed;
  for (int i = 0; i < 3; ++i) {
    g.replay();
    replayed.push_back(u.clone());
    replayed.push_back(mask.clone());
  }
  const Tensor after_replays = rand({5});  // the generator moved on as for three eager steps
  manual_seed(7);
  for (int i = 0; i < 3; ++i) {
    step();
    EXPECT_TRUE(same_bytes(replayed[2 * i], u)) << "rand, replay " << i;
    EXPECT_TRUE(same_bytes(replayed[2 * i + 1], mask)) << "dropout, replay " << i;
  }
  EXPECT_TRUE(same_bytes(after_replays, rand({5})));
  EXPECT_FALSE(same_bytes(replayed[0], replayed[2]));
}

// A tensor freed during the capture keeps its memory for the graph: an allocation made after the
// capture gets other memory, and overwriting that leaves the replay's result right.
TEST(CudaGraph, MemoryFreedDuringCaptureStaysWithTheGraph) {
  SKIP_WITHOUT_CUDA();
  const Tensor x = full({1 << 20}, 2.0, gpu());
  Tensor y;
  const void* freed = nullptr;
  cuda::CUDAGraph g;
  warm_up_and_capture(g, [&] {
    Tensor t = x * 3.0;
    freed = t.data_ptr();
    y = t + 1.0;
  });
  const Tensor other = full({1 << 20}, -1.0, gpu());
  EXPECT_NE(other.data_ptr(), freed);
  const Tensor again = empty({1 << 20}, gpu());
  EXPECT_NE(again.data_ptr(), freed);
  g.replay();
  EXPECT_TRUE(all_close(y, full({1 << 20}, 7.0, kFloat64), 0, 0));
  const cuda::MemoryStats stats = cuda::memory_stats();
  EXPECT_GT(stats.private_pool_reserved_bytes, 0u);
  EXPECT_GT(stats.private_pool_allocated_bytes, 0u);  // y
}

TEST(CudaGraph, ResetGivesThePoolBack) {
  SKIP_WITHOUT_CUDA();
  const Tensor x = ones({1 << 24}, gpu());  // 64 MiB
  size_t reserved_with_graph = 0;
  {
    Tensor y;
    cuda::CUDAGraph g;
    warm_up_and_capture(g, [&] { y = x * 2.0 + 1.0; });
    g.replay();
    reserved_with_graph = cuda::memory_stats().reserved_bytes;
    EXPECT_GE(cuda::memory_stats().private_pool_reserved_bytes, size_t{64} << 20);
    g.reset();
    EXPECT_FALSE(g.captured());
    EXPECT_TRUE(throws<GraphCaptureError>([&] { g.replay(); }, "nothing is captured"));
    EXPECT_TRUE(all_close(y, full({1 << 24}, 3.0, kFloat64), 0, 0));  // y itself lives on
  }
  cuda::empty_cache();
  const cuda::MemoryStats stats = cuda::memory_stats();
  EXPECT_EQ(stats.private_pool_reserved_bytes, 0u);
  EXPECT_EQ(stats.private_pool_allocated_bytes, 0u);
  EXPECT_LE(stats.reserved_bytes + (size_t{64} << 20), reserved_with_graph);
}

// Graphs that share a pool, replayed in capture order: the second reads what the first wrote.
TEST(CudaGraph, GraphsShareAPool) {
  SKIP_WITHOUT_CUDA();
  const Tensor x = arange(0, 4096, 1, gpu());
  Tensor y, z;
  cuda::CUDAGraph first, second;
  warm_up_and_capture(first, [&] { y = x + 1.0; });
  warm_up_and_capture(second, [&] { z = y * 2.0; }, first.pool());
  EXPECT_EQ(first.pool(), second.pool());
  first.replay();
  second.replay();
  EXPECT_TRUE(all_close(z, (arange(0, 4096, 1, TensorOptions(kFloat64)) + 1.0) * 2.0, 0, 0));
}

// Each operation a capture cannot record raises GraphCaptureError naming it, before CUDA sees it:
// the capture goes on and its graph replays.
TEST(CudaGraph, HostWaitsAndCopiesInsideACaptureRaise) {
  SKIP_WITHOUT_CUDA();
  const Tensor x = ones({16}, gpu());
  Tensor y;
  cuda::CUDAGraph g;
  const cuda::Stream side = cuda::Stream::create();
  {
    cuda::StreamGuard guard(side);
    y = x * 5.0;
  }
  Generator other;
  cuda::Event event;
  event.record();
  {
    cuda::GraphCapture capture(g, {0, 0}, &side);
    y = x * 5.0;
    EXPECT_TRUE(throws<GraphCaptureError>([&] { (void)y.sum().item<float>(); }, "[to] copying a [] float32 tensor"));
    EXPECT_TRUE(throws<GraphCaptureError>([&] { (void)y.cpu(); }, "capturing a CUDA graph"));
    EXPECT_TRUE(throws<GraphCaptureError>(
        [&] {
          std::ostringstream printed;
          printed << y;
        },
        "waits for the device"));
    EXPECT_TRUE(throws<GraphCaptureError>([&] { (void)ones({4}).cuda(); }, "touches host memory"));
    EXPECT_TRUE(throws<GraphCaptureError>([&] { cuda::synchronize(); }, "[synchronize]"));
    EXPECT_TRUE(throws<GraphCaptureError>([&] { cuda::current_stream().synchronize(); }, "[Stream.synchronize]"));
    EXPECT_TRUE(throws<GraphCaptureError>([&] { (void)cuda::current_stream().query(); }, "[Stream.query]"));
    EXPECT_TRUE(throws<GraphCaptureError>([&] { event.synchronize(); }, "capture_error_mode 'global'"));
    EXPECT_TRUE(throws<GraphCaptureError>([&] { (void)event.query(); }, "[Event.query]"));
    EXPECT_TRUE(throws<GraphCaptureError>(
        [&] {
          GeneratorGuard guard(other);
          (void)rand({4}, gpu());
        },
        "draws from a generator the graph does not follow"));
    EXPECT_TRUE(cuda::is_current_stream_capturing());
    capture.finish();
  }
  EXPECT_FALSE(cuda::is_current_stream_capturing());
  g.replay();
  EXPECT_TRUE(all_close(y, full({16}, 5.0, kFloat64), 0, 0));
}

// An index out of range in a replayed kernel is found by the device and raised at the next wait.
TEST(CudaGraph, IndexFaultsOfAReplayRaiseAtTheNextWait) {
  SKIP_WITHOUT_CUDA();
  const Tensor x = arange(0, 10, 1, gpu());
  Tensor idx = zeros({3}, TensorOptions(kInt64, Device(kCUDA, 0)));
  Tensor y;
  cuda::CUDAGraph g;
  warm_up_and_capture(g, [&] { y = x.index_select(0, idx); });
  idx.fill_(42);
  g.replay();
  EXPECT_TRUE(throws<IndexError>([&] { cuda::synchronize(); }, "42"));
}

TEST(CudaGraph, GraphsUsedOutOfOrderRaise) {
  SKIP_WITHOUT_CUDA();
  cuda::CUDAGraph g;
  EXPECT_TRUE(throws<GraphCaptureError>([&] { g.capture_begin(); }, "cannot capture the default stream of cuda:0"));
  EXPECT_TRUE(throws<GraphCaptureError>([&] { g.capture_end(); }, "no capture is under way"));
  EXPECT_TRUE(throws<GraphCaptureError>([&] { g.replay(); }, "nothing is captured"));
  EXPECT_TRUE(throws<GraphCaptureError>([&] { (void)g.pool(); }, "no pool yet"));
  const Tensor x = ones({8}, gpu());
  Tensor y;
  warm_up_and_capture(g, [&] { y = x + 1.0; });
  const cuda::Stream side = cuda::Stream::create();
  cuda::StreamGuard guard(side);
  EXPECT_TRUE(throws<GraphCaptureError>([&] { g.capture_begin(); }, "call reset() before capturing again"));
  // An exception inside a capture scope abandons it: the graph is empty and can capture again.
  cuda::CUDAGraph h;
  try {
    cuda::GraphCapture capture(h);
    y = x * 2.0;
    throw ValueError("stop");
  } catch (const ValueError&) {
  }
  EXPECT_FALSE(h.captured());
  EXPECT_FALSE(cuda::is_current_stream_capturing());
  warm_up_and_capture(h, [&] { y = x * 2.0; });
  h.replay();
  EXPECT_TRUE(all_close(y, full({8}, 2.0, kFloat64), 0, 0));
}

// capture_error_mode: 'global' forbids waits on every thread, 'thread_local' only on the capturing
// one, 'relaxed' only on the capturing stream.
TEST(CudaGraph, CaptureErrorModesChooseWhoMayWait) {
  SKIP_WITHOUT_CUDA();
  const Tensor x = ones({8}, gpu());
  for (const auto mode : {cuda::CaptureErrorMode::kGlobal, cuda::CaptureErrorMode::kThreadLocal,
                          cuda::CaptureErrorMode::kRelaxed}) {
    Tensor y;
    cuda::CUDAGraph g;
    const cuda::Stream side = cuda::Stream::create();
    {
      cuda::StreamGuard guard(side);
      y = x + 1.0;
    }
    cuda::GraphCapture capture(g, {0, 0}, &side, mode);
    y = x + 1.0;
    std::string other_thread_error = "none";
    const cuda::Stream other = another_stream(side);
    std::thread t([&] {
      try {
        other.synchronize();
      } catch (const GraphCaptureError& e) {
        other_thread_error = e.what();
      }
    });
    t.join();
    bool this_thread_refused = false;
    try {
      other.synchronize();
    } catch (const GraphCaptureError&) {
      this_thread_refused = true;
    }
    capture.finish();
    g.replay();
    EXPECT_TRUE(all_close(y, full({8}, 2.0, kFloat64), 0, 0));
    EXPECT_EQ(other_thread_error != "none", mode == cuda::CaptureErrorMode::kGlobal) << other_thread_error;
    EXPECT_EQ(this_thread_refused, mode != cuda::CaptureErrorMode::kRelaxed);
  }
}

}  // namespace
