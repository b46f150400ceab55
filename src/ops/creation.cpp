// Creation ops: empty/zeros/ones/full(_like), arange, linspace, eye, from_buffer, from_blob, tensor.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/checked_size.h"
#include "core/dtype_dispatch.h"
#include "core/scalar_range.h"
#include "core/storage.h"
#include "ops/internal.h"
#include "rtx/cuda.h"

namespace rtx {
namespace {

Tensor finish(Tensor t, const TensorOptions& o) {
  if (o.requires_grad) t.requires_grad_(true);
  return t;
}

// o with what it leaves unset taken from t.
TensorOptions like(const Tensor& t, const std::optional<TensorOptions>& o, const char* op) {
  detail::check_defined(t, op);
  return o.value_or(TensorOptions()).resolved(t.dtype(), t.device());
}

// DeviceError naming op when device cannot hold tensors here (no CUDA build, driver or device).
void check_device(const char* op, Device device) {
  if (device.is_cpu()) return;
  RTX_CHECK(cuda::is_available(), DeviceError, "[{}] cannot create a tensor on {}: {}", op, device,
            cuda::unavailable_reason());
  RTX_CHECK(device.index >= 0 && device.index < cuda::device_count(), DeviceError,
            "[{}] cannot create a tensor on {}: this machine has {} CUDA device(s)", op, device, cuda::device_count());
}

// A new tensor of shape filled with value, of dtype default_dtype unless options give one (op names
// the errors).
Tensor filled(const char* op, const Shape& shape, const Scalar& value, const TensorOptions& options,
              DType default_dtype) {
  const TensorOptions o = options.resolved(default_dtype);
  check_device(op, *o.device);
  detail::checked_nbytes(shape, element_size(*o.dtype), op);
  Tensor t = detail::make_tensor(shape, *o.dtype, *o.device);
  detail::fill_raw(t, value);
  return finish(t, o);
}

}  // namespace

Tensor empty(const Shape& shape, const TensorOptions& options) {
  const TensorOptions o = options.resolved();
  check_device("empty", *o.device);
  detail::checked_nbytes(shape, element_size(*o.dtype), "empty");
  return finish(detail::make_tensor(shape, *o.dtype, *o.device), o);
}

// Like torch.full, the dtype follows the value when not given: bool, int64 or the default float.
Tensor full(const Shape& shape, const Scalar& value, const TensorOptions& o) {
  detail::check_fits("full", value, o.dtype.value_or(value.dtype()));
  return filled("full", shape, value, o, value.dtype());
}
Tensor zeros(const Shape& shape, const TensorOptions& o) { return filled("zeros", shape, 0, o, get_default_dtype()); }
Tensor ones(const Shape& shape, const TensorOptions& o) { return filled("ones", shape, 1, o, get_default_dtype()); }

Tensor empty_like(const Tensor& t, std::optional<TensorOptions> o) { return empty(t.sizes(), like(t, o, "empty_like")); }
Tensor zeros_like(const Tensor& t, std::optional<TensorOptions> o) { return zeros(t.sizes(), like(t, o, "zeros_like")); }
Tensor ones_like(const Tensor& t, std::optional<TensorOptions> o) { return ones(t.sizes(), like(t, o, "ones_like")); }
Tensor full_like(const Tensor& t, const Scalar& v, std::optional<TensorOptions> o) {
  return full(t.sizes(), v, like(t, o, "full_like"));
}
Tensor rand_like(const Tensor& t, std::optional<TensorOptions> o) { return rand(t.sizes(), like(t, o, "rand_like")); }
Tensor randn_like(const Tensor& t, std::optional<TensorOptions> o) { return randn(t.sizes(), like(t, o, "randn_like")); }

Tensor arange(const Scalar& end, std::optional<TensorOptions> o) { return arange(0, end, 1, o); }

Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, std::optional<TensorOptions> o) {
  const bool integral = !start.is_floating() && !end.is_floating() && !step.is_floating();
  const TensorOptions opts = o.value_or(TensorOptions()).resolved(integral ? kInt64 : get_default_dtype());
  check_device("arange", *opts.device);
  const double s = start.to_double(), e = end.to_double(), st = step.to_double();
  RTX_CHECK(st != 0, ValueError, "[arange] step must be nonzero");
  RTX_CHECK(std::isfinite(s) && std::isfinite(e), ValueError, "[arange] start and end must be finite, got {} and {}", s, e);
  RTX_CHECK((st > 0 && e >= s) || (st < 0 && e <= s), ValueError,
            "[arange] the range from {} to {} never ends with step {}", s, e, st);
  int64_t n;
  if (integral) {
    // In 128 bits: the span of two int64s, or a step of -2^63, does not fit in 64.
    const __int128 span = static_cast<__int128>(end.to_int()) - start.to_int(), c = step.to_int();
    const __int128 count = c > 0 ? (span + c - 1) / c : (-span - c - 1) / -c;
    RTX_CHECK(count <= INT64_MAX, ValueError, "[arange] the range from {} to {} by {} has too many elements",
              start.to_int(), end.to_int(), step.to_int());
    n = static_cast<int64_t>(count);
  } else {
    const double count = std::ceil((e - s) / st);
    RTX_CHECK(count < 9.2e18, ValueError, "[arange] the range from {} to {} by {} has too many elements", s, e, st);
    n = static_cast<int64_t>(count);
  }
  // Values are computed on the host in double (int64 exactly) and converted once.
  Tensor host = detail::make_tensor({n}, integral ? kInt64 : kFloat64, Device(kCPU));
  if (integral) {
    int64_t* p = host.data_ptr<int64_t>();
    // Unsigned, so that i * step may wrap on the way to a value inside [start, end).
    const uint64_t a = static_cast<uint64_t>(start.to_int()), c = static_cast<uint64_t>(step.to_int());
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int64_t>(a + static_cast<uint64_t>(i) * c);
  } else {
    double* p = host.data_ptr<double>();
    for (int64_t i = 0; i < n; ++i) p[i] = s + static_cast<double>(i) * st;
  }
  return finish(host.to(*opts.device, *opts.dtype), opts);
}

