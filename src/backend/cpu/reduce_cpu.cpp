// CPU kernels of the reduction family. One launcher, reduce(out, x, op), serves every reduction; op is
// an accumulator policy (init / combine / merge / write). The launcher orders the input's dims by
// memory stride, merges dims that are contiguous with each other, and then either
//  - when x's innermost dim is reduced: reduces runs along it with several independent accumulators,
//    one output at a time, in parallel over the outputs (or, when the outputs are few, over parts of
//    the reduced range with per-task partials merged afterwards), or
//  - when x's innermost dim is kept: accumulates whole rows into a tile of outputs (a contiguous,
//    vectorizable loop), in parallel over the tiles (or over parts of the reduced range).
// Any other layout is the same two loops with strides. The policies (and the accumulation types) are
// kernels/common/reduce_ops.h's, shared with the CUDA kernels. Float sums over kept rows (bias
// gradients) are also built for AVX2 and AVX-512 (vector_isa.h). The cumsum scan is at the end.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "backend/cpu/parallel.h"
#include "backend/cpu/vector_isa.h"
#include "core/dtype_dispatch.h"
#include "kernels/common/reduce_ops.h"
#include "dispatch/reduce.h"

namespace rtx::cpu {
namespace {

// Outputs per tile when the innermost dim is kept (their accumulators stay in L1).
constexpr int64_t kTile = 512;
// Independent accumulators along a reduced run (hides the latency of each combine).
constexpr int64_t kLanes = 8;

template <typename T>
T* data_of(const Tensor& t) {
  return static_cast<T*>(t.data_ptr());
}

using namespace reduce_ops;

// ---- geometry -------------------------------------------------------------------------------------

// One (possibly merged) dim: its size and its strides in elements of x and of out.
struct Dim {
  int64_t size;
  int64_t xs;
  int64_t os;
};

int64_t count(const std::vector<Dim>& dims) {
  int64_t n = 1;
  for (const Dim& d : dims) n *= d.size;
  return n;
}

struct Plan {
  std::vector<Dim> kept;         // outer to inner in x's memory order
  std::vector<Dim> reduced;      // outer to inner in x's memory order
  bool inner_reduced = false;    // x's innermost dim is a reduced one
};

// Drops size-1 dims, orders the rest by x's strides (outermost first) and merges neighbours of the
// same kind that are contiguous with each other (in x, and in out for kept dims).
Plan make_plan(const Tensor& out, const Tensor& x) {
  struct Item {
    Dim dim;
    bool reduced;
  };
  std::vector<Item> items;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (x.size(d) != 1) items.push_back({{x.size(d), x.stride(d), out.stride(d)}, out.size(d) == 1});
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.dim.xs > b.dim.xs; });
  std::vector<Item> merged;
  for (const Item& it : items) {
    if (!merged.empty()) {
      Dim& last = merged.back().dim;
      const bool same_kind = merged.back().reduced == it.reduced;
      if (same_kind && last.xs == it.dim.xs * it.dim.size && (it.reduced || last.os == it.dim.os * it.dim.size)) {
        last = {last.size * it.dim.size, it.dim.xs, it.dim.os};
        continue;
      }
    }
    merged.push_back(it);
  }
  Plan plan;
  for (const Item& it : merged) (it.reduced ? plan.reduced : plan.kept).push_back(it.dim);
  plan.inner_reduced = !merged.empty() && merged.back().reduced;
  if (merged.empty()) {  // a single element
    plan.reduced.push_back({1, 0, 0});
    plan.inner_reduced = true;
  }
  return plan;
}

