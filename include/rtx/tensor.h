// Tensor: a cheap, shared handle to an n-dimensional array (storage + sizes + strides + offset) with an
// optional autograd record. Copying a Tensor copies the handle, never the data.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "rtx/device.h"
#include "rtx/dtype.h"
#include "rtx/error.h"
#include "rtx/export.h"
#include "rtx/scalar.h"

namespace rtx {

class Tensor;
using Shape = std::vector<int64_t>;    // sizes, strides or dims
using TensorList = std::vector<Tensor>;

namespace detail {
class TensorImpl;
}
namespace autograd {
class Node;
}

// dtype, device and requires_grad for the creation functions; converts from each of them alone. A
// dtype or device left unset takes the op's default: the source's for the *_like ops, one inferred
// from the values where PyTorch infers it (arange, full, tensor), else get_default_dtype() and the
// CPU.
struct RTX_API TensorOptions {
  std::optional<DType> dtype;
  std::optional<Device> device;
  bool requires_grad = false;

  TensorOptions() = default;
  TensorOptions(DType d) : dtype(d) {}                                                              // NOLINT
  TensorOptions(DType d, Device dev, bool rg = false) : dtype(d), device(dev), requires_grad(rg) {}  // NOLINT
  TensorOptions(Device dev) : device(dev) {}                                                        // NOLINT
  TensorOptions(DeviceType dev) : device(Device(dev)) {}                                            // NOLINT

