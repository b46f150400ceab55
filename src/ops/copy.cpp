// Copies, casts and fills: copy_, fill_, zero_, clone, contiguous, to(dtype/device), item, and the
// raw (unrecorded) helpers front-ends use.
#include <utility>

#include "autograd/function.h"
#include "core/scalar_range.h"
#include "ops/internal.h"
#include "dispatch/copy.h"
#include "rtx/cuda.h"

namespace rtx {

namespace detail {

void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  RTX_CHECK(a.device() == b.device(), DeviceError,
            "[{}] expected all tensors on one device, but got {} and {}; move them with .to(device)", op, a.device(),
            b.device());
}

Device common_device(const char* op, std::initializer_list<const Tensor*> operands) {
  const auto is_number = [](const Tensor* t) { return t->dim() == 0 && t->device().is_cpu(); };
  const Tensor* first = *operands.begin();
  for (const Tensor* t : operands) {
    if (!is_number(t)) {
      first = t;
      break;
    }
  }
  for (const Tensor* t : operands)
    if (!is_number(t)) check_same_device(op, *first, *t);
  return first->device();
}

void check_no_internal_overlap(const Tensor& t, const char* op) {
  for (int64_t d = 0; d < t.dim(); ++d)
    RTX_CHECK(t.strides()[d] != 0 || t.sizes()[d] <= 1, Error,
              "[{}] cannot write in place into an expanded tensor (shape {}, strides {}): several elements share "
              "one memory location; call .clone() first",
              op, shape_str(t.sizes()), shape_str(t.strides()));
}

namespace {
// The bytes t can reach: [first, last) (empty for an empty tensor).
std::pair<const char*, const char*> byte_span(const Tensor& t) {
  const char* base = static_cast<const char*>(t.data_ptr());
  if (t.numel() == 0) return {base, base};
  int64_t lo = 0, hi = 0;  // element offsets from the first element
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t reach = (t.sizes()[d] - 1) * t.strides()[d];
    (reach < 0 ? lo : hi) += reach;
  }
  const auto es = static_cast<int64_t>(t.element_size());
  return {base + lo * es, base + (hi + 1) * es};
}

// Whether a and b put every element at the same address (strides of size-1 dims do not matter).
bool same_layout(const Tensor& a, const Tensor& b) {
  if (a.data_ptr() != b.data_ptr() || a.element_size() != b.element_size() || a.sizes() != b.sizes()) return false;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (a.sizes()[d] > 1 && a.strides()[d] != b.strides()[d]) return false;
  return true;
}
}  // namespace

bool overlaps_differently(const Tensor& dst, const Tensor& src) {
  if (!dst.shares_storage(src) || same_layout(dst, src)) return false;
  const auto [d0, d1] = byte_span(dst);
  const auto [s0, s1] = byte_span(src);
  return d0 < s1 && s0 < d1;
}

bool can_cast(DType from, DType to) {
  if (is_floating(from) && !is_floating(to)) return false;
  if (from != kBool && to == kBool) return false;
  return true;
}

void copy_raw(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  RTX_CHECK(dst.device() == src.device(), DeviceError,
            "[copy_] copies between {} and {} need the CUDA backend (not in this build or no device)", src.device(),
            dst.device());
  kernels::copy_kernel.get(dst.device())(dst, expand_to(src, dst.sizes()));
}

Tensor cast(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  Tensor out = make_tensor(x.sizes(), dtype, x.device());
  copy_raw(out, x);
  return out;
}

Tensor contiguous_raw(const Tensor& t) {
  if (!t.defined() || t.is_contiguous()) return t;
  Tensor c = make_tensor(t.sizes(), t.dtype(), t.device());
  copy_raw(c, t);
  return c;
}

void fill_raw(const Tensor& t, const Scalar& value) {
  if (t.numel() == 0) return;
  kernels::fill_kernel.get(t.device())(t, value);
}

Tensor wrap_scalar(const Scalar& value, DType dtype, Device device) {
  Tensor t = make_tensor({}, dtype, device);
  fill_raw(t, value);
  return t;
}

}  // namespace detail

using detail::check_defined;

Tensor& copy_(Tensor& dst, const Tensor& src) {
  check_defined(dst, "copy_", "dst");
  check_defined(src, "copy_", "src");
  RTX_CHECK(broadcast_shapes(src.sizes(), dst.sizes(), "copy_") == dst.sizes(), ShapeError,
            "[copy_] source of shape {} does not broadcast to destination shape {}", detail::shape_str(src.sizes()),
            detail::shape_str(dst.sizes()));
  // Copies between devices go through src's move to dst's device.
  const Tensor local = src.device() == dst.device() ? src : src.detach().to(dst.device());
  return detail::write_inplace(
      "copy_", dst, {src},
      [&] {
        // The new value of dst as a recorded op of (dst, src): src gets the gradient (the engine sums
        // it over the broadcast dims and casts it to src's dtype), dst's old value none.
        Tensor r = detail::make_tensor(dst.sizes(), dst.dtype(), dst.device());
        detail::copy_raw(r, local);
        auto node = autograd::make_node("copy_", dst, src);
        const Device src_device = src.device();
        node->set_backward([src_device](const TensorList& g, const TensorList&) {
          return TensorList{zeros_like(g[0]), g[0].to(src_device)};
        });
        autograd::set_history(r, node);
        return r;
      },
      // A source that overlaps dst in another layout is read out first.
      [&] { detail::copy_raw(dst, detail::overlaps_differently(dst, local) ? local.detach().clone() : local); });
}

