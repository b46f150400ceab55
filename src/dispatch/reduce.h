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

RTX_KERNEL(sum_kernel, ReduceFn);        // bool/int inputs: int64 out
RTX_KERNEL(mean_kernel, ReduceFn);       // float inputs
RTX_KERNEL(prod_kernel, ReduceFn);       // bool/int inputs: int64 out
RTX_KERNEL(amax_kernel, ReduceFn);       // NaN propagates
RTX_KERNEL(amin_kernel, ReduceFn);       // NaN propagates
RTX_KERNEL(any_kernel, ReduceFn);        // bool out, any input dtype
RTX_KERNEL(all_kernel, ReduceFn);        // bool out, any input dtype
RTX_KERNEL(logsumexp_kernel, ReduceFn);  // float inputs
RTX_KERNEL(norm_kernel, NormFn);         // float inputs
RTX_KERNEL(var_kernel, VarFn);           // float inputs
RTX_KERNEL(argmax_kernel, ArgReduceFn);
RTX_KERNEL(argmin_kernel, ArgReduceFn);
RTX_KERNEL(cumsum_kernel, ScanFn);       // bool/int inputs: int64 out

}  // namespace rtx::kernels
