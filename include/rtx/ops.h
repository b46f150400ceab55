// Every public op as a free function, one doc comment each. Tensor methods forward to these.
// Conventions follow libtorch: dims may be negative; an undefined Tensor means "absent" for
// optional tensor arguments (bias, weight, ...); an empty dims list means every dim.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "rtx/export.h"
#include "rtx/tensor.h"

namespace rtx {

namespace detail {
class Generator;
}

enum class Reduction : uint8_t { None, Mean, Sum };

// ---- creation ---------------------------------------------------------------------------------
// Uninitialized memory.
RTX_API Tensor empty(const Shape& shape, const TensorOptions& options = {});
RTX_API Tensor zeros(const Shape& shape, const TensorOptions& options = {});
RTX_API Tensor ones(const Shape& shape, const TensorOptions& options = {});
RTX_API Tensor full(const Shape& shape, const Scalar& value, const TensorOptions& options = {});
// Same shape (and, unless given, dtype and device) as t.
RTX_API Tensor empty_like(const Tensor& t, std::optional<TensorOptions> options = std::nullopt);
RTX_API Tensor zeros_like(const Tensor& t, std::optional<TensorOptions> options = std::nullopt);
RTX_API Tensor ones_like(const Tensor& t, std::optional<TensorOptions> options = std::nullopt);
RTX_API Tensor full_like(const Tensor& t, const Scalar& value, std::optional<TensorOptions> options = std::nullopt);
RTX_API Tensor rand_like(const Tensor& t, std::optional<TensorOptions> options = std::nullopt);
RTX_API Tensor randn_like(const Tensor& t, std::optional<TensorOptions> options = std::nullopt);
// [0, end) and [start, end) by step; the dtype is int64 when every bound is an integer, unless given.
RTX_API Tensor arange(const Scalar& end, std::optional<TensorOptions> options = std::nullopt);
RTX_API Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step = 1,
                      std::optional<TensorOptions> options = std::nullopt);
// steps evenly spaced values from start to end inclusive.
RTX_API Tensor linspace(double start, double end, int64_t steps, const TensorOptions& options = {});
// n x m identity (m = n when negative).
RTX_API Tensor eye(int64_t n, int64_t m = -1, const TensorOptions& options = {});
// A copy of host memory holding numel(shape) contiguous elements of dtype.
RTX_API Tensor from_buffer(const void* data, const Shape& shape, DType dtype, Device device = Device(kCPU));
// Wraps memory without copying; deleter (if any) runs when the last view is gone.
RTX_API Tensor from_blob(void* data, const Shape& shape, const Shape& strides, DType dtype, Device device,
                         std::function<void(void*)> deleter = nullptr);
// A 1-d tensor holding values (a copy); of T's dtype unless options give one.
namespace detail {
// A 1-d tensor of the n values of dtype source at data, converted to the options' dtype; ValueError
// for a value that does not fit it (as rustytorch.tensor refuses tensor([300], dtype=uint8)).
RTX_API Tensor tensor_of(const void* data, int64_t n, DType source, const TensorOptions& options);
}  // namespace detail
template <typename T>
Tensor tensor(const std::vector<T>& values, const TensorOptions& options = {}) {
  return detail::tensor_of(values.data(), static_cast<int64_t>(values.size()), dtype_of_v<T>, options);
}
RTX_API Tensor tensor(const std::vector<bool>& values, const TensorOptions& options = {});
// rtx::tensor({1.5, 2}) is float32 (unless options say otherwise), rtx::tensor({true, false}) bool.
RTX_API Tensor tensor(std::initializer_list<double> values, const TensorOptions& options = {});
template <typename T, std::enable_if_t<std::is_same_v<T, bool>, int> = 0>
Tensor tensor(std::initializer_list<T> values, const TensorOptions& options = {}) {
  return tensor(std::vector<bool>(values), options);
}
// A 0-d tensor.
RTX_API Tensor scalar_tensor(const Scalar& value, const TensorOptions& options = {});