  // The dtype, or fallback when unset.
  DType dtype_or(DType fallback = get_default_dtype()) const { return dtype.value_or(fallback); }
  // The device, or fallback when unset.
  Device device_or(Device fallback = Device(kCPU)) const { return device.value_or(fallback); }
  // These options with the unset dtype and device taken from the defaults given.
  TensorOptions resolved(DType default_dtype = get_default_dtype(), Device default_device = Device(kCPU)) const {
    return TensorOptions(dtype_or(default_dtype), device_or(default_device), requires_grad);
  }
};

struct ValuesIndices;

class RTX_API Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<detail::TensorImpl> impl);

  // ---- metadata -------------------------------------------------------------------------------
  bool defined() const { return impl_ != nullptr; }
  const Shape& sizes() const;
  const Shape& strides() const;
  Shape shape() const { return sizes(); }
  int64_t size(int64_t dim) const;    // negative dims count from the end
  int64_t stride(int64_t dim) const;
  int64_t dim() const;
  int64_t numel() const;
  int64_t storage_offset() const;
  DType dtype() const;
  Device device() const;
  TensorOptions options() const;  // dtype and device (requires_grad false)
  bool is_contiguous() const;
  bool is_cpu() const { return device().is_cpu(); }
  bool is_cuda() const { return device().is_cuda(); }
  bool is_floating_point() const { return is_floating(dtype()); }
  size_t element_size() const { return rtx::element_size(dtype()); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  // Address of the first element (storage base + offset).
  void* data_ptr() const;
  template <typename T>
  T* data_ptr() const {
    check_dtype_is(dtype_of_v<T>);
    return static_cast<T*>(data_ptr());
  }
  // Whether both handles refer to the same TensorImpl.
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  // Whether both share one storage (views of each other or of a common base).
  bool shares_storage(const Tensor& other) const;
  // Bumped by every in-place write through any view of the storage.
  uint64_t version() const;

  // ---- autograd -------------------------------------------------------------------------------
  bool requires_grad() const;
  Tensor& requires_grad_(bool requires_grad = true);
  // The accumulated gradient of a leaf (undefined until a backward reaches it).
  Tensor grad() const;
  void set_grad(const Tensor& grad);
  bool is_leaf() const;
  // The node that computes this tensor's gradient's contribution to its inputs (null for leaves).
  std::shared_ptr<autograd::Node> grad_fn() const;
  // Which output of grad_fn this tensor is.
  uint32_t output_nr() const;
  void backward(const Tensor& gradient = {}, bool retain_graph = false, bool create_graph = false) const;
  Tensor detach() const;
  Tensor& detach_();
  // hook(grad) runs when this tensor's gradient is computed; a defined return value replaces it.
  int64_t register_hook(std::function<Tensor(const Tensor&)> hook) const;
  // hook(tensor) runs on a leaf after a backward pass has accumulated its .grad (the leaf is passed,
  // its .grad updated); PyTorch's register_post_accumulate_grad_hook. Removed by remove_hook.
  int64_t register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) const;
  void remove_hook(int64_t handle) const;
  // Keep .grad for a non-leaf tensor too.
  void retain_grad() const;
  bool retains_grad() const;

  // ---- conversion and copying -----------------------------------------------------------------
  // A tensor with this data converted or moved (this tensor itself when nothing changes, unless copy).
  // non_blocking: a move between host and GPU returns before the copy completes when the host side
  // is pinned memory (a move to the CPU then allocates pinned memory); synchronize before reading it.
  Tensor to(DType dtype, bool non_blocking = false, bool copy = false) const;
  Tensor to(Device device, bool non_blocking = false, bool copy = false) const;
  Tensor to(Device device, DType dtype, bool non_blocking = false, bool copy = false) const;
  Tensor cpu() const;
  Tensor cuda(int index = 0, bool non_blocking = false) const;
  // A copy of this CPU tensor in page-locked memory (this tensor when already there): moves from it
  // to a GPU can overlap with host work. Needs CUDA.
  Tensor pin_memory() const;
  bool is_pinned() const;
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor& copy_(const Tensor& src);
  Tensor& fill_(const Scalar& value);
  Tensor& zero_();
  // The value of a one-element tensor.
  Scalar item() const;
  template <typename T>
  T item() const {
    return item().to<T>();
  }
  // Values as a flat host vector (converted to T).
  template <typename T>
  std::vector<T> tolist() const;
  // PyTorch-style repr: tensor([[1., 2.], ...], dtype=..., device=..., requires_grad=True)
  std::string str() const;
  // str() with the dtype named dtype_prefix + its name ("dtype=rustytorch.float64") and the backward
  // node named grad_fn_name (where str() prints its op, "grad_fn=<mul>"): Python's repr.
  std::string str(const std::string& dtype_prefix, const std::string& grad_fn_name) const;

  // ---- views (share storage, never copy) ------------------------------------------------------
  Tensor view(const Shape& shape) const;        // -1 infers one size
  Tensor view_dtype(DType dtype) const;         // the same bytes as another dtype (rtx::view_dtype)
  Tensor reshape(const Shape& shape) const;     // a view when strides allow, else a copy
  Tensor permute(const Shape& dims) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;                             // transpose of a matrix (<= 2-d)
  Tensor mT() const;                            // transpose of the last two dims
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  // Python's t[start:end:step] along dim; start/end are clamped like Python's.
  Tensor slice(int64_t dim, std::optional<int64_t> start = std::nullopt, std::optional<int64_t> end = std::nullopt,
               int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor operator[](int64_t index) const { return select(0, index); }
  Tensor expand(const Shape& shape) const;      // -1 keeps a size
  Tensor expand_as(const Tensor& other) const { return expand(other.sizes()); }
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor unflatten(int64_t dim, const Shape& sizes) const;
  Tensor diagonal(int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1) const;
  Tensor as_strided(const Shape& sizes, const Shape& strides, std::optional<int64_t> storage_offset = std::nullopt) const;

  // ---- pointwise ------------------------------------------------------------------------------
#define RTX_UNARY(name, F, r, s, g) \
  Tensor name() const;              \
  Tensor& name##_();
#define RTX_BINARY(name, F, r, s, ga, gb) \
  Tensor name(const Tensor& other) const; \
  Tensor name(const Scalar& other) const; \
  Tensor& name##_(const Tensor& other);   \
  Tensor& name##_(const Scalar& other);
#define RTX_COMPARE(name, F)              \
  Tensor name(const Tensor& other) const; \
  Tensor name(const Scalar& other) const;
#define RTX_LOGICAL(name, F) Tensor name(const Tensor& other) const;
#define RTX_PREDICATE(name, F) Tensor name() const;
#include "rtx/pointwise.def"

  Tensor gelu(const std::string& approximate = "none") const;
  Tensor leaky_relu(double negative_slope = 0.01) const;
  Tensor elu(double alpha = 1.0) const;
  Tensor softplus(double beta = 1.0, double threshold = 20.0) const;
  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt) const;
  Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
  Tensor masked_fill(const Tensor& mask, const Scalar& value) const;
  Tensor& masked_fill_(const Tensor& mask, const Scalar& value);

  // ---- reductions (empty dims = all dims) -----------------------------------------------------
  Tensor sum(const Shape& dims = {}, bool keepdim = false) const;
  Tensor mean(const Shape& dims = {}, bool keepdim = false) const;
  Tensor prod(const Shape& dims = {}, bool keepdim = false) const;
  Tensor amax(const Shape& dims = {}, bool keepdim = false) const;
  Tensor amin(const Shape& dims = {}, bool keepdim = false) const;
  Tensor max() const;
  Tensor min() const;
  ValuesIndices max(int64_t dim, bool keepdim = false) const;
  ValuesIndices min(int64_t dim, bool keepdim = false) const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor argmin(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor var(const Shape& dims = {}, int64_t correction = 1, bool keepdim = false) const;
  Tensor std(const Shape& dims = {}, int64_t correction = 1, bool keepdim = false) const;
  Tensor norm(double p = 2.0, const Shape& dims = {}, bool keepdim = false) const;
  Tensor logsumexp(const Shape& dims, bool keepdim = false) const;
  Tensor any(const Shape& dims = {}, bool keepdim = false) const;
  Tensor all(const Shape& dims = {}, bool keepdim = false) const;
  Tensor cumsum(int64_t dim) const;

  // ---- linear algebra, nn ---------------------------------------------------------------------
  Tensor matmul(const Tensor& other) const;
  Tensor mm(const Tensor& other) const;
  Tensor bmm(const Tensor& other) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;

  // ---- indexing -------------------------------------------------------------------------------
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor tril(int64_t diagonal = 0) const;
  Tensor triu(int64_t diagonal = 0) const;

  // ---- internals ------------------------------------------------------------------------------
  detail::TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<detail::TensorImpl>& impl_ptr() const { return impl_; }

 private:
  void check_dtype_is(DType expected) const;
  std::shared_ptr<detail::TensorImpl> impl_;
};

