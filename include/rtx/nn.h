// rtx::nn: modules in the manner of PyTorch. A Module owns named parameters, buffers and submodules;
// parameters(), state_dict() (PyTorch's dotted keys), to(), train()/eval() and zero_grad() reach the
// whole tree. The layers compute through the public ops and initialize like PyTorch, drawing from the
// library's generator (rtx::manual_seed makes a model reproducible on every device).
//
//   struct Net : rtx::nn::Module {
//     std::shared_ptr<rtx::nn::Linear> fc1, fc2;
//     Net() {
//       fc1 = register_module("fc1", std::make_shared<rtx::nn::Linear>(784, 128));
//       fc2 = register_module("fc2", std::make_shared<rtx::nn::Linear>(128, 10));
//     }
//     rtx::Tensor forward(const rtx::Tensor& x) override { return (*fc2)(rtx::relu((*fc1)(x))); }
//   };
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rtx/device.h"
#include "rtx/dtype.h"
#include "rtx/export.h"
#include "rtx/tensor.h"

namespace rtx::nn {

// Tensors by name in insertion order: what named_parameters(), named_buffers() and state_dict()
// return and load_state_dict() takes.
class RTX_API TensorDict {
 public:
  using Item = std::pair<std::string, Tensor>;

  // Adds key, or replaces its value where it is already present (keeping its position).
  void insert(const std::string& key, Tensor value);
  bool contains(const std::string& key) const { return index_.count(key) != 0; }
  // The value of key; ValueError naming the key when absent.
  const Tensor& at(const std::string& key) const;
  Tensor& at(const std::string& key);
  const Tensor& operator[](const std::string& key) const { return at(key); }
  Tensor& operator[](const std::string& key) { return at(key); }
  std::vector<std::string> keys() const;
  TensorList values() const;
  const std::vector<Item>& items() const { return items_; }
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  std::vector<Item>::const_iterator begin() const { return items_.begin(); }
  std::vector<Item>::const_iterator end() const { return items_.end(); }

 private:
  std::vector<Item> items_;
  std::unordered_map<std::string, size_t> index_;
};

// Keys load_state_dict found on one side only (empty after a strict load).
struct LoadStateDictResult {
  std::vector<std::string> missing_keys;     // in the module, not in the state dict
  std::vector<std::string> unexpected_keys;  // in the state dict, not in the module
};

// ---- the operations Module is built on, shared with the Python nn.Module -------------------------------
// Converts each distinct tensor of tensors (a tensor listed twice, such as a tied weight, once) in
// place: its data is replaced by the data converted to device and, for floating tensors, to dtype,
// so every handle to it (a module's, an optimizer's, a Python Parameter's) sees the converted
// tensor; leaves stay leaves with their requires_grad, and a gradient is converted alongside.
RTX_API void convert_in_place(const TensorList& tensors, std::optional<Device> device, std::optional<DType> dtype,
                              bool non_blocking = false);
// Copies state into own (the tensors of a module's state dict, by key), converting dtype and device.
// strict: a key present on one side only raises ValueError naming every such key. A value that is
// undefined or of another shape raises (ShapeError naming the key and both shapes), strict or not.
// Everything is checked before anything is copied: when it raises, nothing has changed. owner names
// the module in messages.
RTX_API LoadStateDictResult load_into(const TensorDict& own, const TensorDict& state, bool strict,
                                      const std::string& owner);

namespace utils {
// Scales the gradients of parameters in place so that their total norm_type-norm (over all
// gradients as one vector; norm_type may be infinity) is at most max_norm: each is multiplied by
// min(1, max_norm / (total + 1e-6)), computed on the device (no host round trip). Returns the total
// norm before clipping (a 0-d tensor in the gradients' dtype on the first gradient's device; zero
// without gradients). error_if_nonfinite: a NaN or infinite total raises ValueError (a host sync).
RTX_API Tensor clip_grad_norm_(const TensorList& parameters, double max_norm, double norm_type = 2.0,
                               bool error_if_nonfinite = false);
// Clamps every gradient of parameters in place to [-clip_value, clip_value].
RTX_API void clip_grad_value_(const TensorList& parameters, double clip_value);
}  // namespace utils

// The base of every layer and model. Subclasses register their parameters, buffers and submodules
// in the constructor and override forward(). Modules are shared (std::shared_ptr) and not copyable.
class RTX_API Module {
 public:
  // name: what repr() prints; by default the class's own name ("Linear", "Net").
  explicit Module(std::string name = {});
  virtual ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // ---- registration (names are unique per module, non-empty and without '.') --------------------
  // Makes t (a leaf) a parameter; returns it (a handle sharing the registered tensor).
  Tensor register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  // State that is not trained but saved and moved with the module (running statistics, ...); returns it.
  Tensor register_buffer(const std::string& name, Tensor t);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

