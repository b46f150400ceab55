// CPU convolutions through oneDNN (compiled when RTX_WITH_ONEDNN): the forward, input-gradient and
// weight-gradient convolutions of float32 and bfloat16 NCHW tensors, with the kernel tables'
// contracts (dispatch/conv.h). Each returns false, having written nothing, for a case oneDNN does not
// take (other dtypes, a geometry only its slow reference code covers, empty tensors), which the im2col
// kernels of conv_cpu.cpp then compute.
#pragma once

#include <cstdint>

#include "dispatch/conv.h"
#include "rtx/export.h"

namespace rtx::cpu {

bool onednn_conv2d(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias,
                   const kernels::Conv2dParams& p);
bool onednn_conv2d_backward_input(const Tensor& grad_x, const Tensor& grad_out, const Tensor& weight,
                                  const kernels::Conv2dParams& p);
// grad_b undefined: no bias gradient; defined: written along with grad_w when this returns true.
bool onednn_conv2d_backward_weight(const Tensor& grad_w, const Tensor& grad_b, const Tensor& grad_out,
                                   const Tensor& x, const kernels::Conv2dParams& p);

// Whether the CPU convolution kernels hand their cases to oneDNN (on unless switched off), and how
// many convolutions oneDNN has computed; exported so that tests can run the im2col kernels on the
// same cases and tell which kernels ran.
RTX_API bool onednn_conv_enabled();
RTX_API void set_onednn_conv_enabled(bool on);
RTX_API int64_t onednn_conv_runs();
// Whether oneDNN has bfloat16 convolutions on this CPU (its kernels for them need AVX-512); where it
// has none, bfloat16 convolutions run the im2col kernels.
RTX_API bool onednn_conv_has_bfloat16();

}  // namespace rtx::cpu
