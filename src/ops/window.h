// Argument helpers shared by the sliding-window ops (convolutions in conv.cpp, pools in pool.cpp):
// (height, width) arguments, image-input checks, the batch-of-one handling of 3-d inputs and the
// number of windows along a dim.
#pragma once

#include <array>
#include <cstdint>

#include "ops/internal.h"

namespace rtx::window {

using Pair = std::array<int64_t, 2>;

// A per-dim (height, width) argument given as one value for both or as two.
inline Pair pair_arg(const char* op, const char* name, const Shape& v) {
  RTX_CHECK(v.size() == 1 || v.size() == 2, ValueError, "[{}] {} must have 1 or 2 values, got {}", op, name,
            detail::shape_str(v));
  return {v.front(), v.back()};
}

inline Shape shape_of(const int64_t (&v)[2]) { return {v[0], v[1]}; }

inline void check_image_input(const char* op, const Tensor& x) {
  detail::check_defined(x, op);
  RTX_CHECK(x.dim() == 3 || x.dim() == 4, ShapeError,
            "[{}] expected a 3-d (C, H, W) or 4-d (N, C, H, W) input, got shape {}", op, detail::shape_str(x.sizes()));
}

inline void check_float_input(const char* op, const Tensor& x) {
  RTX_CHECK(is_floating(x.dtype()), DTypeError, "[{}] expected a floating point input, got {}", op, x.dtype());
}

// Runs f on x as a 4-d batch (a 3-d input is a batch of one) and drops that batch dim again.
template <typename F>
Tensor batched(const Tensor& x, const F& f) {
  if (x.dim() == 4) return f(x);
  return f(x.unsqueeze(0)).squeeze(0);
}

// Output extent of a convolution or pooling window along one dim (floor or ceil of the window count).
inline int64_t window_count(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation, bool ceil_mode = false) {
  const int64_t span = in + 2 * pad - dilation * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t out = (span >= 0 ? span / stride : -((-span + stride - 1) / stride)) + 1;
  // The last window must start inside the input or its left padding.
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

}  // namespace rtx::window
