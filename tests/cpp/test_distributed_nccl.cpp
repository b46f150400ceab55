// rtx::dist's nccl backend and the group of both backends (backend None), in one process: what a
// build says about NCCL and how it refuses without it; the checks an nccl group makes before it needs
// a device; the CPU half of the combined group with its ranks as threads; and, on a GPU, a one-rank
// nccl group (every collective and dtype, non-contiguous tensors, ordering after a producer on a side
// stream, memory that stays reserved while NCCL uses it, errors) and, with two GPUs, two ranks as
// threads (results, point-to-point, the watchdog's timeout).
#include <atomic>
#include <thread>

#include "dist_test_utils.h"
#include "rtx/distributed.h"
#include "test_utils.h"

namespace rtx::testing {
namespace {

using namespace std::chrono_literals;
using dist::ReduceOp;
using dist::TCPStore;

#define SKIP_WITHOUT_NCCL() \
  if (!dist::is_nccl_available()) GTEST_SKIP() << "this build has no nccl backend (RTX_WITH_NCCL=OFF)"
#define SKIP_WITHOUT_GPUS(n)                                                                           \
  SKIP_WITHOUT_NCCL();                                                                                 \
  if (cuda::device_count() < (n))                                                                      \
  GTEST_SKIP() << (cuda::device_count() == 0 ? "no CUDA device: " + cuda::unavailable_reason()         \
                                             : "needs " + std::to_string(n) + " CUDA devices, found " + \
                                                   std::to_string(cuda::device_count()))

TensorOptions on_gpu(DType t, int device = 0) { return TensorOptions(t, Device(kCUDA, device)); }

// Runs fn(rank, group) for each rank of an nccl group of `size` in its own thread; errors by rank.
std::vector<std::string> run_ranks(int size, dist::Timeout timeout,
                                   const std::function<void(int, dist::ProcessGroup&)>& fn) {
  const MakeGroup nccl_group = [timeout](std::shared_ptr<dist::Store> store, int rank, int n) {
    return dist::make_nccl_group(std::move(store), rank, n, timeout);
  };
  return run_rank_threads(size, 20s, nccl_group, [&](int rank, const auto& pg) { fn(rank, *pg); });
}

// A one-rank group cannot stall, so its timeout only bounds communicator creation, which under
// compute-sanitizer takes tens of seconds.
constexpr dist::Timeout kOneRank = 120s;

// Creates the communicator (lazily made by the first collective, which takes longer than any slow
// producer) so that an ordering test's collective is enqueued while its producer still runs.
void create_communicator(dist::ProcessGroup& pg) { pg.barrier()->wait(); }

// A 4096 x 4096 float32 matrix of ones made by many products on the current stream: the slow producer
// of the ordering tests (tens of milliseconds on a GPU; every product is exact).
constexpr int64_t kSlow = 4096;
Tensor slow_ones(int device) {
  const Tensor m = full({kSlow, kSlow}, 1.0 / kSlow, on_gpu(kFloat32, device));
  Tensor x = ones({kSlow, kSlow}, on_gpu(kFloat32, device));
  for (int i = 0; i < 40; ++i) x = x.matmul(m);
  return x;
}

TEST(DistributedNccl, BuildSaysWhetherItHasNccl) {
  EXPECT_EQ(dist::is_nccl_available(), RTX_WITH_NCCL == 1);
  auto store = std::make_shared<TCPStore>("127.0.0.1", 0, 1, true, 5s);
  dist::InitOptions o;  // no store and no MASTER_ADDR: only a check before the rendezvous can answer
  o.rank = 0;
  o.world_size = 1;
  if (!dist::is_nccl_available()) {
    EXPECT_TRUE(throws<DistBackendError>([&] { dist::make_nccl_group(store, 0, 1, 5s); }, "no nccl backend"));
    EXPECT_TRUE(throws<DistBackendError>([&] { dist::make_combined_group(store, 0, 1, 5s); }, "RTX_WITH_NCCL"));
    for (const char* name : {"nccl", "cuda:nccl", "cpu:gloo,cuda:nccl"}) {
      o.backend = name;
      EXPECT_TRUE(throws<DistBackendError>([&] { dist::init_process_group(o); }, "no nccl backend")) << name;
    }
  } else if (cuda::device_count() == 0) {
    o.backend = "NCCL";
    EXPECT_TRUE(throws<DistBackendError>([&] { dist::init_process_group(o); }, "needs a CUDA device"));
  }
  o.backend = "mpi";
  EXPECT_TRUE(throws<ValueError>([&] { dist::init_process_group(o); }, "'gloo', 'nccl' and 'cpu:gloo,cuda:nccl'"));
  EXPECT_FALSE(dist::is_initialized());
}

// An nccl group needs no device until its first operation; what it refuses before that.
TEST(DistributedNccl, ChecksBeforeAnyCommunicator) {
  SKIP_WITHOUT_NCCL();
  auto store = std::make_shared<TCPStore>("127.0.0.1", 0, 1, true, 5s);
  auto pg = dist::make_nccl_group(store, 0, 1, 5s);
  EXPECT_EQ(pg->backend_name(), "nccl");
  EXPECT_TRUE(throws<DeviceError>([&] { pg->all_reduce(ones({2}), ReduceOp::Sum); },
                                  "[all_reduce] the nccl backend takes CUDA tensors, got one on cpu; use the gloo "
                                  "backend for CPU tensors, or backend=None for both"));
  EXPECT_TRUE(throws<DeviceError>([&] { pg->send(ones({2}), 0, 0); }, "[send] the nccl backend takes CUDA tensors"));
  EXPECT_TRUE(throws<ValueError>([&] { pg->broadcast(Tensor(), 0); }, "[broadcast] got an undefined tensor"));
  if (cuda::device_count() == 0) {
    EXPECT_TRUE(throws<DeviceError>([&] { pg->barrier(); }, "[barrier] the nccl backend needs a CUDA device"));
  }
  EXPECT_TRUE(throws<ValueError>([&] { dist::make_nccl_group(nullptr, 0, 1, 5s); }, "the store is None"));
}

// backend None's group with CPU tensors: its gloo half, ranks as threads.
TEST(DistributedNccl, CombinedGroupRunsCpuTensorsOnGloo) {
  SKIP_WITHOUT_NCCL();
  if (!dist::is_gloo_available()) GTEST_SKIP() << "this build has no gloo backend (install libgloo-dev)";
  std::vector<std::vector<double>> sums(2), gathered(2);
  std::vector<std::string> names(2);
  const MakeGroup combined = [](std::shared_ptr<dist::Store> store, int rank, int size) {
    return dist::make_combined_group(std::move(store), rank, size, 10s, {}, "127.0.0.1", "undefined");
  };
  const auto errors = run_rank_threads(2, 10s, combined, [&](int rank, const auto& pg) {
    names[rank] = pg->backend_name();
    Tensor t = full({3}, rank + 1.0, kFloat64);
    pg->all_reduce(t, ReduceOp::Sum)->wait();
    sums[rank] = values(t);
    std::vector<Tensor> parts = {zeros({2}, kInt64), zeros({2}, kInt64)};
    pg->all_gather(parts, full({2}, static_cast<double>(10 * rank), kInt64))->wait();
    gathered[rank] = values(cat(parts));
    EXPECT_TRUE(pg->barrier()->wait());
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    EXPECT_EQ(names[r], "undefined");
    EXPECT_EQ(sums[r], std::vector<double>(3, 3.0));
    EXPECT_EQ(gathered[r], (std::vector<double>{0, 0, 10, 10}));
  }
}

// One rank: every collective and dtype gives its input back (a sum over one rank), through the real
// NCCL calls.
TEST(DistributedNccl, OneRankEveryCollectiveAndDtype) {
  SKIP_WITHOUT_GPUS(1);
  const auto errors = run_ranks(1, kOneRank, [](int, dist::ProcessGroup& pg) {
    for (DType t : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt8, kUInt8, kInt32, kInt64, kBool}) {
      const Tensor x = arange(0, 6, 1, TensorOptions(kFloat64)).remainder(4).reshape({2, 3}).to(t).cuda();
      const std::vector<double> want = values(x);
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Product, ReduceOp::Min, ReduceOp::Max, ReduceOp::Avg}) {
        if (op == ReduceOp::Avg && !is_floating(t)) continue;
        Tensor y = x.clone();
        pg.all_reduce(y, op)->wait();
        EXPECT_EQ(values(y), want) << t << " " << dist::reduce_op_name(op);
      }
      Tensor b = x.clone();
      pg.broadcast(b, 0)->wait();
      EXPECT_EQ(values(b), want) << t;
      Tensor r = x.clone();
      pg.reduce(r, 0, ReduceOp::Max)->wait();
      EXPECT_EQ(values(r), want) << t;
      std::vector<Tensor> parts = {zeros({2, 3}, on_gpu(t))};
      auto work = pg.all_gather(parts, x);
      work->wait();
      EXPECT_EQ(values(parts[0]), want) << t;
      EXPECT_TRUE(work->result()[0].is_same(parts[0]));
      Tensor big = zeros({6}, on_gpu(t));
      pg.all_gather_into_tensor(big, x)->wait();
      EXPECT_EQ(values(big), want) << t;
      Tensor rs = zeros({2, 3}, on_gpu(t));
      pg.reduce_scatter_tensor(rs, x, ReduceOp::Sum)->wait();
      EXPECT_EQ(values(rs), want) << t;
      Tensor a2a = zeros({2, 3}, on_gpu(t));
      pg.all_to_all_single(a2a, x, {}, {})->wait();
      EXPECT_EQ(values(a2a), want) << t;
    }
    auto barrier = pg.barrier();
    EXPECT_TRUE(barrier->wait());
    EXPECT_TRUE(barrier->is_completed() && barrier->is_success());
    // Empty tensors pass through.
    Tensor none = zeros({0}, on_gpu(kFloat32));
    pg.all_reduce(none, ReduceOp::Sum)->wait();
    pg.all_gather_into_tensor(zeros({0}, on_gpu(kFloat32)), none)->wait();
  });
  EXPECT_EQ(errors[0], "");
}

