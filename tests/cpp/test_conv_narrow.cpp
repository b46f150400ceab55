// Tests of the narrow first-layer convolution kernels of the CPU backend (conv_narrow.h): the forward
// and the weight and bias gradients of float32 inputs with up to 3 channels, over the CNN trainer's
// first layer and a sweep of channel counts, kernel sizes, paddings and plane sizes (tap groups past
// the last, output channels past the last block of four, planes that end inside a vector), against
// float64 and against the kernels that run with these switched off: exactly on data whose sums are
// exact in float32, within float32 rounding on irregular data. Also a gradient check, both thread
// counts, and the cases left to the other kernels.
#include <string>
#include <vector>

#include "conv_cases.h"

namespace rtx::testing {
namespace {

const std::vector<ConvCase> kCases = {
    {"cnn_conv1", {2, 1, 28, 28}, {32, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true},
    {"rgb_27_taps", {2, 3, 9, 11}, {5, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false},
    {"kernel5", {1, 1, 8, 8}, {3, 1, 5, 5}, {1, 1}, {2, 2}, {1, 1}, 1, true},
    {"unpadded_rectangular", {3, 2, 7, 20}, {6, 2, 3, 2}, {1, 1}, {0, 0}, {1, 1}, 1, true},
    {"uneven_padding", {2, 1, 5, 6}, {4, 1, 2, 3}, {1, 1}, {1, 0}, {1, 1}, 1, true},
    {"wide_rows", {1, 1, 3, 40}, {8, 1, 1, 3}, {1, 1}, {0, 1}, {1, 1}, 1, false},
    {"kernel_larger_than_input", {1, 1, 3, 3}, {2, 1, 5, 5}, {1, 1}, {1, 1}, {1, 1}, 1, true},
};

struct Runs {
  TensorList narrow, other, reference;
};

// Runs the case with the narrow kernels (checking that they computed the forward and the weight
// gradient), with them switched off, and in float64, from quarter data (exact sums) or irregular data.
Runs run_case(const ConvCase& c, bool quarter_data) {
  const auto data = [&](const Shape& s, uint64_t seed) { return conv_data(s, seed, kFloat32, quarter_data); };
  const Tensor x = data(c.x, 1), w = data(c.w, 2), b = data({c.w[0]}, 3), g = data(out_shape(c), 4);
  Runs r;
  const int64_t before = cpu::narrow_conv_runs();
  r.narrow = conv_with_grads(c, x, w, b, g);
  EXPECT_EQ(cpu::narrow_conv_runs() - before, 2) << c.name << ": the forward and the weight gradient";
  {
    const SwitchedOff off(cpu::set_narrow_conv_enabled);
    r.other = conv_with_grads(c, x, w, b, g);
  }
  r.reference = conv_with_grads(c, x.to(kFloat64), w.to(kFloat64), b.to(kFloat64), g.to(kFloat64));
  return r;
}

TEST(NarrowConvTest, ExactOnQuarterDataLikeTheOtherKernelsAndFloat64) {
  for (const ConvCase& c : kCases) {
    const Runs r = run_case(c, true);
    expect_conv_close(r.narrow, r.reference, 0, 0, c.name + " vs float64");
    expect_conv_close(r.narrow, r.other, 0, 0, c.name + " vs the other kernels");
  }
}

TEST(NarrowConvTest, IrregularDataWithinFloat32Rounding) {
  for (const ConvCase& c : kCases) {
    const Runs r = run_case(c, false);
    expect_conv_close(r.narrow, r.reference, 1e-5, 1e-4, c.name + " vs float64");
  }
}

TEST(NarrowConvTest, GradientCheck) {
  // float64 inputs run through float32 and back. Quarter data perturbed by a quarter stays exact, and
  // the convolution is linear in each input, so central differences are exact.
  const ConvCase& c = kCases[4];
  const Tensor x = quarter_tensor(c.x, 11, Device(kCPU));
  const Tensor w = quarter_tensor(c.w, 12, Device(kCPU)).requires_grad_();
  const Tensor b = quarter_tensor({c.w[0]}, 13, Device(kCPU)).requires_grad_();
  const int64_t before = cpu::narrow_conv_runs();
  EXPECT_TRUE(gradcheck(
      [&](const TensorList& in) {
        return TensorList{
            conv2d(x.to(kFloat32), in[0].to(kFloat32), in[1].to(kFloat32), shape_of(c.stride), shape_of(c.padding))
                .to(kFloat64)};
      },
      {w, b}, 0.25, 1e-4, 1e-5));
  EXPECT_GT(cpu::narrow_conv_runs() - before, 2);
}

TEST(NarrowConvTest, EitherThreadCount) {
  const int threads = get_num_threads();
  for (int n : {1, 2}) {
    set_num_threads(n);
    for (const ConvCase& c : {kCases[0], kCases[1]}) {
      const Runs r = run_case(c, true);
      expect_conv_close(r.narrow, r.reference, 0, 0, c.name + " with " + std::to_string(n) + " threads");
    }
  }
  set_num_threads(threads);
}

TEST(NarrowConvTest, CasesLeftToTheOtherKernels) {
  // Strides, dilations, groups, more than 3 channels or 27 taps, other dtypes, empty batches.
  const std::vector<std::pair<ConvCase, DType>> cases = {
      {{"stride2", {1, 1, 9, 9}, {4, 1, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, true}, kFloat32},
      {{"dilated", {1, 1, 9, 9}, {4, 1, 3, 3}, {1, 1}, {2, 2}, {2, 2}, 1, true}, kFloat32},
      {{"groups", {1, 2, 6, 6}, {4, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 2, true}, kFloat32},
      {{"four_channels", {1, 4, 6, 6}, {4, 4, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true}, kFloat32},
      {{"kernel7", {1, 1, 9, 9}, {2, 1, 7, 7}, {1, 1}, {3, 3}, {1, 1}, 1, true}, kFloat32},
      {{"float64", {1, 1, 6, 6}, {4, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true}, kFloat64},
      {{"bfloat16", {1, 1, 6, 6}, {4, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true}, kBFloat16},
      {{"empty_batch", {0, 1, 6, 6}, {4, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true}, kFloat32},
  };
  for (const auto& [c, dtype] : cases) {
    const Tensor x = quarter_tensor(c.x, 21, Device(kCPU), dtype), w = quarter_tensor(c.w, 22, Device(kCPU), dtype);
    const Tensor b = quarter_tensor({c.w[0]}, 23, Device(kCPU), dtype);
    const Tensor g = quarter_tensor(out_shape(c), 24, Device(kCPU), dtype);
    const int64_t before = cpu::narrow_conv_runs();
    const TensorList got = conv_with_grads(c, x, w, b, g);
    EXPECT_EQ(cpu::narrow_conv_runs(), before) << c.name;
    const TensorList want = conv_with_grads(c, x.to(kFloat64), w.to(kFloat64), b.to(kFloat64), g.to(kFloat64));
    expect_conv_close(got, want, dtype == kBFloat16 ? 1e-2 : 0, dtype == kBFloat16 ? 1e-2 : 0, c.name);
  }
  EXPECT_TRUE(cpu::narrow_conv_enabled());
}

}  // namespace
}  // namespace rtx::testing
