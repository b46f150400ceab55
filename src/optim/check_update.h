// The argument checks the update functions share: a parameter, its gradient and its state tensors
// must agree in shape, dtype and device; and the dtype a parameter's state has.
#pragma once

#include "core/check.h"
#include "core/shape.h"
#include "rtx/tensor.h"

namespace rtx::optim::detail {

inline void check_param_and_grad(const char* op, const Tensor& param, const Tensor& grad) {
  RTX_CHECK(param.defined() && grad.defined(), ValueError, "[{}] the parameter and its gradient must be defined", op);
  RTX_CHECK(param.is_floating_point(), DTypeError, "[{}] expected a floating parameter, got dtype {}", op,
            param.dtype());
  RTX_CHECK(grad.sizes() == param.sizes(), ShapeError, "[{}] gradient shape {} does not match parameter shape {}", op,
            rtx::detail::shape_str(grad.sizes()), rtx::detail::shape_str(param.sizes()));
  RTX_CHECK(grad.dtype() == param.dtype(), DTypeError, "[{}] gradient dtype {} does not match parameter dtype {}", op,
            grad.dtype(), param.dtype());
  RTX_CHECK(grad.device() == param.device(), DeviceError, "[{}] gradient is on {} but the parameter is on {}", op,
            grad.device(), param.device());
}

// Whether param is updated through a float32 master copy: a 16-bit parameter with master weights.
inline bool keeps_master(const Tensor& param, bool master_weights) {
  return master_weights && (param.dtype() == kFloat16 || param.dtype() == kBFloat16);
}

// The dtype of param's state tensors: float32 with a master copy, else the parameter's.
inline DType state_dtype(const Tensor& param, bool master_weights) {
  return keeps_master(param, master_weights) ? kFloat32 : param.dtype();
}

// A state tensor, when defined, must have its parameter's shape and device and the state's dtype.
inline void check_state(const char* op, const char* name, const Tensor& state, const Tensor& param, DType dtype) {
  if (!state.defined()) return;
  RTX_CHECK(state.sizes() == param.sizes(), ShapeError, "[{}] {} shape {} does not match parameter shape {}", op, name,
            rtx::detail::shape_str(state.sizes()), rtx::detail::shape_str(param.sizes()));
  RTX_CHECK(state.dtype() == dtype, DTypeError, "[{}] {} dtype {} does not match the state dtype {}", op, name,
            state.dtype(), dtype);
  RTX_CHECK(state.device() == param.device(), DeviceError, "[{}] {} is on {} but the parameter is on {}", op, name,
            state.device(), param.device());
}

}  // namespace rtx::optim::detail
