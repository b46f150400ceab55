// rtx::dist::Reducer and its helpers on a 2-rank gloo group whose ranks are threads: gradients averaged
// exactly across ranks through many small buckets, written back before backward returns; a bucket view
// mode; parameters without a gradient refused by name; the coalesced broadcast and the shape check.
#include "dist_test_utils.h"
#include "rtx/data_parallel.h"
#include "test_utils.h"

namespace rtx::testing {
namespace {

using namespace std::chrono_literals;

// Runs body(rank, group) on 2 ranks of a gloo group in threads; each rank's error message.
std::vector<std::string> on_two_ranks(const std::function<void(int, const std::shared_ptr<dist::ProcessGroup>&)>& body) {
  return run_rank_threads(2, 10s, gloo_group(10s), body);
}

TEST(DataParallel, ReducerAveragesGradientsAcrossRanks) {
  if (!dist::is_gloo_available()) GTEST_SKIP() << "this build has no gloo backend (install libgloo-dev)";
  std::vector<std::vector<Tensor>> grads(2);
  std::vector<std::vector<std::vector<size_t>>> buckets(2);
  for (bool view : {false, true}) {
    const auto errors = on_two_ranks([&](int rank, const std::shared_ptr<dist::ProcessGroup>& pg) {
      std::vector<Tensor> params = {leaf({3, 4}, Device(kCPU), 1), leaf({4}, Device(kCPU), 2),
                                    leaf({2, 3}, Device(kCPU), 3)};
      dist::ReducerOptions o;
      o.bucket_cap_bytes = 40;  // five float64s: one parameter per bucket
      o.first_bucket_bytes = 40;
      o.gradient_as_bucket_view = view;
      dist::Reducer reducer(params, pg, o, {"a", "b", "c"});
      buckets[rank] = reducer.bucket_indices();
      for (int step = 0; step < 2; ++step) {
        reducer.prepare_for_backward();
        // Rank r's loss: (r + 1) * sum(p^2) over the parameters: gradient 2 (r + 1) p.
        Tensor loss = (params[0] * params[0]).sum() + (params[1] * params[1]).sum() + (params[2] * params[2]).sum();
        (loss * static_cast<double>(rank + 1)).backward();
        if (step == 0) {
          for (auto& p : params) p.set_grad(Tensor());
        }
      }
      grads[rank] = {params[0].grad(), params[1].grad(), params[2].grad()};
    });
    ASSERT_EQ(errors, (std::vector<std::string>{"", ""}));
    EXPECT_EQ(buckets[0], (std::vector<std::vector<size_t>>{{2}, {1}, {0}}));  // reverse order
    const std::vector<Tensor> params = {leaf({3, 4}, Device(kCPU), 1), leaf({4}, Device(kCPU), 2),
                                        leaf({2, 3}, Device(kCPU), 3)};
    for (int i = 0; i < 3; ++i) {
      // The mean of 2 p and 4 p is 3 p (exact in float64).
      EXPECT_TRUE(same_bytes(grads[0][i], params[i].detach() * 3.0)) << "view " << view << " parameter " << i;
      EXPECT_TRUE(same_bytes(grads[1][i], grads[0][i]));
    }
  }
}

TEST(DataParallel, ReducerNamesParametersWithoutGradient) {
  if (!dist::is_gloo_available()) GTEST_SKIP() << "this build has no gloo backend (install libgloo-dev)";
  const auto errors = on_two_ranks([&](int, const std::shared_ptr<dist::ProcessGroup>& pg) {
    std::vector<Tensor> params = {leaf({2}, Device(kCPU), 1), leaf({2}, Device(kCPU), 2)};
    dist::Reducer reducer(params, pg, {}, {"used", "idle"});
    reducer.prepare_for_backward();
    (params[0] * 2).sum().backward();
  });
  for (const auto& e : errors) {
    EXPECT_NE(e.find("parameters idle (1)"), std::string::npos) << e;
    EXPECT_NE(e.find("find_unused_parameters=True"), std::string::npos) << e;
  }
}

TEST(DataParallel, BroadcastCoalescedAndShapeCheck) {
  if (!dist::is_gloo_available()) GTEST_SKIP() << "this build has no gloo backend (install libgloo-dev)";
  std::vector<std::vector<Tensor>> states(2);
  const auto errors = on_two_ranks([&](int rank, const std::shared_ptr<dist::ProcessGroup>& pg) {
    std::vector<Tensor> t = {full({3}, rank + 1.0, kFloat32), full({2, 2}, rank + 5.0, kFloat64),
                             full({5}, static_cast<double>(rank), kInt64), full({1}, rank + 9.0, kFloat32)};
    dist::verify_same_shapes(*pg, t, "test");
    dist::broadcast_coalesced(*pg, t, 16, 0);  // several buffers: 16 bytes at most, per dtype
    states[rank] = t;
    std::vector<Tensor> other = {full({rank + 1}, 0.0, kFloat32)};
    dist::verify_same_shapes(*pg, other, "test");
  });
  for (const auto& e : errors) EXPECT_NE(e.find("[test] rank 1 of the group has 1 tensors"), std::string::npos) << e;
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(same_bytes(states[1][i], states[0][i])) << i;
  EXPECT_EQ(states[1][1].to(kFloat64).data_ptr<double>()[3], 5.0);
}

}  // namespace
}  // namespace rtx::testing
