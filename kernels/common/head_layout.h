// Where the heads and rows of an attention operand lie. An operand is a [..., n, D] tensor whose
// batch dims hold bh heads in all; the elements of a row are adjacent, but rows and heads may be
// strided, as in the heads a transformer splits off a [B, L, 3 * C] projection with view and
// transpose. Head h starts (h / heads) * batch + (h % heads) * head elements past the data pointer
// (heads = size(-3), with the dims before it collapsed into one stride), and its rows are `row`
// elements apart. Strides of dims of size 1 are 0, so alignment checks see only strides that matter.
// head_layout(t) reads it off a tensor, for the front-end and the kernels alike.
#pragma once

#include <cstdint>
#include <optional>

#include "rtx/export.h"
#include "rtx/tensor.h"

namespace rtx::detail {

struct HeadLayout {
  int64_t heads = 1;
  int64_t batch = 0;
  int64_t head = 0;
  int64_t row = 0;

  RTX_INLINE int64_t offset(int64_t h) const { return (h / heads) * batch + (h % heads) * head; }
  // Whether every stride is a multiple of `elements`.
  RTX_INLINE bool strides_multiple_of(int64_t elements) const {
    return batch % elements == 0 && head % elements == 0 && row % elements == 0;
  }
};

// Where the heads and rows of an attention operand t ([..., n, D]) lie, or nothing when its rows
// are not dense (stride(-1) != 1) or the dims before size(-3) do not collapse into one stride.
inline std::optional<HeadLayout> head_layout(const Tensor& t) {
  const int64_t n = t.dim();
  if (n < 2 || (t.size(-1) > 1 && t.stride(-1) != 1)) return std::nullopt;
  const auto stride_of = [&](int64_t d) { return t.size(d) == 1 ? 0 : t.stride(d); };
  HeadLayout l;
  l.row = stride_of(n - 2);
  if (n >= 3) {
    l.heads = t.size(n - 3);
    l.head = stride_of(n - 3);
  }
  // The dims before the heads dim as one: each one's stride is the next one's stride times its size.
  int64_t expected = -1;
  for (int64_t d = n - 4; d >= 0; --d) {
    if (t.size(d) == 1) continue;
    if (expected < 0) l.batch = t.stride(d);
    else if (t.stride(d) != expected) return std::nullopt;
    expected = t.stride(d) * t.size(d);
  }
  return l;
}

// The number of heads of an attention operand: the product of its batch dims.
inline int64_t head_count(const Tensor& t) {
  int64_t bh = 1;
  for (int64_t d = 0; d + 2 < t.dim(); ++d) bh *= t.size(d);
  return bh;
}

}  // namespace rtx::detail