// Row-major walk over dims, tracking the offsets into x and out.
class Walker {
 public:
  explicit Walker(std::vector<Dim> dims) : dims_(std::move(dims)), idx_(dims_.size(), 0) {}
  void seek(int64_t flat) {
    x_ = o_ = 0;
    for (size_t d = dims_.size(); d-- > 0;) {
      idx_[d] = flat % dims_[d].size;
      flat /= dims_[d].size;
      x_ += idx_[d] * dims_[d].xs;
      o_ += idx_[d] * dims_[d].os;
    }
  }
  void next() {
    for (size_t d = dims_.size(); d-- > 0;) {
      const Dim& dm = dims_[d];
      x_ += dm.xs;
      o_ += dm.os;
      if (++idx_[d] < dm.size) return;
      x_ -= dm.xs * dm.size;
      o_ -= dm.os * dm.size;
      idx_[d] = 0;
    }
  }
  int64_t x() const { return x_; }
  int64_t out() const { return o_; }

 private:
  std::vector<Dim> dims_;
  std::vector<int64_t> idx_;
  int64_t x_ = 0, o_ = 0;
};

// How many parts to cut each task's reduced range into: enough for every thread to have work when
// the tasks are fewer than the threads, but never parts below the grain size.
int64_t split_count(int64_t tasks, int64_t num_red, int64_t elems_per_step) {
  const int64_t threads = omp_get_max_threads();
  if (threads == 1 || tasks >= threads || omp_in_parallel()) return 1;
  const int64_t by_work = num_red * elems_per_step / kGrainSize;
  return std::max<int64_t>(1, std::min<int64_t>({(threads + tasks - 1) / tasks, by_work, num_red}));
}

// ---- the launcher ---------------------------------------------------------------------------------

// Combines n elements load(0..n-1) (reduction indices index0...) into acc.
template <typename Op, typename Load>
typename Op::acc_t accumulate_run(const Op& op, typename Op::acc_t acc, int64_t n, int64_t index0, const Load& load) {
  int64_t i = 0;
  if (n >= 2 * kLanes) {
    typename Op::acc_t lane[kLanes];
    for (auto& l : lane) l = op.init();
    for (; i + kLanes <= n; i += kLanes)
      for (int64_t j = 0; j < kLanes; ++j) lane[j] = op.combine(lane[j], load(i + j), index0 + i + j);
    for (const auto& l : lane) acc = op.merge(acc, l);
  }
  for (; i < n; ++i) acc = op.combine(acc, load(i), index0 + i);
  return acc;
}

template <typename Op>
typename Op::acc_t reduce_run(const Op& op, typename Op::acc_t acc, const typename Op::in_t* p, int64_t stride,
                              int64_t n, int64_t index0) {
  using V = value_t<typename Op::in_t>;
  if (stride == 1) return accumulate_run(op, acc, n, index0, [p](int64_t i) { return static_cast<V>(p[i]); });
  return accumulate_run(op, acc, n, index0, [p, stride](int64_t i) { return static_cast<V>(p[i * stride]); });
}

// Reduces positions [begin, end) of the reduced index space at base; outer walks the reduced dims but
// the innermost one, which is inner.
template <typename Op>
typename Op::acc_t reduce_range(const Op& op, const typename Op::in_t* base, Walker& outer, const Dim& inner,
                                int64_t begin, int64_t end) {
  typename Op::acc_t acc = op.init();
  outer.seek(begin / inner.size);
  int64_t j = begin % inner.size;
  for (int64_t i = begin; i < end; outer.next()) {
    const int64_t run = std::min(inner.size - j, end - i);
    acc = reduce_run(op, acc, base + outer.x() + j * inner.xs, inner.xs, run, i);
    i += run;
    j = 0;
  }
  return acc;
}

