// nn::Module: registration of parameters, buffers and submodules, recursive traversal with dotted
// names, training mode and gradient reset.
#include <unordered_set>

#include "core/check.h"
#include "rtx/nn.h"

namespace rtx::nn {

Module::Module(std::string name) : name_(std::move(name)) {}

Module::~Module() = default;

void Module::check_new_name(const std::string& name, const char* what) const {
  RTX_CHECK(!name.empty(), ValueError, "[{}] {}: the name must not be empty", what, this->name());
  RTX_CHECK(name.find('.') == std::string::npos, ValueError, "[{}] {}: the name '{}' must not contain '.'", what,
            this->name(), name);
  bool taken = parameters_.contains(name) || buffers_.contains(name);
  for (const auto& child : children_) taken = taken || child.first == name;
  RTX_CHECK(!taken, ValueError, "[{}] {}: the name '{}' is already registered", what, this->name(), name);
}

Tensor Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
  check_new_name(name, "register_parameter");
  RTX_CHECK(t.defined(), ValueError, "[register_parameter] {}: parameter '{}' is undefined", this->name(), name);
  RTX_CHECK(t.is_leaf(), ValueError,
            "[register_parameter] {}: parameter '{}' is the result of an op that records gradients; pass a leaf "
            "(detach it)",
            this->name(), name);
  t.requires_grad_(requires_grad);
  parameters_.insert(name, t);
  return t;
}

Tensor Module::register_buffer(const std::string& name, Tensor t) {
  check_new_name(name, "register_buffer");
  RTX_CHECK(t.defined(), ValueError, "[register_buffer] {}: buffer '{}' is undefined", this->name(), name);
  buffers_.insert(name, t);
  return t;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name, "register_module");
  RTX_CHECK(module != nullptr, ValueError, "[register_module] {}: module '{}' is null", this->name(), name);
  children_.emplace_back(name, std::move(module));
}

std::vector<std::pair<std::string, const Module*>> Module::prefixed_modules() const {
  std::vector<std::pair<std::string, const Module*>> out{{"", this}};
  for (size_t i = 0; i < out.size(); ++i) {
    // Insert each module's children right after it: depth-first pre-order, as PyTorch walks the tree.
    const auto [prefix, module] = out[i];
    std::vector<std::pair<std::string, const Module*>> kids;
    for (const auto& [name, child] : module->children_) kids.emplace_back(prefix + name + ".", child.get());
    out.insert(out.begin() + static_cast<std::ptrdiff_t>(i) + 1, kids.begin(), kids.end());
  }
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out;
  for (const auto& [prefix, module] : prefixed_modules())
    out.emplace_back(prefix.empty() ? prefix : prefix.substr(0, prefix.size() - 1), const_cast<Module*>(module));
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& child : children_) out.push_back(child.second);
  return out;
}

TensorDict Module::named_parameters(bool recurse) const {
  TensorDict out;
  std::unordered_set<const void*> seen;
  const auto modules = recurse ? prefixed_modules() : std::vector<std::pair<std::string, const Module*>>{{"", this}};
  for (const auto& [prefix, module] : modules)
    for (const auto& [name, p] : module->parameters_)
      if (seen.insert(p.impl()).second) out.insert(prefix + name, p);
  return out;
}

TensorList Module::parameters(bool recurse) const { return named_parameters(recurse).values(); }

TensorDict Module::named_buffers(bool recurse) const {
  TensorDict out;
  const auto modules = recurse ? prefixed_modules() : std::vector<std::pair<std::string, const Module*>>{{"", this}};
  for (const auto& [prefix, module] : modules)
    for (const auto& [name, b] : module->buffers_) out.insert(prefix + name, b);
  return out;
}

TensorList Module::buffers(bool recurse) const { return named_buffers(recurse).values(); }

int64_t Module::num_parameters() const {
  int64_t total = 0;
  for (const auto& p : parameters()) total += p.numel();
  return total;
}

void Module::train(bool on) {
  training_ = on;
  for (const auto& child : children_) child.second->train(on);
}

void Module::zero_grad() {
  for (auto& p : parameters()) p.set_grad(Tensor());
}

Tensor Module::forward(const Tensor&) {
  RTX_THROW(Error, "[forward] {} does not override forward(const Tensor&)", name());
}

}  // namespace rtx::nn
