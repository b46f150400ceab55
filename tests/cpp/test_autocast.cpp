// Autocast: the dtype each op runs in inside a region (the policy, op by op), cross_entropy of 16-bit
// logits without a cast, nesting, the cast cache, gradients through casts, backward and checkpoint
// replays, and bad regions.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "test_utils.h"

namespace rtx::testing {
namespace {

class AutocastTest : public DeviceTest {
 protected:
  Tensor f32(const Shape& shape, uint64_t seed = 0) const { return quarter_tensor(shape, seed, dev(), kFloat32); }
  Tensor bf16(const Shape& shape, uint64_t seed = 0) const { return quarter_tensor(shape, seed, dev(), kBFloat16); }
  Tensor positive(const Shape& shape, DType dtype) const {
    return make(irregular(numel(shape)), shape, dev(), kFloat64).abs().add(0.5).to(dtype);
  }
  Tensor labels(int64_t n, int64_t classes) const {
    std::vector<double> v;
    for (int64_t i = 0; i < n; ++i) v.push_back(static_cast<double>((i * 7) % classes));
    return make(v, {n}, dev(), kInt64);
  }
};
INSTANTIATE_DEVICE_TESTS(AutocastTest);

using NamedOp = std::pair<std::string, std::function<Tensor()>>;

TEST_P(AutocastTest, LowerPrecisionOpsRunInTheRegionDtype) {
  const Tensor a = f32({4, 6}), b = f32({6, 5}, 1), w = f32({5, 6}, 2), bias = f32({5}, 3);
  const Tensor a3 = f32({2, 4, 6}), b3 = f32({2, 6, 3}, 1);
  const Tensor img = f32({1, 2, 6, 6}), kernel = f32({3, 2, 3, 3}, 1), kernel_t = f32({2, 3, 3, 3}, 2);
  const Tensor q = f32({1, 2, 4, 8}), k = f32({1, 2, 4, 8}, 1), v = f32({1, 2, 4, 8}, 2);
  const std::vector<NamedOp> ops = {
      {"matmul", [&] { return matmul(a, b); }},
      {"mm", [&] { return mm(a, b); }},
      {"bmm", [&] { return bmm(a3, b3); }},
      {"linear", [&] { return linear(a, w, bias); }},
      {"conv2d", [&] { return conv2d(img, kernel); }},
      {"conv_transpose2d", [&] { return conv_transpose2d(img, kernel_t); }},
      {"scaled_dot_product_attention", [&] { return scaled_dot_product_attention(q, k, v, {}, 0.0, true); }},
  };
  for (DType low : {kBFloat16, kFloat16}) {
    AutocastGuard region(dev().type, low);
    for (const auto& [name, op] : ops) EXPECT_EQ(op().dtype(), low) << name << " under " << low;
  }
  for (const auto& [name, op] : ops) EXPECT_EQ(op().dtype(), kFloat32) << name << " outside a region";
}

TEST_P(AutocastTest, Float32OpsRunInFloat32) {
  const Tensor x = bf16({4, 6}), y = bf16({4, 6}, 1), pos = positive({4, 6}, kBFloat16);
  const Tensor img = bf16({2, 3, 4, 4}), stats_mean = make({0, 0, 0}, {3}, dev(), kFloat32);
  const Tensor stats_var = make({1, 1, 1}, {3}, dev(), kFloat32);
  const Tensor target = labels(4, 6);
  const std::vector<NamedOp> ops = {
      {"softmax", [&] { return softmax(x, -1); }},
      {"log_softmax", [&] { return log_softmax(x, -1); }},
      {"layer_norm", [&] { return layer_norm(x, {6}); }},
      {"batch_norm", [&] { return batch_norm(img, stats_mean, stats_var, {}, {}, false); }},
      {"cross_entropy", [&] { return cross_entropy(x, target); }},
      {"nll_loss", [&] { return nll_loss(x, target); }},
      {"mse_loss", [&] { return mse_loss(x, y); }},
      {"binary_cross_entropy_with_logits", [&] { return binary_cross_entropy_with_logits(x, y.sigmoid()); }},
      {"norm", [&] { return norm(x); }},
      {"sum", [&] { return sum(x); }},
      {"prod", [&] { return prod(x, {1}); }},
      {"cumsum", [&] { return cumsum(x, 1); }},
      {"logsumexp", [&] { return logsumexp(x, {1}); }},
      {"exp", [&] { return exp(x); }},
      {"log", [&] { return log(pos); }},
      {"log1p", [&] { return log1p(pos); }},
      {"expm1", [&] { return expm1(x); }},
      {"rsqrt", [&] { return rsqrt(pos); }},
      {"reciprocal", [&] { return reciprocal(pos); }},
      {"pow", [&] { return pow(pos, y); }},
      {"pow scalar", [&] { return pow(pos, 2.5); }},
      {"softplus", [&] { return softplus(x); }},
  };
  AutocastGuard region(dev().type, kBFloat16);
  for (const auto& [name, op] : ops) EXPECT_EQ(op().dtype(), kFloat32) << name;
}

// cross_entropy of 16-bit logits in a region gives the float32 loss, as if the logits had been cast
// to float32 first, but reads them as they are (autocast makes no cast); their gradient is the
// float32 one rounded once, whatever the upstream gradient (here 1/3). With class weights the logits
// are cast, as every fp32-rule op's inputs are.
TEST_P(AutocastTest, CrossEntropyOf16BitLogitsGivesTheFloat32LossWithoutACast) {
  const int64_t n = 6, classes = 37, ignored = 7;  // the second sample's target is 7
  const Tensor target = labels(n, classes);
  for (DType low : {kBFloat16, kFloat16}) {
    const Tensor x = quarter_tensor({n, classes}, 5, dev(), low);
    for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
      for (double smoothing : {0.0, 0.1}) {
        const Tensor x32 = x.to(kFloat32).requires_grad_();
        const Tensor ref = cross_entropy(x32, target, {}, ignored, r, smoothing);
        (ref.sum() / 3.0).backward();
        const Tensor xl = x.clone().requires_grad_();
        const int64_t casts = autocast::stats().casts;
        Tensor loss;
        {
          AutocastGuard region(dev().type, low);
          loss = cross_entropy(xl, target, {}, ignored, r, smoothing);
        }
        EXPECT_EQ(autocast::stats().casts, casts) << low << ": the logits were cast";
        EXPECT_EQ(loss.dtype(), kFloat32);
        EXPECT_TRUE(all_close(loss, ref, 1e-6, 1e-6)) << low << " reduction " << static_cast<int>(r);
        (loss.sum() / 3.0).backward();
        EXPECT_EQ(xl.grad().dtype(), low);
        EXPECT_TRUE(all_close(xl.grad(), x32.grad().to(low), 8e-3, 1e-5))
            << low << " reduction " << static_cast<int>(r);
      }
    }
    const Tensor w = positive({classes}, kFloat32);
    const Tensor ref = cross_entropy(x.to(kFloat32), target, w);
    AutocastGuard region(dev().type, low);
    const Tensor weighted = cross_entropy(x, target, w);
    EXPECT_EQ(weighted.dtype(), kFloat32);
    EXPECT_TRUE(all_close(weighted, ref, 1e-6, 1e-6)) << low;
  }
}

TEST_P(AutocastTest, OtherOpsKeepOrPromoteTheirInputDtypes) {
  const Tensor x = bf16({4, 6}), wide = f32({4, 6}, 1);
  AutocastGuard region(dev().type, kBFloat16);
  EXPECT_EQ(relu(x).dtype(), kBFloat16);
  EXPECT_EQ(gelu(x).dtype(), kBFloat16);
  EXPECT_EQ(tanh(x).dtype(), kBFloat16);
  EXPECT_EQ(mean(x).dtype(), kBFloat16);
  EXPECT_EQ(add(x, x).dtype(), kBFloat16);
  EXPECT_EQ(add(x, wide).dtype(), kFloat32);
  EXPECT_EQ(mul(wide, x).dtype(), kFloat32);
  EXPECT_EQ(cat({x, wide}, 0).dtype(), kFloat32);
  EXPECT_EQ(stack({wide, x}, 0).dtype(), kFloat32);
  EXPECT_EQ(addcmul(wide, x, x).dtype(), kFloat32);
  EXPECT_EQ(relu(wide).dtype(), kFloat32);
}

TEST_P(AutocastTest, MixedOperandsOfProductsAreCastAndFloat64IsLeftAlone) {
  const Tensor a = bf16({3, 4}), b = f32({4, 2}, 1);
  EXPECT_TRUE(throws<DTypeError>([&] { matmul(a, b); }, "same dtype"));
  {
    AutocastGuard region(dev().type, kBFloat16);
    EXPECT_EQ(matmul(a, b).dtype(), kBFloat16);
    const Tensor d = a.to(kFloat64), e = b.to(kFloat64);
    EXPECT_EQ(matmul(d, e).dtype(), kFloat64);
    EXPECT_EQ(softmax(d, 1).dtype(), kFloat64);
    // An int tensor is never cast.
    EXPECT_EQ(sum(make({1, 2, 3}, {3}, dev(), kInt64)).dtype(), kInt64);
  }
}

TEST_P(AutocastTest, RegionsNestAndRestore) {
  const Tensor a = f32({2, 3}), b = f32({3, 2}, 1);
  EXPECT_FALSE(is_autocast_enabled(dev().type));
  {
    AutocastGuard outer(dev().type, kBFloat16);
    EXPECT_TRUE(is_autocast_enabled(dev().type));
    {
      AutocastGuard off(dev().type, kBFloat16, /*enabled=*/false);
      EXPECT_FALSE(is_autocast_enabled(dev().type));
      EXPECT_EQ(matmul(a, b).dtype(), kFloat32);
      {
        AutocastGuard half(dev().type, kFloat16);
        EXPECT_EQ(matmul(a, b).dtype(), kFloat16);
      }
    }
    EXPECT_EQ(get_autocast_dtype(dev().type), kBFloat16);
    EXPECT_EQ(matmul(a, b).dtype(), kBFloat16);
  }
  EXPECT_FALSE(is_autocast_enabled(dev().type));
  EXPECT_EQ(matmul(a, b).dtype(), kFloat32);
}

TEST_P(AutocastTest, ARegionOfAnotherDeviceTypeChangesNothingHere) {
  const DeviceType other = dev().is_cpu() ? kCUDA : kCPU;
  AutocastGuard region(other, kBFloat16);
  EXPECT_EQ(matmul(f32({2, 3}), f32({3, 2}, 1)).dtype(), kFloat32);
}

TEST_P(AutocastTest, GradientsReachFloat32ParametersInFloat32) {
  const Tensor x = f32({8, 16});
  Tensor w = f32({4, 16}, 1).mul(0.25).detach().requires_grad_();
  Tensor bias = f32({4}, 2).detach().requires_grad_();
  Tensor loss;
  {
    AutocastGuard region(dev().type, kBFloat16);
    const Tensor h = linear(x, w, bias);
    EXPECT_EQ(h.dtype(), kBFloat16);
    loss = sum(h.relu() * h);
  }
  EXPECT_EQ(loss.dtype(), kFloat32);
  loss.backward();
  ASSERT_EQ(w.grad().dtype(), kFloat32);
  ASSERT_EQ(bias.grad().dtype(), kFloat32);
  // The float64 reference of the same function.
  const Tensor wd = w.detach().to(kFloat64).requires_grad_(), bd = bias.detach().to(kFloat64).requires_grad_();
  const Tensor hd = linear(x.to(kFloat64), wd, bd);
  sum(hd.relu() * hd).backward();
  EXPECT_TRUE(all_close(w.grad(), wd.grad(), 3e-2, 5e-2));
  EXPECT_TRUE(all_close(bias.grad(), bd.grad(), 3e-2, 5e-2));
}

TEST_P(AutocastTest, EachWeightIsCastOncePerRegion) {
  Tensor w = f32({6, 6}).detach().requires_grad_();
  const Tensor x = f32({3, 6}, 1);
  const autocast::Stats before = autocast::stats();
  {
    AutocastGuard region(dev().type, kBFloat16);
    Tensor h = linear(x, w);  // casts x and w
    h = linear(h, w);         // w from the cache
    h = matmul(h, w.t());     // a view of w is no leaf: cast again
    EXPECT_EQ(autocast::stats().casts - before.casts, 3);
    EXPECT_EQ(autocast::stats().cached, 1);
    {
      AutocastGuard inner(dev().type, kBFloat16);
      linear(h, w);  // still cached in a nested region
    }
    EXPECT_EQ(autocast::stats().casts - before.casts, 3);
    {
      NoGradGuard no_grad;
      w.mul_(0.5);  // a new version: the cast is stale
    }
    linear(h, w);
    EXPECT_EQ(autocast::stats().casts - before.casts, 4);
  }
  EXPECT_EQ(autocast::stats().cached, 0);
  {
    AutocastGuard region(dev().type, kBFloat16, true, /*cache_enabled=*/false);
    linear(x, w);
    linear(x, w);
    EXPECT_EQ(autocast::stats().cached, 0);
    EXPECT_EQ(autocast::stats().casts - before.casts, 8);
  }
}

TEST_P(AutocastTest, TiedWeightsAccumulateOneFloat32Gradient) {
  Tensor w = f32({5, 4}).mul(0.5).detach().requires_grad_();
  const Tensor x = f32({3, 4}, 1);
  {
    AutocastGuard region(dev().type, kBFloat16);
    const Tensor h = linear(x, w);           // [3, 5]
    sum(linear(h, w.t().contiguous().t().t())).backward();  // w used again through a view chain
  }
  ASSERT_EQ(w.grad().dtype(), kFloat32);
  EXPECT_EQ(w.grad().sizes(), (Shape{5, 4}));
}

TEST_P(AutocastTest, BackwardInsideARegionMatchesBackwardOutside) {
  const Tensor x = f32({4, 8});
  Tensor w = f32({8, 8}, 1).mul(0.25).detach().requires_grad_();
  Tensor g_inside, g_outside;
  for (bool inside : {true, false}) {
    w.set_grad({});
    AutocastGuard region(dev().type, kBFloat16);
    Tensor loss = sum(softmax(matmul(x, w), -1) * x);
    if (inside) {
      loss.backward();
      g_inside = w.grad();
    } else {
      Tensor keep = loss;
      {
        AutocastGuard off(dev().type, kBFloat16, false);
        keep.backward();
      }
      g_outside = w.grad();
    }
  }
  EXPECT_TRUE(same_bytes(g_inside, g_outside));
}

TEST_P(AutocastTest, CheckpointReplaysUnderTheForwardsRegion) {
  const Tensor x = f32({4, 8});
  Tensor w = f32({8, 8}, 1).mul(0.25).detach().requires_grad_();
  const auto block = [](const TensorList& in) { return TensorList{softmax(matmul(in[0], in[1]), -1)}; };
  Tensor plain, replayed;
  for (bool checkpointed : {false, true}) {
    w.set_grad({});
    Tensor loss;
    {
      AutocastGuard region(dev().type, kBFloat16);
      const Tensor out = checkpointed ? autograd::checkpoint(block, {x, w})[0] : block({x, w})[0];
      loss = sum(out * x);
    }
    loss.backward();
    (checkpointed ? replayed : plain) = w.grad();
  }
  EXPECT_TRUE(same_bytes(plain, replayed));
}

TEST(Autocast, RejectsAWideLowDtype) {
  EXPECT_TRUE(throws<ValueError>([] { AutocastGuard region(kCPU, kFloat32); }, "bfloat16 or float16"));
  EXPECT_FALSE(is_autocast_enabled(kCPU));
}

TEST(Autocast, DefaultsFollowPyTorch) {
  EXPECT_EQ(get_autocast_dtype(kCUDA), kFloat16);
  EXPECT_EQ(get_autocast_dtype(kCPU), kBFloat16);
  EXPECT_TRUE(is_autocast_cache_enabled());
}

}  // namespace
}  // namespace rtx::testing
