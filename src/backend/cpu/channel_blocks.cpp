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

// f(offset, hw) for every (image, channel block), whose blocked [hw][16] and plain [16][hw] data
// both start `offset` floats in.
template <typename F>
void for_each_channel_block(int64_t n, int64_t c, int64_t hw, const F& f) {
  const int64_t blocks = n * (c / kBlock);
  parallel_for(blocks, std::max<int64_t>(1, kGrainSize / (kBlock * hw)), [&](int64_t b0, int64_t b1) {
    with_vector_isa([&] {
      for (int64_t b = b0; b < b1; ++b) f(b * kBlock * hw, hw);
    });
  });
}

}  // namespace

void to_channel_blocks(float* dst, const float* src, int64_t n, int64_t c, int64_t hw) {
  for_each_channel_block(n, c, hw, [&](int64_t offset, int64_t pixels) {
    float* blocked = dst + offset;
    const float* plain = src + offset;
    int64_t p = 0;
    for (; p + kBlock <= pixels; p += kBlock) {
      Floats16 r[16];
      for (int64_t ch = 0; ch < kBlock; ++ch) r[ch] = *reinterpret_cast<const Floats16*>(plain + ch * pixels + p);
      transpose16(r);
      for (int64_t i = 0; i < kBlock; ++i) *reinterpret_cast<Floats16*>(blocked + (p + i) * kBlock) = r[i];
    }
    for (; p < pixels; ++p)
      for (int64_t ch = 0; ch < kBlock; ++ch) blocked[p * kBlock + ch] = plain[ch * pixels + p];
  });
}

void from_channel_blocks(float* dst, const float* src, int64_t n, int64_t c, int64_t hw) {
  for_each_channel_block(n, c, hw, [&](int64_t offset, int64_t pixels) {
    float* plain = dst + offset;
    const float* blocked = src + offset;
    int64_t p = 0;
    for (; p + kBlock <= pixels; p += kBlock) {
      Floats16 r[16];
      for (int64_t i = 0; i < kBlock; ++i) r[i] = *reinterpret_cast<const Floats16*>(blocked + (p + i) * kBlock);
      transpose16(r);
      for (int64_t ch = 0; ch < kBlock; ++ch) *reinterpret_cast<Floats16*>(plain + ch * pixels + p) = r[ch];
    }
    for (; p < pixels; ++p)
      for (int64_t ch = 0; ch < kBlock; ++ch) plain[ch * pixels + p] = blocked[p * kBlock + ch];
  });
}

}  // namespace rtx::cpu
