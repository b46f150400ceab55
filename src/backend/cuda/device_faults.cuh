// The kernels' side of the deferred index faults (device_faults.h). The kernels of one op that
// check index values lower a word of device memory to the row-major position of the first bad value
// they meet (atomicMin: the same position whatever the timing, the one the CPU reports); a
// one-thread kernel queued after them reads the value at that position and writes the fault into
// the device's record, unless the record already holds an earlier one. Nothing waits, except with
// kernels::sync_checks(), which waits after that kernel and hands the fault back to the front-end.
#pragma once

#include <cstdint>

#include "backend/cuda/device_faults.h"
#include "core/collapse.h"
#include "core/dtype_dispatch.h"
#include "core/tensor_impl.h"
#include "kernels/cuda/pointwise.cuh"

namespace rtx::cuda::detail {

constexpr unsigned long long kNoFault = ~0ull;

// A kernels::IndexCheck as kernels take it.
struct DeviceCheck {
  int64_t bound;
  int64_t skip;
  bool has_skip;
  __device__ __forceinline__ bool bad(int64_t v) const { return (v < 0 || v >= bound) && !(has_skip && v == skip); }
};
inline DeviceCheck device_check(const kernels::IndexCheck& c) {
  return {c.bound, c.skip.value_or(0), c.skip.has_value()};
}

// Lowers an op's fault word to position.
__device__ __forceinline__ void report_fault(unsigned long long* word, int64_t position) {
  const auto p = static_cast<unsigned long long>(position);
  if (p < *reinterpret_cast<volatile unsigned long long*>(word)) atomicMin(word, p);
}

// The fault of the check (op, bound, dim, skip) at the position in *word, if any, into record: the
// index's element there read through calc (byte offsets from row-major positions).
template <typename I>
__global__ void record_fault_kernel(const unsigned long long* word, const char* index,
                                    OffsetCalculator<1, int64_t> calc, FaultRecord* record, int op, DeviceCheck check,
                                    int64_t dim) {
  const unsigned long long position = *word;
  if (position == kNoFault) return;
  int64_t off[1];
  calc.offsets(static_cast<int64_t>(position), off);
  if (atomicCAS(&record->state, kFaultEmpty, kFaultWriting) != kFaultEmpty) return;  // an earlier fault stays
  record->op = op;
  record->value = static_cast<long long>(*reinterpret_cast<const I*>(index + off[0]));
  record->bound = check.bound;
  record->dim = dim;
  record->has_skip = check.has_skip ? 1 : 0;
  record->skip = check.skip;
  __threadfence_system();  // the fields before the state, for a host that reads the state first
  atomicExch(&record->state, kFaultWritten);
}

// The fault word of one op's kernels on a stream.
class IndexFaults {
 public:
  IndexFaults(Device device, cudaStream_t stream)
      : word_(rtx::detail::make_tensor({1}, kInt64, device)), stream_(stream), record_(fault_record(device.index)) {
    RTX_CUDA_CHECK(cudaMemsetAsync(word_.data_ptr(), 0xff, sizeof(unsigned long long), stream_));
  }
  unsigned long long* word() const { return static_cast<unsigned long long*>(word_.data_ptr()); }

  // Queues the move of the fault of the kernels queued so far, in positions of index (the int32 or
  // int64 tensor they read), into the device's record. Returns no fault, except with sync_checks(),
  // which waits for it and returns it.
  kernels::IndexFault finish(const Tensor& index, const kernels::IndexCheck& check) const {
    const rtx::detail::Geometry<1> g = rtx::detail::collapse<1>({&index});
    RTX_CHECK(g.sizes.size() <= static_cast<size_t>(kMaxDims), Error,
              "[cuda] the index of {} has more than {} dims that cannot be merged", kernels::index_op_name(check.op),
              kMaxDims);
    RTX_DISPATCH_INDEX(index.dtype(), "index check", [&] {
      record_fault_kernel<scalar_t><<<1, 1, 0, stream_>>>(word(), static_cast<const char*>(index.data_ptr()),
                                                          make_offset_calculator<1, int64_t>(g), record_,
                                                          static_cast<int>(check.op), device_check(check), check.dim);
      RTX_CUDA_CHECK_LAUNCH();
    });
    if (!kernels::sync_checks()) return {};
    RTX_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return take_device_fault(word_.device().index);
  }

 private:
  Tensor word_;
  cudaStream_t stream_;
  FaultRecord* record_;
};

}  // namespace rtx::cuda::detail
