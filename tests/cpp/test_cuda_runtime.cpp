// The CUDA runtime: availability and its errors, devices and guards, streams and events, moves
// between host and device, and the caching allocator on a real device.
#include <thread>

#include "test_utils.h"

namespace rtx {
namespace {

using testing::all_close;
using testing::throws;

#define SKIP_WITHOUT_CUDA() \
  if (!cuda::is_available()) GTEST_SKIP() << "CUDA: " << cuda::unavailable_reason()

TEST(CudaRuntime, UnavailableRaisesDeviceError) {
  if (cuda::is_available()) {
    // A device index past the last one is the error a machine with GPUs can give.
    const int missing = cuda::device_count();
    EXPECT_TRUE(throws<DeviceError>([&] { zeros({2}, Device(kCUDA, missing)); }, "CUDA device"));
    EXPECT_TRUE(throws<DeviceError>([&] { cuda::set_device(missing); }, "CUDA device"));
    return;
  }
  EXPECT_EQ(cuda::device_count(), 0);
  EXPECT_FALSE(cuda::unavailable_reason().empty());
  EXPECT_TRUE(throws<DeviceError>([] { zeros({2}, Device(kCUDA)); }, "CUDA"));
  EXPECT_TRUE(throws<DeviceError>([] { ones({2}).cuda(); }, "CUDA"));
  EXPECT_TRUE(throws<DeviceError>([] { cuda::synchronize(); }, "not available"));
  EXPECT_TRUE(throws<DeviceError>([] { cuda::Stream::create(); }, "not available"));
  EXPECT_FALSE(ones({2}).is_pinned());
  EXPECT_TRUE(throws<DeviceError>([] { ones({2}).pin_memory(); }, "[pin_memory]"));
}

TEST(CudaRuntime, PinnedMemoryAndNonBlockingMoves) {
  SKIP_WITHOUT_CUDA();
  const Tensor host = arange(0, 1 << 16, 1, TensorOptions(kFloat32));
  EXPECT_FALSE(host.is_pinned());
  const Tensor pinned = host.pin_memory();
  EXPECT_TRUE(pinned.is_pinned());
  EXPECT_TRUE(pinned.pin_memory().is_same(pinned));
  EXPECT_TRUE(all_close(pinned, host, 0, 0));
  EXPECT_TRUE(throws<DeviceError>([] { ones({2}, TensorOptions(kFloat32, Device(kCUDA))).pin_memory(); }, "only CPU"));
  for (int round = 0; round < 3; ++round) {  // freed pinned blocks are reused only once their copies are done
    const Tensor dev = pinned.cuda(0, /*non_blocking=*/true) * 3;
    const Tensor back = dev.to(Device(kCPU), /*non_blocking=*/true);
    EXPECT_TRUE(back.is_pinned());
    cuda::synchronize();
    EXPECT_TRUE(all_close(back, host * 3, 0, 0));
  }
  // Blocking moves from pinned memory are complete on return.
  EXPECT_FALSE(pinned.cuda().cpu().is_pinned());
}

TEST(CudaRuntime, DevicePropertiesAndGuard) {
  SKIP_WITHOUT_CUDA();
  const cuda::DeviceProperties p = cuda::get_device_properties(0);
  EXPECT_FALSE(p.name.empty());
  EXPECT_GT(p.multiprocessor_count, 0);
  EXPECT_GT(p.total_memory, size_t{0});
  EXPECT_GT(p.warp_size, 0);
  const int before = cuda::current_device();
  {
    cuda::DeviceGuard guard(cuda::device_count() - 1);
    EXPECT_EQ(cuda::current_device(), cuda::device_count() - 1);
  }
  EXPECT_EQ(cuda::current_device(), before);
}

TEST(CudaRuntime, StreamsAndEvents) {
  SKIP_WITHOUT_CUDA();
  const cuda::Stream main = cuda::current_stream();
  EXPECT_EQ(main, cuda::Stream::default_stream());
  const cuda::Stream side = cuda::Stream::create();
  EXPECT_NE(side, main);
  {
    cuda::StreamGuard guard(side);
    EXPECT_EQ(cuda::current_stream(), side);
  }
  EXPECT_EQ(cuda::current_stream(), main);

  // Work on a side stream, ordered after the main stream with an event, gives the right values.
  const Tensor a = arange(0, 1 << 20, 1, TensorOptions(kFloat32, Device(kCUDA)));
  cuda::Event ready(true);
  ready.record(main);
  Tensor b;
  {
    cuda::StreamGuard guard(side);
    side.wait(ready);
    b = a * 2 + 1;
    cuda::record_stream(b, side);
  }
  cuda::Event done(true);
  done.record(side);
  main.wait(done);
  done.synchronize();
  EXPECT_TRUE(done.query());
  EXPECT_TRUE(side.query());
  EXPECT_GE(ready.elapsed_time(done), 0.0f);
  EXPECT_TRUE(all_close(b, arange(0, 1 << 20, 1, TensorOptions(kFloat64)) * 2 + 1));
  EXPECT_TRUE(throws<ValueError>([] {
    cuda::Event untimed;
    untimed.record();
    untimed.elapsed_time(untimed);
  }, "timing"));
}

TEST(CudaRuntime, MovesBetweenHostAndDeviceKeepEveryDtype) {
  SKIP_WITHOUT_CUDA();
  for (DType t : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt8, kInt32, kInt64, kUInt8, kBool}) {
    const Tensor host = arange(0, 37, 1, TensorOptions(kFloat64)).remainder(5).to(t);
    const Tensor dev = host.cuda();
    EXPECT_TRUE(dev.is_cuda());
    EXPECT_EQ(dev.dtype(), t);
    const Tensor back = dev.cpu();
    EXPECT_TRUE(back.is_cpu());
    EXPECT_TRUE(all_close(back, host, 0, 0)) << t;
    // Non-contiguous sources and casts on the device.
    const Tensor strided = dev.view({37, 1}).expand({37, 3}).t();
    EXPECT_TRUE(all_close(strided.contiguous().cpu(), host.view({37, 1}).expand({37, 3}).t(), 0, 0)) << t;
    EXPECT_TRUE(all_close(dev.to(kFloat64).cpu(), host.to(kFloat64), 0, 0)) << t;
  }
}

TEST(CudaRuntime, AllocatorReusesCachedBlocks) {
  SKIP_WITHOUT_CUDA();
  { Tensor warm = empty({1 << 20}, TensorOptions(kFloat32, Device(kCUDA))); }
  const cuda::MemoryStats before = cuda::memory_stats();
  for (int step = 0; step < 50; ++step) {
    Tensor x = full({1 << 20}, 1.5, TensorOptions(kFloat32, Device(kCUDA)));
    Tensor y = x * x;
  }
  const cuda::MemoryStats after = cuda::memory_stats();
  EXPECT_EQ(after.num_raw_allocs, before.num_raw_allocs) << cuda::memory_summary();
  EXPECT_GE(after.num_allocs, before.num_allocs + 100);
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_GE(after.peak_allocated_bytes, size_t{2} * (4 << 20));
  EXPECT_NE(cuda::memory_summary().find("cuda:"), std::string::npos);
  cuda::empty_cache();
  EXPECT_LE(cuda::memory_stats().reserved_bytes, after.reserved_bytes);
}

TEST(CudaRuntime, OutOfMemoryNamesTheRequest) {
  SKIP_WITHOUT_CUDA();
  const size_t too_much = cuda::get_device_properties().total_memory * 2;
  EXPECT_TRUE(throws<OutOfMemoryError>(
      [&] { empty({static_cast<int64_t>(too_much / 4)}, TensorOptions(kFloat32, Device(kCUDA))); }, "out of memory"));
  // The allocator still works afterwards.
  EXPECT_EQ(ones({4}, TensorOptions(kFloat32, Device(kCUDA))).cpu().sum().item().to<double>(), 4.0);
}

TEST(CudaRuntime, CurrentStreamIsPerThread) {
  SKIP_WITHOUT_CUDA();
  const cuda::Stream side = cuda::Stream::create();
  cuda::StreamGuard guard(side);
  cuda::Stream seen = side;
  std::thread other([&] { seen = cuda::current_stream(); });
  other.join();
  EXPECT_EQ(seen, cuda::Stream::default_stream());
}

}  // namespace
}  // namespace rtx
