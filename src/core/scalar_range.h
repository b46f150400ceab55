// Whether a number can be written into a tensor of a dtype, by PyTorch's rule for values that fill
// tensors (full, fill_, scalar_tensor): an integer must lie in an integer dtype's range (an unsigned
// dtype also takes negatives down to -max, which wrap, as PyTorch allows); a float written into an
// integer dtype must be finite and in range (it is truncated); a finite float or an integer must not
// exceed a float dtype's largest finite value (inf and NaN pass); bool takes anything.
#pragma once

#include "rtx/dtype.h"
#include "rtx/export.h"
#include "rtx/scalar.h"

namespace rtx::detail {

// ValueError naming op, the value and dtype when value does not fit dtype (exported for the tests).
RTX_API void check_fits(const char* op, const Scalar& value, DType dtype);

}  // namespace rtx::detail