TEST(DistributedNccl, OneRankNonContiguousTensorsAreStagedAndCopiedBack) {
  SKIP_WITHOUT_GPUS(1);
  const auto errors = run_ranks(1, kOneRank, [](int, dist::ProcessGroup& pg) {
    const Tensor src = arange(0, 12, 1, on_gpu(kFloat32)).reshape({3, 4});
    Tensor base = src.clone();
    pg.all_reduce(base.t(), ReduceOp::Sum)->wait();  // in place through a transposed view
    EXPECT_TRUE(all_close(base, src, 0, 0));
    Tensor out = zeros({3, 4}, on_gpu(kFloat32));
    pg.all_gather_into_tensor(out.t(), src.t())->wait();  // a non-contiguous output and input
    EXPECT_TRUE(all_close(out.t(), src.t(), 0, 0));
    std::vector<Tensor> parts = {zeros({4, 3}, on_gpu(kFloat32)).t()};
    pg.all_gather(parts, src)->wait();
    EXPECT_TRUE(all_close(parts[0], src, 0, 0));
    Tensor a2a = zeros({4, 3}, on_gpu(kFloat32));
    pg.all_to_all_single(a2a.t(), src, {}, {3})->wait();
    EXPECT_TRUE(all_close(a2a.t(), src, 0, 0));
  });
  EXPECT_EQ(errors[0], "");
}

