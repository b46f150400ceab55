// nn::TensorDict: tensors by name in insertion order, with a hash index for lookups.
#include "core/check.h"
#include "rtx/nn.h"

namespace rtx::nn {

void TensorDict::insert(const std::string& key, Tensor value) {
  const auto found = index_.find(key);
  if (found != index_.end()) {
    items_[found->second].second = std::move(value);
    return;
  }
  index_.emplace(key, items_.size());
  items_.emplace_back(key, std::move(value));
}

const Tensor& TensorDict::at(const std::string& key) const {
  const auto found = index_.find(key);
  RTX_CHECK(found != index_.end(), ValueError, "[TensorDict] no entry named '{}'", key);
  return items_[found->second].second;
}

Tensor& TensorDict::at(const std::string& key) {
  return const_cast<Tensor&>(static_cast<const TensorDict&>(*this).at(key));
}

std::vector<std::string> TensorDict::keys() const {
  std::vector<std::string> out;
  out.reserve(items_.size());
  for (const auto& item : items_) out.push_back(item.first);
  return out;
}

TensorList TensorDict::values() const {
  TensorList out;
  out.reserve(items_.size());
  for (const auto& item : items_) out.push_back(item.second);
  return out;
}

}  // namespace rtx::nn