  // ---- traversal (registration order, recursive; keys like "features.0.weight") ---------------------
  // Each parameter once, under its first name (a parameter shared by two modules is listed once).
  TensorDict named_parameters(bool recurse = true) const;
  TensorList parameters(bool recurse = true) const;
  TensorDict named_buffers(bool recurse = true) const;
  TensorList buffers(bool recurse = true) const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const { return children_; }
  std::vector<std::shared_ptr<Module>> children() const;
  // This module (under "") and every descendant, depth first (pointers owned by the tree).
  std::vector<std::pair<std::string, Module*>> named_modules();
  // Total number of elements of parameters().
  int64_t num_parameters() const;

  // ---- modes, devices and gradients ---------------------------------------------------------------
  // Training mode for this module and its descendants (Dropout and BatchNorm behave differently).
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // Moves every parameter and buffer in place: the Tensor handles stay valid (an optimizer built
  // earlier keeps working), parameters stay leaves and keep requires_grad, gradients move with them.
  void to(Device device);
  // Converts floating parameters and buffers (integer buffers such as num_batches_tracked keep theirs).
  void to(DType dtype);
  void to(Device device, DType dtype);
  // Sets every parameter's gradient to undefined.
  void zero_grad();

  // ---- state -------------------------------------------------------------------------------------
  // Parameters and buffers by dotted name, detached and sharing storage with the module.
  TensorDict state_dict() const;
  // Copies values into the parameters and buffers of the same names (converting dtype and device).
  // strict: a key present on one side only raises ValueError naming every such key. A shape that
  // differs raises ShapeError naming the key and both shapes, strict or not. Nothing is copied when
  // it raises.
  LoadStateDictResult load_state_dict(const TensorDict& state, bool strict = true);

  // ---- computing and printing ----------------------------------------------------------------------
  // Raises Error unless overridden.
  virtual Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }
  // The class name and extra_repr(), then the children indented: PyTorch's module printing.
  std::string repr() const;
  // The settings repr() prints in the parentheses ("in_features=2, out_features=3, bias=True").
  virtual std::string extra_repr() const { return {}; }
  std::string name() const;

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void check_new_name(const std::string& name, const char* what) const;
  // This module and its descendants with their key prefixes ("", "features.", "features.0.").
  std::vector<std::pair<std::string, const Module*>> prefixed_modules() const;
  // convert_in_place over every parameter and buffer of the tree.
  void convert(std::optional<Device> device, std::optional<DType> dtype);

  std::string name_;
  bool training_ = true;
  TensorDict parameters_;
  TensorDict buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

RTX_API std::ostream& operator<<(std::ostream& os, const Module& module);

// ---- initialization (in place, without recording gradients) ------------------------------------------
namespace init {
// fan_in and fan_out of a weight of at least 2 dims ([out, in, kernel...]).
RTX_API std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& weight);
// Uniform on +-gain * sqrt(3 / fan_in) with gain = sqrt(2 / (1 + a^2)) (leaky_relu's gain).
RTX_API Tensor& kaiming_uniform_(Tensor& weight, double a = 0.0);
// Uniform on +-gain * sqrt(6 / (fan_in + fan_out)).
RTX_API Tensor& xavier_uniform_(Tensor& weight, double gain = 1.0);
}  // namespace init

// ---- layers with parameters --------------------------------------------------------------------------

