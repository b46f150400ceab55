// Tensor handle: metadata accessors and the autograd-facing methods. Op methods live in
// tensor_methods.cpp and forward to the free functions.
#include "rtx/tensor.h"

#include "autograd/function.h"
#include "core/check.h"
#include "core/shape.h"
#include "core/tensor_impl.h"
#include "rtx/ops.h"

namespace rtx {

using detail::TensorImpl;

Tensor::Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

namespace {
[[noreturn]] void throw_undefined(const char* what) {
  RTX_THROW(Error, "[{}] called on an undefined tensor (a default-constructed Tensor holds no data)", what);
}
inline TensorImpl& get(const std::shared_ptr<TensorImpl>& p, const char* what) {
  if (!p) throw_undefined(what);
  return *p;
}
}  // namespace

const Shape& Tensor::sizes() const { return get(impl_, "sizes").sizes; }
const Shape& Tensor::strides() const { return get(impl_, "strides").strides; }
namespace {
// d wrapped into [0, dim); unlike ops (which treat a 0-d tensor as having dims 0 and -1), a 0-d tensor
// has no size or stride to read.
int64_t checked_dim(const Tensor& t, int64_t d, const char* what) {
  RTX_CHECK(t.dim() > 0, IndexError, "[{}] a 0-d tensor has no dims (asked for dim {})", what, d);
  return detail::wrap_dim(d, t.dim(), what);
}
}  // namespace

int64_t Tensor::size(int64_t d) const { return sizes()[checked_dim(*this, d, "size")]; }
int64_t Tensor::stride(int64_t d) const { return strides()[checked_dim(*this, d, "stride")]; }
int64_t Tensor::dim() const { return static_cast<int64_t>(get(impl_, "dim").sizes.size()); }
int64_t Tensor::numel() const { return get(impl_, "numel").numel; }
int64_t Tensor::storage_offset() const { return get(impl_, "storage_offset").offset; }
DType Tensor::dtype() const { return get(impl_, "dtype").dtype; }
Device Tensor::device() const { return get(impl_, "device").storage->device(); }
TensorOptions Tensor::options() const { return TensorOptions(dtype(), device()); }
bool Tensor::is_contiguous() const { return get(impl_, "is_contiguous").contiguous; }
void* Tensor::data_ptr() const { return get(impl_, "data_ptr").data(); }
bool Tensor::shares_storage(const Tensor& other) const {
  return impl_ && other.impl_ && impl_->storage == other.impl_->storage;
}
uint64_t Tensor::version() const { return get(impl_, "version").storage->version(); }

void Tensor::check_dtype_is(DType expected) const {
  RTX_CHECK(dtype() == expected, DTypeError, "[data_ptr] tensor has dtype {} but {} was requested", dtype(), expected);
}

// ---- autograd ---------------------------------------------------------------------------------

bool Tensor::requires_grad() const { return autograd::requires_grad(*this); }

Tensor& Tensor::requires_grad_(bool requires_grad) {
  TensorImpl& impl = get(impl_, "requires_grad_");
  if (!requires_grad && !autograd::requires_grad(*this)) return *this;  // already a leaf without grad
  RTX_CHECK(!requires_grad || is_floating(impl.dtype), DTypeError,
            "[requires_grad_] only floating point tensors can require gradients, but this one has dtype {}", impl.dtype);
  RTX_CHECK(!impl.autograd || !impl.autograd->grad_fn, Error,
            "[requires_grad_] can only be changed on leaf tensors; this one was computed by '{}' (use detach() to "
            "get a leaf)",
            impl.autograd ? impl.autograd->grad_fn->name() : "");
  impl.autograd_meta().requires_grad = requires_grad;
  return *this;
}

Tensor Tensor::grad() const {
  const TensorImpl& impl = get(impl_, "grad");
  return impl.autograd ? impl.autograd->grad : Tensor();
}

void Tensor::set_grad(const Tensor& grad) {
  TensorImpl& impl = get(impl_, "set_grad");
  if (grad.defined()) {
    RTX_CHECK(grad.sizes() == impl.sizes, ShapeError, "[set_grad] gradient shape {} does not match tensor shape {}",
              detail::shape_str(grad.sizes()), detail::shape_str(impl.sizes));
    RTX_CHECK(grad.dtype() == impl.dtype, DTypeError, "[set_grad] gradient dtype {} does not match tensor dtype {}",
              grad.dtype(), impl.dtype);
    RTX_CHECK(grad.device() == device(), DeviceError, "[set_grad] gradient is on {} but the tensor is on {}",
              grad.device(), device());
  }
  impl.autograd_meta().grad = grad;
}

bool Tensor::is_leaf() const {
  const TensorImpl& impl = get(impl_, "is_leaf");
  return !impl.autograd || !impl.autograd->grad_fn;
}

std::shared_ptr<autograd::Node> Tensor::grad_fn() const {
  const TensorImpl& impl = get(impl_, "grad_fn");
  return impl.autograd ? impl.autograd->grad_fn : nullptr;
}

uint32_t Tensor::output_nr() const {
  const TensorImpl& impl = get(impl_, "output_nr");
  return impl.autograd ? impl.autograd->output_nr : 0;
}

void Tensor::backward(const Tensor& gradient, bool retain_graph, bool create_graph) const {
  autograd::backward({*this}, gradient.defined() ? TensorList{gradient} : TensorList{}, retain_graph, create_graph);
}

Tensor Tensor::detach() const { return detail::alias(*this); }

Tensor& Tensor::detach_() {
  TensorImpl& impl = get(impl_, "detach_");
  if (impl.autograd) {
    impl.autograd->grad_fn.reset();
    impl.autograd->requires_grad = false;
    impl.autograd->is_view = false;
  }
  return *this;
}

namespace {
// Removes the (handle, hook) pair with this handle; true when there was one.
template <typename Hooks>
bool erase_handle(Hooks& hooks, int64_t handle) {
  for (auto it = hooks.begin(); it != hooks.end(); ++it) {
    if (it->first == handle) {
      hooks.erase(it);
      return true;
    }
  }
  return false;
}
}  // namespace

int64_t Tensor::register_hook(std::function<Tensor(const Tensor&)> hook) const {
  TensorImpl& impl = get(impl_, "register_hook");
  RTX_CHECK(requires_grad(), Error, "[register_hook] the tensor does not require grad, so no gradient will reach the hook");
  auto& m = impl.autograd_meta();
  if (m.grad_fn) return m.grad_fn->add_hook(m.output_nr, std::move(hook));
  const int64_t handle = autograd::next_hook_handle();
  m.leaf_hooks.emplace_back(handle, std::move(hook));
  return handle;
}

int64_t Tensor::register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) const {
  TensorImpl& impl = get(impl_, "register_post_accumulate_grad_hook");
  RTX_CHECK(requires_grad(), Error,
            "[register_post_accumulate_grad_hook] the tensor does not require grad, so no gradient will reach the hook");
  auto& m = impl.autograd_meta();
  RTX_CHECK(!m.grad_fn, Error,
            "[register_post_accumulate_grad_hook] post accumulate grad hooks cannot be registered on non-leaf tensors "
            "(this one was computed by '{}'); use register_hook",
            m.grad_fn->name());
  const int64_t handle = autograd::next_hook_handle();
  m.post_accumulate_hooks.emplace_back(handle, std::move(hook));
  return handle;
}

