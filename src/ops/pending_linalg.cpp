// Placeholder definitions, replaced as the family is implemented.
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "ops/internal.h"

namespace rtx {
Tensor matmul(const Tensor& a, const Tensor& b) { RTX_THROW(Error, "[matmul] not implemented yet"); }
Tensor mm(const Tensor& a, const Tensor& b) { RTX_THROW(Error, "[mm] not implemented yet"); }
Tensor bmm(const Tensor& a, const Tensor& b) { RTX_THROW(Error, "[bmm] not implemented yet"); }
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) { RTX_THROW(Error, "[linear] not implemented yet"); }
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Shape& stride, const Shape& padding,
              const Shape& dilation, int64_t groups) { RTX_THROW(Error, "[conv2d] not implemented yet"); }
Tensor max_pool2d(const Tensor& x, const Shape& kernel_size, const Shape& stride, const Shape& padding,
                  const Shape& dilation, bool ceil_mode) { RTX_THROW(Error, "[max_pool2d] not implemented yet"); }
ValuesIndices max_pool2d_with_indices(const Tensor& x, const Shape& kernel_size, const Shape& stride,
                                      const Shape& padding, const Shape& dilation, bool ceil_mode) {
  RTX_THROW(Error, "[max_pool2d] not implemented yet");
}
Tensor avg_pool2d(const Tensor& x, const Shape& kernel_size, const Shape& stride, const Shape& padding, bool ceil_mode,
                  bool count_include_pad) { RTX_THROW(Error, "[avg_pool2d] not implemented yet"); }
Tensor adaptive_avg_pool2d(const Tensor& x, const Shape& output_size) { RTX_THROW(Error, "[adaptive_avg_pool2d] not implemented yet"); }
}  // namespace rtx

#include "backend/cpu/register.h"
namespace rtx::cpu {
void register_linalg_kernels() {}
}  // namespace rtx::cpu
namespace rtx::cpu {
void register_conv_kernels() {}
}  // namespace rtx::cpu
