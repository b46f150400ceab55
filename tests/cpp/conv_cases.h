// Convolution cases for the CPU kernel tests (test_conv_onednn.cpp, test_conv_narrow.cpp): a case's
// shapes and parameters, its output and gradients as float64, the output shape for the upstream
// gradient, test data, and kernel switches turned off for a scope.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "backend/cpu/conv_narrow.h"
#include "test_utils.h"

namespace rtx::testing {

using Pair = std::array<int64_t, 2>;

struct ConvCase {
  std::string name;
  Shape x, w;
  Pair stride, padding, dilation;
  int64_t groups;
  bool bias;
};

inline Shape shape_of(const Pair& p) { return {p[0], p[1]}; }

// The output and the gradients of x, weight and bias (undefined without a bias) for upstream
// gradient g, as float64, computed in the dtype of the inputs.
inline TensorList conv_with_grads(const ConvCase& c, const Tensor& x0, const Tensor& w0, const Tensor& b0,
                                  const Tensor& g) {
  const Tensor x = x0.detach().requires_grad_(), w = w0.detach().requires_grad_();
  const Tensor b = c.bias ? b0.detach().requires_grad_() : Tensor();
  const Tensor out = conv2d(x, w, b, shape_of(c.stride), shape_of(c.padding), shape_of(c.dilation), c.groups);
  out.backward(g.to(out.dtype()));
  return {out.to(kFloat64), x.grad().to(kFloat64), w.grad().to(kFloat64), c.bias ? b.grad().to(kFloat64) : Tensor()};
}

// The output shape of case c (for the upstream gradient).
inline Shape out_shape(const ConvCase& c) {
  auto size = [&](int i) {
    return (c.x[2 + i] + 2 * c.padding[i] - c.dilation[i] * (c.w[2 + i] - 1) - 1) / c.stride[i] + 1;
  };
  return {c.x[0], c.w[0], size(0), size(1)};
}

// Compares what conv_with_grads gave, part by part (parts undefined in expected are skipped).
inline void expect_conv_close(const TensorList& actual, const TensorList& expected, double rtol, double atol,
                              const std::string& what) {
  static const char* kParts[] = {"output", "input gradient", "weight gradient", "bias gradient"};
  for (size_t i = 0; i < actual.size(); ++i) {
    if (!expected[i].defined()) continue;
    EXPECT_TRUE(all_close(actual[i], expected[i], rtol, atol)) << what << " " << kParts[i];
  }
}

// A kernel switch (set_narrow_conv_enabled, set_onednn_conv_enabled) turned off for a scope.
class SwitchedOff {
 public:
  explicit SwitchedOff(void (*set)(bool)) : set_(set) { set_(false); }
  ~SwitchedOff() { set_(true); }
  SwitchedOff(const SwitchedOff&) = delete;
  SwitchedOff& operator=(const SwitchedOff&) = delete;

 private:
  void (*set_)(bool);
};

// Test data of dtype: quarters (whose sums are exact in float32) or irregular values.
inline Tensor conv_data(const Shape& s, uint64_t seed, DType dtype, bool quarter_data) {
  return quarter_data ? quarter_tensor(s, seed, Device(kCPU), dtype)
                      : make(smooth(numel(s), seed), s, Device(kCPU), kFloat64).to(dtype);
}

}  // namespace rtx::testing
