// Storage lifetime.
#include "core/storage.h"

#include "core/allocator.h"

namespace rtx::detail {

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  data_ = get_allocator(device.type)->allocate(nbytes, device);
}

Storage::Storage(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter)
    : data_(data), nbytes_(nbytes), device_(device), owned_(false), deleter_(std::move(deleter)) {}

Storage::~Storage() {
  if (owned_) {
    if (data_ != nullptr) get_allocator(device_.type)->deallocate(data_, nbytes_, device_);
  } else if (deleter_) {
    deleter_(data_);
  }
}

}  // namespace rtx::detail
