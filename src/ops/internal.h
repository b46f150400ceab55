// Helpers shared by the op front-ends: argument checks with op-prefixed errors, casts, copies and
// scalar wrapping without autograd, and the in-place protocol.
#pragma once

#include <initializer_list>

#include "autocast/policy.h"
#include "autograd/function.h"
#include "core/check.h"
#include "core/shape.h"
#include "core/tensor_impl.h"
#include "rtx/ops.h"

namespace rtx::detail {

inline void check_defined(const Tensor& t, const char* op, const char* arg = "input") {
  RTX_CHECK(t.defined(), ValueError, "[{}] {} is an undefined tensor", op, arg);
}
void check_same_device(const char* op, const Tensor& a, const Tensor& b);
// The device a pointwise op over `operands` runs on: the one device of its operands, where a 0-d
// CPU tensor (a number, like PyTorch's CPU scalars) combines with tensors on any device and is
// passed to the kernel by value. Raises DeviceError naming op and devices otherwise.
Device common_device(const char* op, std::initializer_list<const Tensor*> operands);
// Writes through t would hit one element more than once (an expanded view).
void check_no_internal_overlap(const Tensor& t, const char* op);
// Whether writing dst element by element could change an element of src before it is read: both
// reach the same memory with different layouts (x.copy_(x.t()), a.add_(a[0])). Such a src must be
// read into a temporary first; the same layout is safe, as each element is read before it is written.
bool overlaps_differently(const Tensor& dst, const Tensor& src);
// Whether a value of type from may be written into a tensor of type to (PyTorch's can_cast).
bool can_cast(DType from, DType to);
// x converted to dtype (x itself when it already has it); not recorded by autograd.
Tensor cast(const Tensor& x, DType dtype);
// A 0-d tensor holding value; not recorded.
Tensor wrap_scalar(const Scalar& value, DType dtype, Device device);
// A number operand of a pointwise op: a 0-d CPU tensor holding value, which kernels on any device
// take by value (see common_device); not recorded.
inline Tensor wrap_number(const Scalar& value, DType dtype) { return wrap_scalar(value, dtype, Device(kCPU)); }
// Writes value into every element (kernel call, no autograd, no version bump).
void fill_raw(const Tensor& t, const Scalar& value);
// Copies src (broadcast, any dtype) into dst (kernel call, no autograd, no version bump).
void copy_raw(const Tensor& dst, const Tensor& src);
// t itself when it is contiguous (or undefined), else a contiguous copy (kernel call, no autograd).
Tensor contiguous_raw(const Tensor& t);

// The protocol of every in-place op on self: refuse writes autograd cannot follow
// (autograd::check_inplace); when the write must be recorded (others are the op's other inputs),
// hand self the history of recorded(), the new value computed out of place; otherwise refuse an
// expanded self, run direct() on self's memory and bump its version.
template <typename Recorded, typename Direct>
Tensor& write_inplace(const char* op, Tensor& self, const TensorList& others, const Recorded& recorded,
                      const Direct& direct) {
  autograd::check_inplace(self, op);
  if (autograd::inplace_needs_grad(self, others)) {
    autocast::ExcludeGuard in_place_ops_keep_their_dtype;
    return autograd::commit_inplace(self, recorded());
  }
  check_no_internal_overlap(self, op);
  direct();
  autograd::bump_version(self);
  return self;
}

}  // namespace rtx::detail

namespace rtx::detail {
// result_type over any number of tensors and scalars.
DType result_type_of(const Tensor* const* tensors, size_t n_tensors, const Scalar* scalars, size_t n_scalars);
// The dtype of (a dimensioned tensor of dtype t) op s.
DType promote_with_scalar(DType t, const Scalar& s);
}  // namespace rtx::detail
