// Kernel tables of the random family. Each kernel gets the (seed, first counter) the front-end
// reserved (under CUDA graph capture also the cell through which replays shift them) and fills its
// output exactly as kernels/common/philox.h specifies, element i (row-major logical order) being a
// pure function of (seed, offset + i / k, i % k), whatever the layout.
#pragma once

#include "core/dispatch.h"
#include "core/generator.h"
#include "rtx/ops.h"

namespace rtx::kernels {

// out (floating, any layout) = uniform on [from, to).
using UniformFn = void(const Tensor& out, const rtx::detail::RandomCounters& rng, double from, double to);
// out (floating, any layout) = normal(mean, std).
using NormalFn = void(const Tensor& out, const rtx::detail::RandomCounters& rng, double mean, double std);
// out (any dtype, any layout) = integers uniform on [low, low + range), range >= 1.
using RandintFn = void(const Tensor& out, const rtx::detail::RandomCounters& rng, int64_t low, uint64_t range);
// out (any dtype, any layout) = 1 with probability p[i], else 0; p is float64, contiguous, out's numel.
using BernoulliFn = void(const Tensor& out, const rtx::detail::RandomCounters& rng, const Tensor& p);
// out (any dtype, any layout) = 1 with probability p, else 0.
using BernoulliScalarFn = void(const Tensor& out, const rtx::detail::RandomCounters& rng, double p);
// out (1-d, contiguous, non-bool) = a permutation of 0..numel-1.
using RandpermFn = void(const Tensor& out, const rtx::detail::RandomCounters& rng);
// out (int64, contiguous [rows, num_samples]) = category indices drawn from weights (float64,
// contiguous [rows, categories], validated: finite, nonnegative, a positive sum per row and, without
// replacement, at least num_samples positive entries per row).
using MultinomialFn = void(const Tensor& out, const rtx::detail::RandomCounters& rng, const Tensor& weights,
                           bool replacement);

// The family's kernels, each with its signature (src/core/dispatch.h says how the list is used).
#define RTX_RANDOM_KERNELS(X)            \
  X(uniform, UniformFn)                  \
  X(normal, NormalFn)                    \
  X(randint, RandintFn)                  \
  X(bernoulli, BernoulliFn)              \
  X(bernoulli_scalar, BernoulliScalarFn) \
  X(randperm, RandpermFn)                \
  X(multinomial, MultinomialFn)
RTX_RANDOM_KERNELS(RTX_FAMILY_KERNEL)

}  // namespace rtx::kernels