// x's innermost dim is reduced: one output at a time.
template <typename Op>
void reduce_inner(const Op& op, const typename Op::in_t* x, const Plan& plan) {
  using acc_t = typename Op::acc_t;
  const std::vector<Dim> outer_red(plan.reduced.begin(), plan.reduced.end() - 1);
  const Dim inner = plan.reduced.back();
  const int64_t num_out = count(plan.kept), num_red = count(plan.reduced);
  const int64_t splits = split_count(num_out, num_red, 1);
  if (splits == 1) {
    parallel_for(num_out, std::max<int64_t>(1, kGrainSize / num_red), [&](int64_t b, int64_t e) {
      Walker outs(plan.kept), red(outer_red);
      outs.seek(b);
      for (int64_t o = b; o < e; ++o, outs.next()) op.write(outs.out(), reduce_range(op, x + outs.x(), red, inner, 0, num_red));
    });
    return;
  }
  const auto partial = std::make_unique<acc_t[]>(num_out * splits);
  parallel_for(num_out * splits, 1, [&](int64_t b, int64_t e) {
    Walker outs(plan.kept), red(outer_red);
    for (int64_t t = b; t < e; ++t) {
      const int64_t o = t / splits, s = t % splits;
      outs.seek(o);
      partial[t] = reduce_range(op, x + outs.x(), red, inner, num_red * s / splits, num_red * (s + 1) / splits);
    }
  });
  Walker outs(plan.kept);
  outs.seek(0);
  for (int64_t o = 0; o < num_out; ++o, outs.next()) {
    acc_t acc = partial[o * splits];
    for (int64_t s = 1; s < splits; ++s) acc = op.merge(acc, partial[o * splits + s]);
    op.write(outs.out(), acc);
  }
}

// Reductions whose row loop in reduce_outer is also built for wider vector ISAs: float sums.
template <typename Op>
inline constexpr bool kWideRowLoop = false;
template <typename Out, bool kMean>
inline constexpr bool kWideRowLoop<SumOp<float, Out, kMean>> = true;

// f() built for vector_isa() where the op's row loop pays for it, else for the baseline.
template <typename Op, typename F>
void with_row_loop_isa(const F& f) {
  if constexpr (kWideRowLoop<Op>) with_vector_isa(f);
  else f();
}

// x's innermost dim (vec) is kept: rows of the reduced space accumulate into tiles of outputs.
template <typename Op>
void reduce_outer(const Op& op, const typename Op::in_t* x, const Plan& plan) {
  using acc_t = typename Op::acc_t;
  using V = value_t<typename Op::in_t>;
  const Dim vec = plan.kept.back();
  const std::vector<Dim> outer_kept(plan.kept.begin(), plan.kept.end() - 1);
  const int64_t num_red = count(plan.reduced);
  const int64_t tiles = (vec.size + kTile - 1) / kTile;
  const int64_t tasks = count(outer_kept) * tiles;
  const int64_t tile_len = std::min(vec.size, kTile);
  // Accumulates reduced positions [rb, re) of task into acc; returns the out offset of its first output.
  auto run_task = [&](int64_t task, int64_t rb, int64_t re, acc_t* acc, Walker& outs, Walker& red) {
    const int64_t v0 = task % tiles * kTile, n = std::min(kTile, vec.size - v0);
    outs.seek(task / tiles);
    const typename Op::in_t* base = x + outs.x() + v0 * vec.xs;
    for (int64_t v = 0; v < n; ++v) acc[v] = op.init();
    red.seek(rb);
    acc_t* __restrict a = acc;  // never aliases x: lets the row loop vectorize without overlap checks
    for (int64_t r = rb; r < re; ++r, red.next()) {
      const typename Op::in_t* __restrict row = base + red.x();
      if (vec.xs == 1) {
        for (int64_t v = 0; v < n; ++v) a[v] = op.combine(a[v], static_cast<V>(row[v]), r);
      } else {
        for (int64_t v = 0; v < n; ++v) a[v] = op.combine(a[v], static_cast<V>(row[v * vec.xs]), r);
      }
    }
    return outs.out() + v0 * vec.os;
  };
  auto tile_size = [&](int64_t task) { return std::min(kTile, vec.size - task % tiles * kTile); };
  const int64_t splits = split_count(tasks, num_red, tile_len);
  if (splits == 1) {
    parallel_for(tasks, std::max<int64_t>(1, kGrainSize / (num_red * tile_len)), [&](int64_t b, int64_t e) {
      const auto acc = std::make_unique<acc_t[]>(tile_len);
      Walker outs(outer_kept), red(plan.reduced);
      with_row_loop_isa<Op>([&] {
        for (int64_t t = b; t < e; ++t) {
          const int64_t o = run_task(t, 0, num_red, acc.get(), outs, red);
          for (int64_t v = 0, n = tile_size(t); v < n; ++v) op.write(o + v * vec.os, acc[v]);
        }
      });
    });
    return;
  }
  const auto partial = std::make_unique<acc_t[]>(tasks * splits * tile_len);
  parallel_for(tasks * splits, 1, [&](int64_t b, int64_t e) {
    Walker outs(outer_kept), red(plan.reduced);
    with_row_loop_isa<Op>([&] {
      for (int64_t t = b; t < e; ++t) {
        const int64_t task = t / splits, s = t % splits;
        run_task(task, num_red * s / splits, num_red * (s + 1) / splits, &partial[t * tile_len], outs, red);
      }
    });
  });
  Walker outs(outer_kept);
  for (int64_t task = 0; task < tasks; ++task) {
    const int64_t v0 = task % tiles * kTile;
    outs.seek(task / tiles);
    const acc_t* first = &partial[task * splits * tile_len];
    for (int64_t v = 0, n = tile_size(task); v < n; ++v) {
      acc_t acc = first[v];
      for (int64_t s = 1; s < splits; ++s) acc = op.merge(acc, first[s * tile_len + v]);
      op.write(outs.out() + (v0 + v) * vec.os, acc);
    }
  }
}

