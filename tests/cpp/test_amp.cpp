// Tests of rtx::amp: non_finite_check_and_unscale_ against a float64 loop over many gradients of odd
// sizes and several dtypes (more tensors than one CUDA launch takes, tensors larger than a chunk,
// non-contiguous ones), found_inf set by an inf or a NaN anywhere (the last tensor, a tensor of
// another dtype) and never reset, update_scale_ step by step against PyTorch's rule, and the errors.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "test_utils.h"

namespace rtx::testing {
namespace {

class AmpTest : public DeviceTest {};
INSTANTIATE_DEVICE_TESTS(AmpTest);

Tensor scalar(double v, Device dev, DType dtype = kFloat32) { return full({1}, v, TensorOptions(dtype, dev)); }

// Sizes of the gradients: 80 tensors (more than a launch holds), one larger than a chunk, empty ones.
std::vector<int64_t> sizes() {
  std::vector<int64_t> out;
  for (int i = 0; i < 80; ++i) out.push_back(i % 9 == 0 ? 0 : 1 + (i * 37) % 301);
  out[41] = 70001;
  return out;
}

TEST_P(AmpTest, UnscalesEveryGradientLikeAFloat64Loop) {
  TensorList grads;
  std::vector<std::vector<double>> expected;
  const double inv = 1.0 / 1024.0;
  const std::vector<int64_t> ns = sizes();
  for (size_t i = 0; i < ns.size(); ++i) {
    const DType dtype = i % 3 == 0 ? kFloat64 : i % 3 == 1 ? kFloat32 : kBFloat16;
    const std::vector<double> v = quarters(ns[i], 7 + i, 256.0);
    grads.push_back(make(v, {ns[i]}, dev(), dtype));
    expected.emplace_back();
    for (double x : v) expected.back().push_back(x * inv);
  }
  Tensor found_inf = scalar(0.0, dev());
  amp::non_finite_check_and_unscale_(grads, found_inf, scalar(inv, dev()));
  EXPECT_EQ(found_inf.item<float>(), 0.0f);
  for (size_t i = 0; i < grads.size(); ++i) EXPECT_EQ(values(grads[i]), expected[i]) << "gradient " << i;
}

TEST_P(AmpTest, NonContiguousGradientsAreUnscaledInPlace) {
  Tensor base = make(quarters(24, 3, 8.0), {4, 6}, dev(), kFloat32);
  Tensor column = base.select(1, 2);
  const std::vector<double> before = values(base);
  Tensor found_inf = scalar(0.0, dev());
  amp::non_finite_check_and_unscale_({column}, found_inf, scalar(0.5, dev()));
  const std::vector<double> after = values(base);
  for (int64_t i = 0; i < 24; ++i) EXPECT_EQ(after[i], i % 6 == 2 ? before[i] * 0.5 : before[i]) << i;
}

TEST_P(AmpTest, AnInfOrNanAnywhereSetsFoundInf) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  const std::vector<int64_t> ns = sizes();
  // (which gradient, which element, the value): the last tensor, one past the first launch, a bfloat16
  // one, the chunk past the first of the large tensor.
  const std::vector<std::tuple<size_t, int64_t, double>> cases = {
      {ns.size() - 1, ns.back() - 1, inf}, {79, 0, nan}, {77, 3, -inf}, {41, 65536 + 5, nan}, {2, 1, inf}};
  for (const auto& [which, at, bad] : cases) {
    TensorList grads;
    for (size_t i = 0; i < ns.size(); ++i) {
      std::vector<double> v = quarters(ns[i], 11 + i);
      if (i == which) v[at] = bad;
      grads.push_back(make(v, {ns[i]}, dev(), i % 2 == 0 ? kBFloat16 : kFloat32));
    }
    Tensor found_inf = scalar(0.0, dev());
    amp::non_finite_check_and_unscale_(grads, found_inf, scalar(0.25, dev()));
    EXPECT_EQ(found_inf.item<float>(), 1.0f) << "gradient " << which << " element " << at;
    // The other values are still unscaled, the bad one stays non-finite.
    const std::vector<double> got = values(grads[which]);
    EXPECT_FALSE(std::isfinite(got[at]));
    // A later clean check never resets the flag.
    Tensor clean = make({1.0, 2.0}, {2}, dev(), kFloat32);
    amp::non_finite_check_and_unscale_({clean}, found_inf, scalar(1.0, dev()));
    EXPECT_EQ(found_inf.item<float>(), 1.0f);
    EXPECT_EQ(values(clean), (std::vector<double>{1.0, 2.0}));
  }
}

TEST_P(AmpTest, AnInverseScaleOfOneLeavesTheGradientsAlone) {
  Tensor g = make({1.5, -2.25, 1e30}, {3}, dev(), kFloat32);
  const Tensor before = g.clone();
  Tensor found_inf = scalar(0.0, dev());
  amp::non_finite_check_and_unscale_({g}, found_inf, scalar(1.0, dev()));
  EXPECT_TRUE(same_bytes(g, before));
  amp::non_finite_check_and_unscale_({}, found_inf, scalar(1.0, dev()));  // nothing to do
  EXPECT_EQ(found_inf.item<float>(), 0.0f);
}

// PyTorch's rule, step by step.
void reference_update(float& scale, int32_t& tracker, bool found_inf, double growth, double backoff, int64_t interval) {
  if (found_inf) {
    scale = static_cast<float>(scale * backoff);
    tracker = 0;
  } else if (tracker + 1 == interval) {
    const auto grown = static_cast<float>(scale * growth);
    if (std::isfinite(grown)) scale = grown;
    tracker = 0;
  } else {
    ++tracker;
  }
}

TEST_P(AmpTest, UpdateScaleFollowsPyTorchsRule) {
  const std::vector<bool> infs = {false, false, true, false, false, false, false, true, true, false, false, false};
  for (const auto& [growth, backoff, interval] : {std::tuple<double, double, int64_t>{2.0, 0.5, 3},
                                                 {3.0, 0.25, 1}, {1.5, 0.9, 5}}) {
    Tensor scale = scalar(1024.0, dev()), tracker = full({1}, 0, TensorOptions(kInt32, dev()));
    float expected_scale = 1024.0f;
    int32_t expected_tracker = 0;
    for (size_t s = 0; s < infs.size(); ++s) {
      amp::update_scale_(scale, tracker, scalar(infs[s] ? 1.0 : 0.0, dev()), growth, backoff, interval);
      reference_update(expected_scale, expected_tracker, infs[s], growth, backoff, interval);
      EXPECT_EQ(scale.item<float>(), expected_scale) << "step " << s;
      EXPECT_EQ(tracker.item<int32_t>(), expected_tracker) << "step " << s;
    }
  }
  // A scale that would overflow float32 stays as it is; the tracker restarts.
  const float largest = std::numeric_limits<float>::max();
  Tensor scale = scalar(largest, dev()), tracker = full({1}, 1, TensorOptions(kInt32, dev()));
  amp::update_scale_(scale, tracker, scalar(0.0, dev()), 2.0, 0.5, 2);
  EXPECT_EQ(scale.item<float>(), largest);
  EXPECT_EQ(tracker.item<int32_t>(), 0);
  // NaN in found_inf counts as found.
  amp::update_scale_(scale, tracker, scalar(std::nan(""), dev()), 2.0, 0.5, 2);
  EXPECT_EQ(scale.item<float>(), largest * 0.5f);
}

TEST_P(AmpTest, BadArgumentsRaise) {
  Tensor found_inf = scalar(0.0, dev()), inv = scalar(1.0, dev());
  Tensor g = make({1.0}, {1}, dev(), kFloat32);
  const std::string op = "[_amp_foreach_non_finite_check_and_unscale_]";
  const Tensor ints = zeros({2}, TensorOptions(kInt64, dev()));
  EXPECT_TRUE(throws<DTypeError>([&] { amp::non_finite_check_and_unscale_({g, ints}, found_inf, inv); },
                                 op + " gradient 1 has dtype int64"));
  EXPECT_TRUE(throws<ValueError>(
      [&] { amp::non_finite_check_and_unscale_({g}, found_inf, scalar(1.0, dev(), kFloat64)); },
      op + " inv_scale must be a 1-element float32 tensor, got float64 [1]"));
  Tensor two = zeros({2}, TensorOptions(kFloat32, dev()));
  EXPECT_TRUE(throws<ValueError>([&] { amp::non_finite_check_and_unscale_({g}, two, inv); },
                                 op + " found_inf must be a 1-element float32 tensor, got float32 [2]"));
  EXPECT_TRUE(throws<ValueError>([&] { amp::non_finite_check_and_unscale_({g, Tensor()}, found_inf, inv); },
                                 "gradient 1 is an undefined tensor"));
  std::vector<float> storage(4);
  const Tensor elsewhere = on_other_device(dev(), storage, {4});
  EXPECT_TRUE(throws<DeviceError>([&] { amp::non_finite_check_and_unscale_({g, elsewhere}, found_inf, inv); },
                                  op + " gradient 1 is on"));
  Tensor scale = scalar(2.0, dev()), tracker = full({1}, 0, TensorOptions(kInt32, dev()));
  Tensor wrong_tracker = scalar(0.0, dev());
  EXPECT_TRUE(throws<ValueError>([&] { amp::update_scale_(scale, wrong_tracker, found_inf, 2.0, 0.5, 10); },
                                 "[_amp_update_scale_] growth_tracker must be a 1-element int32 tensor, got float32"));
  EXPECT_TRUE(throws<ValueError>([&] { amp::update_scale_(two, tracker, found_inf, 2.0, 0.5, 10); },
                                 "[_amp_update_scale_] scale must be a 1-element float32 tensor"));
  const Tensor found_elsewhere = on_other_device(dev(), storage, {1});
  EXPECT_TRUE(throws<DeviceError>([&] { amp::update_scale_(scale, tracker, found_elsewhere, 2.0, 0.5, 10); },
                                  "[_amp_update_scale_] found_inf is on"));
}

}  // namespace
}  // namespace rtx::testing
