// Helpers shared by the CUDA kernels of the sorting, indexing and random families: the stable
// device-wide radix sort (defined in sort.cu, the one source that includes CUB), the offsets of the
// rows along a dim, and index division that stays 32-bit where it can.
#pragma once

#include <array>
#include <cstdint>

#include "core/tensor_impl.h"
#include "kernels/cuda/pointwise.cuh"

namespace rtx::cuda {

// One array of a sort: `current` holds the input and `alternate` is scratch of the same length;
// after the sort `current` points at whichever of the two holds the result.
template <typename T>
struct SortBuffers {
  T* current;
  T* alternate;
};

// Stable ascending sort of n (key, value) pairs by bits [0, end_bit) of the keys, on stream.
void radix_sort_pairs(SortBuffers<uint64_t>& keys, SortBuffers<uint32_t>& values, int64_t n, int end_bit,
                      Device device, cudaStream_t stream);
void radix_sort_pairs(SortBuffers<uint64_t>& keys, SortBuffers<uint64_t>& values, int64_t n, int end_bit,
                      Device device, cudaStream_t stream);

// Bits that hold every value up to v (0 for v = 0).
inline int bit_width(uint64_t v) {
  int bits = 0;
  while (bits < 64 && (v >> bits) != 0) ++bits;
  return bits;
}

// A device scratch buffer of n elements of T (uint32_t, uint64_t, int64_t or double).
template <typename T>
Tensor scratch(int64_t n, Device device) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "scratch holds 32- or 64-bit words");
  return rtx::detail::make_tensor({n}, sizeof(T) == 4 ? kInt32 : kInt64, device);
}

// Division by a fixed positive divisor: multiply-shift when every dividend and the divisor are below
// 2^31, a 64-bit division otherwise.
struct Divider {
  IntDivider small;
  int64_t divisor = 1;
  bool is_small = true;

  Divider() = default;
  // max_dividend: the largest dividend that will be divided.
  Divider(int64_t d, int64_t max_dividend)
      : divisor(d), is_small(d < (int64_t{1} << 31) && max_dividend < (int64_t{1} << 31)) {
    if (is_small) small = IntDivider(static_cast<uint32_t>(d));
  }
  __device__ __forceinline__ int64_t div(int64_t n) const {
    return is_small ? static_cast<int64_t>(small.div(static_cast<uint32_t>(n))) : n / divisor;
  }
};

// The rows along dim of N operands walked over `sizes` (each operand's own size at dim and beyond
// `sizes` ignored): dim and size-1 dims dropped, contiguous dims merged, strides in bytes. Row r (in
// row-major order) starts at byte offsets calc.offsets(r).
template <size_t N>
OffsetCalculator<static_cast<int>(N), int64_t> row_offsets(const Shape& sizes, int64_t dim,
                                                           const std::array<const Tensor*, N>& ops) {
  Shape row_shape = sizes;
  row_shape[dim] = 1;
  std::array<Tensor, N> views;
  std::array<const Tensor*, N> ptrs;
  for (size_t k = 0; k < N; ++k) {
    views[k] = rtx::detail::make_view(*ops[k], row_shape, ops[k]->strides(), ops[k]->storage_offset());
    ptrs[k] = &views[k];
  }
  const rtx::detail::Geometry<N> g = rtx::detail::collapse<N>(ptrs);
  RTX_CHECK(g.sizes.size() <= static_cast<size_t>(kMaxDims), Error,
            "[cuda] row kernels take at most {} dims that cannot be merged, got {}; call .contiguous() first",
            kMaxDims, g.sizes.size());
  return make_offset_calculator<static_cast<int>(N), int64_t>(g);
}

}  // namespace rtx::cuda
