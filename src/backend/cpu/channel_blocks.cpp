// NCHW <-> nChw16c for float32 (channel_blocks.h). Each (image, channel block) is a [16][hw] <->
// [hw][16] transposition, 16 pixels at a time in 16 vectors of 16 floats (four shuffle stages, so that
// both sides move whole cache lines); the loops are built for the CPU's vector ISA (vector_isa.h).
#include "backend/cpu/channel_blocks.h"

#include <algorithm>
#include <type_traits>
#include <utility>

#include "backend/cpu/parallel.h"
#include "backend/cpu/vector_isa.h"

namespace rtx::cpu {

namespace {

constexpr int64_t kBlock = 16;

// The masks of transposition stage s (8, 4, 2, 1) for __builtin_shuffle(lo, hi, mask), J = 0..15:
// the new lo takes column j of lo where j lacks bit s and column j - s of hi where it has it; the new
// hi takes column j + s of lo and column j of hi.
template <int s, typename J>
struct StageMasks;
template <int s, int... J>
struct StageMasks<s, std::integer_sequence<int, J...>> {
  static constexpr Ints16 lo{((J & s) == 0 ? J : 16 + J - s)...};
  static constexpr Ints16 hi{((J & s) == 0 ? J + s : 16 + J)...};
};

// r[i][j] becomes r[j][i]: four stages that swap the off-diagonal s x s blocks of every 2s x 2s block.
inline void transpose16(Floats16 (&r)[16]) {
  const auto stage = [&](auto s_tag) {
    constexpr int s = decltype(s_tag)::value;
    using Masks = StageMasks<s, std::make_integer_sequence<int, 16>>;
    for (int i = 0; i < 16; ++i) {
      if ((i & s) != 0) continue;
      const Floats16 lo = r[i], hi = r[i + s];
      r[i] = __builtin_shuffle(lo, hi, Masks::lo);
      r[i + s] = __builtin_shuffle(lo, hi, Masks::hi);
    }
  };
  stage(std::integral_constant<int, 8>{});
  stage(std::integral_constant<int, 4>{});
  stage(std::integral_constant<int, 2>{});
  stage(std::integral_constant<int, 1>{});
}

// dst = the transpose of src, a rows x cols tile (rows src_stride apart) into cols x rows (rows
// dst_stride apart): in vectors when it is a whole 16 x 16 tile, else element by element.
void transpose_tile(float* dst, int64_t dst_stride, const float* src, int64_t src_stride, int64_t rows,
                    int64_t cols) {
  if (rows == kBlock && cols == kBlock) {
    Floats16 r[16];
    for (int64_t i = 0; i < kBlock; ++i) r[i] = *reinterpret_cast<const Floats16*>(src + i * src_stride);
    transpose16(r);
    for (int64_t j = 0; j < kBlock; ++j) *reinterpret_cast<Floats16*>(dst + j * dst_stride) = r[j];
    return;
  }
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[j * dst_stride + i] = src[i * src_stride + j];
}

// For every (image, channel block), whose blocked [hw][16] and plain [16][hw] data both start at the
// same offset: the blocked data from the plain (to_blocks) or the plain from the blocked, 16 pixels a
// tile.
void convert(float* dst, const float* src, int64_t n, int64_t c, int64_t hw, bool to_blocks) {
  const int64_t blocks = n * (c / kBlock);
  parallel_for(blocks, std::max<int64_t>(1, kGrainSize / (kBlock * hw)), [&](int64_t b0, int64_t b1) {
    with_vector_isa([&] {
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t offset = b * kBlock * hw;
        for (int64_t p = 0; p < hw; p += kBlock) {
          const int64_t pixels = std::min(kBlock, hw - p);
          if (to_blocks)
            transpose_tile(dst + offset + p * kBlock, kBlock, src + offset + p, hw, kBlock, pixels);
          else
            transpose_tile(dst + offset + p, hw, src + offset + p * kBlock, kBlock, pixels, kBlock);
        }
      }
    });
  });
}

}  // namespace

void to_channel_blocks(float* dst, const float* src, int64_t n, int64_t c, int64_t hw) {
  convert(dst, src, n, c, hw, true);
}

void from_channel_blocks(float* dst, const float* src, int64_t n, int64_t c, int64_t hw) {
  convert(dst, src, n, c, hw, false);
}

}  // namespace rtx::cpu