Tensor& fill_(Tensor& t, const Scalar& value) {
  check_defined(t, "fill_");
  detail::check_fits("fill_", value, t.dtype());
  return detail::write_inplace(
      "fill_", t, {},
      [&] {
        // A recorded op of t's old value whose gradient is zero: t keeps requiring grad, like PyTorch's.
        Tensor r = full_like(t, value);
        auto node = autograd::make_node("fill_", t);
        node->set_backward([](const TensorList& g, const TensorList&) { return TensorList{zeros_like(g[0])}; });
        autograd::set_history(r, node);
        return r;
      },
      [&] { detail::fill_raw(t, value); });
}

Tensor& zero_(Tensor& t) { return fill_(t, 0); }

Tensor to_dtype(const Tensor& x, DType dtype) {
  check_defined(x, "to");
  if (x.dtype() == dtype) return x;
  Tensor out = detail::cast(x, dtype);
  if (is_floating(dtype) && is_floating(x.dtype())) {
    if (auto node = autograd::make_node("to", x)) {
      // The engine casts the gradient back to x's dtype.
      node->set_backward([](const TensorList& g, const TensorList&) { return TensorList{g[0]}; });
      autograd::set_history(out, node);
    }
  }
  return out;
}

Tensor clone(const Tensor& t) {
  check_defined(t, "clone");
  Tensor out = detail::make_tensor(t.sizes(), t.dtype(), t.device());
  detail::copy_raw(out, t);
  if (auto node = autograd::make_node("clone", t)) {
    node->set_backward([](const TensorList& g, const TensorList&) { return TensorList{g[0]}; });
    autograd::set_history(out, node);
  }
  return out;
}

Tensor contiguous(const Tensor& t) {
  check_defined(t, "contiguous");
  return t.is_contiguous() ? t : clone(t);
}

Tensor scalar_tensor(const Scalar& value, const TensorOptions& options) {
  const TensorOptions o = options.resolved();
  detail::check_fits("scalar_tensor", value, *o.dtype);
  Tensor t = detail::wrap_scalar(value, *o.dtype, *o.device);
  if (o.requires_grad) t.requires_grad_(true);
  return t;
}

// ---- Tensor methods that copy -----------------------------------------------------------------

Tensor Tensor::to(DType dtype, bool, bool copy) const {
  Tensor r = to_dtype(*this, dtype);
  return copy && r.is_same(*this) ? rtx::clone(r) : r;
}

Tensor Tensor::contiguous() const { return rtx::contiguous(*this); }
Tensor Tensor::clone() const { return rtx::clone(*this); }
Tensor& Tensor::copy_(const Tensor& src) { return rtx::copy_(*this, src); }
Tensor& Tensor::fill_(const Scalar& value) { return rtx::fill_(*this, value); }
Tensor& Tensor::zero_() { return rtx::zero_(*this); }

Scalar Tensor::item() const {
  check_defined(*this, "item");
  RTX_CHECK(numel() == 1, ValueError, "[item] only one-element tensors have an item, but this one has shape {}",
            detail::shape_str(sizes()));
  Tensor host = is_cpu() ? *this : cpu();
  const void* p = host.data_ptr();
  switch (dtype()) {
    case kBool: return Scalar(*static_cast<const bool*>(p));
    case kUInt8: return Scalar(static_cast<int64_t>(*static_cast<const uint8_t*>(p)));
    case kInt8: return Scalar(static_cast<int64_t>(*static_cast<const int8_t*>(p)));
    case kInt16: return Scalar(static_cast<int64_t>(*static_cast<const int16_t*>(p)));
    case kInt32: return Scalar(static_cast<int64_t>(*static_cast<const int32_t*>(p)));
    case kInt64: return Scalar(*static_cast<const int64_t*>(p));
    case kFloat16: return Scalar(static_cast<double>(static_cast<float>(*static_cast<const Half*>(p))));
    case kBFloat16: return Scalar(static_cast<double>(static_cast<float>(*static_cast<const BFloat16*>(p))));
    case kFloat32: return Scalar(static_cast<double>(*static_cast<const float*>(p)));
    case kFloat64: return Scalar(*static_cast<const double*>(p));
  }
  return Scalar();
}

template <typename T>
std::vector<T> Tensor::tolist() const {
  check_defined(*this, "tolist");
  Tensor c = to(Device(kCPU), dtype_of_v<T>).contiguous();
  const T* p = c.data_ptr<T>();
  return std::vector<T>(p, p + c.numel());
}
template std::vector<bool> Tensor::tolist<bool>() const;
template std::vector<uint8_t> Tensor::tolist<uint8_t>() const;
template std::vector<int8_t> Tensor::tolist<int8_t>() const;
template std::vector<int16_t> Tensor::tolist<int16_t>() const;
template std::vector<int32_t> Tensor::tolist<int32_t>() const;
template std::vector<int64_t> Tensor::tolist<int64_t>() const;
template std::vector<float> Tensor::tolist<float>() const;
template std::vector<double> Tensor::tolist<double>() const;

}  // namespace rtx
