// Joining and splitting front-ends: cat, stack, split (by size and by sizes) and chunk. cat promotes
// its inputs to their common dtype and skips legacy empty 1-d [0] tensors like PyTorch; stack is
// unsqueeze + cat; the splits return narrow views (no copies) whose gradients join in one cat.
#include "autograd/function.h"
#include "dispatch/index.h"
#include "ops/internal.h"

namespace rtx {

namespace {

using detail::check_defined;
using detail::shape_str;

// PyTorch skips 1-d empty tensors in cat whatever the other inputs' shapes (a legacy behaviour).
bool skipped_in_cat(const Tensor& t) { return t.dim() == 1 && t.numel() == 0; }

// Pieces of x along dim with the given lengths (adding up to its size): views of x, the outputs of
// one recorded node whose backward joins the pieces' gradients with one cat (zeros for a piece that
// received none), as PyTorch's split does, rather than a zero-padded gradient per piece.
TensorList split_views(const Tensor& x, int64_t dim, const Shape& lengths) {
  TensorList out;
  out.reserve(lengths.size());
  {
    NoGradGuard no_grad;  // plain views: the node below records all of them
    int64_t start = 0;
    for (int64_t len : lengths) {
      out.push_back(narrow(x, dim, start, len));
      start += len;
    }
  }
  if (auto node = autograd::make_node("split", x)) {
    node->set_backward([dim, lengths, sizes = x.sizes(), options = x.options()](const TensorList& g, const TensorList&) {
      TensorList parts;
      parts.reserve(lengths.size());
      for (size_t i = 0; i < lengths.size(); ++i) {
        if (i < g.size() && g[i].defined()) {
          parts.push_back(g[i]);
        } else {
          Shape piece = sizes;
          piece[dim] = lengths[i];
          parts.push_back(zeros(piece, options));
        }
      }
      return TensorList{cat(parts, dim)};
    });
    for (const Tensor& piece : out) {
      autograd::set_history(piece, node);
      autograd::mark_view(piece);
    }
  }
  return out;
}

int64_t wrap_split_dim(const Tensor& x, int64_t dim, const char* op) {
  check_defined(x, op);
  RTX_CHECK(x.dim() > 0, ShapeError, "[{}] needs a tensor with at least 1 dim, got a 0-d tensor", op);
  return detail::wrap_dim(dim, x.dim(), op);
}

}  // namespace

Tensor cat(const TensorList& tensors, int64_t dim) {
  RTX_CHECK(!tensors.empty(), ValueError, "[cat] expects a non-empty list of tensors");
  std::vector<const Tensor*> all;
  const Tensor* first = nullptr;  // the first input that is not skipped: it fixes the shape
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    RTX_CHECK(t.defined(), ValueError, "[cat] tensor {} of the list is undefined", i);
    RTX_CHECK(t.dim() > 0, ShapeError, "[cat] tensor {} of the list is 0-d; 0-d tensors cannot be concatenated (use stack)",
              i);
    detail::check_same_device("cat", tensors[0], t);
    all.push_back(&t);
    if (first == nullptr && !skipped_in_cat(t)) first = &t;
  }
  const DType dtype = detail::result_type_of(all.data(), all.size(), nullptr, 0);
  const Device device = tensors[0].device();
  if (first == nullptr) {
    detail::wrap_dim(dim, 1, "cat");
    return detail::make_tensor({0}, dtype, device);
  }
  const int64_t d = detail::wrap_dim(dim, first->dim(), "cat");
  Shape shape = first->sizes();
  shape[d] = 0;
  TensorList inputs;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (skipped_in_cat(t)) continue;
    RTX_CHECK(t.dim() == first->dim(), ShapeError,
              "[cat] tensors must have the same number of dims: tensor {} has shape {} but the first has {}", i,
              shape_str(t.sizes()), shape_str(first->sizes()));
    for (int64_t k = 0; k < t.dim(); ++k)
      RTX_CHECK(k == d || t.size(k) == first->size(k), ShapeError,
                "[cat] sizes must match except in dim {}: tensor {} has shape {} but the first has {} (size {} != {} at "
                "dim {})",
                d, i, shape_str(t.sizes()), shape_str(first->sizes()), t.size(k), first->size(k), k);
    shape[d] += t.size(d);
    inputs.push_back(t);
  }
  Tensor out = detail::make_tensor(shape, dtype, device);
  if (out.numel() > 0) kernels::cat_kernel.get(device)(out, inputs, d);
  if (auto node = autograd::make_node_list("cat", tensors)) {
    std::vector<int64_t> lengths;  // -1: skipped, no gradient
    for (const Tensor& t : tensors) lengths.push_back(skipped_in_cat(t) ? -1 : t.size(d));
    node->set_backward([lengths, d](const TensorList& g, const TensorList&) {
      TensorList grads;
      int64_t start = 0;
      for (int64_t len : lengths) {
        grads.push_back(len < 0 ? Tensor() : narrow(g[0], d, start, len));
        start += std::max<int64_t>(len, 0);
      }
      return grads;
    });
    autograd::set_history(out, node);
  }
  return out;
}

