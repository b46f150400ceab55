// CUDA kernels of the multi-tensor ops, on the multi-tensor launcher (kernels/cuda/multi_tensor.cuh),
// without reading anything back to the host.
//  - Norms, in two passes. Each block of the launcher reduces one chunk of one tensor and stores the
//    chunk's partial in a scratch buffer where tensor i's partials start at the sum of the earlier
//    tensors' chunk counts (that address travels as the tensor's per-tensor scalar); then a second
//    kernel, one block per tensor, merges each tensor's partials in chunk order and writes its norm.
//    The order of every merge is fixed by the launch configuration (no atomics), so the norms are
//    the same run to run. The policies (accumulation in float, double for float64) are
//    reduce_ops::NormOp's, as the reductions' are.
//  - The multiplication, in one pass: each block scales one chunk in place.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/dtype_dispatch.h"
#include "core/tensor_impl.h"
#include "dispatch/foreach.h"
#include "kernels/common/reduce_ops.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/multi_tensor.cuh"

namespace rtx::cuda {
namespace {

using namespace reduce_ops;

constexpr int kUnroll = 4;              // loads in flight per thread
constexpr int kFinishThreads = 128;     // threads merging one tensor's partials
constexpr size_t kFinishTensors = 240;  // tensors per launch of the second pass

// The policy's merge as the combining function of block_reduce.
template <typename Op>
struct Merge {
  Op op;
  __device__ __forceinline__ typename Op::acc_t operator()(typename Op::acc_t a, typename Op::acc_t b) const {
    return op.merge(a, b);
  }
};

// First pass: the partial of elements [begin, end) of one tensor. Each thread combines the elements
// it strides over in kUnroll accumulators, merged in order, then the block merges its threads'.
template <typename Op>
struct NormChunk {
  Op op;
  __device__ void operator()(const MultiTensorMeta<1>& meta, int tensor, int64_t begin, int64_t end) const {
    using T = typename Op::in_t;
    using A = typename Op::acc_t;
    const T* x = static_cast<const T*>(meta.addresses[0][tensor]);
    const int64_t step = blockDim.x;
    A acc[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc[u] = op.init();
    for (int64_t i = begin + threadIdx.x; i < end; i += step * kUnroll) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t k = i + u * step;
        if (k < end) acc[u] = op.combine(acc[u], static_cast<value_t<T>>(x[k]), k);
      }
    }
    A a = acc[0];
#pragma unroll
    for (int u = 1; u < kUnroll; ++u) a = op.merge(a, acc[u]);
    __shared__ A scratch[kMaxBlockWarps];
    a = block_reduce(a, 1, scratch, Merge<Op>{op});
    if (threadIdx.x == 0) static_cast<A*>(meta.scalars[tensor])[begin / kMultiTensorChunk] = a;
  }
};

// Where the partials of the tensors of one second-pass launch lie: tensor b's are
// [first[b], first[b + 1]) of the scratch buffer.
struct FinishBatch {
  int64_t first[kFinishTensors + 1];
};

// Second pass: block b merges the partials of tensor b of the batch and writes its norm at out_index + b.
template <typename Op>
__global__ void __launch_bounds__(kFinishThreads)
    finish_norms(const RTX_GRID_CONSTANT FinishBatch batch, const typename Op::acc_t* partials, const Op op,
                 int64_t out_index) {
  using A = typename Op::acc_t;
  const int b = static_cast<int>(blockIdx.x);
  if (batch.first[b] == batch.first[b + 1]) {  // an empty tensor (whose norm of a negative order would be inf)
    if (threadIdx.x == 0) op.out[out_index + b] = typename Op::in_t(0);
    return;
  }
  A a = op.init();
  for (int64_t k = batch.first[b] + threadIdx.x; k < batch.first[b + 1]; k += blockDim.x) a = op.merge(a, partials[k]);
  __shared__ A scratch[kMaxBlockWarps];
  a = block_reduce(a, 1, scratch, Merge<Op>{op});
  if (threadIdx.x == 0) op.write(out_index + b, a);
}

template <typename Op>
void norms(const Tensor& out, const TensorList& tensors, const Op& op) {
  using A = typename Op::acc_t;
  const size_t n = tensors.size();
  std::vector<int64_t> first(n + 1, 0);
  for (size_t i = 0; i < n; ++i)
    first[i + 1] = first[i] + (tensors[i].numel() + kMultiTensorChunk - 1) / kMultiTensorChunk;
  const Tensor scratch = rtx::detail::make_tensor(
      {std::max<int64_t>(first[n], 1) * static_cast<int64_t>(sizeof(A))}, kUInt8, out.device());
  A* partials = static_cast<A*>(scratch.data_ptr());
  multi_tensor_apply_with<1>(
      out.device(), {&tensors}, [&](size_t i) -> void* { return partials + first[i]; }, NormChunk<Op>{op});
  detail::KernelScope scope(out.device());
  for (size_t b0 = 0; b0 < n; b0 += kFinishTensors) {
    const size_t count = std::min(kFinishTensors, n - b0);
    FinishBatch batch;
    for (size_t b = 0; b <= count; ++b) batch.first[b] = first[b0 + b];
    finish_norms<Op><<<static_cast<unsigned>(count), kFinishThreads, 0, scope.stream()>>>(
        batch, partials, op, static_cast<int64_t>(b0));
    RTX_CUDA_CHECK_LAUNCH();
  }
}

void foreach_norm_cuda(const Tensor& out, const TensorList& tensors, double p) {
  RTX_DISPATCH_FLOATS(out.dtype(), "_foreach_norm", [&] {
    with_norm_op(static_cast<scalar_t*>(out.data_ptr()), p, [&](const auto& op) { norms(out, tensors, op); });
  });
}

// x = x * s for the elements [begin, end) of one tensor, in the compute type C; s is *scalar, or
// value when scalar is null.
template <typename T>
struct MulChunk {
  using C = rtx::detail::opmath_t<T>;
  const C* scalar;
  C value;
  __device__ void operator()(const MultiTensorMeta<1>& meta, int tensor, int64_t begin, int64_t end) const {
    T* x = static_cast<T*>(meta.addresses[0][tensor]);
    const C s = scalar != nullptr ? *scalar : value;
    const int64_t step = blockDim.x;
    for (int64_t i = begin + threadIdx.x; i < end; i += step * kUnroll) {
      C v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (i + u * step < end) v[u] = static_cast<C>(x[i + u * step]);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (i + u * step < end) x[i + u * step] = static_cast<T>(v[u] * s);
    }
  }
};

void foreach_mul_cuda(const TensorList& tensors, const Tensor& scalar, double value) {
  RTX_DISPATCH_FLOATS(tensors[0].dtype(), "_foreach_mul_", [&] {
    using C = rtx::detail::opmath_t<scalar_t>;
    const C* s = scalar.defined() ? static_cast<const C*>(scalar.data_ptr()) : nullptr;
    multi_tensor_apply<1>(tensors[0].device(), {&tensors}, {}, MulChunk<scalar_t>{s, static_cast<C>(value)});
  });
}

}  // namespace

RTX_REGISTER_KERNELS(foreach_cuda) { RTX_FOREACH_KERNELS(RTX_SET_CUDA_KERNEL) }

}  // namespace rtx::cuda
