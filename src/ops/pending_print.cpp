// Placeholder definitions, replaced as the family is implemented.
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "ops/internal.h"

namespace rtx {
std::string Tensor::str() const { RTX_THROW(Error, "[str] not implemented yet"); }
std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }
}  // namespace rtx
