// CUDA kernels of the fused optimizer updates (kernels/common/adam_step.h, sgd_step.h) over the
// multi-tensor launcher: one launch updates the chunks of many parameters. Step counts kept in
// tensors are first incremented by a launch of their own (every block of a parameter then reads the
// same count) and each block computes its parameter's bias corrections from its count. Adam moves a
// parameter's tensors four elements at a time where they are aligned for it (the element update
// then runs on the registers), which keeps more bytes in flight per thread.
#include <cstdint>

#include "core/dtype_dispatch.h"
#include "dispatch/optim.h"
#include "kernels/cuda/multi_tensor.cuh"
#include "kernels/cuda/pointwise.cuh"

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

constexpr int kStepVec = 4;  // elements per vector of the vectorized updates

// Whether p (null: a list the update does not use) may be read kStepVec elements at a time.
template <typename P>
__device__ __forceinline__ bool step_aligned(const P* p) {
  return reinterpret_cast<uintptr_t>(p) % (sizeof(P) * kStepVec) == 0;
}

template <typename P>
__device__ __forceinline__ Packed<P, kStepVec> load_vector(const P* p, int64_t i) {
  return *reinterpret_cast<const Packed<P, kStepVec>*>(p + i);
}
template <typename P>
__device__ __forceinline__ void store_vector(P* p, int64_t i, const Packed<P, kStepVec>& v) {
  *reinterpret_cast<Packed<P, kStepVec>*>(p + i) = v;
}

// Elements i .. i + kStepVec - 1: every tensor the update uses read as one vector, the element
// update run on those registers, and the tensors it writes stored back as vectors. kMaster and
// kAmsgrad say whether t.master and t.max_exp_avg_sq are set, so that the register copies' addresses
// are known when compiling.
template <bool kMaster, bool kAmsgrad, typename T, typename S>
__device__ __forceinline__ void adam_step_vector(const kernels::AdamPointers<T, S>& t, int64_t i,
                                                 const kernels::AdamStep& s, const float* grad_scale) {
  Packed<T, kStepVec> param = load_vector(t.param, i), grad = load_vector(t.grad, i);
  Packed<S, kStepVec> master{}, exp_avg = load_vector(t.exp_avg, i), exp_avg_sq = load_vector(t.exp_avg_sq, i),
                      max_exp_avg_sq{};
  if constexpr (kMaster) master = load_vector(t.master, i);
  if constexpr (kAmsgrad) max_exp_avg_sq = load_vector(t.max_exp_avg_sq, i);
  const kernels::AdamPointers<T, S> registers{param.v, grad.v, kMaster ? master.v : nullptr, exp_avg.v,
                                              exp_avg_sq.v, kAmsgrad ? max_exp_avg_sq.v : nullptr};
#pragma unroll
  for (int j = 0; j < kStepVec; ++j) kernels::adam_step_element(registers, j, s, grad_scale);
  store_vector(t.param, i, param);
  if (grad_scale != nullptr) store_vector(t.grad, i, grad);  // the unscaled gradient
  if constexpr (kMaster) store_vector(t.master, i, master);
  store_vector(t.exp_avg, i, exp_avg);
  store_vector(t.exp_avg_sq, i, exp_avg_sq);
  if constexpr (kAmsgrad) store_vector(t.max_exp_avg_sq, i, max_exp_avg_sq);
}

// adam_step_vector over [begin, end), a whole number of vectors, by the block's threads.
template <bool kMaster, bool kAmsgrad, typename T, typename S>
__device__ void adam_step_vectors(const kernels::AdamPointers<T, S>& t, int64_t begin, int64_t end,
                                  const kernels::AdamStep& s, const float* grad_scale) {
  for (int64_t i = begin + threadIdx.x * kStepVec; i < end; i += blockDim.x * kStepVec)
    adam_step_vector<kMaster, kAmsgrad>(t, i, s, grad_scale);
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
    // begin is a multiple of the chunk, so aligned bases give aligned vectors.
    const bool vectors = step_aligned(p.param) && step_aligned(p.grad) && step_aligned(p.master) &&
                         step_aligned(p.exp_avg) && step_aligned(p.exp_avg_sq) && step_aligned(p.max_exp_avg_sq);
    int64_t scalar_begin = begin;
    if (vectors) {
      scalar_begin = begin + (end - begin) / kStepVec * kStepVec;
      const float* scale = scalars.grad_scale;
      if (p.master != nullptr) {
        if (p.max_exp_avg_sq != nullptr) adam_step_vectors<true, true>(p, begin, scalar_begin, s, scale);
        else adam_step_vectors<true, false>(p, begin, scalar_begin, s, scale);
      } else {
        if (p.max_exp_avg_sq != nullptr) adam_step_vectors<false, true>(p, begin, scalar_begin, s, scale);
        else adam_step_vectors<false, false>(p, begin, scalar_begin, s, scale);
      }
    }
    for (int64_t i = scalar_begin + threadIdx.x; i < end; i += blockDim.x)
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