// ---- random (counter-based Philox: a seed fixes every value on every device) -----------------------
// Seeds every device's default generator.
RTX_API void manual_seed(uint64_t seed);
RTX_API uint64_t initial_seed();
// Generator state (seed, offset) so that a run can be resumed exactly.
struct GeneratorState {
  uint64_t seed = 0;
  uint64_t offset = 0;
};
RTX_API GeneratorState get_rng_state();
RTX_API void set_rng_state(const GeneratorState& state);
// A random generator (torch.Generator): a seed and a counter. A Generator is a handle, like Tensor:
// copies share one state. Random ops draw from the calling thread's current generator, which is the
// default generator unless a GeneratorGuard makes another one current.
class RTX_API Generator {
 public:
  // A new generator with PyTorch's default seed, independent of every other. device is what device()
  // reports: the numbers are the same on every device.
  explicit Generator(Device device = Device(kCPU));
  // Sets the seed and restarts the counter; returns *this.
  Generator& manual_seed(uint64_t seed);
  // Sets a seed from a nondeterministic source and returns it.
  uint64_t seed();
  uint64_t initial_seed() const;
  GeneratorState get_state() const;
  void set_state(const GeneratorState& state);
  Device device() const { return device_; }
  // Whether both handles refer to one generator.
  bool is_same(const Generator& other) const { return impl_ == other.impl_; }
  detail::Generator& impl() const { return *impl_; }

 private:
  Generator(std::shared_ptr<detail::Generator> impl, Device device);
  friend RTX_API Generator default_generator();
  std::shared_ptr<detail::Generator> impl_;
  Device device_;
};
// The process-wide generator, the one manual_seed, initial_seed and get/set_rng_state act on.
RTX_API Generator default_generator();
// Makes generator the calling thread's current generator while the guard lives (guards nest):
// { GeneratorGuard guard(g); x = rand({3}); } draws from g and leaves the default generator as it was.
class RTX_API GeneratorGuard {
 public:
  explicit GeneratorGuard(const Generator& generator);
  ~GeneratorGuard();
  GeneratorGuard(const GeneratorGuard&) = delete;
  GeneratorGuard& operator=(const GeneratorGuard&) = delete;

 private:
  Generator generator_;
  detail::Generator* previous_;
};
// Uniform on [0, 1).
RTX_API Tensor rand(const Shape& shape, const TensorOptions& options = {});
// Standard normal.
RTX_API Tensor randn(const Shape& shape, const TensorOptions& options = {});
// Integers uniform on [low, high).
RTX_API Tensor randint(int64_t low, int64_t high, const Shape& shape, const TensorOptions& options = TensorOptions(kInt64));
// A random permutation of 0..n-1.
RTX_API Tensor randperm(int64_t n, const TensorOptions& options = TensorOptions(kInt64));
RTX_API Tensor& uniform_(Tensor& t, double from = 0.0, double to = 1.0);
RTX_API Tensor& normal_(Tensor& t, double mean = 0.0, double std = 1.0);
// Fills t with draws of the exponential (rate lambd), geometric (trials to the first success of
// probability p), log-normal (exp of normal(mean, std)) and Cauchy distributions, and with integers
// uniform on [from, to) (default: from 0 to the dtype's largest exactly held integer, inclusive).
RTX_API Tensor& exponential_(Tensor& t, double lambd = 1.0);
RTX_API Tensor& geometric_(Tensor& t, double p);
RTX_API Tensor& log_normal_(Tensor& t, double mean = 1.0, double std = 2.0);
RTX_API Tensor& cauchy_(Tensor& t, double median = 0.0, double sigma = 1.0);
RTX_API Tensor& random_(Tensor& t, std::optional<int64_t> from = std::nullopt, std::optional<int64_t> to = std::nullopt);
// 1 with probability p (elementwise), else 0; result has p's dtype.
RTX_API Tensor bernoulli(const Tensor& p);
RTX_API Tensor bernoulli(const Tensor& like, double p);
// Draws num_samples category indices per row of (unnormalized, nonnegative) weights.
RTX_API Tensor multinomial(const Tensor& weights, int64_t num_samples, bool replacement = false);

