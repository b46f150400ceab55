// nn::Sequential: children run in order, named by their position.
#include <string>

#include "core/check.h"
#include "rtx/nn.h"

namespace rtx::nn {

Sequential::Sequential() = default;

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (const auto& m : modules) push_back(m);
}

void Sequential::push_back(std::shared_ptr<Module> module) {
  register_module(std::to_string(size()), std::move(module));
}

std::shared_ptr<Module> Sequential::operator[](size_t index) const {
  RTX_CHECK(index < size(), IndexError, "[Sequential] index {} is out of range for {} modules", index, size());
  return named_children()[index].second;
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor out = x;
  for (const auto& child : named_children()) out = child.second->forward(out);
  return out;
}

}  // namespace rtx::nn
