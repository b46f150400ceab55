// Index checks without a host synchronization: a bad index in embedding, the class-index losses,
// the index family and one_hot raises the op's IndexError at once on the CPU, and on CUDA at the
// next synchronization with the device (.item(), .cpu(), synchronize(), stream and event waits),
// after which the device's fault record is clear and the device usable; with sync_checks() CUDA
// raises at the op; a good op never waits for the device.
#include <atomic>
#include <functional>
#include <thread>

#include "dispatch/index.h"
#include "test_utils.h"

namespace rtx {
namespace {

using testing::all_close;
using testing::make;
using testing::throws;
using testing::values;

class DeviceFaultTest : public testing::DeviceTest {
 protected:
  Tensor idx(const std::vector<int64_t>& v, const Shape& shape) const {
    return from_buffer(v.data(), shape, kInt64).to(dev());
  }
  TensorOptions f32() const { return TensorOptions(kFloat32, dev()); }

  // Runs op, which meets a bad index, then sync: the CPU raises in op, CUDA in sync. Returns the
  // message, or "" after reporting a failure.
  std::string fault_message(const std::function<void()>& op, const std::function<void()>& sync) const {
    try {
      op();
    } catch (const IndexError& e) {
      if (dev().is_cuda()) ADD_FAILURE() << "CUDA raised at the op instead of the synchronization: " << e.what();
      return e.what();
    }
    if (dev().is_cpu()) {
      ADD_FAILURE() << "the CPU did not raise at the op";
      return "";
    }
    try {
      sync();
    } catch (const IndexError& e) {
      return e.what();
    }
    ADD_FAILURE() << "no IndexError at the synchronization";
    return "";
  }

  // The message holds the op's own text, and on CUDA says where it was reported; the device's record
  // is clear afterwards.
  ::testing::AssertionResult reports(const std::string& message, const std::string& expected) const {
    if (message.find(expected) == std::string::npos)
      return ::testing::AssertionFailure() << "message '" << message << "' lacks '" << expected << "'";
    if (dev().is_cuda()) {
      if (message.find("reported at this synchronization") == std::string::npos)
        return ::testing::AssertionFailure() << "message '" << message << "' does not say it was deferred";
      try {
        cuda::synchronize();
      } catch (const IndexError& e) {
        return ::testing::AssertionFailure() << "the record was not cleared: " << e.what();
      }
    }
    return ::testing::AssertionSuccess();
  }
};
INSTANTIATE_DEVICE_TESTS(DeviceFaultTest);

// Restores sync_checks() on scope exit.
class SyncChecks {
 public:
  explicit SyncChecks(bool on) : before_(kernels::sync_checks()) { kernels::set_sync_checks(on); }
  ~SyncChecks() { kernels::set_sync_checks(before_); }
  SyncChecks(const SyncChecks&) = delete;
  SyncChecks& operator=(const SyncChecks&) = delete;