// ---- views, shape and copies (methods of Tensor, also as functions) ------------------------------
RTX_API Tensor view(const Tensor& t, const Shape& shape);
// The same bytes read as another dtype (torch's view(dtype); a name of its own, as view({}) must stay
// the 0-d shape). Of a wider or narrower type, the last
// dimension (stride 1) shrinks or grows by the ratio of the sizes, and the other strides and the offset
// scale with it. The result shares the memory and has no gradient.
RTX_API Tensor view_dtype(const Tensor& t, DType dtype);
RTX_API Tensor reshape(const Tensor& t, const Shape& shape);
RTX_API Tensor permute(const Tensor& t, const Shape& dims);
RTX_API Tensor transpose(const Tensor& t, int64_t dim0, int64_t dim1);
RTX_API Tensor narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length);
RTX_API Tensor slice(const Tensor& t, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step = 1);
RTX_API Tensor select(const Tensor& t, int64_t dim, int64_t index);
RTX_API Tensor expand(const Tensor& t, const Shape& shape);
RTX_API Tensor squeeze(const Tensor& t, std::optional<int64_t> dim = std::nullopt);
RTX_API Tensor unsqueeze(const Tensor& t, int64_t dim);
RTX_API Tensor flatten(const Tensor& t, int64_t start_dim = 0, int64_t end_dim = -1);
RTX_API Tensor unflatten(const Tensor& t, int64_t dim, const Shape& sizes);
RTX_API Tensor diagonal(const Tensor& t, int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1);
RTX_API Tensor as_strided(const Tensor& t, const Shape& sizes, const Shape& strides, std::optional<int64_t> storage_offset = std::nullopt);
RTX_API Tensor contiguous(const Tensor& t);
RTX_API Tensor clone(const Tensor& t);
// The shape a and b broadcast to; ShapeError naming op when they do not.
RTX_API Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op = "broadcast");
RTX_API TensorList broadcast_tensors(const TensorList& tensors);
// Sums t down to shape (the reverse of broadcasting t from shape).
RTX_API Tensor sum_to(const Tensor& t, const Shape& shape);

// ---- type promotion ---------------------------------------------------------------------------
// PyTorch's result_type: dimensioned tensors outrank 0-d tensors, which outrank scalars, within a category.
RTX_API DType result_type(const Tensor& a, const Tensor& b);
RTX_API DType result_type(const Tensor& a, const Scalar& b);

// ---- pointwise (see rtx/pointwise.def for the table) -----------------------------------------------
#define RTX_UNARY(name, F, r, s, g) \
  RTX_API Tensor name(const Tensor& x); \
  RTX_API Tensor& name##_(Tensor& x);
#define RTX_BINARY(name, F, r, s, ga, gb)                         \
  RTX_API Tensor name(const Tensor& a, const Tensor& b);          \
  RTX_API Tensor name(const Tensor& a, const Scalar& b);          \
  RTX_API Tensor name(const Scalar& a, const Tensor& b);          \
  RTX_API Tensor& name##_(Tensor& a, const Tensor& b);            \
  RTX_API Tensor& name##_(Tensor& a, const Scalar& b);
#define RTX_COMPARE(name, F)                             \
  RTX_API Tensor name(const Tensor& a, const Tensor& b); \
  RTX_API Tensor name(const Tensor& a, const Scalar& b);
#define RTX_LOGICAL(name, F) RTX_API Tensor name(const Tensor& a, const Tensor& b);
#define RTX_PREDICATE(name, F) RTX_API Tensor name(const Tensor& x);
#include "rtx/pointwise.def"

// a + alpha * b
RTX_API Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha);
RTX_API Tensor& add_(Tensor& a, const Tensor& b, const Scalar& alpha);
// approximate: "none" (exact, erf) or "tanh".
RTX_API Tensor gelu(const Tensor& x, const std::string& approximate = "none");
RTX_API Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
RTX_API Tensor elu(const Tensor& x, double alpha = 1.0);
// log(1 + exp(beta x)) / beta, linear above threshold.
RTX_API Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);
RTX_API Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
RTX_API Tensor& clamp_(Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
// Elementwise bounds (either may be undefined).
RTX_API Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max);
// cond ? a : b, broadcast.
RTX_API Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
RTX_API Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b);
RTX_API Tensor where(const Tensor& cond, const Scalar& a, const Tensor& b);
RTX_API Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value);
RTX_API Tensor& masked_fill_(Tensor& x, const Tensor& mask, const Scalar& value);
// x + weight * (end - x)
RTX_API Tensor lerp(const Tensor& x, const Tensor& end, const Scalar& weight);
// x + value * t1 * t2 and x + value * t1 / t2
RTX_API Tensor addcmul(const Tensor& x, const Tensor& t1, const Tensor& t2, const Scalar& value = 1);
RTX_API Tensor addcdiv(const Tensor& x, const Tensor& t1, const Tensor& t2, const Scalar& value = 1);
RTX_API Tensor& addcmul_(Tensor& x, const Tensor& t1, const Tensor& t2, const Scalar& value = 1);
RTX_API Tensor& addcdiv_(Tensor& x, const Tensor& t1, const Tensor& t2, const Scalar& value = 1);
RTX_API Tensor& lerp_(Tensor& x, const Tensor& end, const Scalar& weight);
// Elementwise cast (differentiable between float types).
RTX_API Tensor to_dtype(const Tensor& x, DType dtype);
// dst[...] = src, broadcasting src and converting its dtype.
RTX_API Tensor& copy_(Tensor& dst, const Tensor& src);
RTX_API Tensor& fill_(Tensor& t, const Scalar& value);
RTX_API Tensor& zero_(Tensor& t);

