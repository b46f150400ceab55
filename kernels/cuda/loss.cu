// CUDA kernels of the class-index losses: cross_entropy fused over the softmax, and nll_loss,
// forward and backward. Semantics follow src/backend/cpu/loss_cpu.cpp.
//
// The cross_entropy forward reads the logits once: each row's online softmax statistics give its
// log-sum-exp, the loss at the target and the label-smoothing term; the backward writes
// scale * (A * softmax - B) in one pass from the saved log-sum-exp. Per-sample losses and weights
// are summed by fixed blocks and then in block order (deterministic, no atomics).
#include <algorithm>
#include <vector>

#include "core/dtype_dispatch.h"
#include "backend/cuda/tuner.h"
#include "core/tensor_impl.h"
#include "kernels/cuda/rows.cuh"
#include "dispatch/loss.h"

namespace rtx::cuda {
namespace {

// Blocks of the first stage of the sample sums (the second stage is one block of as many threads).
constexpr int kLossBlocks = 256;

using LossSums = SumPair<double>;  // (sum of losses, sum of weights)

template <typename T>
__device__ __forceinline__ opmath_t<T> class_weight(const T* w, int64_t c) {
  return w != nullptr ? static_cast<opmath_t<T>>(w[c]) : opmath_t<T>(1);
}

// Whether a sample's target counts as ignored: ignore_index, or a value outside [0, classes), which
// the front-end's index check reports at the next synchronization (src/dispatch/loss.h).
__device__ __forceinline__ bool ignored_target(int64_t t, int64_t ignore_index, int64_t classes) {
  return t == ignore_index || t < 0 || t >= classes;
}

// ---- cross_entropy forward ----------------------------------------------------------------------

// The loss of one sample (x: its class-0 logit, classes `stride` apart) from the softmax statistics
// of its logits; writes the log-sum-exp and the loss (zero for an ignored target).
template <typename T, bool kSmooth>
__device__ __forceinline__ void finish_cross_entropy(double* sample_loss, opmath_t<T>* lse, int64_t sample,
                                                     const SoftmaxStats<T>& st, const T* x, int64_t stride,
                                                     const int64_t* target, const T* w, int64_t classes,
                                                     int64_t ignore_index, double smoothing) {
  using acc_t = opmath_t<T>;
  const double log_sum = st.log_sum();
  lse[sample] = static_cast<acc_t>(st.max + log_sum);
  const int64_t t = target[sample];
  if (ignored_target(t, ignore_index, classes)) {
    sample_loss[sample] = 0.0;
    return;
  }
  const double wt = class_weight(w, t);
  double loss = wt * ((st.max - static_cast<acc_t>(x[t * stride])) + log_sum);
  // sum_c w_c * (lse - x_c) = sum_c w_c * (max - x_c) + log_sum * sum_c w_c
  if constexpr (kSmooth)
    loss = (1.0 - smoothing) * loss +
           smoothing / static_cast<double>(classes) * (log_sum * static_cast<double>(st.weight) + st.dev);
  sample_loss[sample] = loss;
}

template <typename T, bool kSmooth>
__global__ void __launch_bounds__(kMaxRowBlock, kStreamBlocksPerSM)
    cross_entropy_rows_kernel(double* sample_loss, opmath_t<T>* lse, const T* x, const int64_t* target, const T* w,
                              int64_t rows, int64_t classes, int lanes, bool vectorized, int64_t ignore_index,
                              double smoothing) {
  using acc_t = opmath_t<T>;
  using Stats = SoftmaxStats<T>;
  constexpr int kVec = kVecOf<T>;
  constexpr int kInputs = kSmooth ? 2 : 1;  // the logits, and the class weights when smoothing
  constexpr int U = kStreamPieces<T, kInputs>;
  __shared__ Stats scratch[kMaxBlockWarps];
  for_each_row(rows, lanes, [&](int64_t row, int lane) {
    const int64_t len = row < 0 ? 0 : classes, off = row < 0 ? 0 : row * classes;
    Stats st = Stats::empty();
    stream_row<U>(x + off, len, lane, lanes, vectorized, neg_inf<T>(),
                  [&](acc_t(&v)[U][kVec], int64_t j, int64_t stride, bool full) {
                    st.template add<U * kVec>(&v[0][0]);
                    if constexpr (kSmooth) {
#pragma unroll
                      for (int u = 0; u < U; ++u) {
                        acc_t wv[kVec];
                        load_piece(w != nullptr ? w : x, j + u * stride, w != nullptr ? len : 0, vectorized, acc_t(1),
                                   wv);
#pragma unroll
                        for (int e = 0; e < kVec; ++e)
                          if (full || j + u * stride + e < len) st.add_weighted(v[u][e], wv[e]);
                      }
                    }
                  });
    st = row_reduce(st, lanes, scratch, MergeStats<T>{});
    if (row >= 0 && lane == 0)
      finish_cross_entropy<T, kSmooth>(sample_loss, lse, row, st, x + off, 1, target, w, classes, ignore_index,
                                       smoothing);
  });
}

template <typename T, bool kSmooth>
__global__ void cross_entropy_columns_kernel(double* sample_loss, opmath_t<T>* lse, const T* x, const int64_t* target,
                                             const T* w, int64_t n, int64_t classes, int64_t inner, int64_t tiles,
                                             int64_t ignore_index, double smoothing) {
  using acc_t = opmath_t<T>;
  using Stats = SoftmaxStats<T>;
  __shared__ Stats scratch[kColumnBlock];
  for_each_column(n, classes, inner, tiles, [&](int64_t sample, int64_t base, bool valid) {
    Stats st = Stats::empty();
    if (valid) {
      for (int64_t c = threadIdx.y; c < classes; c += blockDim.y) {
        const acc_t v = static_cast<acc_t>(x[base + c * inner]);
        st.template add<1>(&v);
        if constexpr (kSmooth) st.add_weighted(v, class_weight(w, c));
      }
    }
    st = block_reduce(st, blockDim.x, scratch, MergeStats<T>{});
    if (valid && threadIdx.y == 0)
      finish_cross_entropy<T, kSmooth>(sample_loss, lse, sample, st, x + base, inner, target, w, classes, ignore_index,
                                       smoothing);
  });
}

// ---- sample sums --------------------------------------------------------------------------------

// The loss and weight of a sample whose loss a cross_entropy kernel computed.
template <typename T>
struct StoredLoss {
  const double* sample_loss;
  const int64_t* target;
  const T* w;
  int64_t ignore_index;
  int64_t classes;
  __device__ LossSums operator()(int64_t i) const {
    const int64_t t = target[i];
    if (ignored_target(t, ignore_index, classes)) return {0.0, 0.0};
    return {sample_loss[i], static_cast<double>(class_weight(w, t))};
  }
};

// The loss and weight of a sample of nll_loss: -w[t] * log_probs[t].
template <typename T, typename index_t>
struct NllLoss {
  const T* x;
  const int64_t* target;
  const T* w;
  int64_t ignore_index;
  int64_t classes;
  Divider<index_t> by_inner;
  __device__ LossSums operator()(int64_t i) const {
    const int64_t t = target[i];
    if (ignored_target(t, ignore_index, classes)) return {0.0, 0.0};
    const double wt = class_weight(w, t);
    const index_t q = by_inner.div(static_cast<index_t>(i));
    const int64_t inner = by_inner.divisor();
    const int64_t at = static_cast<int64_t>(q) * classes * inner + (i - static_cast<int64_t>(q) * inner) + t * inner;
    return {-wt * static_cast<opmath_t<T>>(x[at]), wt};
  }
};

// Sums (loss, weight) over the samples, fixed blocks first; Reduction::None also writes each loss.
template <typename T, typename Loss>
__global__ void class_loss_partials_kernel(LossSums* partial, T* out_none, int64_t samples, Loss loss_of) {
  __shared__ LossSums scratch[kMaxBlockWarps];
  LossSums s{0.0, 0.0};
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < samples;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const LossSums l = loss_of(i);
    if (out_none != nullptr) out_none[i] = static_cast<T>(l.a);
    s = s + l;
  }
  s = block_reduce(s, 1, scratch, SumOp{});
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// Combines the partial sums in order: total_weight, and the mean or sum into out.
template <typename T>
__global__ void class_loss_finish_kernel(T* out, opmath_t<T>* total_weight, const LossSums* partial, int blocks,
                                         Reduction reduction) {
  __shared__ LossSums scratch[kMaxBlockWarps];
  LossSums s{0.0, 0.0};
  if (static_cast<int>(threadIdx.x) < blocks) s = partial[threadIdx.x];
  s = block_reduce(s, 1, scratch, SumOp{});
  if (threadIdx.x != 0) return;
  *total_weight = static_cast<opmath_t<T>>(s.b);
  if (reduction == Reduction::Mean) *out = static_cast<T>(s.a / s.b);
  if (reduction == Reduction::Sum) *out = static_cast<T>(s.a);
}

// out (T) and total_weight (opmath_t<T>) from the losses and weights of the samples.
template <typename T, typename Loss>
void reduce_class_loss(const Tensor& out, const Tensor& total_weight, int64_t samples, Reduction reduction,
                       const Loss& loss_of, cudaStream_t stream) {
  const int blocks = static_cast<int>(std::min<unsigned>(kLossBlocks, grid_stride_blocks(samples, kBlockSize)));
  const Tensor partial_t = rtx::detail::make_tensor({blocks, 2}, kFloat64, out.device());
  auto* partial = static_cast<LossSums*>(partial_t.data_ptr());
  class_loss_partials_kernel<T, Loss><<<blocks, kBlockSize, 0, stream>>>(
      partial, reduction == Reduction::None ? out.data_ptr<T>() : nullptr, samples, loss_of);
  RTX_CUDA_CHECK_LAUNCH();
  class_loss_finish_kernel<T><<<1, kLossBlocks, 0, stream>>>(out.data_ptr<T>(), total_weight.data_ptr<opmath_t<T>>(),
                                                             partial, blocks, reduction);
  RTX_CUDA_CHECK_LAUNCH();
}

template <typename T>
T* optional_ptr(const Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

template <typename T, bool kSmooth>
void cross_entropy_stats(double* sample_loss, opmath_t<T>* lse, const T* x, const int64_t* target, const T* w,
                         int64_t n, int64_t classes, int64_t inner, int64_t ignore_index, double smoothing,
                         const detail::KernelScope& scope) {
  if (inner > 1) {
    const ColumnLaunch l(n, inner);
    cross_entropy_columns_kernel<T, kSmooth><<<l.grid, l.block, 0, scope.stream()>>>(
        sample_loss, lse, x, target, w, n, classes, inner, l.tiles, ignore_index, smoothing);
  } else {
    // Lanes per row: the built-in stream_lanes first, then the tuner's other candidates.
    std::vector<int> lanes{stream_lanes<T>(classes)};
    for (int l : {32, 64, 128, 256, 512})
      if (std::find(lanes.begin(), lanes.end(), l) == lanes.end()) lanes.push_back(l);
    const bool vec = rows_vectorizable<T>(classes, x, w);
    const auto launch = [&](int lanes_per_row) {
      const RowLaunch l(n, lanes_per_row);
      cross_entropy_rows_kernel<T, kSmooth><<<l.grid, l.block, 0, scope.stream()>>>(
          sample_loss, lse, x, target, w, n, classes, l.lanes, vec, ignore_index, smoothing);
    };
    const char* kernel = kSmooth ? "cross_entropy_rows_smooth" : "cross_entropy_rows";
    const int choice = detail::tuned_row_choice(scope.device(), scope.stream(), kernel, dtype_of_v<T>, n, classes,
                                                static_cast<int>(lanes.size()), 0, [&](int c) {
                                                  launch(lanes[c]);
                                                  return true;
                                                });
    launch(lanes[choice]);
  }
  RTX_CUDA_CHECK_LAUNCH();
}

void cross_entropy_cuda(const Tensor& out, const Tensor& lse, const Tensor& total_weight, const Tensor& logits,
                        const Tensor& target, const Tensor& weight, int64_t ignore_index, Reduction reduction,
                        double smoothing) {
  detail::KernelScope scope(logits.device());
  const int64_t n = logits.size(0), classes = logits.size(1), inner = logits.size(2), samples = n * inner;
  const Tensor loss_t = rtx::detail::make_tensor({samples}, kFloat64, logits.device());
  double* sample_loss = loss_t.data_ptr<double>();
  RTX_DISPATCH_FLOATS(logits.dtype(), "cross_entropy", [&] {
    using T = scalar_t;
    const T* w = optional_ptr<T>(weight);
    const int64_t* t = target.data_ptr<int64_t>();
    if (samples > 0) {
      auto stats = smoothing > 0.0 ? cross_entropy_stats<T, true> : cross_entropy_stats<T, false>;
      stats(sample_loss, lse.data_ptr<opmath_t<T>>(), logits.data_ptr<T>(), t, w, n, classes, inner, ignore_index,
            smoothing, scope);
    }
    reduce_class_loss<opmath_t<T>>(out, total_weight, samples, reduction,
                                   StoredLoss<T>{sample_loss, t, w, ignore_index, classes}, scope.stream());
  });
}

void nll_loss_cuda(const Tensor& out, const Tensor& total_weight, const Tensor& log_probs, const Tensor& target,
                   const Tensor& weight, int64_t ignore_index, Reduction reduction) {
  detail::KernelScope scope(log_probs.device());
  const int64_t classes = log_probs.size(1), inner = log_probs.size(2), samples = log_probs.size(0) * inner;
  RTX_DISPATCH_FLOATS(log_probs.dtype(), "nll_loss", [&] {
    using T = scalar_t;
    with_index_type(std::max(samples, log_probs.numel()), [&](auto tag) {
      using index_t = decltype(tag);
      reduce_class_loss<T>(
          out, total_weight, samples, reduction,
          NllLoss<T, index_t>{log_probs.data_ptr<T>(), target.data_ptr<int64_t>(), optional_ptr<T>(weight),
                              ignore_index, classes, Divider<index_t>(std::max<int64_t>(inner, 1))},
          scope.stream());
    });
  });
}

// ---- backward -----------------------------------------------------------------------------------

// What the backward of a class-index loss needs for one sample.
template <typename T>
struct SampleGrad {
  using acc_t = opmath_t<T>;
  int64_t target;  // -1 when ignored
  acc_t weight;    // w[target], 0 when ignored
  acc_t scale;     // the upstream gradient, over the total weight for Reduction::Mean
};

// G: the upstream gradient's element type.
template <typename T, typename G>
__device__ __forceinline__ SampleGrad<T> sample_grad(int64_t i, const G* g, const int64_t* target, const T* w,
                                                     const opmath_t<T>* total_weight, int64_t ignore_index,
                                                     int64_t classes, Reduction reduction) {
  using acc_t = opmath_t<T>;
  const int64_t t = target[i];
  const bool ignored = ignored_target(t, ignore_index, classes);
  acc_t scale;
  if (reduction == Reduction::None)
    scale = static_cast<acc_t>(g[i]);
  else if (reduction == Reduction::Mean)
    scale = static_cast<acc_t>(g[0]) / *total_weight;
  else
    scale = static_cast<acc_t>(g[0]);
  return {ignored ? int64_t{-1} : t, ignored ? acc_t(0) : class_weight(w, t), scale};
}

// The label-smoothing constants of the cross_entropy backward: keep = 1 - smoothing, smooth =
// smoothing / classes, and the sum of the class weights (a device value when the weights are given).
template <typename T>
struct Smoothing {
  using acc_t = opmath_t<T>;
  acc_t keep, smooth, classes;
  const acc_t* weight_sum;
  __device__ acc_t wsum() const { return weight_sum != nullptr ? *weight_sum : classes; }
};

// grad of logit c of a sample: scale * (A * softmax_c - B_c), A = sum_c B_c,
// B_c = keep * w_t * [c == t] + smooth * w_c; zero for an ignored sample.
template <typename T>
__device__ __forceinline__ opmath_t<T> cross_entropy_grad(const SampleGrad<T>& s, const Smoothing<T>& sm,
                                                          opmath_t<T> wsum, opmath_t<T> lse, bool is_target,
                                                          opmath_t<T> x, opmath_t<T> wc) {
  using acc_t = opmath_t<T>;
  if (s.target < 0) return acc_t(0);
  const acc_t a = sm.keep * s.weight + sm.smooth * wsum;
  const acc_t b = (is_target ? sm.keep * s.weight : acc_t(0)) + sm.smooth * wc;
  return s.scale * (a * exp_of<T>(x - lse) - b);
}

// The backward over rows of a whole number of aligned 128-bit pieces: one piece per thread, every
// piece inside one sample's row (the layout of a pointwise op, so it streams like one).
// kClassWeights: label smoothing reads the class weights.
template <typename index_t, typename T, bool kClassWeights>
__global__ void cross_entropy_backward_vector_kernel(T* gx, const opmath_t<T>* g, const T* x, const opmath_t<T>* lse,
                                                     const int64_t* target, const T* w,
                                                     const opmath_t<T>* total_weight, index_t pieces,
                                                     Divider<index_t> pieces_per_row, int64_t ignore_index,
                                                     Reduction reduction, Smoothing<T> sm) {
  using acc_t = opmath_t<T>;
  constexpr int kVec = kVecOf<T>;
  const index_t p = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= pieces) return;
  const index_t row = pieces_per_row.div(p);
  const int64_t c0 = static_cast<int64_t>(p - row * pieces_per_row.divisor()) * kVec;
  const int64_t first = static_cast<int64_t>(p) * kVec;
  acc_t xv[kVec], wv[kVec], o[kVec];
  load_piece(x, first, first + kVec, true, acc_t(0), xv);
  if constexpr (kClassWeights) load_piece(w, c0, c0 + kVec, true, acc_t(1), wv);
  const int64_t classes = static_cast<int64_t>(pieces_per_row.divisor()) * kVec;  // rows are whole samples
  const SampleGrad<T> s =
      sample_grad(static_cast<int64_t>(row), g, target, w, total_weight, ignore_index, classes, reduction);
  const acc_t l = lse[row], wsum = sm.wsum();
#pragma unroll
  for (int e = 0; e < kVec; ++e)
    o[e] = cross_entropy_grad<T>(s, sm, wsum, l, c0 + e == s.target, xv[e], kClassWeights ? wv[e] : acc_t(1));
  store_piece(gx, first, first + kVec, true, o);
}

// The backward over [n, classes, inner] in any other case, one element per thread step.
template <typename index_t, typename T>
__global__ void cross_entropy_backward_flat_kernel(T* gx, const opmath_t<T>* g, const T* x, const opmath_t<T>* lse,
                                                   const int64_t* target, const T* w, const opmath_t<T>* total_weight,
                                                   index_t numel, Divider<index_t> by_inner,
                                                   Divider<index_t> by_classes, int64_t ignore_index,
                                                   Reduction reduction, Smoothing<T> sm) {
  const opmath_t<T> wsum = sm.wsum();
  for (index_t e = blockIdx.x * blockDim.x + threadIdx.x; e < numel; e += gridDim.x * blockDim.x) {
    const index_t q = by_inner.div(e), b = by_classes.div(q);  // q = b * classes + c
    const index_t c = q - b * by_classes.divisor();
    const int64_t sample = static_cast<int64_t>(b) * by_inner.divisor() + (e - q * by_inner.divisor());
    const SampleGrad<T> s =
        sample_grad(sample, g, target, w, total_weight, ignore_index, static_cast<int64_t>(by_classes.divisor()),
                    reduction);
    gx[e] = static_cast<T>(cross_entropy_grad<T>(s, sm, wsum, lse[sample], c == s.target,
                                                 static_cast<opmath_t<T>>(x[e]), class_weight(w, c)));
  }
}

template <typename T>
__global__ void weight_sum_kernel(opmath_t<T>* out, const T* w, int64_t classes) {
  __shared__ double scratch[kMaxBlockWarps];
  double s = 0;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) s += static_cast<double>(class_weight(w, c));
  s = block_reduce(s, 1, scratch, SumOp{});
  if (threadIdx.x == 0) *out = static_cast<opmath_t<T>>(s);
}

void cross_entropy_backward_cuda(const Tensor& grad_logits, const Tensor& g, const Tensor& logits, const Tensor& lse,
                                 const Tensor& target, const Tensor& weight, const Tensor& total_weight,
                                 int64_t ignore_index, Reduction reduction, double smoothing) {
  if (grad_logits.numel() == 0) return;
  detail::KernelScope scope(logits.device());
  const int64_t n = logits.size(0), classes = logits.size(1), inner = logits.size(2);
  RTX_DISPATCH_FLOATS(logits.dtype(), "cross_entropy_backward", [&] {
    using T = scalar_t;
    using acc_t = opmath_t<T>;
    const T* w = optional_ptr<T>(weight);
    Tensor wsum_t;
    if (w != nullptr && smoothing > 0.0) {
      wsum_t = rtx::detail::make_tensor({}, lse.dtype(), logits.device());
      weight_sum_kernel<T><<<1, kBlockSize, 0, scope.stream()>>>(wsum_t.data_ptr<acc_t>(), w, classes);
      RTX_CUDA_CHECK_LAUNCH();
    }
    const Smoothing<T> sm{static_cast<acc_t>(1.0 - smoothing), static_cast<acc_t>(smoothing / classes),
                          static_cast<acc_t>(classes), wsum_t.defined() ? wsum_t.data_ptr<acc_t>() : nullptr};
    T* gx = grad_logits.data_ptr<T>();
    const acc_t* gp = g.data_ptr<acc_t>();
    const T* xp = logits.data_ptr<T>();
    const acc_t* lp = lse.data_ptr<acc_t>();
    const int64_t* t = target.data_ptr<int64_t>();
    const acc_t* tw = total_weight.data_ptr<acc_t>();
    const int64_t numel = grad_logits.numel();
    if (inner == 1 && rows_vectorizable<T>(classes, gx, xp, w)) {
      const int64_t pieces = numel / kVecOf<T>;
      with_index_type(pieces, [&](auto tag) {
        using index_t = decltype(tag);
        auto kernel = wsum_t.defined() ? cross_entropy_backward_vector_kernel<index_t, T, true>
                                       : cross_entropy_backward_vector_kernel<index_t, T, false>;
        kernel<<<static_cast<unsigned>(ceil_div(pieces, kBlockSize)), kBlockSize, 0, scope.stream()>>>(
            gx, gp, xp, lp, t, w, tw, static_cast<index_t>(pieces), Divider<index_t>(classes / kVecOf<T>),
            ignore_index, reduction, sm);
      });
    } else {
      with_index_type(numel, [&](auto tag) {
        using index_t = decltype(tag);
        cross_entropy_backward_flat_kernel<index_t, T>
            <<<grid_stride_blocks(numel, kBlockSize), kBlockSize, 0, scope.stream()>>>(
                gx, gp, xp, lp, t, w, tw, static_cast<index_t>(numel), Divider<index_t>(inner),
                Divider<index_t>(classes), ignore_index, reduction, sm);
      });
    }
    RTX_CUDA_CHECK_LAUNCH();
  });
}

// grad[sample, target] = -w[target] * scale (the rest was zeroed).
template <typename index_t, typename T>
__global__ void nll_loss_backward_scatter_kernel(T* gx, const T* g, const int64_t* target, const T* w,
                                                 const opmath_t<T>* total_weight, index_t samples, int64_t classes,
                                                 Divider<index_t> by_inner, int64_t ignore_index, Reduction reduction) {
  for (index_t i = blockIdx.x * blockDim.x + threadIdx.x; i < samples; i += gridDim.x * blockDim.x) {
    const SampleGrad<T> s =
        sample_grad(static_cast<int64_t>(i), g, target, w, total_weight, ignore_index, classes, reduction);
    if (s.target < 0) continue;
    const index_t q = by_inner.div(i);
    const int64_t inner = by_inner.divisor();
    gx[static_cast<int64_t>(q) * classes * inner + (i - q * by_inner.divisor()) + s.target * inner] =
        static_cast<T>(-s.weight * s.scale);
  }
}

void nll_loss_backward_cuda(const Tensor& grad, const Tensor& g, const Tensor& target, const Tensor& weight,
                            const Tensor& total_weight, int64_t ignore_index, Reduction reduction) {
  detail::KernelScope scope(grad.device());
  RTX_CUDA_CHECK(cudaMemsetAsync(grad.data_ptr(), 0, grad.nbytes(), scope.stream()));
  const int64_t classes = grad.size(1), inner = grad.size(2), samples = grad.size(0) * inner;
  if (samples == 0) return;
  RTX_DISPATCH_FLOATS(grad.dtype(), "nll_loss_backward", [&] {
    using T = scalar_t;
    with_index_type(grad.numel(), [&](auto tag) {
      using index_t = decltype(tag);
      nll_loss_backward_scatter_kernel<index_t, T>
          <<<grid_stride_blocks(samples, kBlockSize), kBlockSize, 0, scope.stream()>>>(
              grad.data_ptr<T>(), g.data_ptr<T>(), target.data_ptr<int64_t>(), optional_ptr<T>(weight),
              total_weight.data_ptr<opmath_t<T>>(), static_cast<index_t>(samples), classes, Divider<index_t>(inner),
              ignore_index, reduction);
    });
    RTX_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace

RTX_REGISTER_KERNELS(loss_cuda) { RTX_LOSS_KERNELS(RTX_SET_CUDA_KERNEL) }

}  // namespace rtx::cuda
