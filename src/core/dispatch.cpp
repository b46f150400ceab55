// The error a missing kernel slot raises.
#include "core/dispatch.h"

#include "core/check.h"

namespace rtx::detail {

void throw_missing_kernel(const char* op, Device device) {
  const char* name = op;
  // Tables are named "<op>_kernel"; report the op itself.
  std::string s(name);
  const std::string suffix = "_kernel";
  if (s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0)
    s.resize(s.size() - suffix.size());
  RTX_THROW(DeviceError, "[{}] no kernel for {}", s, device_type_name(device.type));
}

}  // namespace rtx::detail
