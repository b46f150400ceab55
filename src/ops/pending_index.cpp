// Placeholder definitions, replaced as the family is implemented.
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "ops/internal.h"

namespace rtx {
Tensor cat(const TensorList& tensors, int64_t dim) { RTX_THROW(Error, "[cat] not implemented yet"); }
Tensor stack(const TensorList& tensors, int64_t dim) { RTX_THROW(Error, "[stack] not implemented yet"); }
TensorList split(const Tensor& x, int64_t split_size, int64_t dim) { RTX_THROW(Error, "[split] not implemented yet"); }
TensorList split(const Tensor& x, const Shape& split_sizes, int64_t dim) { RTX_THROW(Error, "[split] not implemented yet"); }
TensorList chunk(const Tensor& x, int64_t chunks, int64_t dim) { RTX_THROW(Error, "[chunk] not implemented yet"); }
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) { RTX_THROW(Error, "[index_select] not implemented yet"); }
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) { RTX_THROW(Error, "[gather] not implemented yet"); }
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) { RTX_THROW(Error, "[scatter] not implemented yet"); }
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value) { RTX_THROW(Error, "[scatter] not implemented yet"); }
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) { RTX_THROW(Error, "[scatter_add] not implemented yet"); }
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha) { RTX_THROW(Error, "[index_add] not implemented yet"); }
Tensor tril(const Tensor& x, int64_t diagonal) { RTX_THROW(Error, "[tril] not implemented yet"); }
Tensor triu(const Tensor& x, int64_t diagonal) { RTX_THROW(Error, "[triu] not implemented yet"); }
ValuesIndices topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) { RTX_THROW(Error, "[topk] not implemented yet"); }
ValuesIndices sort(const Tensor& x, int64_t dim, bool descending) { RTX_THROW(Error, "[sort] not implemented yet"); }
Tensor argsort(const Tensor& x, int64_t dim, bool descending) { RTX_THROW(Error, "[argsort] not implemented yet"); }
}  // namespace rtx

#include "backend/cpu/register.h"
namespace rtx::cpu {
void register_index_kernels() {}
}  // namespace rtx::cpu