// out = op's reduction of x over the dims where out has size 1 (out has x's rank).
template <typename Op>
void reduce(const Tensor& out, const Tensor& x, const Op& op) {
  const Plan plan = make_plan(out, x);
  const auto* data = data_of<const typename Op::in_t>(x);
  if (plan.inner_reduced) reduce_inner(op, data, plan);
  else reduce_outer(op, data, plan);
}

// ---- kernels --------------------------------------------------------------------------------------

void sum_cpu(const Tensor& out, const Tensor& x) {
  RTX_DISPATCH_ALL(x.dtype(), "sum", [&] { reduce(out, x, SumOp<scalar_t>{data_of<sum_out_t<scalar_t>>(out)}); });
}

void mean_cpu(const Tensor& out, const Tensor& x) {
  const int64_t count = out.numel() > 0 ? x.numel() / out.numel() : 1;
  RTX_DISPATCH_FLOATS(x.dtype(), "mean", [&] {
    using Op = SumOp<scalar_t, scalar_t, true>;
    reduce(out, x, Op{data_of<scalar_t>(out), static_cast<typename Op::acc_t>(count)});
  });
}

void prod_cpu(const Tensor& out, const Tensor& x) {
  RTX_DISPATCH_ALL(x.dtype(), "prod", [&] { reduce(out, x, ProdOp<scalar_t>{data_of<sum_out_t<scalar_t>>(out)}); });
}

void amax_cpu(const Tensor& out, const Tensor& x) {
  RTX_DISPATCH_ALL(x.dtype(), "amax", [&] { reduce(out, x, ExtremeOp<scalar_t, true>{data_of<scalar_t>(out)}); });
}

void amin_cpu(const Tensor& out, const Tensor& x) {
  RTX_DISPATCH_ALL(x.dtype(), "amin", [&] { reduce(out, x, ExtremeOp<scalar_t, false>{data_of<scalar_t>(out)}); });
}

void any_cpu(const Tensor& out, const Tensor& x) {
  RTX_DISPATCH_ALL(x.dtype(), "any", [&] { reduce(out, x, LogicalOp<scalar_t, false>{data_of<bool>(out)}); });
}

void all_cpu(const Tensor& out, const Tensor& x) {
  RTX_DISPATCH_ALL(x.dtype(), "all", [&] { reduce(out, x, LogicalOp<scalar_t, true>{data_of<bool>(out)}); });
}

