// Storage lifetime.
#include "core/storage.h"

#include "core/allocator.h"

namespace rtx::detail {

namespace {
Allocator* allocator_of(Device device, bool pinned) { return pinned ? get_pinned_allocator() : get_allocator(device.type); }
}  // namespace

Storage::Storage(size_t nbytes, Device device, bool pinned) : nbytes_(nbytes), device_(device), pinned_(pinned) {
  data_ = allocator_of(device, pinned)->allocate(nbytes, device);
}

Storage::Storage(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter)
    : data_(data), nbytes_(nbytes), device_(device), owned_(false), deleter_(std::move(deleter)) {}

Storage::~Storage() {
  if (owned_) {
    if (data_ != nullptr) allocator_of(device_, pinned_)->deallocate(data_, nbytes_, device_);
  } else if (deleter_) {
    deleter_(data_);
  }
}

}  // namespace rtx::detail
