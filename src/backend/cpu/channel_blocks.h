// Conversions of float32 activations between NCHW and oneDNN's nChw16c (channels in blocks of 16, a
// block's 16 values of one pixel side by side) for tensors whose channels are whole blocks: a 16 x 16
// transposition per block of pixels, on the library's threads. They move the convolutions' operands
// about 1.5x faster than oneDNN's reorder primitives do (docs/benchmarks.md).
#pragma once

#include <cstdint>

namespace rtx::cpu {

// dst [n][c / 16][hw][16] from src [n][c][hw]; c a multiple of 16.
void to_channel_blocks(float* dst, const float* src, int64_t n, int64_t c, int64_t hw);
// dst [n][c][hw] from src [n][c / 16][hw][16]; c a multiple of 16.
void from_channel_blocks(float* dst, const float* src, int64_t n, int64_t c, int64_t hw);

}  // namespace rtx::cpu
