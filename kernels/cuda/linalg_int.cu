// CUDA integer matmul: a tiled GEMM that reads both operands through their strides (broadcast batches
// are stride 0) and wraps like the CPU kernel: products and sums run in the unsigned type of at least
// 32 bits and are truncated to the output type, so every dtype wraps modulo 2^bits. Each 256-thread
// block computes a 64 x 64 output tile, 4 x 4 per thread, over 16-deep slices of K staged in shared
// memory; grid z runs over batches.
#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/runtime.h"
#include "core/collapse.h"
#include "core/dtype_dispatch.h"
#include "core/tensor_impl.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/copy.h"

namespace rtx::cuda {
namespace {

constexpr int kTile = 64;    // output rows and columns per block
constexpr int kDepth = 16;   // K per shared-memory stage
constexpr int kSide = 16;    // threads per tile side: each thread owns kTile / kSide rows and columns
constexpr int kPer = kTile / kSide;
constexpr int kThreads = kSide * kSide;
constexpr int kMaxBatchDims = 16;
constexpr unsigned kMaxGridYZ = 65535;

// Element offsets of each operand's matrix in batch b: batch dims collapsed, innermost first.
struct BatchStrides {
  int dims = 0;
  int64_t sizes[kMaxBatchDims] = {};
  int64_t a[kMaxBatchDims] = {};
  int64_t b[kMaxBatchDims] = {};

  __device__ void offsets(int64_t batch, int64_t& oa, int64_t& ob) const {
    oa = 0;
    ob = 0;
    for (int d = 0; d < dims; ++d) {
      const int64_t i = batch % sizes[d];
      batch /= sizes[d];
      oa += i * a[d];
      ob += i * b[d];
    }
  }
};

// The matrix strides of one operand.
struct MatrixStrides {
  int64_t s0, s1;
};

template <typename T, typename Acc>
__global__ void __launch_bounds__(kThreads) int_matmul_kernel(T* __restrict__ out, const T* __restrict__ a,
                                                              const T* __restrict__ b, int64_t m, int64_t n,
                                                              int64_t k, MatrixStrides as, MatrixStrides bs,
                                                              BatchStrides batch, int64_t batches) {
  // Tiles stored K-major; one padding column spreads the stores over the banks.
  __shared__ Acc ta[kDepth][kTile + 1];
  __shared__ Acc tb[kDepth][kTile + 1];
  const int tx = static_cast<int>(threadIdx.x) % kSide, ty = static_cast<int>(threadIdx.x) / kSide;
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const int64_t row_tiles = (m + kTile - 1) / kTile;
  for (int64_t z = blockIdx.z; z < batches; z += gridDim.z) {
    int64_t oa, ob;
    batch.offsets(z, oa, ob);
    const T* pa = a + oa;
    const T* pb = b + ob;
    T* po = out + z * m * n;
    for (int64_t rt = blockIdx.y; rt < row_tiles; rt += gridDim.y) {
      const int64_t row0 = rt * kTile;
      Acc acc[kPer][kPer] = {};
      for (int64_t k0 = 0; k0 < k; k0 += kDepth) {
        for (int e = static_cast<int>(threadIdx.x); e < kTile * kDepth; e += kThreads) {
          // a: consecutive threads walk K within a row; b: consecutive threads walk a row of b.
          const int ar = e / kDepth, ak = e % kDepth;
          const int64_t gr = row0 + ar, gk = k0 + ak;
          ta[ak][ar] = gr < m && gk < k ? static_cast<Acc>(pa[gr * as.s0 + gk * as.s1]) : Acc(0);
          const int bk = e / kTile, bc = e % kTile;
          const int64_t hk = k0 + bk, gc = col0 + bc;
          tb[bk][bc] = hk < k && gc < n ? static_cast<Acc>(pb[hk * bs.s0 + gc * bs.s1]) : Acc(0);
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < kDepth; ++kk) {
          Acc av[kPer], bv[kPer];
#pragma unroll
          for (int i = 0; i < kPer; ++i) {
            av[i] = ta[kk][ty + i * kSide];
            bv[i] = tb[kk][tx + i * kSide];
          }
#pragma unroll
          for (int i = 0; i < kPer; ++i)
#pragma unroll
            for (int j = 0; j < kPer; ++j) acc[i][j] += av[i] * bv[j];
        }
        __syncthreads();
      }
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        const int64_t r = row0 + ty + i * kSide;
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
          const int64_t c = col0 + tx + j * kSide;
          if (r < m && c < n) po[r * n + c] = static_cast<T>(acc[i][j]);
        }
      }
    }
  }
}

