// CUDA kernels of the fused optimizer updates (kernels/common/adam_step.h, sgd_step.h) over the
// multi-tensor launcher: one launch updates the chunks of many parameters. Step counts kept in
// tensors are first incremented by a launch of their own (every block of a parameter then reads the
// same count) and each block computes its parameter's bias corrections from its count.
#include "core/dtype_dispatch.h"
#include "dispatch/optim.h"
#include "kernels/cuda/multi_tensor.cuh"

namespace rtx::cuda {
namespace {

__device__ __forceinline__ bool skipped(const kernels::StepScalars& scalars) {
  return scalars.found_inf != nullptr && *scalars.found_inf != 0.0f;
}

// Adds one to every step count (1-element float32 tensors), unless found_inf is set.
struct IncrementStep {
  const float* found_inf;
  __device__ void operator()(const MultiTensorMeta<1>& meta, int tensor, int64_t begin, int64_t) const {
    if (threadIdx.x != 0 || begin != 0 || (found_inf != nullptr && *found_inf != 0.0f)) return;
    *static_cast<float*>(meta.addresses[0][tensor]) += 1.0f;
  }
};

void increment_steps(Device device, const TensorList& steps, const float* found_inf) {
  multi_tensor_apply<1>(device, {&steps}, {}, IncrementStep{found_inf});
}

// Lists: param, grad, master, exp_avg, exp_avg_sq, max_exp_avg_sq; the scalar: the step count.
template <typename T, typename S>
struct AdamChunk {
  kernels::AdamStep step;
  kernels::StepScalars scalars;
  __device__ void operator()(const MultiTensorMeta<6>& meta, int tensor, int64_t begin, int64_t end) const {
    if (skipped(scalars)) return;
    kernels::AdamStep s = step;
    if (scalars.lr != nullptr) s.lr = *scalars.lr;
    if (meta.scalars[tensor] != nullptr) s.set_step(*static_cast<const float*>(meta.scalars[tensor]));
    const kernels::AdamPointers<T, S> p{
        static_cast<T*>(meta.addresses[0][tensor]), static_cast<T*>(meta.addresses[1][tensor]),
        static_cast<S*>(meta.addresses[2][tensor]), static_cast<S*>(meta.addresses[3][tensor]),
        static_cast<S*>(meta.addresses[4][tensor]), static_cast<S*>(meta.addresses[5][tensor])};
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x)
      kernels::adam_step_element(p, i, s, scalars.grad_scale);
  }
};

// Lists: param, grad, master, momentum_buffer.
template <typename T, typename S>
struct SgdChunk {
  kernels::SgdStep step;
  kernels::StepScalars scalars;
  __device__ void operator()(const MultiTensorMeta<4>& meta, int tensor, int64_t begin, int64_t end) const {
    if (skipped(scalars)) return;
    kernels::SgdStep s = step;
    if (scalars.lr != nullptr) s.lr = *scalars.lr;
    const kernels::SgdPointers<T, S> p{
        static_cast<T*>(meta.addresses[0][tensor]), static_cast<T*>(meta.addresses[1][tensor]),
        static_cast<S*>(meta.addresses[2][tensor]), static_cast<S*>(meta.addresses[3][tensor])};
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x)
      kernels::sgd_step_element(p, i, s, scalars.grad_scale);
  }
};

void adam_multi_step_cuda(const kernels::AdamTensors& t, const kernels::AdamStep& step,
                          const kernels::StepScalars& scalars) {
  const Device device = t.params[0].device();
  if (!t.steps.empty()) increment_steps(device, t.steps, scalars.found_inf);
  kernels::dispatch_param_and_state_types(
      t.params[0].dtype(), !t.masters.empty(), "adam_update", [&](auto param_type, auto state_type) {
    using T = decltype(param_type);
    using S = decltype(state_type);
    multi_tensor_apply<6>(device, {&t.params, &t.grads, &t.masters, &t.exp_avgs, &t.exp_avg_sqs, &t.max_exp_avg_sqs},
                          t.steps, AdamChunk<T, S>{step, scalars});
  });
}

void sgd_multi_step_cuda(const kernels::SgdTensors& t, const kernels::SgdStep& step,
                         const kernels::StepScalars& scalars) {
  kernels::dispatch_param_and_state_types(
      t.params[0].dtype(), !t.masters.empty(), "sgd_update", [&](auto param_type, auto state_type) {
    using T = decltype(param_type);
    using S = decltype(state_type);
    multi_tensor_apply<4>(t.params[0].device(), {&t.params, &t.grads, &t.masters, &t.momentum_buffers}, {},
                          SgdChunk<T, S>{step, scalars});
  });
}

}  // namespace

RTX_REGISTER_KERNELS(optim_cuda) { RTX_OPTIM_KERNELS(RTX_SET_CUDA_KERNEL) }

}  // namespace rtx::cuda