 private:
  bool before_;
};

TEST_P(DeviceFaultTest, EmbeddingRaisesAtItemAndTheDeviceStaysUsable) {
  const SyncChecks deferred(false);
  const Tensor w = make({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {5, 2}, dev(), kFloat32);
  const Tensor bad = idx({1, 7, 2}, {3}), good = idx({4, 0}, {2});
  Tensor out;
  const std::string message = fault_message([&] { out = embedding(w, bad); }, [&] { out.sum().item<double>(); });
  EXPECT_TRUE(reports(message, "[embedding] index 7 is out of range for 5 embeddings (valid indices: 0..4)"));
  if (dev().is_cuda()) {  // the bad row was skipped (zero), the others read
    EXPECT_EQ(values(out), (std::vector<double>{2, 3, 0, 0, 4, 5}));
  }
  EXPECT_EQ(values(embedding(w, good)), (std::vector<double>{8, 9, 0, 1}));
}

TEST_P(DeviceFaultTest, ClassLossTargetsRaiseAtTheNextSynchronization) {
  const SyncChecks deferred(false);
  const Tensor logits = make({0.5, -1, 2, 0, 1, 3}, {2, 3}, dev(), kFloat32);
  const Tensor bad = idx({0, 3}, {2}), negative = idx({-1, 0}, {2}), good = idx({2, 1}, {2});
  Tensor loss;
  EXPECT_TRUE(reports(fault_message([&] { loss = cross_entropy(logits, bad); }, [&] { loss.item<double>(); }),
                      "[cross_entropy] target 3 is out of bounds for 3 classes (valid: 0..2, or ignore_index -100)"));
  EXPECT_TRUE(reports(fault_message([&] { loss = nll_loss(log_softmax(logits, 1), negative); },
                                    [&] { cuda::synchronize(); }),
                      "[nll_loss] target -1 is out of bounds for 3 classes"));
  EXPECT_TRUE(all_close(cross_entropy(logits, good), cross_entropy(logits.cpu(), good.cpu()), 1e-6, 1e-6));
}

TEST_P(DeviceFaultTest, ATrainingStepWithABadTargetRunsToItsEndAndRaisesAtTheLoss) {
  const SyncChecks deferred(false);
  const Tensor w = make(testing::smooth(12, 1), {4, 3}, dev(), kFloat32).requires_grad_();
  const Tensor tokens = idx({0, 2, 1}, {3}), targets = idx({1, 9, 0}, {3});
  Tensor loss;
  const std::string message = fault_message(
      [&] {
        loss = cross_entropy(embedding(w, tokens), targets);
        loss.backward();
      },
      [&] { loss.item<double>(); });
  EXPECT_TRUE(reports(message, "[cross_entropy] target 9 is out of bounds for 3 classes"));
  if (dev().is_cuda()) {  // the bad sample counted as ignored: its embedding row (2) got no gradient
    const std::vector<double> g = values(w.grad());
    for (int c = 0; c < 3; ++c) EXPECT_EQ(g[2 * 3 + c], 0.0);
    for (double v : g) EXPECT_TRUE(std::isfinite(v));
  }
}

TEST_P(DeviceFaultTest, IndexFamilyRaisesAtEverySynchronizationPoint) {
  const SyncChecks deferred(false);
  const Tensor x = make(testing::quarters(15, 3), {3, 5}, dev(), kFloat32);
  const Tensor rows = make(testing::quarters(12, 4), {3, 4}, dev(), kFloat32);
  const Tensor gather_bad = idx({0, 7, 1}, {1, 3}), select_bad = idx({1, 4}, {2});
  const Tensor scatter_bad = idx({3}, {1, 1}), add_bad = idx({0, -5}, {2});
  const Tensor src = ones({1, 1}, f32()), source = ones({3, 2}, f32());
  Tensor out;
  EXPECT_TRUE(reports(fault_message([&] { out = gather(x, 1, gather_bad); }, [&] { out.cpu(); }),
                      "[gather] index 7 is out of bounds for dim 1 with size 5"));
  EXPECT_TRUE(reports(fault_message([&] { out = index_select(rows, 1, select_bad); },
                                    [&] { cuda::current_stream().synchronize(); }),
                      "[index_select] index 4 is out of bounds for dim 1 with size 4"));
  EXPECT_TRUE(reports(fault_message([&] { out = scatter_add(x, 0, scatter_bad, src); },
                                    [&] {
                                      cuda::Event done;
                                      done.record();
                                      done.synchronize();
                                    }),
                      "[scatter_add] index 3 is out of bounds for dim 0 with size 3"));
  EXPECT_TRUE(reports(fault_message([&] { out = index_add(x, 1, add_bad, source); },
                                    [&] { out.to(Device(kCPU), kFloat64).tolist<double>(); }),
                      "[index_add] index -5 is out of bounds for dim 1 with size 5"));
  EXPECT_TRUE(all_close(gather(x, 1, idx({4, 0, 2}, {1, 3})), gather(x.cpu(), 1, idx({4, 0, 2}, {1, 3}).cpu())));
}

TEST_P(DeviceFaultTest, OneHotWithNumClassesChecksOnTheDevice) {
  const SyncChecks deferred(false);
  const Tensor bad = idx({0, 3}, {2}), negative = idx({0, -2}, {2});
  Tensor out;
  EXPECT_TRUE(reports(fault_message([&] { out = one_hot(bad, 3); }, [&] { out.sum().item<int64_t>(); }),
                      "[one_hot] class value 3 is out of range for num_classes = 3"));
  if (dev().is_cuda()) {
    EXPECT_EQ(values(out), (std::vector<double>{1, 0, 0, 0, 0, 0}));
    // Inferring num_classes reads the largest value back (a synchronization, as in PyTorch); the
    // negative value is then found on the device.
    EXPECT_TRUE(reports(fault_message([&] { out = one_hot(negative); }, [&] { cuda::synchronize(); }),
                        "[one_hot] class value -2 is negative"));
  }
}

TEST_P(DeviceFaultTest, TheFirstFaultWinsUntilItIsReported) {
  if (dev().is_cpu()) GTEST_SKIP() << "the CPU raises at each op";
  const SyncChecks deferred(false);
  const Tensor w = ones({5, 2}, f32()), x = ones({3, 5}, f32());
  const Tensor bad_tokens = idx({5}, {1}), bad_gather = idx({9}, {1, 1});
  embedding(w, bad_tokens);
  gather(x, 1, bad_gather);
  EXPECT_TRUE(throws<IndexError>([] { cuda::synchronize(); }, "[embedding] index 5 is out of range for 5 embeddings"));
  EXPECT_NO_THROW(cuda::synchronize());  // the second fault met a full record and is not reported
}

TEST_P(DeviceFaultTest, OneOfTwoThreadsWaitingForTheDeviceRaises) {
  if (dev().is_cpu()) GTEST_SKIP() << "the CPU raises at the op";
  const SyncChecks deferred(false);
  const Tensor x = ones({3, 5}, f32()), bad = idx({0, 5}, {1, 2});
  gather(x, 1, bad);
  std::atomic<int> raised{0};
  auto wait = [&] {
    try {
      cuda::synchronize(0);
    } catch (const IndexError&) {
      ++raised;
    }
  };
  std::thread a(wait), b(wait);
  a.join();
  b.join();
  EXPECT_EQ(raised.load(), 1);
}

TEST_P(DeviceFaultTest, SyncChecksRaiseAtTheOp) {
  const SyncChecks immediate(true);
  const Tensor w = ones({5, 2}, f32()), logits = ones({2, 3}, f32()), x = ones({3, 5}, f32());
  const Tensor bad_tokens = idx({1, 7}, {2}), bad_targets = idx({0, 3}, {2}), bad_index = idx({0, 5}, {1, 2});
  const Tensor classes = idx({0, 4}, {2});
  auto at_op = [](const std::function<void()>& op, const std::string& expected) -> ::testing::AssertionResult {
    try {
      op();
    } catch (const IndexError& e) {
      const std::string m = e.what();
      if (m.find(expected) == std::string::npos || m.find("reported at this synchronization") != std::string::npos)
        return ::testing::AssertionFailure() << "message '" << m << "'";
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure() << "did not raise at the op";
  };
  EXPECT_TRUE(at_op([&] { embedding(w, bad_tokens); }, "[embedding] index 7 is out of range for 5 embeddings"));
  EXPECT_TRUE(at_op([&] { cross_entropy(logits, bad_targets); }, "[cross_entropy] target 3 is out of bounds"));
  EXPECT_TRUE(at_op([&] { gather(x, 1, bad_index); }, "[gather] index 5 is out of bounds for dim 1 with size 5"));
  EXPECT_TRUE(at_op([&] { scatter_add(x, 1, bad_index, ones({1, 2}, f32())); }, "[scatter_add] index 5"));
  EXPECT_TRUE(at_op([&] { one_hot(classes, 4); }, "[one_hot] class value 4 is out of range for num_classes = 4"));
  if (dev().is_cuda()) {
    EXPECT_NO_THROW(cuda::synchronize());  // the record was taken at the op
  }
}

// Every checking op returns while work queued before it still runs: none waits for the device.
TEST_P(DeviceFaultTest, GoodOpsDoNotWaitForTheDevice) {
  if (dev().is_cpu()) GTEST_SKIP() << "the CPU has nothing to wait for";
  const SyncChecks deferred(false);
  const Tensor w = ones({50, 8}, f32()), logits = ones({4, 50}, f32()), x = ones({6, 50}, f32());
  const Tensor tokens = idx({3, 49, 0, 7}, {4}), index = idx({1, 2, 3, 4, 5, 49}, {6, 1});
  const Tensor picks = idx({0, 5}, {2}), classes = idx({0, 1, 2, 3}, {4});
  Tensor e, l, oh;
  const auto checking_ops = [&] {
    e = embedding(w, tokens);
    l = cross_entropy(logits, tokens);
    nll_loss(log_softmax(logits, 1), tokens);
    gather(x, 1, index);
    index_select(x, 1, picks);
    scatter_add(x, 1, index, ones({6, 1}, f32()));
    index_add(x, 1, picks, ones({6, 2}, f32()));
    oh = one_hot(classes, 4);
  };
  // Once first: a kernel's first launch loads its module and new blocks come from cudaMalloc, either
  // of which may wait for the device; neither is the ops' doing.
  checking_ops();
  Tensor a = full({8192, 8192}, 1e-4, f32()), c = a;
  cuda::synchronize();
  for (int i = 0; i < 10; ++i) c = matmul(c, a);  // about 11 TFLOP: tens of milliseconds at least
  checking_ops();
  EXPECT_FALSE(cuda::current_stream().query()) << "an op waited for the matmuls queued before it";
  cuda::synchronize();
  EXPECT_EQ(values(oh), (std::vector<double>{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}));
  EXPECT_EQ(values(e), std::vector<double>(32, 1.0));
  EXPECT_NEAR(l.item<double>(), std::log(50.0), 1e-5);
}

}  // namespace
}  // namespace rtx
