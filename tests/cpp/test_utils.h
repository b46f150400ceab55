// Shared test helpers: device parametrization, float64 comparisons, error expectations and the
// float64 central-difference gradient checks (first and second order).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "ops/kernels.h"
#include "rtx/rtx.h"

namespace rtx::testing {

// Every device type the tests run on; CUDA cases skip with a reason where they cannot run.
inline std::vector<Device> all_devices() { return {Device(kCPU), Device(kCUDA, 0)}; }

// Skips the current test when dev cannot run here.
#define RTX_SKIP_IF_UNAVAILABLE(dev)                                                                 \
  do {                                                                                              \
    if ((dev).is_cuda()) {                                                                          \
      if (!::rtx::cuda::is_available()) GTEST_SKIP() << "CUDA: " << ::rtx::cuda::unavailable_reason(); \
      if (!::rtx::kernels::copy_kernel.has(::rtx::kCUDA))                                          \
        GTEST_SKIP() << "CUDA: this build registers no CUDA kernels yet";                          \
    }                                                                                               \
  } while (0)

// A test fixture parametrized over all_devices(); use TEST_P(DeviceTest-derived, ...) and
// INSTANTIATE_DEVICE_TESTS(Fixture).
class DeviceTest : public ::testing::TestWithParam<Device> {
 protected:
  void SetUp() override { RTX_SKIP_IF_UNAVAILABLE(GetParam()); }
  Device dev() const { return GetParam(); }
};

inline std::string device_param_name(const ::testing::TestParamInfo<Device>& info) {
  return info.param.is_cpu() ? "cpu" : "cuda";
}
#define INSTANTIATE_DEVICE_TESTS(Fixture) \
  INSTANTIATE_TEST_SUITE_P(Devices, Fixture, ::testing::ValuesIn(::rtx::testing::all_devices()), \
                           ::rtx::testing::device_param_name)

// All values as doubles (any dtype, any device, any layout).
inline std::vector<double> values(const Tensor& t) { return t.to(Device(kCPU), kFloat64).contiguous().tolist<double>(); }

// Tolerances like torch.testing.assert_close per dtype.
inline double default_rtol(DType t) {
  switch (t) {
    case kFloat16: return 1e-3;
    case kBFloat16: return 1.6e-2;
    case kFloat32: return 1.3e-6;
    case kFloat64: return 1e-7;
    default: return 0.0;
  }
}
inline double default_atol(DType t) {
  switch (t) {
    case kFloat16: return 1e-5;
    case kBFloat16: return 1e-5;
    case kFloat32: return 1e-5;
    case kFloat64: return 1e-7;
    default: return 0.0;
  }
}

// Checks shape and values of actual against expected (NaNs must match NaNs).
inline ::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, double rtol = -1, double atol = -1) {
  if (actual.sizes() != expected.sizes()) {
    return ::testing::AssertionFailure() << "shape " << ::testing::PrintToString(actual.sizes()) << " != expected "
                                         << ::testing::PrintToString(expected.sizes());
  }
  if (rtol < 0) rtol = default_rtol(actual.dtype());
  if (atol < 0) atol = default_atol(actual.dtype());
  const auto a = values(actual), e = values(expected);
  for (size_t i = 0; i < a.size(); ++i) {
    const bool both_nan = std::isnan(a[i]) && std::isnan(e[i]);
    const bool same_inf = std::isinf(a[i]) && a[i] == e[i];
    if (both_nan || same_inf) continue;
    if (!(std::fabs(a[i] - e[i]) <= atol + rtol * std::fabs(e[i]))) {
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " != expected " << e[i]
                                           << " (rtol " << rtol << ", atol " << atol << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

// A float64 tensor from values with a shape (on dev).
inline Tensor make(const std::vector<double>& v, const Shape& shape, Device dev = Device(kCPU), DType dtype = kFloat64) {
  return from_buffer(v.data(), shape, kFloat64).to(dev, dtype);
}

// Expects fn to throw exactly ErrorType (or a subclass) with a message containing `needle`.
template <typename ErrorType, typename Fn>
::testing::AssertionResult throws(Fn&& fn, const std::string& needle) {
  try {
    fn();
  } catch (const ErrorType& e) {
    const std::string msg = e.what();
    if (msg.find(needle) == std::string::npos)
      return ::testing::AssertionFailure() << "message '" << msg << "' lacks '" << needle << "'";
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw another type: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

using Fn = std::function<TensorList(const TensorList&)>;

namespace detail {
// Sum over outputs of <weight_k, output_k>: a scalar whose gradient is the vector-Jacobian product.
inline Tensor project(const TensorList& outs, const TensorList& weights) {
  Tensor total = zeros({}, TensorOptions(kFloat64, outs[0].device()));
  for (size_t k = 0; k < outs.size(); ++k)
    if (outs[k].defined() && is_floating(outs[k].dtype())) total = total + (outs[k].to(kFloat64) * weights[k]).sum();
  return total;
}
inline TensorList random_weights(const TensorList& outs) {
  TensorList w;
  for (const auto& o : outs) w.push_back(o.defined() ? randn(o.sizes(), TensorOptions(kFloat64, o.device())) : Tensor());
  return w;
}
}  // namespace detail

// float64 central-difference check of the gradient of fn at inputs (only inputs that require grad
// are checked). Uses a random projection of the outputs so one backward covers all of them.
inline ::testing::AssertionResult gradcheck(const Fn& fn, const TensorList& inputs, double eps = 1e-6,
                                            double atol = 1e-5, double rtol = 1e-4) {
  TensorList outs = fn(inputs);
  const TensorList w = detail::random_weights(outs);
  TensorList diff_inputs;
  for (const auto& x : inputs)
    if (x.defined() && x.requires_grad()) diff_inputs.push_back(x);
  // Outputs that do not depend on any input differentiably (e.g. the derivative of a linear function)
  // have a zero gradient.
  const Tensor projected = detail::project(outs, w);
  const TensorList analytic = projected.requires_grad()
                                  ? autograd::grad({projected}, diff_inputs, {}, std::nullopt, false, true)
                                  : TensorList(diff_inputs.size());
  for (size_t k = 0; k < diff_inputs.size(); ++k) {
    const Tensor& x = diff_inputs[k];
    if (x.dtype() != kFloat64) return ::testing::AssertionFailure() << "gradcheck needs float64 inputs";
    const auto a = analytic[k].defined() ? values(analytic[k]) : std::vector<double>(x.numel(), 0.0);
    Tensor flat = x.detach();  // shares storage: perturbing it perturbs x
    for (int64_t i = 0; i < x.numel(); ++i) {
      // Index i of the logical (row-major) order.
      Shape idx(x.dim());
      int64_t rem = i;
      for (int64_t d = x.dim() - 1; d >= 0; --d) {
        idx[d] = rem % x.size(d);
        rem /= x.size(d);
      }
      Tensor elem = flat;
      for (int64_t d = 0; d < x.dim(); ++d) elem = elem.select(0, idx[d]);
      const double orig = elem.item<double>();
      double f_plus, f_minus;
      {
        NoGradGuard ng;
        elem.fill_(orig + eps);
        f_plus = detail::project(fn(inputs), w).item<double>();
        elem.fill_(orig - eps);
        f_minus = detail::project(fn(inputs), w).item<double>();
        elem.fill_(orig);
      }
      const double numeric = (f_plus - f_minus) / (2 * eps);
      if (!(std::fabs(numeric - a[i]) <= atol + rtol * std::fabs(numeric)))
        return ::testing::AssertionFailure() << "input " << k << " element " << i << ": analytic " << a[i]
                                             << " vs numeric " << numeric;
    }
  }
  return ::testing::AssertionSuccess();
}

// Second-order check: gradcheck of the (create_graph) first derivative with respect to the inputs.
inline ::testing::AssertionResult gradgradcheck(const Fn& fn, const TensorList& inputs, double eps = 1e-6,
                                                double atol = 1e-4, double rtol = 1e-3) {
  const TensorList w = detail::random_weights(fn(inputs));
  Fn first = [&](const TensorList& in) {
    EnableGradGuard enable_grad;  // gradcheck evaluates fn under NoGradGuard
    TensorList diff;
    for (const auto& x : in)
      if (x.defined() && x.requires_grad()) diff.push_back(x);
    return autograd::grad({detail::project(fn(in), w)}, diff, {}, std::nullopt, true, true);
  };
  return gradcheck(first, inputs, eps, atol, rtol);
}

}  // namespace rtx::testing