Tensor linspace(double start, double end, int64_t steps, const TensorOptions& options) {
  RTX_CHECK(steps >= 0, ValueError, "[linspace] steps must be nonnegative, got {}", steps);
  const TensorOptions o = options.resolved();
  check_device("linspace", *o.device);
  Tensor host = detail::make_tensor({steps}, kFloat64, Device(kCPU));
  double* p = host.data_ptr<double>();
  const double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
  // Symmetric evaluation (like PyTorch) so that both ends are exact; one step is just start.
  const int64_t half = steps / 2;
  for (int64_t i = 0; i < steps; ++i)
    p[i] = i < half || steps == 1 ? start + step * static_cast<double>(i) : end - step * static_cast<double>(steps - 1 - i);
  return finish(host.to(*o.device, *o.dtype), o);
}

Tensor eye(int64_t n, int64_t m, const TensorOptions& options) {
  if (m < 0) m = n;
  RTX_CHECK(n >= 0, ValueError, "[eye] n must be nonnegative, got {}", n);
  const TensorOptions o = options.resolved();
  check_device("eye", *o.device);
  Tensor t = zeros({n, m}, TensorOptions(*o.dtype, *o.device));
  Tensor d = t.diagonal();
  detail::fill_raw(d, 1);
  return finish(t, o);
}

Tensor from_buffer(const void* data, const Shape& shape, DType dtype, Device device) {
  const int64_t n = detail::checked_numel(shape, "from_buffer");
  RTX_CHECK(data != nullptr || n == 0, ValueError, "[from_buffer] null data pointer for {} elements", n);
  check_device("from_buffer", device);
  Tensor host = detail::make_tensor(shape, dtype, Device(kCPU));
  if (n > 0) std::memcpy(host.data_ptr(), data, static_cast<size_t>(n) * element_size(dtype));
  return device.is_cpu() ? host : host.to(device);
}

Tensor from_blob(void* data, const Shape& shape, const Shape& strides, DType dtype, Device device,
                 std::function<void(void*)> deleter) {
  RTX_CHECK(shape.size() == strides.size() || strides.empty(), ShapeError, "[from_blob] {} sizes but {} strides",
            shape.size(), strides.size());
  detail::checked_numel(shape, "from_blob");
  Shape st = strides.empty() ? detail::contiguous_strides(shape) : strides;
  for (int64_t s : st)
    RTX_CHECK(s >= 0, ValueError, "[from_blob] negative strides are not supported ({})", detail::shape_str(st));
  const int64_t extent = detail::checked_extent(shape, st, 0, "from_blob");
  const size_t nbytes = detail::checked_nbytes({extent}, element_size(dtype), "from_blob");
  auto storage = std::make_shared<detail::Storage>(data, nbytes, device, std::move(deleter));
  return Tensor(std::make_shared<detail::TensorImpl>(std::move(storage), shape, st, 0, dtype));
}

Tensor tensor(std::initializer_list<double> values, const TensorOptions& options) {
  const std::vector<double> v(values);
  return detail::tensor_of(v.data(), static_cast<int64_t>(v.size()), kFloat64, options.resolved());
}

Tensor detail::tensor_of(const void* data, int64_t n, DType source, const TensorOptions& options) {
  const TensorOptions o = options.resolved(source);
  check_device("tensor", *o.device);
  const Tensor values = from_buffer(data, {n}, source);
  if (*o.dtype != source) {
    RTX_DISPATCH_ALL(source, "tensor", [&] {
      const auto* v = values.data_ptr<scalar_t>();
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (std::is_same_v<scalar_t, bool>) break;  // 0 and 1 fit every dtype
        else if (is_floating(source)) check_fits("tensor", Scalar(static_cast<double>(v[i])), *o.dtype);
        else check_fits("tensor", Scalar(static_cast<int64_t>(v[i])), *o.dtype);
      }
    });
  }
  return finish(values.to(*o.device, *o.dtype), o);
}

Tensor tensor(const std::vector<bool>& values, const TensorOptions& options) {
  // vector<bool> packs bits and has no data(): go through one byte per value.
  return tensor(std::vector<uint8_t>(values.begin(), values.end()), options.resolved(kBool));
}

}  // namespace rtx
