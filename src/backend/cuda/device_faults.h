// Deferred index faults of the CUDA backend. A kernel that meets a bad index value neither traps nor
// makes the host wait: the first bad value a device's kernels meet goes into that device's fault
// record, a few words of pinned host memory mapped into the device, and the host looks at the
// record where it waits for the device anyway (stream, event and device synchronization, blocking
// copies between host and device). A fault found there is cleared and raised as the IndexError of
// the op whose kernel met it. The record is made with the device's memory, at the first allocation
// on the device, so a kernel queued later (in a CUDA graph capture, say) never allocates it. The
// kernels' side is in device_faults.cuh.
#pragma once

#include "dispatch/index.h"
#include "kernels/cuda/compat.h"

namespace rtx::cuda::detail {

// One device's record: the first fault since the host last took one. state goes from kFaultEmpty
// to kFaultWriting (a kernel claimed the record) to kFaultWritten (the fields are complete) on the
// device, and back to kFaultEmpty when the host takes the fault.
struct FaultRecord {
  unsigned int state;
  int op;  // a kernels::IndexOp
  int has_skip;
  long long value, bound, dim, skip;
};
constexpr unsigned int kFaultEmpty = 0, kFaultWriting = 1, kFaultWritten = 2;

// The record of `device` (a valid index) as its kernels address it; made by the first call.
FaultRecord* fault_record(int device);
// Called after every wait for `device`: when its record holds a fault, clears it and throws the
// fault's IndexError, saying that an earlier kernel found it. Costs a read of host memory otherwise.
void report_device_fault(int device);
// Clears the record of `device` and returns its fault (found is false when it holds none); only
// for kernels::sync_checks(), which waits for the kernels first.
kernels::IndexFault take_device_fault(int device);

}  // namespace rtx::cuda::detail
