// rtx::dist data parallelism: the Reducer that averages the gradients of a model replicated on every
// rank of a process group while backward is still running (the engine of DistributedDataParallel),
// and the helpers that make the replicas start equal.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "rtx/distributed.h"

namespace rtx::dist {

struct ReducerOptions {
  // A bucket holds at most this many bytes of gradients (PyTorch's bucket_cap_mb = 25)...
  size_t bucket_cap_bytes = size_t{25} << 20;
  // ...except the first one to be reduced, kept small so that communication starts early.
  size_t first_bucket_bytes = size_t{1} << 20;
  // Parameters the forward's outputs do not depend on count as ready (with a zero gradient) when
  // backward starts; a parameter no rank used keeps its .grad.
  bool find_unused_parameters = false;
  // After the first reduction each .grad is a view into its bucket: no copies in and out.
  bool gradient_as_bucket_view = false;
};

// Averages the gradients of `parameters` (leaves that require grad, each on every rank with the same
// shape and dtype) across `group` during each backward pass that prepare_for_backward armed.
// The parameters are put into buckets of one dtype and device, in reverse order (the order in which
// backward produces their gradients). When the last gradient of a bucket has been accumulated the
// bucket is copied into a flat buffer, divided by the group size and all-reduced (SUM) asynchronously,
// while backward goes on; buckets start in one fixed order on every rank. When backward ends, every
// reduction is waited for and the averages are written back into the parameters' .grad.
class RTX_API Reducer {
 public:
  // names: the parameters' names for error messages (empty: their indices only).
  Reducer(std::vector<Tensor> parameters, std::shared_ptr<ProcessGroup> group, ReducerOptions options = {},
          std::vector<std::string> names = {});
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Arms the next backward pass. outputs: what the forward returned; with find_unused_parameters the
  // graph below them is searched for the parameters it does not reach.
  void prepare_for_backward(const TensorList& outputs = {});
  // The parameter indices of each bucket, in the order the buckets are reduced.
  std::vector<std::vector<size_t>> bucket_indices() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

// Copies `tensors` from rank src of group to every other rank, in flat buffers of at most
// buffer_bytes (per dtype and device).
RTX_API void broadcast_coalesced(ProcessGroup& group, const std::vector<Tensor>& tensors, size_t buffer_bytes,
                                 int src = 0);

// ValueError on every rank unless every rank of group passes as many tensors, with the same shapes and
// dtypes (what a data-parallel model needs of its replicas); `what` names the caller in the message.
RTX_API void verify_same_shapes(ProcessGroup& group, const std::vector<Tensor>& tensors, const char* what);

}  // namespace rtx::dist
