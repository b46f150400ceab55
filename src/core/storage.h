// Storage: one allocation shared by a tensor and all its views, with the version counter that
// in-place writes bump and saved-for-backward tensors check.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "rtx/device.h"

namespace rtx::detail {

class Storage {
 public:
  // Allocates nbytes from the device's allocator (CPU storage from the pinned allocator when pinned).
  Storage(size_t nbytes, Device device, bool pinned = false);
  // Wraps memory owned elsewhere; deleter (may be null) runs on destruction.
  Storage(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  // Page-locked host memory.
  bool pinned() const { return pinned_; }
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }
  // In-place writes that autograd recorded (they change the history of every view of the storage).
  uint64_t recorded_writes() const { return recorded_writes_; }
  void bump_recorded_writes() { ++recorded_writes_; }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  uint64_t version_ = 0;
  uint64_t recorded_writes_ = 0;
  bool owned_ = true;
  bool pinned_ = false;
  std::function<void(void*)> deleter_;
};

}  // namespace rtx::detail
