// What the multi-tensor updates share: list checks, the buckets of parameters that one kernel call
// takes (one device and dtype, and whatever else must be equal within a call), contiguous stand-ins
// for non-contiguous tensors, and the scalars a step reads from tensors, resolved for one device.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "dispatch/optim.h"
#include "rtx/optim.h"

namespace rtx::optim::detail {

// grads has one entry per parameter; list (a state list) too, or is empty and becomes so (undefined entries).
void check_lists(const char* op, const TensorList& params, const TensorList& grads);
void size_state_list(const char* op, const char* name, TensorList& list, size_t n);

// The state tensor called name, or undefined.
inline Tensor find_state(const std::map<std::string, Tensor>& tensors, const char* name) {
  const auto found = tensors.find(name);
  return found == tensors.end() ? Tensor() : found->second;
}

// The indices [0, n) in buckets of equal key(i), buckets in the order of their first index.
template <typename Key, typename KeyOf>
std::vector<std::vector<size_t>> buckets(size_t n, const KeyOf& key_of) {
  std::vector<std::pair<Key, std::vector<size_t>>> found;
  for (size_t i = 0; i < n; ++i) {
    const Key key = key_of(i);
    size_t b = 0;
    while (b < found.size() && !(found[b].first == key)) ++b;
    if (b == found.size()) found.emplace_back(key, std::vector<size_t>());
    found[b].second.push_back(i);
  }
  std::vector<std::vector<size_t>> out;
  for (auto& entry : found) out.push_back(std::move(entry.second));
  return out;
}

// The tensors of one kernel call: each tensor itself when it is contiguous, else a contiguous copy
// that finish() writes back. finish() also bumps the version of every tensor written in place.
class Staging {
 public:
  // Appends t (or its stand-in) to list; written: the kernel changes it.
  void add(TensorList& list, const Tensor& t, bool written);
  void finish();

 private:
  std::vector<std::pair<Tensor, Tensor>> written_;  // (tensor, the one the kernel wrote)
};

// scalars for a kernel call on device: pointers into device memory (copies made there are kept
// here), or the lr as a host value when it is a CPU tensor and the device a GPU.
class ResolvedScalars {
 public:
  ResolvedScalars(const char* op, const DeviceScalars& scalars, Device device, double options_lr);
  const kernels::StepScalars& pointers() const { return pointers_; }
  double host_lr() const { return host_lr_; }

 private:
  Tensor lr_, grad_scale_, found_inf_;
  kernels::StepScalars pointers_;
  double host_lr_;
};

}  // namespace rtx::optim::detail
