// What the CUDA backend checks while CUDA graphs capture (graph.cpp keeps the record of captures under
// way): calls that wait for the device or touch host memory raise GraphCaptureError before CUDA would
// break the capture, the caching allocator's own cudaMalloc runs in relaxed capture mode, and random
// kernels find the device cell through which replays advance their counters.
#pragma once

#include <cstdint>

#include "kernels/cuda/compat.h"

namespace rtx::cuda::detail {

// Whether any capture is under way in the process (one atomic load: the fast path of every check).
bool any_capture_active();

// Throws GraphCaptureError naming `op` and saying `why` when `stream` (on `device`) is capturing, or
// when a capture under way forbids waiting for the device from this thread (a kGlobal capture on any
// thread, a kThreadLocal one on this thread). `stream` null: a wait for the whole device.
void check_no_capture(const char* op, int device, cudaStream_t stream, const char* why);

// Whether `stream` is capturing a graph (false for the legacy default stream, which never captures).
bool stream_capturing(cudaStream_t stream);

// Makes what the libraries create lazily, with calls a capture refuses, before a capture of `stream`
// begins: cuBLASLt's handle and the stream's workspace (linalg.cpp), a cuDNN handle (conv.cpp).
void prepare_blas_for_capture(int device, cudaStream_t stream);
void prepare_cudnn_for_capture(int device, cudaStream_t stream);

// Queues on `stream` the write of a graph's replay cell: {seed, counter shift} (random.cu).
void write_replay_cell(uint64_t* cell, uint64_t seed, uint64_t shift, cudaStream_t stream);

// Makes CUDA calls of this thread that capture would refuse (cudaMalloc of a new segment, which the
// allocator hands to the capturing graph's private pool) legal for a scope.
class RelaxedCaptureScope {
 public:
  RelaxedCaptureScope();
  ~RelaxedCaptureScope();
  RelaxedCaptureScope(const RelaxedCaptureScope&) = delete;
  RelaxedCaptureScope& operator=(const RelaxedCaptureScope&) = delete;

 private:
  cudaStreamCaptureMode previous_;
  bool active_;
};

}  // namespace rtx::cuda::detail