// Result of ops returning values and their positions (max/min along a dim, topk, sort):
// `auto [values, indices] = rtx::topk(x, 5);`
struct ValuesIndices {
  Tensor values;
  Tensor indices;
};

RTX_API std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Arithmetic and comparison operators (a Scalar on either side never upcasts the tensor).
RTX_API Tensor operator-(const Tensor& a);
#define RTX_TENSOR_OPERATOR(op, name)                              \
  RTX_API Tensor operator op(const Tensor& a, const Tensor& b);   \
  RTX_API Tensor operator op(const Tensor& a, const Scalar& b);   \
  RTX_API Tensor operator op(const Scalar& a, const Tensor& b);
RTX_TENSOR_OPERATOR(+, add)
RTX_TENSOR_OPERATOR(-, sub)
RTX_TENSOR_OPERATOR(*, mul)
RTX_TENSOR_OPERATOR(/, div)
RTX_TENSOR_OPERATOR(==, eq)
RTX_TENSOR_OPERATOR(!=, ne)
RTX_TENSOR_OPERATOR(<, lt)
RTX_TENSOR_OPERATOR(<=, le)
RTX_TENSOR_OPERATOR(>, gt)
RTX_TENSOR_OPERATOR(>=, ge)
#undef RTX_TENSOR_OPERATOR
RTX_API Tensor& operator+=(Tensor& a, const Tensor& b);
RTX_API Tensor& operator+=(Tensor& a, const Scalar& b);
RTX_API Tensor& operator-=(Tensor& a, const Tensor& b);
RTX_API Tensor& operator-=(Tensor& a, const Scalar& b);
RTX_API Tensor& operator*=(Tensor& a, const Tensor& b);
RTX_API Tensor& operator*=(Tensor& a, const Scalar& b);
RTX_API Tensor& operator/=(Tensor& a, const Tensor& b);
RTX_API Tensor& operator/=(Tensor& a, const Scalar& b);

}  // namespace rtx