// y = x weight^T + bias; weight [out, in] and bias uniform on +-1/sqrt(in) (PyTorch's default).
class RTX_API Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  void reset_parameters();

  int64_t in_features, out_features;
  Tensor weight, bias;  // bias undefined without one
};

// 2-d convolution over NCHW inputs with a square kernel: weight [out, in, k, k], weight and bias
// uniform on +-1/sqrt(in * k * k) (PyTorch's default).
class RTX_API Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1, int64_t padding = 0,
         bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  void reset_parameters();

  int64_t in_channels, out_channels, kernel_size, stride, padding;
  Tensor weight, bias;
};

// Batch normalization over dim 1 with learned weight (ones) and bias (zeros) and the buffers
// running_mean, running_var and num_batches_tracked. Training mode normalizes with the batch's
// statistics and updates the running ones; evaluation mode uses the running ones.
class RTX_API BatchNorm : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  int64_t num_features;
  double eps, momentum;
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 protected:
  BatchNorm(int64_t num_features, double eps, double momentum, std::vector<int64_t> accepted_dims);

 private:
  std::vector<int64_t> accepted_dims_;
};

// Over [N, C] or [N, C, L] inputs.
class RTX_API BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(int64_t num_features, double eps = 1e-5, double momentum = 0.1);
};

// Over [N, C, H, W] inputs.
class RTX_API BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1);
};

// Normalizes over the trailing normalized_shape dims, then scales (weight, ones) and shifts (bias, zeros).
class RTX_API LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5);
  explicit LayerNorm(int64_t normalized_size, double eps = 1e-5) : LayerNorm(Shape{normalized_size}, eps) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  Shape normalized_shape;
  double eps;
  Tensor weight, bias;
};

// Rows of weight [num_embeddings, embedding_dim] (standard normal) picked by int64 indices; the
// padding_idx row starts at zero and gets no gradient.
class RTX_API Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx = std::nullopt);
  Tensor forward(const Tensor& indices) override;
  std::string extra_repr() const override;

  int64_t num_embeddings, embedding_dim;
  std::optional<int64_t> padding_idx;
  Tensor weight;
};

// ---- layers without parameters ------------------------------------------------------------------------

// Zeroes elements with probability p and scales the rest by 1/(1-p) in training mode; identity in eval.
class RTX_API Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  double p;
};

class RTX_API ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override;
};

// approximate: "none" (erf) or "tanh".
class RTX_API GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  std::string approximate;
};

// Flattens dims start_dim..end_dim (by default all but the batch dim).
class RTX_API Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  int64_t start_dim, end_dim;
};

// Max over square windows; the stride defaults to the kernel size.
class RTX_API MaxPool2d : public Module {
 public:
  explicit MaxPool2d(int64_t kernel_size, std::optional<int64_t> stride = std::nullopt, int64_t padding = 0);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  int64_t kernel_size, stride, padding;
};

// ---- containers ----------------------------------------------------------------------------------------

// Runs its children in order, each on the previous one's output; children are named "0", "1", ...
//   auto net = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(2, 8), std::make_shared<nn::ReLU>());
// C++ evaluates a call's arguments in no fixed order, so the layers above may draw their initial
// values from the generator in either order. Where the order matters (values equal to another
// program's for one seed), pass a braced list, whose elements are evaluated left to right:
//   auto net = std::make_shared<nn::Sequential>(
//       std::initializer_list<std::shared_ptr<nn::Module>>{std::make_shared<nn::Linear>(2, 8), ...});
// or construct the layers one statement at a time and push_back them.
class RTX_API Sequential : public Module {
 public:
  Sequential();
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);
  template <typename M, typename... Ms>
  explicit Sequential(std::shared_ptr<M> first, std::shared_ptr<Ms>... rest) : Sequential() {
    push_back(std::move(first));
    (push_back(std::move(rest)), ...);
  }
  void push_back(std::shared_ptr<Module> module);
  size_t size() const { return named_children().size(); }
  // The child at index (IndexError when out of range).
  std::shared_ptr<Module> operator[](size_t index) const;
  Tensor forward(const Tensor& x) override;
};

}  // namespace rtx::nn