Tensor stack(const TensorList& tensors, int64_t dim) {
  RTX_CHECK(!tensors.empty(), ValueError, "[stack] expects a non-empty list of tensors");
  for (size_t i = 0; i < tensors.size(); ++i) {
    RTX_CHECK(tensors[i].defined(), ValueError, "[stack] tensor {} of the list is undefined", i);
    RTX_CHECK(tensors[i].sizes() == tensors[0].sizes(), ShapeError,
              "[stack] expects tensors of one shape, but tensor 0 has shape {} and tensor {} has {}",
              shape_str(tensors[0].sizes()), i, shape_str(tensors[i].sizes()));
  }
  const int64_t d = detail::wrap_dim(dim, tensors[0].dim() + 1, "stack");
  TensorList parts;
  parts.reserve(tensors.size());
  for (const Tensor& t : tensors) parts.push_back(unsqueeze(t, d));
  return cat(parts, d);
}

TensorList split(const Tensor& x, int64_t split_size, int64_t dim) {
  const int64_t d = wrap_split_dim(x, dim, "split");
  const int64_t size = x.size(d);
  RTX_CHECK(split_size >= 0, ValueError, "[split] split_size must be nonnegative, got {}", split_size);
  RTX_CHECK(split_size > 0 || size == 0, ValueError,
            "[split] split_size can only be 0 when dim {} has size 0, but it has size {}", d, size);
  if (size == 0) return split_views(x, d, {0});
  Shape lengths;
  for (int64_t start = 0; start < size; start += split_size) lengths.push_back(std::min(split_size, size - start));
  return split_views(x, d, lengths);
}

TensorList split(const Tensor& x, const Shape& split_sizes, int64_t dim) {
  const int64_t d = wrap_split_dim(x, dim, "split");
  int64_t total = 0;
  for (int64_t s : split_sizes) {
    RTX_CHECK(s >= 0, ValueError, "[split] split_sizes must be nonnegative, got {}", shape_str(split_sizes));
    total += s;
  }
  RTX_CHECK(total == x.size(d), ValueError,
            "[split] split_sizes {} add up to {}, but dim {} of the input (shape {}) has size {}", shape_str(split_sizes),
            total, d, shape_str(x.sizes()), x.size(d));
  return split_views(x, d, split_sizes);
}

TensorList chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  const int64_t d = wrap_split_dim(x, dim, "chunk");
  RTX_CHECK(chunks > 0, ValueError, "[chunk] chunks must be positive, got {}", chunks);
  const int64_t size = x.size(d);
  // An empty dim still gives `chunks` (empty) pieces.
  if (size == 0) return split_views(x, d, Shape(chunks, 0));
  return split(x, (size + chunks - 1) / chunks, d);
}

}  // namespace rtx