// ---- reductions (empty dims = all dims) ------------------------------------------------------------
// Integer and bool inputs sum to int64.
RTX_API Tensor sum(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
RTX_API Tensor mean(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
RTX_API Tensor prod(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
RTX_API Tensor amax(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
RTX_API Tensor amin(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
// Largest/smallest element (0-d).
RTX_API Tensor max(const Tensor& x);
RTX_API Tensor min(const Tensor& x);
// Values and int64 indices of the max/min along dim (the first occurrence on ties).
RTX_API ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim = false);
RTX_API ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim = false);
// Index of the max/min, over the flattened tensor when dim is absent.
RTX_API Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
RTX_API Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
// Variance with Bessel's correction by default (correction = 1).
RTX_API Tensor var(const Tensor& x, const Shape& dims = {}, int64_t correction = 1, bool keepdim = false);
RTX_API Tensor std(const Tensor& x, const Shape& dims = {}, int64_t correction = 1, bool keepdim = false);
// p-norm (p = inf for max-abs).
RTX_API Tensor norm(const Tensor& x, double p = 2.0, const Shape& dims = {}, bool keepdim = false);
RTX_API Tensor logsumexp(const Tensor& x, const Shape& dims, bool keepdim = false);
RTX_API Tensor any(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
RTX_API Tensor all(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
RTX_API Tensor cumsum(const Tensor& x, int64_t dim);
// Running product (integers and bool in int64), log(cumsum(exp(x))) computed stably, and the running
// maximum / minimum with the index each came from (the later one on ties; a NaN, once met, stays).
RTX_API Tensor cumprod(const Tensor& x, int64_t dim);
RTX_API Tensor logcumsumexp(const Tensor& x, int64_t dim);
RTX_API ValuesIndices cummax(const Tensor& x, int64_t dim);
RTX_API ValuesIndices cummin(const Tensor& x, int64_t dim);

// ---- linear algebra ----------------------------------------------------------------------------
// numpy-style matmul: 1-d, 2-d and batched with broadcast batch dims.
RTX_API Tensor matmul(const Tensor& a, const Tensor& b);
RTX_API Tensor mm(const Tensor& a, const Tensor& b);
RTX_API Tensor bmm(const Tensor& a, const Tensor& b);
// a[i] * b[j] of two vectors; the dot product of two vectors of one dtype; matrix times vector.
RTX_API Tensor outer(const Tensor& a, const Tensor& b);
RTX_API Tensor dot(const Tensor& a, const Tensor& b);
RTX_API Tensor mv(const Tensor& m, const Tensor& v);
// beta * input + alpha * (mat1 @ mat2), and its batched form over [B, n, k] @ [B, k, m]; with beta = 0
// input is ignored (its NaNs too), as in PyTorch.
RTX_API Tensor addmm(const Tensor& input, const Tensor& mat1, const Tensor& mat2, const Scalar& beta = 1,
                     const Scalar& alpha = 1);
RTX_API Tensor baddbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, const Scalar& beta = 1,
                       const Scalar& alpha = 1);
// beta * input + alpha * (mat @ vec), and beta * input + alpha * outer(vec1, vec2).
RTX_API Tensor addmv(const Tensor& input, const Tensor& mat, const Tensor& vec, const Scalar& beta = 1,
                     const Scalar& alpha = 1);
RTX_API Tensor addr(const Tensor& input, const Tensor& vec1, const Tensor& vec2, const Scalar& beta = 1,
                    const Scalar& alpha = 1);
// x @ weight^T + bias (weight: [out, in]).
RTX_API Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});

// ---- convolution and pooling (NCHW) ------------------------------------------------------------
RTX_API Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, const Shape& stride = {1, 1},
                      const Shape& padding = {0, 0}, const Shape& dilation = {1, 1}, int64_t groups = 1);
// The adjoint of conv2d (PyTorch's argument order): weight [in_channels, out_channels / groups, kH, kW], output
// size (in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1 per dim; output_padding
// must be smaller than stride.
RTX_API Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
                                const Shape& stride = {1, 1}, const Shape& padding = {0, 0},
                                const Shape& output_padding = {0, 0}, int64_t groups = 1,
                                const Shape& dilation = {1, 1});
