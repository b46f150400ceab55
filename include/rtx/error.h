// The exception types the library throws. Every message starts with the op in brackets and names the
// offending argument with its shapes, dtypes or devices, e.g.
//   [matmul] shapes [2, 3] and [4, 5]: inner dimensions 3 != 4
#pragma once

#include <stdexcept>
#include <string>

#include "rtx/export.h"

namespace rtx {

// Base of all library errors (Python: RuntimeError).
class RTX_API Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};
// Shapes that do not fit together (Python: ValueError).
class RTX_API ShapeError : public Error {
 public:
  using Error::Error;
};
// A dtype the op does not accept (Python: TypeError).
class RTX_API DTypeError : public Error {
 public:
  using Error::Error;
};
// Tensors on different devices, or a device that is not available.
class RTX_API DeviceError : public Error {
 public:
  using Error::Error;
};
// An index or dimension out of range (Python: IndexError).
class RTX_API IndexError : public Error {
 public:
  using Error::Error;
};
// An argument value that is not allowed: negative sizes, probabilities outside [0, 1], ... (Python: ValueError).
class RTX_API ValueError : public Error {
 public:
  using Error::Error;
};
// A device allocation that failed even after the cache was released.
class RTX_API OutOfMemoryError : public Error {
 public:
  using Error::Error;
};
// A checkpoint or tensor file that cannot be read or written.
class RTX_API CheckpointError : public Error {
 public:
  using Error::Error;
};
// An operation that a CUDA graph capture cannot record: one that waits for the device or touches host
// memory (.item(), .cpu(), a synchronize), or a graph used out of order (Python: GraphCaptureError).
class RTX_API GraphCaptureError : public Error {
 public:
  using Error::Error;
};

// A distributed operation that failed: a peer that died or never came, a timeout, a group used wrongly
// (Python: rustytorch.distributed.DistError). The message names the rank, the key or collective and
// the timeout.
class RTX_API DistributedError : public Error {
 public:
  using Error::Error;
};
// A collective or point-to-point operation of a backend that failed (Python: DistBackendError).
class RTX_API DistBackendError : public DistributedError {
 public:
  using DistributedError::DistributedError;
};
// A store operation that failed or timed out (Python: DistStoreError).
class RTX_API DistStoreError : public DistributedError {
 public:
  using DistributedError::DistributedError;
};

}  // namespace rtx
