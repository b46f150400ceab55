// Kernel tables of the reduction family. Every reduction kernel receives its result viewed with the
// input's rank (size 1 on the reduced dims, the input's size elsewhere): the reduced dims are those
// where the two sizes differ. The front-end calls kernels only on non-empty inputs and outputs and
// has already chosen the result dtype.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "rtx/tensor.h"

namespace rtx::kernels {

// out = reduction of x over the dims where out has size 1.
using ReduceFn = void(const Tensor& out, const Tensor& x);
// p-norm: p = 2, 1, 0 (count of nonzeros), +-inf or any other value.
using NormFn = void(const Tensor& out, const Tensor& x, double p);
// Variance with divisor max(0, n - correction); its square root when take_sqrt.
using VarFn = void(const Tensor& out, const Tensor& x, int64_t correction, bool take_sqrt);
// Values and int64 indices of the extreme along the (at most one) reduced dim; the first occurrence on
// ties, the first NaN when there is one.
using ArgReduceFn = void(const Tensor& values, const Tensor& indices, const Tensor& x);
// out = inclusive prefix sums of a contiguous x along dim (out contiguous, same shape).
using ScanFn = void(const Tensor& out, const Tensor& x, int64_t dim);

// The family's kernels, each with its signature (src/core/dispatch.h says how the list is used).
#define RTX_REDUCE_KERNELS(X)                              \
  X(sum, ReduceFn)        /* bool/int inputs: int64 out */ \
  X(mean, ReduceFn)       /* float inputs */               \
  X(prod, ReduceFn)       /* bool/int inputs: int64 out */ \
  X(amax, ReduceFn)       /* NaN propagates */             \
  X(amin, ReduceFn)       /* NaN propagates */             \
  X(any, ReduceFn)        /* bool out, any input dtype */  \
  X(all, ReduceFn)        /* bool out, any input dtype */  \
  X(logsumexp, ReduceFn)  /* float inputs */               \
  X(norm, NormFn)         /* float inputs */               \
  X(var, VarFn)           /* float inputs */               \
  X(argmax, ArgReduceFn)                                   \
  X(argmin, ArgReduceFn)                                   \
  X(cumsum, ScanFn)       /* bool/int inputs: int64 out */
RTX_REDUCE_KERNELS(RTX_FAMILY_KERNEL)

}  // namespace rtx::kernels
