// Where the heads and rows of an attention operand lie. An operand is a [..., n, D] tensor whose
// batch dims hold bh heads in all; the elements of a row are adjacent, but rows and heads may be
// strided, as in the heads a transformer splits off a [B, L, 3 * C] projection with view and
// transpose. Head h starts (h / heads) * batch + (h % heads) * head elements past the data pointer
// (heads = size(-3), with the dims before it collapsed into one stride), and its rows are `row`
// elements apart. Strides of dims of size 1 are 0, so alignment checks see only strides that matter.
#pragma once

#include <cstdint>

#include "rtx/export.h"

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

}  // namespace rtx::detail
