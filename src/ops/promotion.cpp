// result_type: PyTorch's promotion across dimensioned tensors, 0-d tensors and scalars. A lower
// tier only matters when its category (bool < integer < float) is higher than the tier above it.
#include "ops/internal.h"

namespace rtx {
namespace {

enum class Category { Bool, Integral, Floating };
Category category(DType t) {
  return t == kBool ? Category::Bool : is_floating(t) ? Category::Floating : Category::Integral;
}

// std::nullopt stands for "no operand in this tier".
using Tier = std::optional<DType>;

Tier promote(Tier a, DType b) { return a ? promote_types(*a, b) : b; }

Tier combine(Tier higher, Tier lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (category(*lower) > category(*higher)) return promote_types(*higher, *lower);
  return higher;
}

}  // namespace

namespace detail {
DType result_type_of(const Tensor* const* tensors, size_t n_tensors, const Scalar* scalars, size_t n_scalars) {
  Tier dim_tier, zero_tier, scalar_tier;
  for (size_t i = 0; i < n_tensors; ++i) {
    const Tensor& t = *tensors[i];
    if (t.dim() > 0) dim_tier = promote(dim_tier, t.dtype());
    else zero_tier = promote(zero_tier, t.dtype());
  }
  for (size_t i = 0; i < n_scalars; ++i) scalar_tier = promote(scalar_tier, scalars[i].dtype());
  Tier r = combine(dim_tier, combine(zero_tier, scalar_tier));
  return r.value_or(get_default_dtype());
}
DType promote_with_scalar(DType t, const Scalar& s) { return *combine(t, s.dtype()); }
}  // namespace detail

DType result_type(const Tensor& a, const Tensor& b) {
  const Tensor* ts[] = {&a, &b};
  return detail::result_type_of(ts, 2, nullptr, 0);
}

DType result_type(const Tensor& a, const Scalar& b) {
  const Tensor* ts[] = {&a};
  return detail::result_type_of(ts, 1, &b, 1);
}

}  // namespace rtx