// The collective runs after the producer queued on the caller's (side) stream, and the Work's wait()
// orders the caller's stream after the collective. Whenever the collective is seen completed, so is
// the producer (queried after it; on a loaded host both may be done by the first query).
TEST(DistributedNccl, OneRankCollectiveRunsAfterTheCallersStream) {
  SKIP_WITHOUT_GPUS(1);
  const auto errors = run_ranks(1, kOneRank, [](int, dist::ProcessGroup& pg) {
    create_communicator(pg);
    const cuda::Stream side = cuda::Stream::create(0);
    cuda::StreamGuard guard(side);
    Tensor out = zeros({kSlow * kSlow}, on_gpu(kFloat32));
    const Tensor in = slow_ones(0) + 6;  // 7 once the producer is done
    cuda::Event produced;
    produced.record(side);
    auto work = pg.all_gather_into_tensor(out, in);
    while (!work->is_completed()) std::this_thread::yield();
    EXPECT_TRUE(produced.query());
    work->wait();
    EXPECT_TRUE(all_close(out, full({kSlow * kSlow}, 7.0, kFloat64), 0, 0));
  });
  EXPECT_EQ(errors[0], "");
}

// An input freed right after an asynchronous collective keeps its memory until NCCL is done with it:
// a tensor of its size allocated next on the same stream (whose best fit it would be) gets other
// memory, and overwriting that does not change the result. The check counts only when the collective
// was still pending after that allocation (on a loaded host the producer can finish first, and then
// reusing the memory is right), so a few attempts are made.
TEST(DistributedNccl, OneRankInputMemoryOutlivesItsTensor) {
  SKIP_WITHOUT_GPUS(1);
  const auto errors = run_ranks(1, kOneRank, [](int, dist::ProcessGroup& pg) {
    create_communicator(pg);
    bool checked = false;
    for (int attempt = 0; attempt < 5 && !checked; ++attempt) {
      cuda::empty_cache();
      const int64_t n = kSlow / 4 * kSlow;  // a size no other tensor here has
      Tensor out = zeros({n}, on_gpu(kFloat32));
      const Tensor producer = slow_ones(0);
      Tensor in = (producer.narrow(0, 0, kSlow / 4) + 6).view({-1});
      const void* in_memory = in.data_ptr();
      auto work = pg.all_gather_into_tensor(out, in);
      in = Tensor();
      const Tensor other = full({n}, -5.0, on_gpu(kFloat32));
      checked = !work->is_completed();  // still pending now, so it was when `other` was allocated
      if (checked) {
        EXPECT_NE(other.data_ptr(), in_memory);
      }
      work->wait();
      EXPECT_TRUE(all_close(out, full({n}, 7.0, kFloat64), 0, 0));
    }
    EXPECT_TRUE(checked) << "the collective finished before the next allocation in every attempt";
  });
  EXPECT_EQ(errors[0], "");
}

