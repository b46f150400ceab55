// The argument checks every backend makes before it enqueues an operation, with one message each:
// ranks in range, matching dtypes, AVG only on floating types, the shapes of the gathers and
// scatters, all_to_all_single's splits; and how a group names itself in error messages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rtx/distributed.h"

namespace rtx::dist::detail {

// "[2, 3]"
inline std::string shape_str(const Tensor& t) {
  std::string s;
  for (int64_t d : t.sizes()) s += (s.empty() ? "" : ", ") + std::to_string(d);
  return "[" + s + "]";
}

// "rank 1 of a gloo group of 2 (world ranks [0, 1])": who failed. group: "a gloo group", "an nccl group".
inline std::string group_ident(const char* group, int rank, int size, const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return "rank " + std::to_string(rank) + " of " + group + " of " + std::to_string(size) + " (world ranks [" + s + "])";
}

inline void check_defined(const Tensor& t, const char* op) {
  if (!t.defined()) throw ValueError(std::string("[") + op + "] got an undefined tensor");
}

inline void check_same_dtype(const Tensor& output, const Tensor& input, const char* op) {
  if (output.dtype() != input.dtype()) {
    throw DTypeError(std::string("[") + op + "] output dtype " + dtype_name(output.dtype()) + " != input dtype " +
                     dtype_name(input.dtype()));
  }
}

inline void check_avg(ReduceOp op, DType dtype, const char* what) {
  if (op == ReduceOp::Avg && !is_floating(dtype)) {
    throw DTypeError(std::string("[") + what + "] ReduceOp.AVG needs a floating-point tensor, got " +
                     dtype_name(dtype) + " (the average of integers is not an integer)");
  }
}

// r is a rank of a group of size ranks.
inline void check_rank(int r, int size, const char* op, const char* name) {
  if (r < 0 || r >= size) {
    throw ValueError(std::string("[") + op + "] " + name + " rank " + std::to_string(r) + " is not in [0, " +
                     std::to_string(size) + ")");
  }
}

// r is a rank of the group other than this one (rank).
inline void check_peer(int r, int rank, int size, const char* op, const char* name) {
  check_rank(r, size, op, name);
  if (r == rank) throw ValueError(std::string("[") + op + "] " + name + " rank " + std::to_string(r) + " is this rank");
}

// all_gather: size outputs shaped like input, of its dtype.
inline void check_all_gather(const std::vector<Tensor>& outputs, const Tensor& input, int size) {
  if (static_cast<int>(outputs.size()) != size) {
    throw ValueError("[all_gather] tensor_list has " + std::to_string(outputs.size()) + " tensors, the group has " +
                     std::to_string(size) + " ranks");
  }
  for (const auto& o : outputs) {
    check_same_dtype(o, input, "all_gather");
    if (o.sizes() != input.sizes()) {
      throw ShapeError("[all_gather] output shape " + shape_str(o) + " != input shape " + shape_str(input));
    }
  }
}

inline void check_all_gather_into_tensor(const Tensor& output, const Tensor& input, int size) {
  check_same_dtype(output, input, "all_gather_into_tensor");
  if (output.numel() != size * input.numel()) {
    throw ShapeError("[all_gather_into_tensor] output shape " + shape_str(output) + " must hold " +
                     std::to_string(size) + " inputs of shape " + shape_str(input));
  }
}

inline void check_reduce_scatter_tensor(const Tensor& output, const Tensor& input, ReduceOp op, int size) {
  check_same_dtype(output, input, "reduce_scatter_tensor");
  check_avg(op, input.dtype(), "reduce_scatter_tensor");
  if (input.numel() != size * output.numel()) {
    throw ShapeError("[reduce_scatter_tensor] input shape " + shape_str(input) + " must hold " +
                     std::to_string(size) + " outputs of shape " + shape_str(output));
  }
}

inline void check_all_to_all(const Tensor& output, const Tensor& input) {
  check_same_dtype(output, input, "all_to_all_single");
  if (input.dim() == 0 || output.dim() == 0) throw ShapeError("[all_to_all_single] tensors must have a dim 0");
}

// all_to_all_single: the elements t sends to (or receives from) each of size ranks, from the rows per
// rank along dim 0 in splits (empty: equal parts). name: the argument, for messages.
inline std::vector<int64_t> split_counts(const Tensor& t, const std::vector<int64_t>& splits, int size,
                                         const char* name) {
  const int64_t rows = t.sizes()[0];
  const int64_t row = rows == 0 ? 0 : t.numel() / rows;
  std::vector<int64_t> counts;
  if (splits.empty()) {
    if (rows % size != 0) {
      throw ShapeError(std::string("[all_to_all_single] dim 0 of shape ") + shape_str(t) + " does not split into " +
                       std::to_string(size) + " equal parts; pass " + name);
    }
    counts.assign(size, rows / size * row);
    return counts;
  }
  if (static_cast<int>(splits.size()) != size) {
    throw ValueError(std::string("[all_to_all_single] ") + name + " has " + std::to_string(splits.size()) +
                     " entries, the group has " + std::to_string(size) + " ranks");
  }
  int64_t total = 0;
  for (int64_t s : splits) {
    if (s < 0) throw ValueError(std::string("[all_to_all_single] ") + name + " has a negative entry");
    total += s;
    counts.push_back(s * row);
  }
  if (total != rows) {
    throw ShapeError(std::string("[all_to_all_single] ") + name + " sums to " + std::to_string(total) +
                     ", dim 0 of shape " + shape_str(t) + " is " + std::to_string(rows));
  }
  return counts;
}

}  // namespace rtx::dist::detail