void logsumexp_cpu(const Tensor& out, const Tensor& x) {
  RTX_DISPATCH_FLOATS(x.dtype(), "logsumexp", [&] { reduce(out, x, LogSumExpOp<scalar_t>{data_of<scalar_t>(out)}); });
}

void norm_cpu(const Tensor& out, const Tensor& x, double p) {
  RTX_DISPATCH_FLOATS(x.dtype(), "norm", [&] {
    with_norm_op(data_of<scalar_t>(out), p, [&](const auto& op) { reduce(out, x, op); });
  });
}

void var_cpu(const Tensor& out, const Tensor& x, int64_t correction, bool take_sqrt) {
  const int64_t count = out.numel() > 0 ? x.numel() / out.numel() : 0;
  RTX_DISPATCH_FLOATS(x.dtype(), "var", [&] {
    using Op = VarOp<scalar_t>;
    reduce(out, x, Op{data_of<scalar_t>(out), static_cast<typename Op::V>(variance_divisor(count, correction)), take_sqrt});
  });
}

void argmax_cpu(const Tensor& values, const Tensor& indices, const Tensor& x) {
  RTX_DISPATCH_ALL(x.dtype(), "argmax", [&] {
    reduce(values, x, ArgOp<scalar_t, true>{data_of<scalar_t>(values), data_of<int64_t>(indices)});
  });
}

void argmin_cpu(const Tensor& values, const Tensor& indices, const Tensor& x) {
  RTX_DISPATCH_ALL(x.dtype(), "argmin", [&] {
    reduce(values, x, ArgOp<scalar_t, false>{data_of<scalar_t>(values), data_of<int64_t>(indices)});
  });
}

// ---- cumsum -----------------------------------------------------------------------------------------

// Prefix sums of x viewed as [outer, len, inner] along len.
template <typename T>
void scan(const T* x, sum_out_t<T>* out, int64_t outer, int64_t len, int64_t inner) {
  using acc_t = sum_acc_t<T>;
  using Out = sum_out_t<T>;
  if (inner == 1) {
    parallel_for(outer, std::max<int64_t>(1, kGrainSize / len), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        acc_t acc = 0;
        for (int64_t i = o * len; i < (o + 1) * len; ++i) {
          acc = add(acc, static_cast<acc_t>(static_cast<value_t<T>>(x[i])));
          out[i] = static_cast<Out>(acc);
        }
      }
    });
    return;
  }
  // Rows along len accumulate into a tile of running sums.
  const int64_t tiles = (inner + kTile - 1) / kTile;
  parallel_for(outer * tiles, std::max<int64_t>(1, kGrainSize / (len * std::min(inner, kTile))), [&](int64_t b, int64_t e) {
    std::vector<acc_t> acc(std::min(inner, kTile));
    for (int64_t t = b; t < e; ++t) {
      const int64_t o = t / tiles, v0 = t % tiles * kTile, n = std::min(kTile, inner - v0);
      std::fill(acc.begin(), acc.begin() + n, acc_t(0));
      for (int64_t i = 0; i < len; ++i) {
        const int64_t row = (o * len + i) * inner + v0;
        for (int64_t v = 0; v < n; ++v) {
          acc[v] = add(acc[v], static_cast<acc_t>(static_cast<value_t<T>>(x[row + v])));
          out[row + v] = static_cast<Out>(acc[v]);
        }
      }
    }
  });
}

void cumsum_cpu(const Tensor& out, const Tensor& x, int64_t dim) {
  int64_t outer = 1, len = 1, inner = 1;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d < dim) outer *= x.size(d);
    else if (d == dim) len = x.size(d);
    else inner *= x.size(d);
  }
  RTX_DISPATCH_ALL(x.dtype(), "cumsum", [&] {
    scan<scalar_t>(data_of<const scalar_t>(x), data_of<sum_out_t<scalar_t>>(out), outer, len, inner);
  });
}

}  // namespace

RTX_REGISTER_KERNELS(reduce_cpu) { RTX_REDUCE_KERNELS(RTX_SET_CPU_KERNEL) }

}  // namespace rtx::cpu
