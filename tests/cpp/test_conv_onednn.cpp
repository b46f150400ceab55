// Tests of the oneDNN convolution kernels of the CPU backend (builds with RTX_WITH_ONEDNN): conv2d's
// forward, input and weight gradients and conv_transpose2d in float32 and bfloat16, over the CNN
// trainer's two layers and a sweep of strides, paddings, dilations, groups, 1x1 kernels and batch 1,
// against the im2col kernels (oneDNN switched off) and against float64: exactly on data whose sums
// are exact in float32, within float32 rounding on irregular data and with Winograd's algorithm
// below the "highest" float32 precision. Also a gradient check of the float32 path, more problems
// than the primitive cache holds, both thread counts, and the cases left to im2col (float64,
// float16, empty batches, oneDNN switched off), and the weight gradient's reuse of the input
// gradient's converted output gradient. The narrow first-layer kernels are switched off here.
#include "rtx/config.h"

#if RTX_WITH_ONEDNN

#include <cstdint>
#include <string>
#include <vector>

#include "backend/cpu/conv_onednn.h"
#include "conv_cases.h"

namespace rtx::testing {
namespace {

using Case = ConvCase;

const std::vector<Case> kCases = {
    {"cnn_conv1", {2, 1, 28, 28}, {32, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true},
    {"cnn_conv2", {2, 32, 14, 14}, {64, 32, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true},
    {"batch1_stride2", {1, 3, 9, 9}, {8, 3, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, true},
    {"uneven_strides", {2, 4, 11, 9}, {6, 4, 3, 2}, {2, 3}, {1, 0}, {1, 1}, 1, false},
    {"dilated", {2, 3, 12, 12}, {5, 3, 3, 3}, {1, 1}, {2, 2}, {2, 2}, 1, true},
    {"dilated_uneven", {1, 2, 10, 13}, {4, 2, 2, 3}, {1, 2}, {0, 3}, {3, 2}, 1, true},
    {"groups", {2, 8, 7, 7}, {6, 4, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 2, true},
    {"depthwise", {2, 8, 10, 10}, {8, 1, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 8, false},
    {"pointwise", {3, 16, 6, 6}, {8, 16, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, true},
    {"kernel5", {2, 4, 8, 8}, {4, 4, 5, 5}, {1, 1}, {2, 2}, {1, 1}, 1, false},
    {"kernel_as_large_as_padded_input", {1, 2, 3, 3}, {2, 2, 5, 5}, {1, 1}, {1, 1}, {1, 1}, 1, true},
};

// Runs the case in dtype with oneDNN, with im2col and in float64, from inputs of the given kind
// (quarters: exact sums; otherwise irregular values), and checks that oneDNN computed all three
// convolutions of the oneDNN run (none in bfloat16 on a CPU where oneDNN has no bfloat16 kernels).
struct Runs {
  TensorList onednn, im2col, reference;
};
Runs run_case(const Case& c, DType dtype, bool quarter_data) {
  const SwitchedOff narrow(cpu::set_narrow_conv_enabled);  // these tests are about oneDNN's kernels
  const auto data = [&](const Shape& s, uint64_t seed) { return conv_data(s, seed, dtype, quarter_data); };
  const Tensor x = data(c.x, 1), w = data(c.w, 2), b = data({c.w[0]}, 3), g = data(out_shape(c), 4);
  Runs r;
  const int64_t before = cpu::onednn_conv_runs();
  r.onednn = conv_with_grads(c, x, w, b, g);
  const bool onednn = dtype != kBFloat16 || cpu::onednn_conv_has_bfloat16();
  EXPECT_EQ(cpu::onednn_conv_runs() - before, onednn ? 3 : 0)
      << c.name << " " << dtype << ": oneDNN " << (onednn ? "did not compute" : "computed")
      << " the forward and both gradients";
  {
    const SwitchedOff im2col(cpu::set_onednn_conv_enabled);
    r.im2col = conv_with_grads(c, x, w, b, g);
  }
  r.reference = conv_with_grads(c, x.to(kFloat64), w.to(kFloat64), b.to(kFloat64), g.to(kFloat64));
  return r;
}

void expect_close(const TensorList& actual, const TensorList& expected, double rtol, double atol, const std::string& what) {
  expect_conv_close(actual, expected, rtol, atol, what);
}

TEST(OnednnConvTest, ExactOnQuarterDataLikeIm2colAndFloat64) {
  // Products of quarters are multiples of 1/16 and their sums stay below 2^11: exact in float32, so
  // every path must give the float64 values exactly; bfloat16 rounds that exact sum once.
  for (const Case& c : kCases) {
    const Runs f32 = run_case(c, kFloat32, true);
    expect_close(f32.onednn, f32.reference, 0, 0, c.name + " float32 vs float64");
    expect_close(f32.onednn, f32.im2col, 0, 0, c.name + " float32 vs im2col");
    const Runs bf16 = run_case(c, kBFloat16, true);
    TensorList rounded;
    for (const Tensor& t : bf16.reference) rounded.push_back(t.defined() ? t.to(kBFloat16).to(kFloat64) : t);
    expect_close(bf16.onednn, rounded, 0, 0, c.name + " bfloat16 vs float64 rounded once");
    expect_close(bf16.onednn, bf16.im2col, 0, 0, c.name + " bfloat16 vs im2col");
  }
}

TEST(OnednnConvTest, IrregularDataWithinFloat32Rounding) {
  for (const Case& c : kCases) {
    const Runs r = run_case(c, kFloat32, false);
    expect_close(r.onednn, r.reference, 1e-5, 1e-4, c.name + " vs float64");
    expect_close(r.onednn, r.im2col, 1e-5, 1e-4, c.name + " vs im2col");
  }
}

TEST(OnednnConvTest, WinogradBelowHighestPrecision) {
  // Below "highest", float32 forward and input-gradient convolutions of 3x3 layers with 16 or more
  // channels may run Winograd's algorithm: within a few float32 roundings of the output's scale.
  Float32PrecisionGuard precision("high");
  const Runs r = run_case(kCases[1], kFloat32, false);
  expect_close(r.onednn, r.reference, 1e-5, 1e-4, "cnn_conv2 below highest precision");
  // A layer with one input channel, and bfloat16, stay direct: exact on quarter data.
  const Runs first = run_case(kCases[0], kFloat32, true);
  expect_close(first.onednn, first.reference, 0, 0, "cnn_conv1 below highest precision");
  const Runs bf16 = run_case(kCases[1], kBFloat16, true);
  expect_close(bf16.onednn, bf16.im2col, 0, 0, "cnn_conv2 bfloat16 below highest precision");
}

TEST(OnednnConvTest, TransposedConvolutionMatchesIm2col) {
  // conv_transpose2d runs the input-gradient kernel, output_padding included.
  const Tensor x = quarter_tensor({2, 6, 5, 4}, 5, Device(kCPU), kFloat32);
  const Tensor w = quarter_tensor({6, 2, 3, 3}, 6, Device(kCPU), kFloat32);
  const Tensor b = quarter_tensor({4}, 7, Device(kCPU), kFloat32);
  const auto run = [&](const Tensor& xx, const Tensor& ww, const Tensor& bb) {
    return conv_transpose2d(xx, ww, bb, {2, 2}, {1, 0}, {1, 1}, 2, {1, 2}).to(kFloat64);
  };
  const int64_t before = cpu::onednn_conv_runs();
  const Tensor onednn = run(x, w, b);
  EXPECT_EQ(cpu::onednn_conv_runs() - before, 1);
  Tensor im2col;
  {
    const SwitchedOff guard(cpu::set_onednn_conv_enabled);
    im2col = run(x, w, b);
  }
  EXPECT_EQ(onednn.sizes(), (Shape{2, 4, 10, 12}));
  EXPECT_TRUE(all_close(onednn, im2col, 0, 0));
  EXPECT_TRUE(all_close(onednn, run(x.to(kFloat64), w.to(kFloat64), b.to(kFloat64)), 0, 0));
}

TEST(OnednnConvTest, GradientCheckOfTheFloat32Path) {
  // The float64 inputs run through float32 (oneDNN) and back. Quarter data perturbed by a quarter
  // stays exact, and the convolution is linear in each input, so central differences are exact.
  const Case& c = kCases[6];  // groups, bias
  const Tensor x = quarter_tensor(c.x, 11, Device(kCPU)).requires_grad_();
  const Tensor w = quarter_tensor(c.w, 12, Device(kCPU)).requires_grad_();
  const Tensor b = quarter_tensor({c.w[0]}, 13, Device(kCPU)).requires_grad_();
  const int64_t before = cpu::onednn_conv_runs();
  EXPECT_TRUE(gradcheck(
      [&](const TensorList& in) {
        return TensorList{conv2d(in[0].to(kFloat32), in[1].to(kFloat32), in[2].to(kFloat32), shape_of(c.stride),
                                 shape_of(c.padding), shape_of(c.dilation), c.groups)
                              .to(kFloat64)};
      },
      {x, w, b}, 0.25, 1e-4, 1e-5));
  EXPECT_GT(cpu::onednn_conv_runs() - before, 3);
}

TEST(OnednnConvTest, EitherThreadCount) {
  const int threads = get_num_threads();
  for (int n : {1, 2}) {
    set_num_threads(n);
    for (const Case& c : {kCases[1], kCases[7]}) {
      const Runs r = run_case(c, kFloat32, true);
      expect_close(r.onednn, r.reference, 0, 0, c.name + " with " + std::to_string(n) + " threads");
    }
  }
  set_num_threads(threads);
}

TEST(OnednnConvTest, MoreProblemsThanTheCacheHolds) {
  // 80 forward problems (the cache keeps 64), then the first ones again after their eviction.
  const SwitchedOff narrow(cpu::set_narrow_conv_enabled);  // which would take these two-channel inputs
  const Tensor w = quarter_tensor({3, 2, 3, 3}, 21, Device(kCPU), kFloat32);
  const auto check = [&](int64_t size) {
    const Tensor x = quarter_tensor({1, 2, size, 5}, 22, Device(kCPU), kFloat32);
    const Tensor out = conv2d(x, w, {}, {1, 1}, {1, 1});
    EXPECT_TRUE(all_close(out, conv2d(x.to(kFloat64), w.to(kFloat64), {}, {1, 1}, {1, 1}), 0, 0)) << "height " << size;
  };
  const int64_t before = cpu::onednn_conv_runs();
  for (int64_t size = 1; size <= 80; ++size) check(size);
  for (int64_t size = 1; size <= 4; ++size) check(size);
  EXPECT_EQ(cpu::onednn_conv_runs() - before, 84);
}

TEST(OnednnConvTest, WeightGradientReusesTheConvertedOutputGradientOnlyWhileUnchanged) {
  // The input-gradient kernel (here conv_transpose2d's forward) keeps its blocked copy of its
  // operand; the weight-gradient kernel that follows (conv2d's backward, the weight alone) may use it
  // only for the same tensor at the same version. Quarter data: exact.
  const Shape xs{2, 32, 5, 5}, ws{32, 32, 3, 3};
  const Tensor x = quarter_tensor(xs, 41, Device(kCPU), kFloat32);
  const Tensor w = quarter_tensor(ws, 42, Device(kCPU), kFloat32).requires_grad_();
  const auto weight_grad_after = [&](const Tensor& converted, const Tensor& g) {
    const Tensor out = conv2d(x, w, {}, {1, 1}, {1, 1});
    conv_transpose2d(converted, w.detach(), {}, {1, 1}, {1, 1});
    return autograd::grad({out}, {w}, {g})[0].to(kFloat64);
  };
  const auto reference = [&](const Tensor& g) {
    const Tensor w64 = w.detach().to(kFloat64).requires_grad_();
    return autograd::grad({conv2d(x.to(kFloat64), w64, {}, {1, 1}, {1, 1})}, {w64}, {g.to(kFloat64)})[0];
  };
  Tensor g = quarter_tensor(xs, 43, Device(kCPU), kFloat32);
  const Tensor other = quarter_tensor(xs, 44, Device(kCPU), kFloat32);
  const int64_t before = cpu::onednn_conv_runs();
  EXPECT_TRUE(all_close(weight_grad_after(g, g), reference(g), 0, 0)) << "the same output gradient";
  EXPECT_TRUE(all_close(weight_grad_after(g, other), reference(other), 0, 0)) << "another output gradient";
  EXPECT_TRUE(all_close(weight_grad_after(other, g), reference(g), 0, 0)) << "another converted before";
  const Tensor out = conv2d(x, w, {}, {1, 1}, {1, 1});
  conv_transpose2d(g, w.detach(), {}, {1, 1}, {1, 1});
  mul_(g, Scalar(-0.5));  // an in-place write bumps the version
  EXPECT_TRUE(all_close(autograd::grad({out}, {w}, {g})[0].to(kFloat64), reference(g), 0, 0))
      << "the output gradient written in place";
  EXPECT_EQ(cpu::onednn_conv_runs() - before, 12);
}

TEST(OnednnConvTest, CasesLeftToIm2col) {
  const Case& c = kCases[2];
  const int64_t before = cpu::onednn_conv_runs();
  // float64 and float16 run the im2col kernels.
  for (DType dt : {kFloat64, kFloat16}) {
    const Tensor x = quarter_tensor(c.x, 31, Device(kCPU), dt), w = quarter_tensor(c.w, 32, Device(kCPU), dt);
    const Tensor out = conv2d(x, w, {}, shape_of(c.stride), shape_of(c.padding));
    EXPECT_TRUE(all_close(out, conv2d(x.to(kFloat64), w.to(kFloat64), {}, shape_of(c.stride), shape_of(c.padding)), 0, 0))
        << dtype_name(dt);
  }
  // An empty batch: an empty output and a zero weight gradient.
  const Tensor x = zeros({0, 3, 9, 9}, TensorOptions(kFloat32)).requires_grad_();
  const Tensor w = quarter_tensor(c.w, 33, Device(kCPU), kFloat32).requires_grad_();
  const Tensor out = conv2d(x, w, {}, shape_of(c.stride), shape_of(c.padding));
  EXPECT_EQ(out.sizes(), (Shape{0, 8, 5, 5}));
  out.sum().backward();
  EXPECT_TRUE(all_close(w.grad(), zeros(c.w, TensorOptions(kFloat32)), 0, 0));
  EXPECT_EQ(cpu::onednn_conv_runs(), before);
  // Switched off, float32 runs im2col too.
  {
    const SwitchedOff guard(cpu::set_onednn_conv_enabled);
    conv2d(quarter_tensor(c.x, 34, Device(kCPU), kFloat32), w.detach(), {}, shape_of(c.stride), shape_of(c.padding));
  }
  EXPECT_EQ(cpu::onednn_conv_runs(), before);
  EXPECT_TRUE(cpu::onednn_conv_enabled());
}

}  // namespace
}  // namespace rtx::testing

#endif  // RTX_WITH_ONEDNN
