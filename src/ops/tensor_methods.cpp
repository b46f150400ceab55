// Tensor's op methods and the arithmetic operators: thin forwards to the free functions.
#include "rtx/ops.h"

namespace rtx {

#define RTX_UNARY(name, F, r, s, g)                       \
  Tensor Tensor::name() const { return rtx::name(*this); } \
  Tensor& Tensor::name##_() { return rtx::name##_(*this); }
#define RTX_BINARY(name, F, r, s, ga, gb)                                                   \
  Tensor Tensor::name(const Tensor& other) const { return rtx::name(*this, other); }       \
  Tensor Tensor::name(const Scalar& other) const { return rtx::name(*this, other); }       \
  Tensor& Tensor::name##_(const Tensor& other) { return rtx::name##_(*this, other); }      \
  Tensor& Tensor::name##_(const Scalar& other) { return rtx::name##_(*this, other); }
#define RTX_COMPARE(name, F)                                                                \
  Tensor Tensor::name(const Tensor& other) const { return rtx::name(*this, other); }       \
  Tensor Tensor::name(const Scalar& other) const { return rtx::name(*this, other); }
#define RTX_LOGICAL(name, F) \
  Tensor Tensor::name(const Tensor& other) const { return rtx::name(*this, other); }
#define RTX_PREDICATE(name, F) \
  Tensor Tensor::name() const { return rtx::name(*this); }
#include "rtx/pointwise.def"

Tensor Tensor::gelu(const std::string& approximate) const { return rtx::gelu(*this, approximate); }
Tensor Tensor::leaky_relu(double slope) const { return rtx::leaky_relu(*this, slope); }
Tensor Tensor::elu(double alpha) const { return rtx::elu(*this, alpha); }
Tensor Tensor::softplus(double beta, double threshold) const { return rtx::softplus(*this, beta, threshold); }
Tensor Tensor::clamp(std::optional<Scalar> min, std::optional<Scalar> max) const { return rtx::clamp(*this, min, max); }
Tensor& Tensor::clamp_(std::optional<Scalar> min, std::optional<Scalar> max) { return rtx::clamp_(*this, min, max); }
Tensor Tensor::masked_fill(const Tensor& mask, const Scalar& value) const { return rtx::masked_fill(*this, mask, value); }
Tensor& Tensor::masked_fill_(const Tensor& mask, const Scalar& value) { return rtx::masked_fill_(*this, mask, value); }

Tensor Tensor::sum(const Shape& dims, bool keepdim) const { return rtx::sum(*this, dims, keepdim); }
Tensor Tensor::mean(const Shape& dims, bool keepdim) const { return rtx::mean(*this, dims, keepdim); }
Tensor Tensor::prod(const Shape& dims, bool keepdim) const { return rtx::prod(*this, dims, keepdim); }
Tensor Tensor::amax(const Shape& dims, bool keepdim) const { return rtx::amax(*this, dims, keepdim); }
Tensor Tensor::amin(const Shape& dims, bool keepdim) const { return rtx::amin(*this, dims, keepdim); }
Tensor Tensor::max() const { return rtx::max(*this); }
Tensor Tensor::min() const { return rtx::min(*this); }
ValuesIndices Tensor::max(int64_t dim, bool keepdim) const { return rtx::max(*this, dim, keepdim); }
ValuesIndices Tensor::min(int64_t dim, bool keepdim) const { return rtx::min(*this, dim, keepdim); }
Tensor Tensor::argmax(std::optional<int64_t> dim, bool keepdim) const { return rtx::argmax(*this, dim, keepdim); }
Tensor Tensor::argmin(std::optional<int64_t> dim, bool keepdim) const { return rtx::argmin(*this, dim, keepdim); }
Tensor Tensor::var(const Shape& dims, int64_t correction, bool keepdim) const {
  return rtx::var(*this, dims, correction, keepdim);
}
Tensor Tensor::std(const Shape& dims, int64_t correction, bool keepdim) const {
  return rtx::std(*this, dims, correction, keepdim);
}
Tensor Tensor::norm(double p, const Shape& dims, bool keepdim) const { return rtx::norm(*this, p, dims, keepdim); }
Tensor Tensor::logsumexp(const Shape& dims, bool keepdim) const { return rtx::logsumexp(*this, dims, keepdim); }
Tensor Tensor::any(const Shape& dims, bool keepdim) const { return rtx::any(*this, dims, keepdim); }
Tensor Tensor::all(const Shape& dims, bool keepdim) const { return rtx::all(*this, dims, keepdim); }
Tensor Tensor::cumsum(int64_t dim) const { return rtx::cumsum(*this, dim); }

Tensor Tensor::matmul(const Tensor& other) const { return rtx::matmul(*this, other); }
Tensor Tensor::mm(const Tensor& other) const { return rtx::mm(*this, other); }
Tensor Tensor::bmm(const Tensor& other) const { return rtx::bmm(*this, other); }
Tensor Tensor::softmax(int64_t dim) const { return rtx::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return rtx::log_softmax(*this, dim); }

Tensor Tensor::index_select(int64_t dim, const Tensor& index) const { return rtx::index_select(*this, dim, index); }
Tensor Tensor::gather(int64_t dim, const Tensor& index) const { return rtx::gather(*this, dim, index); }
Tensor Tensor::tril(int64_t diagonal) const { return rtx::tril(*this, diagonal); }
Tensor Tensor::triu(int64_t diagonal) const { return rtx::triu(*this, diagonal); }

// ---- operators --------------------------------------------------------------------------------
Tensor operator-(const Tensor& a) { return neg(a); }
#define RTX_TENSOR_OPERATOR(op, name)                                                     \
  Tensor operator op(const Tensor& a, const Tensor& b) { return name(a, b); }            \
  Tensor operator op(const Tensor& a, const Scalar& b) { return name(a, b); }            \
  Tensor operator op(const Scalar& a, const Tensor& b) { return RTX_REVERSED_##name(a, b); }
#define RTX_REVERSED_add(a, b) add(b, a)
#define RTX_REVERSED_mul(a, b) mul(b, a)
#define RTX_REVERSED_sub(a, b) sub(a, b)
#define RTX_REVERSED_div(a, b) div(a, b)
#define RTX_REVERSED_eq(a, b) eq(b, a)
#define RTX_REVERSED_ne(a, b) ne(b, a)
#define RTX_REVERSED_lt(a, b) gt(b, a)
#define RTX_REVERSED_le(a, b) ge(b, a)
#define RTX_REVERSED_gt(a, b) lt(b, a)
#define RTX_REVERSED_ge(a, b) le(b, a)
RTX_TENSOR_OPERATOR(+, add)
RTX_TENSOR_OPERATOR(-, sub)
RTX_TENSOR_OPERATOR(*, mul)
RTX_TENSOR_OPERATOR(/, div)
RTX_TENSOR_OPERATOR(==, eq)
RTX_TENSOR_OPERATOR(!=, ne)
RTX_TENSOR_OPERATOR(<, lt)
RTX_TENSOR_OPERATOR(<=, le)
RTX_TENSOR_OPERATOR(>, gt)
RTX_TENSOR_OPERATOR(>=, ge)

Tensor& operator+=(Tensor& a, const Tensor& b) { return add_(a, b); }
Tensor& operator+=(Tensor& a, const Scalar& b) { return add_(a, b); }
Tensor& operator-=(Tensor& a, const Tensor& b) { return sub_(a, b); }
Tensor& operator-=(Tensor& a, const Scalar& b) { return sub_(a, b); }
Tensor& operator*=(Tensor& a, const Tensor& b) { return mul_(a, b); }
Tensor& operator*=(Tensor& a, const Scalar& b) { return mul_(a, b); }
Tensor& operator/=(Tensor& a, const Tensor& b) { return div_(a, b); }
Tensor& operator/=(Tensor& a, const Scalar& b) { return div_(a, b); }

}  // namespace rtx
