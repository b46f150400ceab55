// Direct CPU convolution of inputs with few channels, the first layer of an image model: float32,
// up to 3 input channels and 27 taps (channels x kernel height x kernel width), stride 1, no
// dilation, one group. The forward and the weight and bias gradients run here, straight on NCHW;
// each returns false, having written nothing, for a case it does not take, which oneDNN or the
// im2col kernels then compute (the input gradient always goes there).
#pragma once

#include <cstdint>

#include "dispatch/conv.h"
#include "rtx/export.h"

namespace rtx::cpu {

bool narrow_conv2d(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias,
                   const kernels::Conv2dParams& p);
// grad_b undefined: no bias gradient; defined: written along with grad_w when this returns true.
bool narrow_conv2d_backward_weight(const Tensor& grad_w, const Tensor& grad_b, const Tensor& grad_out,
                                   const Tensor& x, const kernels::Conv2dParams& p);

// Whether the CPU convolution kernels hand their cases to these kernels first (on unless switched off),
// and how many convolutions they have computed; exported so that tests can run the other kernels on the
// same cases and tell which kernels ran.
RTX_API bool narrow_conv_enabled();
RTX_API void set_narrow_conv_enabled(bool on);
RTX_API int64_t narrow_conv_runs();

}  // namespace rtx::cpu
