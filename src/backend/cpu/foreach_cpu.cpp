// CPU kernels of the multi-tensor ops. The norms cut every tensor of the list into blocks of a fixed
// size, reduce the blocks of all tensors in parallel and merge each tensor's partials in block
// order, so the result does not depend on the thread count; the policies are reduce_ops::NormOp's.
// The multiplication goes tensor by tensor, each split over threads.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend/cpu/parallel.h"
#include "core/dtype_dispatch.h"
#include "dispatch/foreach.h"
#include "kernels/common/reduce_ops.h"

namespace rtx::cpu {
namespace {

using namespace reduce_ops;

constexpr int64_t kBlock = 65536;  // elements per partial
constexpr int64_t kLanes = 8;      // independent accumulators along a block (hide each combine's latency)

// Combines x[begin, end) in kLanes accumulators, merged in lane order.
template <typename Op>
typename Op::acc_t accumulate(const Op& op, const typename Op::in_t* x, int64_t begin, int64_t end) {
  using V = value_t<typename Op::in_t>;
  typename Op::acc_t lane[kLanes];
  for (auto& l : lane) l = op.init();
  int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) lane[j] = op.combine(lane[j], static_cast<V>(x[i + j]), i + j);
  for (; i < end; ++i) lane[0] = op.combine(lane[0], static_cast<V>(x[i]), i);
  typename Op::acc_t acc = lane[0];
  for (int64_t j = 1; j < kLanes; ++j) acc = op.merge(acc, lane[j]);
  return acc;
}

// op.write(i, the reduction of tensors[i]) for every tensor.
template <typename Op>
void norms(const Op& op, const TensorList& tensors) {
  using T = typename Op::in_t;
  using A = typename Op::acc_t;
  const size_t n = tensors.size();
  std::vector<int64_t> first(n + 1, 0);  // tensor i's blocks are [first[i], first[i + 1])
  int64_t elements = 0;
  for (size_t i = 0; i < n; ++i) {
    const int64_t numel = tensors[i].numel();
    first[i + 1] = first[i] + (numel + kBlock - 1) / kBlock;
    elements += numel;
  }
  const int64_t blocks = first[n];
  std::vector<A> partial(static_cast<size_t>(blocks));
  parallel_for(blocks, elements <= kGrainSize ? blocks : 1, [&](int64_t b, int64_t e) {
    // The tensor of block b: the last whose first block is at or before b (empty tensors have none).
    size_t i = static_cast<size_t>(std::upper_bound(first.begin(), first.end(), b) - first.begin()) - 1;
    for (int64_t k = b; k < e; ++k) {
      while (first[i + 1] <= k) ++i;
      const int64_t begin = (k - first[i]) * kBlock;
      partial[k] = accumulate(op, static_cast<const T*>(tensors[i].data_ptr()), begin,
                              std::min(begin + kBlock, tensors[i].numel()));
    }
  });
  for (size_t i = 0; i < n; ++i) {
    if (first[i] == first[i + 1]) {  // an empty tensor (whose norm of a negative order would be inf)
      op.out[i] = T(0);
      continue;
    }
    A acc = partial[first[i]];
    for (int64_t k = first[i] + 1; k < first[i + 1]; ++k) acc = op.merge(acc, partial[k]);
    op.write(static_cast<int64_t>(i), acc);
  }
}

void foreach_norm_cpu(const Tensor& out, const TensorList& tensors, double p) {
  RTX_DISPATCH_FLOATS(out.dtype(), "_foreach_norm", [&] {
    with_norm_op(static_cast<scalar_t*>(out.data_ptr()), p, [&](const auto& op) { norms(op, tensors); });
  });
}

void foreach_mul_cpu(const TensorList& tensors, const Tensor& scalar, double value) {
  RTX_DISPATCH_FLOATS(tensors[0].dtype(), "_foreach_mul_", [&] {
    using C = rtx::detail::opmath_t<scalar_t>;
    const C s = scalar.defined() ? *static_cast<const C*>(scalar.data_ptr()) : static_cast<C>(value);
    for (const Tensor& t : tensors) {
      scalar_t* x = static_cast<scalar_t*>(t.data_ptr());
      parallel_for(t.numel(), kGrainSize, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) x[i] = static_cast<scalar_t>(static_cast<C>(x[i]) * s);
      });
    }
  });
}

}  // namespace

RTX_REGISTER_KERNELS(foreach_cpu) { RTX_FOREACH_KERNELS(RTX_SET_CPU_KERNEL) }

}  // namespace rtx::cpu
