// The kernel registry: one table per op with a slot per device type, declared by the op's family
// (src/dispatch/<family>.h) and filled by each backend file of the family from its
// RTX_REGISTER_KERNELS block, which runs once when the library is loaded. The tables are
// constant-initialized, so no static-initialization order matters. A lookup is an array index.
#pragma once

#include "rtx/device.h"
#include "rtx/export.h"

namespace rtx::detail {

[[noreturn]] void throw_missing_kernel(const char* op, Device device);

template <typename Fn>
class KernelTable {
 public:
  explicit constexpr KernelTable(const char* op) : op_(op) {}
  void set(DeviceType type, Fn* fn) { slots_[static_cast<int>(type)] = fn; }
  bool has(DeviceType type) const { return slots_[static_cast<int>(type)] != nullptr; }
  Fn* get(Device device) const {
    Fn* fn = slots_[static_cast<int>(device.type)];
    if (fn == nullptr) throw_missing_kernel(op_, device);
    return fn;
  }
  const char* op() const { return op_; }

 private:
  const char* op_;
  Fn* slots_[kNumDeviceTypes] = {};
};

}  // namespace rtx::detail

// A family's header (src/dispatch/<family>.h) names each of its tables once, RTX_KERNEL(name,
// Signature): a declaration wherever it is included, and the definition in src/dispatch/tables.cpp,
// which defines RTX_DEFINING_KERNEL_TABLES before it includes every family's header. Exported so
// that code outside the library (tests, extensions) can ask which devices have a kernel.
#ifdef RTX_DEFINING_KERNEL_TABLES
#define RTX_KERNEL(name, Signature) RTX_API ::rtx::detail::KernelTable<Signature> name(#name)
#else
#define RTX_KERNEL(name, Signature) extern RTX_API ::rtx::detail::KernelTable<Signature> name
#endif

// A backend's file of a family fills the family's tables when the library loads:
//   RTX_REGISTER_KERNELS(conv_cpu) { kernels::conv2d_kernel.set(kCPU, conv2d_cpu); ... }
// No list names the block: adding a backend file of a family touches nothing else.
#define RTX_REGISTER_KERNELS(name)                                                    \
  static void rtx_register_##name##_kernels();                                        \
  [[maybe_unused]] static const bool rtx_##name##_kernels_registered =                 \
      (rtx_register_##name##_kernels(), true);                                        \
  static void rtx_register_##name##_kernels()