RTX_API Tensor max_pool2d(const Tensor& x, const Shape& kernel_size, const Shape& stride = {},
                          const Shape& padding = {0, 0}, const Shape& dilation = {1, 1}, bool ceil_mode = false);
// Values and the flat (h * W + w) index of each max within its input plane.
RTX_API ValuesIndices max_pool2d_with_indices(const Tensor& x, const Shape& kernel_size, const Shape& stride = {},
                                              const Shape& padding = {0, 0}, const Shape& dilation = {1, 1},
                                              bool ceil_mode = false);
RTX_API Tensor avg_pool2d(const Tensor& x, const Shape& kernel_size, const Shape& stride = {},
                          const Shape& padding = {0, 0}, bool ceil_mode = false, bool count_include_pad = true);
RTX_API Tensor adaptive_avg_pool2d(const Tensor& x, const Shape& output_size);

// ---- neural network functions -----------------------------------------------------------------
RTX_API Tensor softmax(const Tensor& x, int64_t dim);
RTX_API Tensor log_softmax(const Tensor& x, int64_t dim);
RTX_API Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {},
                          const Tensor& bias = {}, double eps = 1e-5);
// Training mode normalizes with batch statistics and updates running_mean/var in place (when given).
RTX_API Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                          const Tensor& weight, const Tensor& bias, bool training, double momentum = 0.1,
                          double eps = 1e-5);
// Rows of weight picked by integer indices; padding_idx rows get no gradient.
RTX_API Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx = std::nullopt);
// Zeroes elements with probability p and scales the rest by 1/(1-p); identity when !training.
RTX_API Tensor dropout(const Tensor& x, double p = 0.5, bool training = true);
// logits [N, C] or [N, C, d...], target class indices [N] / [N, d...] (int64).
RTX_API Tensor cross_entropy(const Tensor& logits, const Tensor& target, const Tensor& weight = {},
                             int64_t ignore_index = -100, Reduction reduction = Reduction::Mean,
                             double label_smoothing = 0.0);
RTX_API Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const Tensor& weight = {},
                        int64_t ignore_index = -100, Reduction reduction = Reduction::Mean);
RTX_API Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
RTX_API Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target, const Tensor& weight = {},
                                                const Tensor& pos_weight = {}, Reduction reduction = Reduction::Mean);
// softmax(q k^T * scale + attn_mask) v over the last two dims: query [..., L, E], key [..., S, E],
// value [..., S, Ev]. A bool attn_mask keeps its true positions, a float one is added to the scores;
// is_causal keeps the keys j <= i; scale defaults to 1 / sqrt(E). Without a mask or dropout the
// scores are never stored (fused kernels). enable_gqa lets key and value [..., Hkv, S, E] have fewer
// heads than query [..., Hq, L, E] (Hq a multiple of Hkv; query head h reads head h / (Hq / Hkv)).
RTX_API Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                            const Tensor& attn_mask = {}, double dropout_p = 0.0,
                                            bool is_causal = false, std::optional<double> scale = std::nullopt,
                                            bool enable_gqa = false);
// int64 indices -> int64 one-hot rows (num_classes = max + 1 when negative).
RTX_API Tensor one_hot(const Tensor& indices, int64_t num_classes = -1);

