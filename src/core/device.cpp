// Device parsing and printing.
#include "rtx/device.h"

#include <cstdlib>

#include "core/check.h"

namespace rtx {

Device::Device(const std::string& spec) {
  if (spec == "cpu") {
    *this = Device(DeviceType::CPU);
    return;
  }
  if (spec == "cuda") {
    *this = Device(DeviceType::CUDA, 0);
    return;
  }
  if (spec.rfind("cuda:", 0) == 0 && spec.size() > 5 && spec.size() < 9) {
    const std::string num = spec.substr(5);
    bool digits = true;
    for (char c : num) digits = digits && c >= '0' && c <= '9';
    if (digits) {
      *this = Device(DeviceType::CUDA, std::atoi(num.c_str()));
      return;
    }
  }
  RTX_THROW(ValueError, "[device] invalid device string '{}': expected 'cpu', 'cuda' or 'cuda:N'", spec);
}

std::string Device::str() const {
  return is_cpu() ? std::string("cpu") : std::string("cuda:") + std::to_string(index);
}

const char* device_type_name(DeviceType t) { return t == DeviceType::CPU ? "cpu" : "cuda"; }

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

}  // namespace rtx
