// Overflow-checked size arithmetic (exported for the tests). Every byte count an allocation asks for (elements x itemsize,
// alignment rounding, allocator size classes) and every element extent a tensor's geometry reaches
// (offset + sizes x strides) is computed here, so that no size wraps around to a small request.
#pragma once

#include <cstddef>
#include <cstdint>

#include "rtx/export.h"
#include "rtx/tensor.h"

namespace rtx::detail {

// The most bytes one allocation may ask for: kernels address bytes with int64 offsets.
inline constexpr size_t kMaxAllocBytes = static_cast<size_t>(INT64_MAX);

// The bytes a contiguous tensor of `sizes` and `itemsize`-byte elements needs. ValueError naming op
// for a negative size or more than 2^63 - 1 elements; OutOfMemoryError naming op, the shape and the
// bytes asked for when they exceed kMaxAllocBytes.
RTX_API size_t checked_nbytes(const Shape& sizes, size_t itemsize, const char* op);
// bytes rounded up to a multiple of align (> 0); OutOfMemoryError naming who and the bytes asked for
// when the result would exceed kMaxAllocBytes.
RTX_API size_t checked_round_up(size_t bytes, size_t align, const char* who);
// One past the largest element index a view of (sizes, strides) at offset reaches: offset +
// sum((size - 1) x stride) + 1, or 0 when it has no elements. Sizes, strides and offset must be
// nonnegative. ValueError naming op, sizes, strides and offset when that index exceeds int64.
RTX_API int64_t checked_extent(const Shape& sizes, const Shape& strides, int64_t offset, const char* op);

}  // namespace rtx::detail
