// Placeholder definitions, replaced as the family is implemented.
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "ops/internal.h"

namespace rtx {
Tensor sum(const Tensor& x, const Shape& dims, bool keepdim) { RTX_THROW(Error, "[sum] not implemented yet"); }
Tensor mean(const Tensor& x, const Shape& dims, bool keepdim) { RTX_THROW(Error, "[mean] not implemented yet"); }
Tensor prod(const Tensor& x, const Shape& dims, bool keepdim) { RTX_THROW(Error, "[prod] not implemented yet"); }
Tensor amax(const Tensor& x, const Shape& dims, bool keepdim) { RTX_THROW(Error, "[amax] not implemented yet"); }
Tensor amin(const Tensor& x, const Shape& dims, bool keepdim) { RTX_THROW(Error, "[amin] not implemented yet"); }
Tensor max(const Tensor& x) { RTX_THROW(Error, "[max] not implemented yet"); }
Tensor min(const Tensor& x) { RTX_THROW(Error, "[min] not implemented yet"); }
ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim) { RTX_THROW(Error, "[max] not implemented yet"); }
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim) { RTX_THROW(Error, "[min] not implemented yet"); }
Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) { RTX_THROW(Error, "[argmax] not implemented yet"); }
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) { RTX_THROW(Error, "[argmin] not implemented yet"); }
Tensor var(const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) { RTX_THROW(Error, "[var] not implemented yet"); }
Tensor std(const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) { RTX_THROW(Error, "[std] not implemented yet"); }
Tensor norm(const Tensor& x, double p, const Shape& dims, bool keepdim) { RTX_THROW(Error, "[norm] not implemented yet"); }
Tensor logsumexp(const Tensor& x, const Shape& dims, bool keepdim) { RTX_THROW(Error, "[logsumexp] not implemented yet"); }
Tensor any(const Tensor& x, const Shape& dims, bool keepdim) { RTX_THROW(Error, "[any] not implemented yet"); }
Tensor all(const Tensor& x, const Shape& dims, bool keepdim) { RTX_THROW(Error, "[all] not implemented yet"); }
Tensor cumsum(const Tensor& x, int64_t dim) { RTX_THROW(Error, "[cumsum] not implemented yet"); }
}  // namespace rtx

#include "backend/cpu/register.h"
namespace rtx::cpu {
void register_reduce_kernels() {}
}  // namespace rtx::cpu
