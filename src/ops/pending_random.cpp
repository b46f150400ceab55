// Placeholder definitions, replaced as the family is implemented.
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "ops/internal.h"

namespace rtx {
void manual_seed(uint64_t seed) { RTX_THROW(Error, "[manual_seed] not implemented yet"); }
uint64_t initial_seed() { RTX_THROW(Error, "[initial_seed] not implemented yet"); }
GeneratorState get_rng_state() { RTX_THROW(Error, "[get_rng_state] not implemented yet"); }
void set_rng_state(const GeneratorState& state) { RTX_THROW(Error, "[set_rng_state] not implemented yet"); }
Tensor rand(const Shape& shape, const TensorOptions& options) { RTX_THROW(Error, "[rand] not implemented yet"); }
Tensor randn(const Shape& shape, const TensorOptions& options) { RTX_THROW(Error, "[randn] not implemented yet"); }
Tensor randint(int64_t low, int64_t high, const Shape& shape, const TensorOptions& options) { RTX_THROW(Error, "[randint] not implemented yet"); }
Tensor randperm(int64_t n, const TensorOptions& options) { RTX_THROW(Error, "[randperm] not implemented yet"); }
Tensor& uniform_(Tensor& t, double from, double to) { RTX_THROW(Error, "[uniform_] not implemented yet"); }
Tensor& normal_(Tensor& t, double mean, double std) { RTX_THROW(Error, "[normal_] not implemented yet"); }
Tensor bernoulli(const Tensor& p) { RTX_THROW(Error, "[bernoulli] not implemented yet"); }
Tensor bernoulli(const Tensor& like, double p) { RTX_THROW(Error, "[bernoulli] not implemented yet"); }
Tensor multinomial(const Tensor& weights, int64_t num_samples, bool replacement) { RTX_THROW(Error, "[multinomial] not implemented yet"); }
}  // namespace rtx

#include "backend/cpu/register.h"
namespace rtx::cpu {
void register_random_kernels() {}
}  // namespace rtx::cpu