// The batch dims of t ([..., rows, cols]) as a view without the matrix dims.
Tensor batch_view(const Tensor& t) {
  const Shape sizes(t.sizes().begin(), t.sizes().end() - 2), strides(t.strides().begin(), t.strides().end() - 2);
  return rtx::detail::make_view(t, sizes, strides, t.storage_offset());
}

// Fills s with a and b's batch dims collapsed together (out is contiguous, so its batch stride is
// implied); false when more than kMaxBatchDims dims remain.
bool batch_strides(const Tensor& a, const Tensor& b, BatchStrides& s) {
  const Tensor va = batch_view(a), vb = batch_view(b);
  const rtx::detail::Geometry<2> g = rtx::detail::collapse<2>({&va, &vb});
  if (g.sizes.size() > static_cast<size_t>(kMaxBatchDims)) return false;
  s.dims = static_cast<int>(g.sizes.size());
  const auto es = static_cast<int64_t>(a.element_size());
  for (int d = 0; d < s.dims; ++d) {
    const size_t src = g.sizes.size() - 1 - static_cast<size_t>(d);  // innermost first
    s.sizes[d] = g.sizes[src];
    s.a[d] = g.strides[0][src] / es;
    s.b[d] = g.strides[1][src] / es;
  }
  return true;
}

}  // namespace

// out [..., m, n] = a @ b for integer dtypes (k >= 1), wrapping like the CPU kernel.
void int_matmul(const Tensor& out, const Tensor& a_in, const Tensor& b_in) {
  detail::KernelScope scope(out.device());
  Tensor a = a_in, b = b_in;
  BatchStrides batch;
  if (!batch_strides(a, b, batch)) {
    a = contiguous_cuda(a);
    b = contiguous_cuda(b);
    batch_strides(a, b, batch);
  }
  const int64_t nd = out.dim();
  const int64_t m = out.size(nd - 2), n = out.size(nd - 1), k = a.size(nd - 1);
  const int64_t batches = out.numel() / (m * n);
  const MatrixStrides as{a.stride(nd - 2), a.stride(nd - 1)}, bs{b.stride(nd - 2), b.stride(nd - 1)};
  const dim3 grid(static_cast<unsigned>((n + kTile - 1) / kTile),
                  static_cast<unsigned>(std::min<int64_t>((m + kTile - 1) / kTile, kMaxGridYZ)),
                  static_cast<unsigned>(std::min<int64_t>(batches, kMaxGridYZ)));
  switch (out.dtype()) {
    RTX_DISPATCH_INTS_CASES([&] {
      using Acc = std::conditional_t<sizeof(scalar_t) == 8, uint64_t, uint32_t>;
      int_matmul_kernel<scalar_t, Acc><<<grid, kThreads, 0, scope.stream()>>>(
          static_cast<scalar_t*>(out.data_ptr()), static_cast<const scalar_t*>(a.data_ptr()),
          static_cast<const scalar_t*>(b.data_ptr()), m, n, k, as, bs, batch, batches);
      RTX_CUDA_CHECK_LAUNCH();
    })
    RTX_DTYPE_DEFAULT(out.dtype(), "matmul");
  }
}

}  // namespace rtx::cuda