// ---- joining, splitting, indexing --------------------------------------------------------------
RTX_API Tensor cat(const TensorList& tensors, int64_t dim = 0);
RTX_API Tensor stack(const TensorList& tensors, int64_t dim = 0);
// Pieces of split_size along dim (the last may be smaller).
RTX_API TensorList split(const Tensor& x, int64_t split_size, int64_t dim = 0);
RTX_API TensorList split(const Tensor& x, const Shape& split_sizes, int64_t dim = 0);
RTX_API TensorList chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
RTX_API Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
RTX_API Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
RTX_API Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
RTX_API Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value);
RTX_API Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
RTX_API Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha = 1);
// x with the slices along dim that index names set to value, or replaced by source's slices in
// index's order (an index named twice gets the sum of its sources; PyTorch leaves that undefined).
RTX_API Tensor index_fill(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value);
RTX_API Tensor index_copy(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source);
// The int64 coordinates [count, x.dim()] of x's nonzero (true) elements, in row-major order. Reads
// the count back from the device.
RTX_API Tensor nonzero(const Tensor& x);
// x's elements where mask (bool, broadcast with x) is true, as a 1-d tensor in row-major order.
RTX_API Tensor masked_select(const Tensor& x, const Tensor& mask);
RTX_API Tensor tril(const Tensor& x, int64_t diagonal = 0);
RTX_API Tensor triu(const Tensor& x, int64_t diagonal = 0);
// The order of the elements along each of dims reversed (a copy).
RTX_API Tensor flip(const Tensor& x, const Shape& dims);
// flip along dim 1 (of a tensor of at least 2 dims) and along dim 0.
RTX_API Tensor fliplr(const Tensor& x);
RTX_API Tensor flipud(const Tensor& x);
// Elements shifted by shifts[i] positions along dims[i], wrapping around; without dims, over the
// flattened tensor (one shift).
RTX_API Tensor roll(const Tensor& x, const Shape& shifts, const Shape& dims = {});
// The dims source moved to the places destination, the others keeping their order (a view).
RTX_API Tensor movedim(const Tensor& x, const Shape& source, const Shape& destination);
// Each element repeated `repeats` times (or repeats[i] times) in place along dim; over the flattened
// tensor without dim. Tensor repeats are read back to the host.
RTX_API Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim = std::nullopt);
RTX_API Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim = std::nullopt);
// The n-th forward difference along dim (xor for bool), after prepending and appending the given tensors.
RTX_API Tensor diff(const Tensor& x, int64_t n = 1, int64_t dim = -1, const Tensor& prepend = {},
                    const Tensor& append = {});
// The windows of `size` elements every `step` along dim, as a new last dim (a view, Tensor.unfold).
RTX_API Tensor unfold(const Tensor& x, int64_t dim, int64_t size, int64_t step);
// Coordinate grids of 0-d or 1-d tensors (views): "ij" puts tensor i along dim i, "xy" swaps the first two.
RTX_API TensorList meshgrid(const TensorList& tensors, const std::string& indexing = "ij");
// gather along dim after broadcasting x and indices in every other dim; over the flattened tensors
// without dim.
RTX_API Tensor take_along_dim(const Tensor& x, const Tensor& indices, std::optional<int64_t> dim = std::nullopt);
RTX_API ValuesIndices topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true);
// Stable sort.
RTX_API ValuesIndices sort(const Tensor& x, int64_t dim = -1, bool descending = false);
RTX_API Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false);

// ---- ops built from the ops above (so every device, dtype rule and autograd come with them) --------
// Elementwise (src/ops/elementwise.cpp). Floating NaN, +inf and -inf replaced by nan, posinf and
// neginf (defaults: 0 and the dtype's largest and lowest finite values); other dtypes are copied.
RTX_API Tensor nan_to_num(const Tensor& x, double nan = 0.0, std::optional<double> posinf = std::nullopt,
                          std::optional<double> neginf = std::nullopt);
// log(p / (1 - p)), with p clamped to [eps, 1 - eps] when eps is given.
RTX_API Tensor logit(const Tensor& x, std::optional<double> eps = std::nullopt);
// x * log(y), 0 where x is 0 and y is not NaN.
RTX_API Tensor xlogy(const Tensor& x, const Tensor& y);
// x - trunc(x).
RTX_API Tensor frac(const Tensor& x);
// Whether the sign bit is set (bool; true for -0.0 and a negative NaN).
RTX_API Tensor signbit(const Tensor& x);
// |a| with the sign of b (-0.0 counts as negative), in a floating dtype.
RTX_API Tensor copysign(const Tensor& a, const Tensor& b);
// 0 where x < 0, values where x == 0, 1 where x > 0; x and values of one dtype.
RTX_API Tensor heaviside(const Tensor& x, const Tensor& values);
// maximum and minimum that ignore a NaN when the other operand is a number.
RTX_API Tensor fmax(const Tensor& a, const Tensor& b);
RTX_API Tensor fmin(const Tensor& a, const Tensor& b);
RTX_API Tensor isposinf(const Tensor& x);
RTX_API Tensor isneginf(const Tensor& x);
RTX_API Tensor deg2rad(const Tensor& x);
RTX_API Tensor rad2deg(const Tensor& x);
// pow computed in float64.
RTX_API Tensor float_power(const Tensor& a, const Tensor& b);

