// Overflow-checked size arithmetic (see checked_size.h).
#include "core/checked_size.h"

#include "core/check.h"
#include "core/shape.h"

namespace rtx::detail {

size_t checked_nbytes(const Shape& sizes, size_t itemsize, const char* op) {
  const int64_t n = checked_numel(sizes, op);
  const unsigned __int128 bytes = static_cast<unsigned __int128>(n) * itemsize;
  RTX_CHECK(bytes <= kMaxAllocBytes, OutOfMemoryError,
            "[{}] out of memory: a tensor of shape {} with {}-byte elements needs {} bytes, more than the {} bytes "
            "one allocation can hold",
            op, shape_str(sizes), itemsize, bytes, kMaxAllocBytes);
  return static_cast<size_t>(bytes);
}

size_t checked_round_up(size_t bytes, size_t align, const char* who) {
  RTX_CHECK(bytes <= kMaxAllocBytes - (align - 1), OutOfMemoryError,
            "[{}] out of memory: {} bytes asked for, more than the {} bytes one allocation can hold once rounded "
            "up to a multiple of {}",
            who, bytes, kMaxAllocBytes, align);
  return (bytes + align - 1) / align * align;
}

int64_t checked_extent(const Shape& sizes, const Shape& strides, int64_t offset, const char* op) {
  for (int64_t s : sizes)
    if (s == 0) return 0;
  // Each term is below 2^126 and the sum so far below 2^63, so the 128-bit sum cannot wrap.
  __int128 last = offset;
  for (size_t i = 0; i < sizes.size(); ++i) {
    last += static_cast<__int128>(sizes[i] - 1) * strides[i];
    RTX_CHECK(last < INT64_MAX, ValueError,
              "[{}] sizes {} with strides {} at storage offset {} reach beyond the 2^63 - 1 elements a tensor can "
              "address",
              op, shape_str(sizes), shape_str(strides), offset);
  }
  return static_cast<int64_t>(last) + 1;
}

}  // namespace rtx::detail