TEST(DistributedNccl, OneRankErrorsBeforeAnythingIsEnqueued) {
  SKIP_WITHOUT_GPUS(1);
  const auto errors = run_ranks(1, kOneRank, [](int, dist::ProcessGroup& pg) {
    const Tensor x = ones({4}, on_gpu(kFloat32));
    EXPECT_TRUE(throws<DTypeError>([&] { pg.all_reduce(ones({2}, on_gpu(kInt32)), ReduceOp::Avg); },
                                   "[all_reduce] ReduceOp.AVG needs a floating-point tensor, got int32"));
    EXPECT_TRUE(throws<DTypeError>([&] { pg.all_reduce(ones({2}, on_gpu(kBool)), ReduceOp::Avg); }, "got bool"));
    EXPECT_TRUE(throws<ShapeError>([&] { pg.all_gather_into_tensor(zeros({3}, on_gpu(kFloat32)), x); },
                                   "[all_gather_into_tensor] output shape [3] must hold 1 inputs of shape [4]"));
    EXPECT_TRUE(throws<DTypeError>([&] { pg.reduce_scatter_tensor(zeros({4}, on_gpu(kInt64)), x, ReduceOp::Sum); },
                                   "output dtype int64 != input dtype float32"));
    EXPECT_TRUE(throws<ShapeError>([&] { pg.all_to_all_single(zeros({4}, on_gpu(kFloat32)), x, {}, {3}); },
                                   "input_split_sizes sums to 3"));
    EXPECT_TRUE(throws<DeviceError>([&] { pg.all_gather_into_tensor(zeros({4}), x); }, "takes CUDA tensors"));
    EXPECT_TRUE(throws<ValueError>([&] { pg.send(x, 0, 0); }, "[send] dst rank 0 is this rank"));
    EXPECT_TRUE(throws<ValueError>([&] { pg.broadcast(x, 1); }, "[broadcast] src rank 1 is not in [0, 1)"));
    pg.all_reduce(x, ReduceOp::Sum)->wait();  // the group still works
    if (cuda::device_count() > 1) {
      const Tensor elsewhere = ones({4}, on_gpu(kFloat32, 1));
      EXPECT_TRUE(throws<DeviceError>([&] { pg.all_reduce(elsewhere, ReduceOp::Sum); },
                                      "this nccl group works on cuda:0, got a tensor on cuda:1"));
      EXPECT_TRUE(throws<DeviceError>([&] { pg.all_gather_into_tensor(ones({4}, on_gpu(kFloat32, 1)), x); },
                                      "[all_gather_into_tensor] tensors on cuda:1 and cuda:0"));
    }
  });
  EXPECT_EQ(errors[0], "");
}