// Statistics (src/ops/statistics.cpp). (var, mean) and (std, mean) of one pass over the arguments.
RTX_API TensorList var_mean(const Tensor& x, const Shape& dims = {}, int64_t correction = 1, bool keepdim = false);
RTX_API TensorList std_mean(const Tensor& x, const Shape& dims = {}, int64_t correction = 1, bool keepdim = false);
// (amin, amax).
RTX_API TensorList aminmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
// sum and mean of the elements that are not NaN.
RTX_API Tensor nansum(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
RTX_API Tensor nanmean(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
// The k-th smallest element (k from 1) along dim and its index.
RTX_API ValuesIndices kthvalue(const Tensor& x, int64_t k, int64_t dim = -1, bool keepdim = false);
// The lower median (element (n - 1) / 2 of the sorted values; NaN when there is one) of all elements,
// and along dim with its index. nanmedian skips NaNs.
RTX_API Tensor median(const Tensor& x);
RTX_API ValuesIndices median(const Tensor& x, int64_t dim, bool keepdim = false);
RTX_API Tensor nanmedian(const Tensor& x);
RTX_API ValuesIndices nanmedian(const Tensor& x, int64_t dim, bool keepdim = false);
// The q-quantiles (q in [0, 1], a 0-d or 1-d float tensor) of the flattened tensor or along dim;
// interpolation: "linear", "lower", "higher", "midpoint" or "nearest". A 1-d q puts its dim first.
RTX_API Tensor quantile(const Tensor& x, const Tensor& q, std::optional<int64_t> dim = std::nullopt,
                        bool keepdim = false, const std::string& interpolation = "linear");
// quantile over the elements that are not NaN (NaN for a row of NaNs).
RTX_API Tensor nanquantile(const Tensor& x, const Tensor& q, std::optional<int64_t> dim = std::nullopt,
                           bool keepdim = false, const std::string& interpolation = "linear");

// Counting and searching (src/ops/search.cpp), not differentiable. unique gives the sorted distinct
// values of the flattened x, the index of each element's value (x's shape) and each value's count;
// unique_consecutive the same for runs of equal neighbours (unsorted). NaNs are distinct.
RTX_API TensorList unique(const Tensor& x);
RTX_API TensorList unique_consecutive(const Tensor& x);
// Occurrences of each value of a 1-d non-negative integer tensor (int64), or the sums of weights (of
// weights' floating dtype, else float64); max(x) + 1 bins, at least minlength.
RTX_API Tensor bincount(const Tensor& x, const Tensor& weights = {}, int64_t minlength = 0);
// For each value, the index where it would be inserted into the sorted last dim of sorted_sequence
// (1-d, or sharing values' leading dims) to keep it sorted: before equal elements, or after them when
// right. sorter (int64) sorts an unsorted sequence. int64 indices, int32 with out_int32.
RTX_API Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& values, bool right = false,
                            bool out_int32 = false, const Tensor& sorter = {});
// searchsorted(boundaries, x, right): the bucket of each element of x among 1-d boundaries.
RTX_API Tensor bucketize(const Tensor& x, const Tensor& boundaries, bool right = false, bool out_int32 = false);

// Joining and splitting (src/ops/stacking.cpp). Tensors with at least 1, 2 or 3 dims: a 0-d tensor
// becomes [1] ([1, 1], [1, 1, 1]), a 1-d [n] becomes [1, n] ([1, n, 1]), a 2-d [m, n] [m, n, 1].
RTX_API Tensor atleast_1d(const Tensor& x);
RTX_API Tensor atleast_2d(const Tensor& x);
RTX_API Tensor atleast_3d(const Tensor& x);
// cat along dim 1 (dim 0 for 1-d tensors), dim 0 of atleast_2d, dim 2 of atleast_3d, and the columns
// of 2-d tensors (1-d ones as columns).
RTX_API Tensor hstack(const TensorList& tensors);
RTX_API Tensor vstack(const TensorList& tensors);
RTX_API Tensor dstack(const TensorList& tensors);
RTX_API Tensor column_stack(const TensorList& tensors);
// Views of x along dim: `sections` pieces as equal as can be (the first size % sections one longer),
// or pieces cut at the given indices.
RTX_API TensorList tensor_split(const Tensor& x, int64_t sections, int64_t dim = 0);
RTX_API TensorList tensor_split(const Tensor& x, const Shape& indices, int64_t dim = 0);
// tensor_split along dim 1 (dim 0 of a 1-d tensor), 0 (at least 2 dims) and 2 (at least 3 dims);
// a number of sections must divide that dim.
RTX_API TensorList hsplit(const Tensor& x, int64_t sections);
RTX_API TensorList hsplit(const Tensor& x, const Shape& indices);
RTX_API TensorList vsplit(const Tensor& x, int64_t sections);
RTX_API TensorList vsplit(const Tensor& x, const Shape& indices);
RTX_API TensorList dsplit(const Tensor& x, int64_t sections);
RTX_API TensorList dsplit(const Tensor& x, const Shape& indices);
// Block-diagonal matrix of 0-d, 1-d (a row) or 2-d tensors.
RTX_API Tensor block_diag(const TensorList& tensors);
// Every combination of the elements of 1-d tensors, one per row ([n] for one tensor).
RTX_API Tensor cartesian_prod(const TensorList& tensors);

// Matrices (src/ops/matrix.cpp). The diagonal of a matrix, or the square matrix with a vector on
// diagonal `offset`.
RTX_API Tensor diag(const Tensor& x, int64_t offset = 0);
// Matrices over dims (dim1, dim2) of the result holding x's last dim on their diagonal `offset`.
RTX_API Tensor diag_embed(const Tensor& x, int64_t offset = 0, int64_t dim1 = -2, int64_t dim2 = -1);
// Sum of a matrix's diagonal.
RTX_API Tensor trace(const Tensor& x);
// The [2, count] int64 coordinates of the lower (upper) triangle of a rows x cols matrix, row by row.
RTX_API Tensor tril_indices(int64_t rows, int64_t cols, int64_t offset = 0,
                            const TensorOptions& options = TensorOptions(kInt64));
RTX_API Tensor triu_indices(int64_t rows, int64_t cols, int64_t offset = 0,
                            const TensorOptions& options = TensorOptions(kInt64));
// Kronecker product.
RTX_API Tensor kron(const Tensor& a, const Tensor& b);
// Contracts a's dims_a with b's dims_b (in pairs); the int form takes a's last n dims and b's first n.
RTX_API Tensor tensordot(const Tensor& a, const Tensor& b, int64_t n = 2);
RTX_API Tensor tensordot(const Tensor& a, const Tensor& b, const Shape& dims_a, const Shape& dims_b);
// 3-d cross product along dim (the first dim of size 3 when absent), broadcast.
RTX_API Tensor cross(const Tensor& a, const Tensor& b, std::optional<int64_t> dim = std::nullopt);
// p-norm distances between the rows of [..., P, M] and [..., R, M]: [..., P, R].
RTX_API Tensor cdist(const Tensor& a, const Tensor& b, double p = 2.0);
// x turned k quarter turns from dims[0] towards dims[1].
RTX_API Tensor rot90(const Tensor& x, int64_t k = 1, const Shape& dims = {0, 1});

// ---- multi-tensor ops (one kernel call per device and dtype of the list) ------------------------
// The ord-norm of each tensor as a 0-d tensor of its dtype, or of dtype converted to (PyTorch's _foreach_norm).
RTX_API TensorList foreach_norm(const TensorList& tensors, double ord = 2.0,
                                std::optional<DType> dtype = std::nullopt);
// Multiplies every tensor in place by scalar, a 0-d tensor on their device or on the CPU (PyTorch's _foreach_mul_).
RTX_API void foreach_mul_(TensorList& tensors, const Tensor& scalar);
// Multiplies every tensor in place by a number.
RTX_API void foreach_mul_(TensorList& tensors, const Scalar& scalar);

}  // namespace rtx