void Tensor::remove_hook(int64_t handle) const {
  TensorImpl& impl = get(impl_, "remove_hook");
  if (!impl.autograd) return;
  auto& m = *impl.autograd;
  if (m.grad_fn && m.grad_fn->remove_hook(handle)) return;
  if (erase_handle(m.leaf_hooks, handle)) return;
  erase_handle(m.post_accumulate_hooks, handle);
}

void Tensor::retain_grad() const {
  TensorImpl& impl = get(impl_, "retain_grad");
  RTX_CHECK(requires_grad(), Error, "[retain_grad] the tensor does not require grad");
  auto& m = impl.autograd_meta();
  if (!m.grad_fn || m.retains_grad) return;  // leaves keep .grad anyway
  m.retains_grad = true;
  std::weak_ptr<TensorImpl> weak = impl_;
  m.grad_fn->add_hook(m.output_nr, [weak](const Tensor& g) {
    if (auto p = weak.lock()) {
      auto& meta = p->autograd_meta();
      NoGradGuard no_grad;
      meta.grad = meta.grad.defined() ? meta.grad + g : g.clone();
    }
    return Tensor();
  });
}

bool Tensor::retains_grad() const {
  const TensorImpl& impl = get(impl_, "retains_grad");
  return impl.autograd && impl.autograd->retains_grad;
}

}  // namespace rtx
