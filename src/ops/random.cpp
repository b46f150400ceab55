// Random ops: the default generator's seed and state, rand/randn/randint/randperm, the in-place
// uniform_/normal_, bernoulli and multinomial. Each op validates its arguments, reserves the Philox
// counters its values use from the thread's current generator (kernels/common/philox.h documents the
// mapping) and calls its kernel. Random ops are not differentiable.
#include <cmath>
#include <limits>

#include "autograd/function.h"
#include "core/dtype_dispatch.h"
#include "core/generator.h"
#include "kernels/common/philox.h"
#include "ops/internal.h"
#include "dispatch/random.h"

namespace rtx {

namespace {

using detail::check_defined;

// Calls table's kernel for out with the counters of n_values values at per_counter values each;
// nothing (and no counter taken) when there are no values.
template <typename Fn, typename... Args>
void launch(const detail::KernelTable<Fn>& table, const Tensor& out, int64_t n_values, int per_counter,
            const Args&... args) {
  if (n_values == 0) return;
  Fn* kernel = table.get(out.device());
  const detail::RandomCounters rng = detail::current_generator().reserve(philox::counters_for(n_values, per_counter));
  kernel(out, rng, args...);
}

// Mantissa digits of a floating dtype.
int float_digits(DType dtype) {
  int digits = 0;
  RTX_DISPATCH_FLOATS(dtype, "random", [&] { digits = philox::Digits<scalar_t>::value; });
  return digits;
}

void check_floating_dtype(const char* op, DType dtype, const char* hint) {
  RTX_CHECK(is_floating(dtype), DTypeError, "[{}] expected a floating dtype, but got {}{}", op, dtype, hint);
}

void fill_uniform(const Tensor& t, double from, double to) {
  launch(kernels::uniform_kernel, t, t.numel(), philox::float_per_counter(float_digits(t.dtype())), from, to);
}

void fill_normal(const Tensor& t, double mean, double std) {
  launch(kernels::normal_kernel, t, t.numel(), philox::float_per_counter(float_digits(t.dtype())), mean, std);
}

// A new tensor of shape filled by fill, with requires_grad from options (o: dtype and device set).
template <typename Fill>
Tensor create(const char* op, const Shape& shape, const TensorOptions& o, const Fill& fill) {
  detail::checked_numel(shape, op);
  Tensor t = detail::make_tensor(shape, *o.dtype, *o.device);
  fill(t);
  if (o.requires_grad) t.requires_grad_(true);
  return t;
}

// Overwrites self with fill(self). When self's history records grad, the new values start a branch
// whose gradient to the old values is zero (as PyTorch's uniform_/normal_).
template <typename Fill>
Tensor& fill_inplace(const char* op, Tensor& self, const Fill& fill) {
  return detail::write_inplace(
      op, self, {},
      [&] {
        Tensor result = detail::make_tensor(self.sizes(), self.dtype(), self.device());
        fill(result);
        auto node = autograd::make_node(op, self);
        node->set_backward([](const TensorList& g, const TensorList&) { return TensorList{zeros_like(g[0])}; });
        autograd::set_history(result, node);
        return result;
      },
      [&] { fill(self); });
}

// t's values as a contiguous float64 tensor on t's device, outside autograd.
Tensor contiguous_float64(const Tensor& t) { return detail::cast(t.detach(), kFloat64).contiguous(); }
// t itself when on the host, else a host copy (for validating values).
Tensor on_host(const Tensor& t) { return t.is_cpu() ? t : t.cpu(); }

// The consecutive integers a dtype holds exactly: [min, end), end 0 meaning no bound (int64).
struct IntRange {
  int64_t min, end;
};
IntRange exact_integers(DType dtype) {
  switch (dtype) {
    case kBool: return {0, 2};
    case kUInt8: return {0, 256};
    case kInt8: return {-128, 128};
    case kInt16: return {-(int64_t{1} << 15), int64_t{1} << 15};
    case kInt32: return {-(int64_t{1} << 31), int64_t{1} << 31};
    case kInt64: return {std::numeric_limits<int64_t>::min(), 0};
    default: break;
  }
  const int digits = float_digits(dtype);
  return {-(int64_t{1} << digits), (int64_t{1} << digits) + 1};
}

}  // namespace

// ---- generator state ----------------------------------------------------------------------------

void manual_seed(uint64_t seed) { detail::default_generator().set_seed(seed); }
uint64_t initial_seed() { return detail::default_generator().seed(); }
GeneratorState get_rng_state() { return detail::default_generator().state(); }
void set_rng_state(const GeneratorState& state) { detail::default_generator().set_state(state); }

// ---- creation -----------------------------------------------------------------------------------

Tensor rand(const Shape& shape, const TensorOptions& o) {
  const TensorOptions options = o.resolved();
  check_floating_dtype("rand", *options.dtype, "; use randint for integers");
  return create("rand", shape, options, [](const Tensor& t) { fill_uniform(t, 0.0, 1.0); });
}

Tensor randn(const Shape& shape, const TensorOptions& o) {
  const TensorOptions options = o.resolved();
  check_floating_dtype("randn", *options.dtype, "");
  return create("randn", shape, options, [](const Tensor& t) { fill_normal(t, 0.0, 1.0); });
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, const TensorOptions& o) {
  const TensorOptions options = o.resolved(kInt64);
  RTX_CHECK(low < high, ValueError, "[randint] expected low < high, but got low={} and high={}", low, high);
  const IntRange exact = exact_integers(*options.dtype);
  RTX_CHECK(low >= exact.min && (exact.end == 0 || high <= exact.end), ValueError,
            "[randint] the range [{}, {}) does not fit dtype {}, which holds the integers of [{}, {}) exactly", low,
            high, *options.dtype, exact.min, exact.end);
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  return create("randint", shape, options, [&](const Tensor& t) {
    launch(kernels::randint_kernel, t, t.numel(), philox::RandintDraw::kPerCounter, low, range);
  });
}

Tensor randperm(int64_t n, const TensorOptions& o) {
  const TensorOptions options = o.resolved(kInt64);
  RTX_CHECK(n >= 0, ValueError, "[randperm] n must be nonnegative, got {}", n);
  RTX_CHECK(*options.dtype != kBool, DTypeError, "[randperm] bool cannot hold a permutation; use an integer dtype");
  const int64_t max_n = exact_integers(*options.dtype).end;
  RTX_CHECK(max_n == 0 || n <= max_n, ValueError, "[randperm] n = {} is too large for dtype {} (at most {})", n,
            *options.dtype, max_n);
  return create("randperm", {n}, options, [&](const Tensor& t) {
    launch(kernels::randperm_kernel, t, n, philox::KeyDraw::kPerCounter);
  });
}

// ---- in place -----------------------------------------------------------------------------------

Tensor& uniform_(Tensor& t, double from, double to) {
  check_defined(t, "uniform_");
  RTX_CHECK(is_floating(t.dtype()), DTypeError, "[uniform_] expected a floating tensor, but got dtype {}", t.dtype());
  RTX_CHECK(std::isfinite(from) && std::isfinite(to), ValueError,
            "[uniform_] from and to must be finite, got {} and {}", from, to);
  RTX_CHECK(from <= to, ValueError, "[uniform_] expected from <= to, but got from={} > to={}", from, to);
  RTX_CHECK(std::isfinite(to - from), ValueError, "[uniform_] the range to - from = {} - {} overflows", to, from);
  return fill_inplace("uniform_", t, [&](const Tensor& dst) { fill_uniform(dst, from, to); });
}

Tensor& normal_(Tensor& t, double mean, double std) {
  check_defined(t, "normal_");
  RTX_CHECK(is_floating(t.dtype()), DTypeError, "[normal_] expected a floating tensor, but got dtype {}", t.dtype());
  RTX_CHECK(std >= 0.0, ValueError, "[normal_] expected std >= 0, but got std={}", std);
  return fill_inplace("normal_", t, [&](const Tensor& dst) { fill_normal(dst, mean, std); });
}

// Draws from other distributions, each a function of uniform (or normal) draws made in float64 and
// written into t's dtype, so that every device gives the same values for a seed.
namespace {
template <typename Transform>
Tensor& transformed_draws(const char* op, Tensor& t, bool normal, const Transform& transform) {
  check_defined(t, op);
  return fill_inplace(op, t, [&](const Tensor& dst) {
    Tensor draws = detail::make_tensor(dst.sizes(), kFloat64, dst.device());
    if (normal) {
      fill_normal(draws, 0.0, 1.0);
    } else {
      fill_uniform(draws, 0.0, 1.0);
    }
    detail::copy_raw(dst, transform(draws));
  });
}
}  // namespace

Tensor& exponential_(Tensor& t, double lambd) {
  RTX_CHECK(lambd > 0.0, ValueError, "[exponential_] expects lambd > 0, got {}", lambd);
  check_floating_dtype("exponential_", t.dtype(), "");
  return transformed_draws("exponential_", t, false, [&](const Tensor& u) { return neg(log1p(neg(u))) / lambd; });
}

Tensor& geometric_(Tensor& t, double p) {
  RTX_CHECK(p > 0.0 && p < 1.0, ValueError, "[geometric_] expects 0 < p < 1, got {}", p);
  // The number of trials up to the first success: ceil(log(1 - u) / log(1 - p)), at least 1.
  return transformed_draws("geometric_", t, false, [&](const Tensor& u) {
    return clamp(ceil(log1p(neg(u)) / std::log1p(-p)), Scalar(1.0), std::nullopt);
  });
}

Tensor& log_normal_(Tensor& t, double mean, double std) {
  RTX_CHECK(std > 0.0, ValueError, "[log_normal_] expects std > 0, got {}", std);
  check_floating_dtype("log_normal_", t.dtype(), "");
  return transformed_draws("log_normal_", t, true, [&](const Tensor& z) { return exp(z * std + mean); });
}

Tensor& cauchy_(Tensor& t, double median, double sigma) {
  RTX_CHECK(sigma > 0.0, ValueError, "[cauchy_] expects sigma > 0, got {}", sigma);
  check_floating_dtype("cauchy_", t.dtype(), "");
  return transformed_draws("cauchy_", t, false, [&](const Tensor& u) {
    return tan((u - 0.5) * M_PI) * sigma + median;
  });
}

Tensor& random_(Tensor& t, std::optional<int64_t> from, std::optional<int64_t> to) {
  check_defined(t, "random_");
  const IntRange exact = exact_integers(t.dtype());
  // Without bounds: [0, the dtype's largest exact integer]; without `to`, up to it.
  const int64_t low = from.value_or(0);
  const int64_t high = to ? *to : exact.end == 0 ? std::numeric_limits<int64_t>::max() : exact.end;
  RTX_CHECK(low < high, ValueError, "[random_] expects from < to, got from={} and to={}", low, high);
  RTX_CHECK(low >= exact.min && (exact.end == 0 || high <= exact.end), ValueError,
            "[random_] the range [{}, {}) does not fit dtype {}, which holds the integers of [{}, {}) exactly", low,
            high, t.dtype(), exact.min, exact.end);
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  return fill_inplace("random_", t, [&](const Tensor& dst) {
    launch(kernels::randint_kernel, dst, dst.numel(), philox::RandintDraw::kPerCounter, low, range);
  });
}

// ---- bernoulli and multinomial ------------------------------------------------------------------

Tensor bernoulli(const Tensor& p) {
  check_defined(p, "bernoulli", "p");
  RTX_CHECK(is_floating(p.dtype()), DTypeError,
            "[bernoulli] p must be a floating tensor of probabilities, but got dtype {}", p.dtype());
  const Tensor probs = contiguous_float64(p);
  const Tensor host = on_host(probs);
  const double* v = host.data_ptr<double>();
  for (int64_t i = 0; i < host.numel(); ++i) {
    RTX_CHECK(v[i] >= 0.0 && v[i] <= 1.0, ValueError,
              "[bernoulli] p must hold probabilities in [0, 1], but element {} (flat) of p (shape {}) is {}", i,
              detail::shape_str(p.sizes()), v[i]);
  }
  Tensor out = detail::make_tensor(p.sizes(), p.dtype(), p.device());
  launch(kernels::bernoulli_kernel, out, out.numel(), philox::BernoulliDraw::kPerCounter, probs);
  return out;
}

Tensor bernoulli(const Tensor& like, double p) {
  check_defined(like, "bernoulli");
  RTX_CHECK(p >= 0.0 && p <= 1.0, ValueError, "[bernoulli] p must be a probability in [0, 1], but got {}", p);
  Tensor out = detail::make_tensor(like.sizes(), like.dtype(), like.device());
  launch(kernels::bernoulli_scalar_kernel, out, out.numel(), philox::BernoulliDraw::kPerCounter, p);
  return out;
}

Tensor multinomial(const Tensor& weights, int64_t num_samples, bool replacement) {
  check_defined(weights, "multinomial", "weights");
  RTX_CHECK(is_floating(weights.dtype()), DTypeError, "[multinomial] weights must be floating, but got dtype {}",
            weights.dtype());
  RTX_CHECK(weights.dim() == 1 || weights.dim() == 2, ShapeError,
            "[multinomial] weights must be 1-d or 2-d (rows of categories), but got shape {}",
            detail::shape_str(weights.sizes()));
  RTX_CHECK(num_samples > 0, ValueError, "[multinomial] num_samples must be positive, got {}", num_samples);
  const int64_t rows = weights.dim() == 2 ? weights.size(0) : 1;
  const int64_t cats = weights.size(-1);
  RTX_CHECK(cats > 0, ValueError, "[multinomial] weights of shape {} have no categories",
            detail::shape_str(weights.sizes()));
  RTX_CHECK(replacement || num_samples <= cats, ValueError,
            "[multinomial] cannot draw {} samples without replacement from {} categories; draw fewer or pass "
            "replacement=true",
            num_samples, cats);
  const Tensor w = contiguous_float64(weights).view({rows, cats});
  const Tensor host = on_host(w);
  const double* v = host.data_ptr<double>();
  for (int64_t r = 0; r < rows; ++r) {
    int64_t positive = 0;
    for (int64_t c = 0; c < cats; ++c) {
      const double x = v[r * cats + c];
      RTX_CHECK(std::isfinite(x) && x >= 0.0, ValueError,
                "[multinomial] weights must be finite and nonnegative, but row {} has {} at category {}", r, x, c);
      positive += x > 0.0;
    }
    RTX_CHECK(positive > 0, ValueError, "[multinomial] row {} of the weights is all zeros", r);
    RTX_CHECK(replacement || positive >= num_samples, ValueError,
              "[multinomial] row {} has {} categories of positive weight, fewer than the {} samples drawn without "
              "replacement",
              r, positive, num_samples);
  }
  Tensor out = detail::make_tensor({rows, num_samples}, kInt64, weights.device());
  // One uniform per sample with replacement, one exponential key per category without.
  const int64_t n_values = rows * (replacement ? num_samples : cats);
  const int per_counter =
      replacement ? philox::UniformDraw<53>::kPerCounter : philox::LogUniformDraw::kPerCounter;
  launch(kernels::multinomial_kernel, out, n_values, per_counter, w, replacement);
  return weights.dim() == 1 ? out.view({num_samples}) : out;
}

}  // namespace rtx
