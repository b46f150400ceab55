// The argument checks the update functions share: a parameter, its gradient and its state tensors
// must agree in shape, dtype and device.
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

// A state tensor, when defined, must look like its parameter.
inline void check_state(const char* op, const char* name, const Tensor& state, const Tensor& param) {
  if (!state.defined()) return;
  RTX_CHECK(state.sizes() == param.sizes(), ShapeError, "[{}] {} shape {} does not match parameter shape {}", op, name,
            rtx::detail::shape_str(state.sizes()), rtx::detail::shape_str(param.sizes()));
  RTX_CHECK(state.dtype() == param.dtype(), DTypeError, "[{}] {} dtype {} does not match parameter dtype {}", op, name,
            state.dtype(), param.dtype());
  RTX_CHECK(state.device() == param.device(), DeviceError, "[{}] {} is on {} but the parameter is on {}", op, name,
            state.device(), param.device());
}

}  // namespace rtx::optim::detail