// Two ranks on two devices: reductions, gathers, uneven all_to_all and point-to-point.
TEST(DistributedNccl, TwoRanksOnTwoDevices) {
  SKIP_WITHOUT_GPUS(2);
  std::vector<std::vector<double>> sums(2), maxes(2), avgs(2), flags(2), gathered(2), a2a(2), got(2), reduced(2);
  const auto errors = run_ranks(2, 20s, [&](int rank, dist::ProcessGroup& pg) {
    cuda::DeviceGuard device(rank);
    Tensor s = full({3}, rank + 1.0, on_gpu(kFloat64, rank));
    pg.all_reduce(s, ReduceOp::Sum)->wait();
    sums[rank] = values(s);
    Tensor m = arange(0, 4, 1, on_gpu(kInt32, rank)) * (rank == 0 ? 1 : -1);
    pg.all_reduce(m, ReduceOp::Max)->wait();
    maxes[rank] = values(m);
    Tensor a = full({2}, rank * 2.0, on_gpu(kBFloat16, rank));
    pg.all_reduce(a, ReduceOp::Avg)->wait();
    avgs[rank] = values(a);
    Tensor f = full({2}, 1.0, on_gpu(kBool, rank));  // bool SUM is a logical or: no uint8 wrap-around
    std::shared_ptr<dist::Work> last;
    for (int i = 0; i < 16; ++i) last = pg.all_reduce(f, ReduceOp::Sum);
    last->wait();  // the collectives of a group run in issue order
    flags[rank] = values(f);
    Tensor r = full({2}, rank + 5.0, on_gpu(kFloat32, rank));
    pg.reduce(r, 1, ReduceOp::Product)->wait();
    reduced[rank] = values(r);
    Tensor big = zeros({4}, on_gpu(kInt64, rank));
    pg.all_gather_into_tensor(big, full({2}, 10.0 * rank, on_gpu(kInt64, rank)))->wait();
    gathered[rank] = values(big);
    // rank s sends s + d + 1 elements of value 100 s + d to rank d.
    std::vector<int64_t> in_splits, out_splits;
    std::vector<Tensor> pieces;
    for (int d = 0; d < 2; ++d) {
      in_splits.push_back(rank + d + 1);
      out_splits.push_back(d + rank + 1);
      pieces.push_back(full({rank + d + 1}, 100.0 * rank + d, on_gpu(kFloat32, rank)));
    }
    Tensor out = zeros({out_splits[0] + out_splits[1]}, on_gpu(kFloat32, rank));
    pg.all_to_all_single(out, cat(pieces), out_splits, in_splits)->wait();
    a2a[rank] = values(out);
    // Point to point: rank 0 sends, then receives; rank 1 the other way round (tags are ignored).
    Tensor mine = full({5}, rank + 0.5, on_gpu(kFloat64, rank));
    Tensor theirs = zeros({5}, on_gpu(kFloat64, rank));
    if (rank == 0) {
      pg.send(mine, 1, 3)->wait();
      pg.recv(theirs, 1, 4)->wait();
    } else {
      pg.recv(theirs, 0, 3)->wait();
      pg.send(mine, 0, 4)->wait();
    }
    got[rank] = values(theirs);
    EXPECT_TRUE(pg.barrier()->wait());
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    EXPECT_EQ(sums[r], std::vector<double>(3, 3.0));
    EXPECT_EQ(maxes[r], (std::vector<double>{0, 1, 2, 3}));
    EXPECT_EQ(avgs[r], std::vector<double>(2, 1.0));
    EXPECT_EQ(flags[r], std::vector<double>(2, 1.0));
    EXPECT_EQ(reduced[r], r == 1 ? std::vector<double>(2, 30.0) : std::vector<double>(2, 5.0));
    EXPECT_EQ(gathered[r], (std::vector<double>{0, 0, 10, 10}));
    std::vector<double> want;
    for (int s = 0; s < 2; ++s) want.insert(want.end(), static_cast<size_t>(s + r + 1), 100.0 * s + r);
    EXPECT_EQ(a2a[r], want) << "rank " << r;
    EXPECT_EQ(got[r], std::vector<double>(5, (1 - r) + 0.5));
  }
}

// A collective one rank never joins: the watchdog aborts the communicator at the timeout, and the
// group raises DistBackendError from then on (nobody hangs; both groups are destroyed cleanly).
TEST(DistributedNccl, TwoRanksWatchdogFailsAStalledCollective) {
  SKIP_WITHOUT_GPUS(2);
  std::string late;
  std::atomic<bool> rank0_done{false};
  const auto errors = run_ranks(2, 2s, [&](int rank, dist::ProcessGroup& pg) {
    cuda::DeviceGuard device(rank);
    Tensor t = ones({4}, on_gpu(kFloat32, rank));
    pg.all_reduce(t, ReduceOp::Sum)->wait();  // both ranks: the communicator exists
    cuda::synchronize(rank);
    if (rank == 1) {  // alive (its communicator too) but never joins the next all_reduce
      while (!rank0_done) std::this_thread::sleep_for(10ms);
      return;
    }
    struct Release {  // rank 1 goes when rank 0 does, however rank 0 ends
      std::atomic<bool>& done;
      ~Release() { done = true; }
    } release{rank0_done};
    const auto start = std::chrono::steady_clock::now();
    auto work = pg.all_reduce(t, ReduceOp::Sum);  // rank 1 never comes
    EXPECT_TRUE(throws<DistBackendError>([&] { work->wait(10s); }, "did not complete within 2 s"));
    EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
    EXPECT_TRUE(work->is_completed() && !work->is_success());
    try {
      pg.all_reduce(t, ReduceOp::Sum);
    } catch (const DistBackendError& e) {
      late = e.what();
    }
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_NE(late.find("[all_reduce] rank 0 of an nccl group of 2 (world ranks [0, 1]) did not complete within 2 s"),
            std::string::npos)
      << late;
}

}  // namespace
}  // namespace rtx::testing
