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

// A family's header (src/dispatch/<family>.h) lists its tables once, as an X-macro of (op, Signature)
// pairs, and declares them with RTX_FAMILY_KERNEL:
//   #define RTX_SORT_KERNELS(X) X(sort, SortFn) X(topk, TopkFn)
//   RTX_SORT_KERNELS(RTX_FAMILY_KERNEL)
// which declares kernels::sort_kernel and kernels::topk_kernel wherever it is included, and defines them
// in src/dispatch/tables.cpp, which defines RTX_DEFINING_KERNEL_TABLES before it includes every
// family's header. Exported so that code outside the library (tests, extensions) can ask which
// devices have a kernel. RTX_KERNEL declares a single table outside a list.
#ifdef RTX_DEFINING_KERNEL_TABLES
#define RTX_KERNEL(name, Signature) RTX_API ::rtx::detail::KernelTable<Signature> name(#name)
#else
#define RTX_KERNEL(name, Signature) extern RTX_API ::rtx::detail::KernelTable<Signature> name
#endif
#define RTX_FAMILY_KERNEL(op, Signature) RTX_KERNEL(op##_kernel, Signature);

// Each backend file of a family fills all of the family's tables when the library loads, with its
// functions named <op>_<backend> (a backend that lacks one does not compile):
//   RTX_REGISTER_KERNELS(sort_cuda) { RTX_SORT_KERNELS(RTX_SET_CUDA_KERNEL) }
// No list names the block: adding a backend file of a family touches nothing else.
#define RTX_REGISTER_KERNELS(name)                                                    \
  static void rtx_register_##name##_kernels();                                        \
  [[maybe_unused]] static const bool rtx_##name##_kernels_registered =                 \
      (rtx_register_##name##_kernels(), true);                                        \
  static void rtx_register_##name##_kernels()
#define RTX_SET_CPU_KERNEL(op, Signature) ::rtx::kernels::op##_kernel.set(::rtx::kCPU, op##_cpu);
#define RTX_SET_CUDA_KERNEL(op, Signature) ::rtx::kernels::op##_kernel.set(::rtx::kCUDA, op##_cuda);
