// CPU kernels of the loss family: cross-entropy (fused over the softmax) and nll_loss, forward and
// backward. Elementwise math runs in the opmath type (float for 16-bit floats), its loops also built
// for AVX2 and AVX-512 (vector_isa.h); sums over samples accumulate in double in fixed blocks
// combined in order, so results never depend on the thread count.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/cpu/nn_rows.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/vector_isa.h"
#include "core/dtype_dispatch.h"
#include "dispatch/loss.h"

namespace rtx::cpu {
namespace {

using namespace rows;
using detail::opmath_t;

// ---- class-index losses -------------------------------------------------------------------------

// The [n, classes, inner] / [n, inner] geometry of a class-index loss.
struct ClassGeometry {
  int64_t n, classes, inner;
  explicit ClassGeometry(const Tensor& input3) : n(input3.size(0)), classes(input3.size(1)), inner(input3.size(2)) {}
  int64_t samples() const { return n * inner; }
  // Offset of (sample, class 0) in [n, classes, inner]; classes are inner apart.
  int64_t row(int64_t sample) const { return (sample / inner) * classes * inner + sample % inner; }
};

// Runs loss_of(sample, target, weight) -> loss for every sample whose target is not ignored, writes
// per-sample losses (Reduction::None) or their sum or weighted mean to out, and the total weight.
// Out: out's element type.
template <typename T, typename Out, typename F>
void class_loss_forward(const Tensor& out, const Tensor& total_weight, const ClassGeometry& geo, const Tensor& target,
                        const Tensor& weight, int64_t ignore_index, Reduction reduction, const F& loss_of) {
  using acc_t = opmath_t<T>;
  const int64_t* t = target.data_ptr<int64_t>();
  const T* w = optional_data<T>(weight);
  Out* o = out.data_ptr<Out>();
  const bool none = reduction == Reduction::None;
  using Sums = std::array<double, 2>;  // loss, weight
  const Sums sums = blocked_reduce(
      geo.samples(), grain_for(geo.classes), Sums{0, 0},
      [&](int64_t begin, int64_t end) {
        Sums part{0, 0};
        with_vector_isa([&] {
          for (int64_t i = begin; i < end; ++i) {
            double loss = 0;
            if (t[i] != ignore_index) {
              const double wt = w ? static_cast<double>(static_cast<acc_t>(w[t[i]])) : 1.0;
              loss = loss_of(i, t[i], wt);
              part[0] += loss;
              part[1] += wt;
            }
            if (none) o[i] = static_cast<Out>(loss);
          }
        });
        return part;
      },
      [](Sums a, Sums b) {
        return Sums{a[0] + b[0], a[1] + b[1]};
      });
  *total_weight.data_ptr<acc_t>() = static_cast<acc_t>(sums[1]);
  if (reduction == Reduction::Mean) *o = static_cast<Out>(sums[0] / sums[1]);
  if (reduction == Reduction::Sum) *o = static_cast<Out>(sums[0]);
}

// Runs grad_of(sample, target, weight, scale) for every sample, scale being what the sample's loss
// is multiplied by (the upstream gradient, over the total weight for Reduction::Mean) and weight
// zero for ignored targets. G: g's element type.
template <typename T, typename G, typename F>
void class_loss_backward(const Tensor& g, const Tensor& total_weight, const ClassGeometry& geo, const Tensor& target,
                         const Tensor& weight, int64_t ignore_index, Reduction reduction, const F& grad_of) {
  using acc_t = opmath_t<T>;
  const int64_t* t = target.data_ptr<int64_t>();
  const T* w = optional_data<T>(weight);
  const G* gp = g.data_ptr<G>();
  const acc_t total = *total_weight.data_ptr<acc_t>();
  const acc_t reduced_scale = reduction == Reduction::Mean ? static_cast<acc_t>(*gp) / total : static_cast<acc_t>(*gp);
  parallel_for(geo.samples(), grain_for(geo.classes), [&](int64_t begin, int64_t end) {
    with_vector_isa([&] {
      for (int64_t i = begin; i < end; ++i) {
        const bool ignored = t[i] == ignore_index;
        const acc_t wt = ignored ? acc_t(0) : w ? static_cast<acc_t>(w[t[i]]) : acc_t(1);
        const acc_t scale = reduction == Reduction::None ? static_cast<acc_t>(gp[i]) : reduced_scale;
        grad_of(i, ignored ? int64_t{-1} : t[i], wt, scale);
      }
    });
  });
}

// Sum of the class weights (the number of classes without weights).
template <typename T>
double weight_sum(const T* w, int64_t classes) {
  double s = 0;
  for (int64_t c = 0; c < classes; ++c) s += w ? static_cast<double>(static_cast<opmath_t<T>>(w[c])) : 1.0;
  return s;
}

template <typename T>
void cross_entropy_impl(const Tensor& out, const Tensor& lse, const Tensor& total_weight, const Tensor& logits,
                        const Tensor& target, const Tensor& weight, int64_t ignore_index, Reduction reduction,
                        double smoothing) {
  using acc_t = opmath_t<T>;
  const ClassGeometry geo(logits);
  const T* x = logits.data_ptr<T>();
  const T* w = optional_data<T>(weight);
  acc_t* lp = lse.data_ptr<acc_t>();
  const double smooth_scale = smoothing / static_cast<double>(geo.classes);
  const double wsum = weight_sum(w, geo.classes);
  with_stride(geo.inner, [&](auto s) {
    class_loss_forward<T, acc_t>(
        out, total_weight, geo, target, weight, ignore_index, reduction, [&](int64_t i, int64_t t, double wt) {
          const T* row = x + geo.row(i);
          const MaxLogSum<T> ml = slice_max_logsum(row, geo.classes, s);
          const double l = static_cast<double>(ml.max) + ml.log_sum;
          lp[i] = static_cast<acc_t>(l);
          double loss = wt * ((ml.max - static_cast<acc_t>(row[t * s])) + ml.log_sum);
          if (smoothing > 0.0) {
            // sum_c w_c * (lse - x_c) = sum_c w_c * (max - x_c) + log_sum * sum_c w_c
            double smooth = ml.log_sum * wsum;
            for (int64_t c = 0; c < geo.classes; ++c)
              smooth += (w ? static_cast<acc_t>(w[c]) : acc_t(1)) * (ml.max - static_cast<acc_t>(row[c * s]));
            loss = (1.0 - smoothing) * loss + smooth_scale * smooth;
          }
          return loss;
        });
  });
}

template <typename T>
void cross_entropy_backward_impl(const Tensor& grad_logits, const Tensor& g, const Tensor& logits, const Tensor& lse,
                                 const Tensor& target, const Tensor& weight, const Tensor& total_weight,
                                 int64_t ignore_index, Reduction reduction, double smoothing) {
  using acc_t = opmath_t<T>;
  const ClassGeometry geo(logits);
  const T* x = logits.data_ptr<T>();
  T* gx = grad_logits.data_ptr<T>();
  const T* w = optional_data<T>(weight);
  const acc_t* lp = lse.data_ptr<acc_t>();
  const acc_t smooth_scale = static_cast<acc_t>(smoothing / static_cast<double>(geo.classes));
  const acc_t keep = static_cast<acc_t>(1.0 - smoothing);
  const acc_t wsum = static_cast<acc_t>(weight_sum(w, geo.classes));
  with_stride(geo.inner, [&](auto s) {
    const auto grad_of = [&](int64_t i, int64_t t, acc_t wt, acc_t scale) {
      T* grow = gx + geo.row(i);
      if (t < 0) {
        for (int64_t c = 0; c < geo.classes; ++c) grow[c * s] = T(0);
        return;
      }
      // scale * (A * softmax - B): A = sum_c B_c, B = keep * w_t * onehot + smooth * w
      const T* row = x + geo.row(i);
      // One loop with class weights and one without, its scalars copied into locals (the stores to
      // grow could alias the captured ones), so that nothing is loaded conditionally and both
      // vectorize.
      const auto write = [&](const auto& weight_of) {
        const acc_t on_target = keep * wt, a = on_target + smooth_scale * wsum, smooth = smooth_scale, sc = scale,
                    l = lp[i];
        for (int64_t c = 0; c < geo.classes; ++c) {
          const acc_t b = (c == t ? on_target : acc_t(0)) + smooth * weight_of(c);
          grow[c * s] = static_cast<T>(sc * (a * fn::exp_of(static_cast<acc_t>(row[c * s]) - l) - b));
        }
      };
      if (w)
        write([&](int64_t c) { return static_cast<acc_t>(w[c]); });
      else
        write([](int64_t) { return acc_t(1); });
    };
    class_loss_backward<T, acc_t>(g, total_weight, geo, target, weight, ignore_index, reduction, grad_of);
  });
}

template <typename T>
void nll_loss_impl(const Tensor& out, const Tensor& total_weight, const Tensor& log_probs, const Tensor& target,
                   const Tensor& weight, int64_t ignore_index, Reduction reduction) {
  const ClassGeometry geo(log_probs);
  const T* x = log_probs.data_ptr<T>();
  class_loss_forward<T, T>(
      out, total_weight, geo, target, weight, ignore_index, reduction,
      [&](int64_t i, int64_t t, double wt) { return -wt * static_cast<opmath_t<T>>(x[geo.row(i) + t * geo.inner]); });
}

template <typename T>
void nll_loss_backward_impl(const Tensor& grad, const Tensor& g, const Tensor& target, const Tensor& weight,
                            const Tensor& total_weight, int64_t ignore_index, Reduction reduction) {
  using acc_t = opmath_t<T>;
  const ClassGeometry geo(grad);
  T* gx = grad.data_ptr<T>();
  parallel_for(grad.numel(), kGrainSize, [&](int64_t begin, int64_t end) { std::fill(gx + begin, gx + end, T(0)); });
  class_loss_backward<T, T>(g, total_weight, geo, target, weight, ignore_index, reduction,
                            [&](int64_t i, int64_t t, acc_t wt, acc_t scale) {
                              if (t >= 0) gx[geo.row(i) + t * geo.inner] = static_cast<T>(-wt * scale);
                            });
}

void cross_entropy_cpu(const Tensor& out, const Tensor& lse, const Tensor& total_weight, const Tensor& logits,
                       const Tensor& target, const Tensor& weight, int64_t ignore_index, Reduction reduction,
                       double smoothing) {
  RTX_DISPATCH_FLOATS(logits.dtype(), "cross_entropy", [&] {
    cross_entropy_impl<scalar_t>(out, lse, total_weight, logits, target, weight, ignore_index, reduction, smoothing);
  });
}

void cross_entropy_backward_cpu(const Tensor& grad_logits, const Tensor& g, const Tensor& logits, const Tensor& lse,
                                const Tensor& target, const Tensor& weight, const Tensor& total_weight,
                                int64_t ignore_index, Reduction reduction, double smoothing) {
  RTX_DISPATCH_FLOATS(logits.dtype(), "cross_entropy_backward", [&] {
    cross_entropy_backward_impl<scalar_t>(grad_logits, g, logits, lse, target, weight, total_weight, ignore_index,
                                          reduction, smoothing);
  });
}

void nll_loss_cpu(const Tensor& out, const Tensor& total_weight, const Tensor& log_probs, const Tensor& target,
                  const Tensor& weight, int64_t ignore_index, Reduction reduction) {
  RTX_DISPATCH_FLOATS(log_probs.dtype(), "nll_loss", [&] {
    nll_loss_impl<scalar_t>(out, total_weight, log_probs, target, weight, ignore_index, reduction);
  });
}

void nll_loss_backward_cpu(const Tensor& grad, const Tensor& g, const Tensor& target, const Tensor& weight,
                           const Tensor& total_weight, int64_t ignore_index, Reduction reduction) {
  RTX_DISPATCH_FLOATS(grad.dtype(), "nll_loss_backward", [&] {
    nll_loss_backward_impl<scalar_t>(grad, g, target, weight, total_weight, ignore_index, reduction);
  });
}

}  // namespace

RTX_REGISTER_KERNELS(loss_cpu) { RTX_LOSS_KERNELS(RTX_SET_CPU_KERNEL) }

}  // namespace rtx::cpu
