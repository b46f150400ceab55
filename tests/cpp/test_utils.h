// Shared test helpers: device parametrization, float64 comparisons, error expectations, reproducible
// test data and the float64 central-difference gradient checks (first and second order).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "dispatch/copy.h"
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

// ---- test data ----------------------------------------------------------------------------------

inline int64_t numel(const Shape& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

// One step of a 64-bit linear congruential generator: the same data on every platform.
inline uint64_t lcg(uint64_t& state) {
  state = state * 6364136223846793005ULL + 1442695040888963407ULL;
  return state >> 33;
}

// Multiples of 0.25 * scale in [-2, 2] * scale, with zeros and ties: exact in every float type
// (small integers when scale is 4).
inline std::vector<double> quarters(int64_t n, uint64_t seed, double scale = 1.0) {
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) x = (static_cast<double>(lcg(seed) % 17) - 8.0) * 0.25 * scale;
  return v;
}

// Distinct values in [-1.5, 1.5], none near zero: no ties or kinks for gradient checks.
inline std::vector<double> smooth(int64_t n, uint64_t seed) {
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) {
    x = (static_cast<double>(lcg(seed) % 1000003) / 1000003.0 - 0.5) * 3.0;
    if (std::fabs(x) < 1e-3) x += 0.01;
  }
  return v;
}

// Distinct, irregular values in about [-3, 3] (a sampled sine).
inline std::vector<double> irregular(int64_t n, double seed = 0.0) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = 3.0 * std::sin(1.37 * static_cast<double>(i) + seed) + 0.01 * (i % 7);
  return v;
}

// A tensor of shape holding quarters(numel(shape), seed), exact in every dtype but bool and uint8.
inline Tensor quarter_tensor(const Shape& shape, uint64_t seed, Device dev, DType dtype = kFloat64) {
  return make(quarters(numel(shape), seed), shape, dev, dtype);
}

// A float64 tensor of shape holding smooth(numel(shape), seed) that requires grad.
inline Tensor leaf(const Shape& shape, Device dev, uint64_t seed = 0) {
  return make(smooth(numel(shape), seed), shape, dev).requires_grad_();
}

// A tensor on a device other than dev around host memory, for device-mismatch errors (its data is
// never read): on the CPU when dev is a GPU, else one that claims to live on cuda:0.
inline Tensor on_other_device(Device dev, std::vector<float>& storage, const Shape& shape, DType dtype = kFloat32) {
  return from_blob(storage.data(), shape, {}, dtype, dev.is_cpu() ? Device(kCUDA, 0) : Device(kCPU));
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

// a and b hold the same bytes (and have one shape and dtype): bitwise reproducibility.
inline ::testing::AssertionResult same_bytes(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return ::testing::AssertionFailure() << "shape or dtype differ";
  const Tensor x = a.cpu().contiguous(), y = b.cpu().contiguous();
  if (x.nbytes() == 0) return ::testing::AssertionSuccess();  // empty tensors may have no data pointer
  if (std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0) return ::testing::AssertionSuccess();
  const auto vx = values(x), vy = values(y);
  for (size_t i = 0; i < vx.size(); ++i)
    if (std::memcmp(&vx[i], &vy[i], sizeof(double)) != 0)
      return ::testing::AssertionFailure() << "element " << i << ": " << vx[i] << " != " << vy[i];
  return ::testing::AssertionFailure() << "bytes differ";
}

// Sets the float32 matmul precision (which also governs convolutions) for a scope.
class Float32PrecisionGuard {
 public:
  explicit Float32PrecisionGuard(const std::string& precision) : saved_(get_float32_matmul_precision()) {
    set_float32_matmul_precision(precision);
  }
  ~Float32PrecisionGuard() { set_float32_matmul_precision(saved_); }
  Float32PrecisionGuard(const Float32PrecisionGuard&) = delete;
  Float32PrecisionGuard& operator=(const Float32PrecisionGuard&) = delete;

 private:
  std::string saved_;
};

// Turns deterministic algorithms on for a scope.
class DeterministicGuard {
 public:
  DeterministicGuard() : saved_(are_deterministic_algorithms_enabled()) { use_deterministic_algorithms(true); }
  ~DeterministicGuard() { use_deterministic_algorithms(saved_); }
  DeterministicGuard(const DeterministicGuard&) = delete;
  DeterministicGuard& operator=(const DeterministicGuard&) = delete;

 private:
  bool saved_;
};

using Fn = std::function<TensorList(const TensorList&)>;

// f with every output squared: its gradient then depends on the inputs, so that a second-order check
// differentiates the op's backward formula (the gradient of a linear op alone is constant).
inline Fn squared(const Fn& f) {
  return [f](const TensorList& in) {
    TensorList outs = f(in);
    for (auto& o : outs) o = o * o;
    return outs;
  };
}

namespace detail {
// Sum over outputs of <weight_k, output_k>: a scalar whose gradient is the vector-Jacobian product.
// Undefined outputs (no gradient) count as zero.
inline Tensor project(const TensorList& outs, const TensorList& weights) {
  Tensor total;
  for (size_t k = 0; k < outs.size(); ++k) {
    if (!outs[k].defined() || !is_floating(outs[k].dtype())) continue;
    Tensor term = (outs[k].to(kFloat64) * weights[k]).sum();
    total = total.defined() ? total + term : term;
  }
  return total.defined() ? total : zeros({}, kFloat64);
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

// Second-order check: gradcheck of the (create_graph) first derivative with respect to the inputs. A
// first derivative without a gradient path back to the inputs (that of add, relu, ...) counts as zero
// everywhere, so the check then confirms numerically that it does not change when the inputs move.
inline ::testing::AssertionResult gradgradcheck(const Fn& fn, const TensorList& inputs, double eps = 1e-6,
                                                double atol = 1e-4, double rtol = 1e-3) {
  const TensorList w = detail::random_weights(fn(inputs));
  Fn first = [&](const TensorList& in) {
    EnableGradGuard enable_grad;  // gradcheck evaluates fn under NoGradGuard
    TensorList diff;
    for (const auto& x : in)
      if (x.defined() && x.requires_grad()) diff.push_back(x);
    const Tensor projected = detail::project(fn(in), w);
    if (!projected.requires_grad()) return TensorList(diff.size());
    return autograd::grad({projected}, diff, {}, std::nullopt, true, true);
  };
  return gradcheck(first, inputs, eps, atol, rtol);
}

}  // namespace rtx::testing
