// Products built on matmul (so every device, dtype rule, autocast and autograd come with it): outer,
// dot, mv and the scaled-add forms addmm, baddbmm, addmv and addr.
#include "ops/internal.h"

namespace rtx {
namespace {

using detail::check_defined;
using detail::shape_str;

void check_dims(const char* op, const char* what, const Tensor& t, int64_t want) {
  check_defined(t, op);
  RTX_CHECK(t.dim() == want, ShapeError, "[{}] {} must have {} dim{}, got shape {}", op, what, want,
            want == 1 ? "" : "s", shape_str(t.sizes()));
}

// beta * input + alpha * product, with PyTorch's rule that beta = 0 ignores input (NaN included).
Tensor scaled_add(const Tensor& input, const Tensor& product, const Scalar& beta, const Scalar& alpha) {
  const Tensor scaled = alpha.to_double() == 1.0 ? product : product * alpha;
  if (beta.to_double() == 0.0) return scaled + zeros_like(input);
  return (beta.to_double() == 1.0 ? input : input * beta) + scaled;
}

}  // namespace

Tensor outer(const Tensor& a, const Tensor& b) {
  check_dims("outer", "the first vector", a, 1);
  check_dims("outer", "the second vector", b, 1);
  return a.unsqueeze(1) * b.unsqueeze(0);
}

Tensor dot(const Tensor& a, const Tensor& b) {
  check_dims("dot", "the first vector", a, 1);
  check_dims("dot", "the second vector", b, 1);
  RTX_CHECK(a.size(0) == b.size(0), ShapeError, "[dot] vectors of {} and {} elements", a.size(0), b.size(0));
  RTX_CHECK(a.dtype() == b.dtype(), DTypeError, "[dot] expects vectors of one dtype, got {} and {}", a.dtype(),
            b.dtype());
  return matmul(a, b);
}

Tensor mv(const Tensor& m, const Tensor& v) {
  check_dims("mv", "the matrix", m, 2);
  check_dims("mv", "the vector", v, 1);
  RTX_CHECK(m.size(1) == v.size(0), ShapeError, "[mv] a matrix of shape {} times a vector of {} elements",
            shape_str(m.sizes()), v.size(0));
  return matmul(m, v);
}

Tensor addmm(const Tensor& input, const Tensor& m1, const Tensor& m2, const Scalar& beta, const Scalar& alpha) {
  check_defined(input, "addmm");
  check_dims("addmm", "mat1", m1, 2);
  check_dims("addmm", "mat2", m2, 2);
  return scaled_add(input, mm(m1, m2), beta, alpha);
}

Tensor baddbmm(const Tensor& input, const Tensor& b1, const Tensor& b2, const Scalar& beta, const Scalar& alpha) {
  check_defined(input, "baddbmm");
  check_dims("baddbmm", "batch1", b1, 3);
  check_dims("baddbmm", "batch2", b2, 3);
  return scaled_add(input, bmm(b1, b2), beta, alpha);
}

Tensor addmv(const Tensor& input, const Tensor& mat, const Tensor& vec, const Scalar& beta, const Scalar& alpha) {
  check_defined(input, "addmv");
  return scaled_add(input, mv(mat, vec), beta, alpha);
}

Tensor addr(const Tensor& input, const Tensor& vec1, const Tensor& vec2, const Scalar& beta, const Scalar& alpha) {
  check_defined(input, "addr");
  return scaled_add(input, outer(vec1, vec2), beta, alpha);
}

}  // namespace rtx
