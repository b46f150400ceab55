// Reading datasets stored in files.
#pragma once

#include <string>

#include "rtx/export.h"
#include "rtx/tensor.h"

namespace rtx::data {

// Reads an IDX file (the MNIST family's format: a 4-byte magic naming the element type and rank,
// big-endian 32-bit dimensions, then big-endian data), plain or gzip-compressed, into a CPU tensor
// of that shape. Element types: unsigned byte -> uint8, signed byte -> int8, 16- and 32-bit
// integers -> int32, float -> float32, double -> float64. A missing, truncated, oversized or
// malformed file raises CheckpointError naming the file; memory grows only with the bytes actually
// read, never with what a header claims.
RTX_API Tensor read_idx(const std::string& path);

}  // namespace rtx::data
