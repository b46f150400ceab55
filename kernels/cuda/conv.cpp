// CUDA convolution kernels through cuDNN's convolution API: the forward, input-gradient and
// weight-gradient convolutions of NCHW tensors. cuDNN's heuristics offer the algorithms and the tuner
// (backend/cuda/tuner.h) times them once per GPU model and problem, as cudnn.benchmark does, keeping
// the choice in its cache so that a problem runs the same algorithm every time; the plan is cached per
// problem, and the workspace is a temporary
// tensor from the caching allocator. float32 runs in exact float32 (FMA math: cuDNN's default math
// would allow TF32) unless the float32 matmul precision allows TF32; float16/bfloat16 accumulate in
// float32; deterministic mode takes deterministic algorithms only. The bias is copied into the output
// and the convolution added onto it, so 16-bit outputs round once. Batches whose tensors exceed
// cuDNN's 32-bit element counts run in chunks of images. Without cuDNN in the build the kernels raise
// DeviceError.
#include "rtx/config.h"

#include "backend/cuda/capture.h"
#include "core/check.h"
#include "dispatch/conv.h"

#if RTX_WITH_CUDNN
#include <cudnn.h>

#include <algorithm>
#include <array>
#include <climits>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "backend/cuda/plan_cache.h"
#include "backend/cuda/runtime.h"
#include "backend/cuda/tuner.h"
#include "core/tensor_impl.h"
#include "kernels/cuda/copy.h"
#include "rtx/settings.h"
#endif

namespace rtx::cuda {
namespace {

using kernels::Conv2dParams;

#if RTX_WITH_CUDNN

[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file, int line) {
  RTX_THROW(Error, "[cudnn] {} failed: {} at {}:{}", call, cudnnGetErrorString(status), file, line);
}

// Raises rtx::Error quoting the call and cuDNN's status when a cuDNN call fails.
#define RTX_CUDNN_CHECK(call)                                                                             \
  do {                                                                                                    \
    const cudnnStatus_t rtx_status_ = (call);                                                             \
    if (rtx_status_ != CUDNN_STATUS_SUCCESS) throw_cudnn_error(rtx_status_, #call, __FILE__, __LINE__); \
  } while (0)

// A cuDNN handle of one device for a scope, bound to the scope's stream. A handle carries a stream,
// so each call leases its own from a per-device pool; handles are made on demand and never destroyed
// (at process exit the driver may already be gone).
class HandleLease {
 public:
  HandleLease(int device, cudaStream_t stream) : device_(device) {
    {
      std::lock_guard<std::mutex> lock(mutex());
      std::vector<cudnnHandle_t>& free = pool()[device];
      if (!free.empty()) {
        handle_ = free.back();
        free.pop_back();
      }
    }
    if (handle_ == nullptr) RTX_CUDNN_CHECK(cudnnCreate(&handle_));
    const cudnnStatus_t status = cudnnSetStream(handle_, stream);
    if (status != CUDNN_STATUS_SUCCESS) {
      release();
      throw_cudnn_error(status, "cudnnSetStream(handle_, stream)", __FILE__, __LINE__);
    }
  }
  ~HandleLease() { release(); }
  HandleLease(const HandleLease&) = delete;
  HandleLease& operator=(const HandleLease&) = delete;
  cudnnHandle_t get() const { return handle_; }

 private:
  void release() {
    if (handle_ == nullptr) return;
    std::lock_guard<std::mutex> lock(mutex());
    pool()[device_].push_back(handle_);
    handle_ = nullptr;
  }
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::map<int, std::vector<cudnnHandle_t>>& pool() {
    static auto* p = new std::map<int, std::vector<cudnnHandle_t>>();
    return *p;
  }
  int device_;
  cudnnHandle_t handle_ = nullptr;
};

// A cuDNN descriptor created and destroyed with its scope.
template <typename Handle, cudnnStatus_t (*Create)(Handle*), cudnnStatus_t (*Destroy)(Handle)>
class Descriptor {
 public:
  Descriptor() { RTX_CUDNN_CHECK(Create(&handle_)); }
  ~Descriptor() { Destroy(handle_); }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  Handle get() const { return handle_; }

 private:
  Handle handle_ = nullptr;
};
using TensorDesc = Descriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDesc = Descriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvDesc =
    Descriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor>;

// Sizes of one convolution: x [n, c, h, w], weight [o, c / groups, kh, kw], y [n, o, oh, ow].
struct ConvShape {
  int64_t n, c, h, w, o, kh, kw, oh, ow;
};

ConvShape shape_of(const Shape& x, const Shape& w, const Shape& y) {
  return {x[0], x[1], x[2], x[3], w[0], w[2], w[3], y[2], y[3]};
}

int to_int(int64_t v) {
  RTX_CHECK(v <= INT_MAX, Error, "[conv2d] size {} exceeds cuDNN's 32-bit sizes", v);
  return static_cast<int>(v);
}

cudnnDataType_t data_type(DType t) {
  switch (t) {
    case kFloat64: return CUDNN_DATA_DOUBLE;
    case kFloat16: return CUDNN_DATA_HALF;
    case kBFloat16: return CUDNN_DATA_BFLOAT16;
    default: return CUDNN_DATA_FLOAT;
  }
}

// Tensor cores for the 16-bit floats; for float32, TF32 only when the float32 matmul precision allows
// it (cuDNN's default math allows it on its own, FMA math does not).
cudnnMathType_t math_type(DType t) {
  if (t == kFloat16 || t == kBFloat16) return CUDNN_TENSOR_OP_MATH;
  if (t == kFloat32 && get_float32_matmul_precision() == "highest") return CUDNN_FMA_MATH;
  return CUDNN_DEFAULT_MATH;
}

// The descriptors of a convolution over `images` images.
struct Descriptors {
  TensorDesc x, y;
  FilterDesc w;
  ConvDesc conv;

  Descriptors(const ConvShape& s, int64_t images, DType dtype, const Conv2dParams& p, cudnnMathType_t math) {
    const cudnnDataType_t t = data_type(dtype);
    RTX_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x.get(), CUDNN_TENSOR_NCHW, t, to_int(images), to_int(s.c),
                                               to_int(s.h), to_int(s.w)));
    RTX_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y.get(), CUDNN_TENSOR_NCHW, t, to_int(images), to_int(s.o),
                                               to_int(s.oh), to_int(s.ow)));
    RTX_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w.get(), t, CUDNN_TENSOR_NCHW, to_int(s.o), to_int(s.c / p.groups),
                                               to_int(s.kh), to_int(s.kw)));
    const cudnnDataType_t compute = dtype == kFloat64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    RTX_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv.get(), to_int(p.padding[0]), to_int(p.padding[1]),
                                                    to_int(p.stride[0]), to_int(p.stride[1]), to_int(p.dilation[0]),
                                                    to_int(p.dilation[1]), CUDNN_CROSS_CORRELATION, compute));
    RTX_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv.get(), to_int(p.groups)));
    RTX_CUDNN_CHECK(cudnnSetConvolutionMathType(conv.get(), math));
  }
};

// The memory of one call: x and y of its images, and the weight.
struct Buffers {
  void *x, *w, *y;
};

// The three directions: the heuristic query, the workspace query and the call of each.
struct Forward {
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  using Algo = cudnnConvolutionFwdAlgo_t;
  static constexpr int kId = 0;
  static constexpr int kCount = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  static constexpr const char* kOp = "conv2d";
  static constexpr const char* kCall = "cudnnConvolutionForward";
  static cudnnStatus_t heuristics(cudnnHandle_t h, const Descriptors& d, int* n, Perf* perf) {
    return cudnnGetConvolutionForwardAlgorithm_v7(h, d.x.get(), d.w.get(), d.conv.get(), d.y.get(), kCount, n, perf);
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const Descriptors& d, Algo a, size_t* bytes) {
    return cudnnGetConvolutionForwardWorkspaceSize(h, d.x.get(), d.w.get(), d.conv.get(), d.y.get(), a, bytes);
  }
  // y = alpha * conv(x, w) + beta * y
  static cudnnStatus_t run(cudnnHandle_t h, const Descriptors& d, Algo a, void* ws, size_t bytes, const void* alpha,
                           const void* beta, const Buffers& b) {
    return cudnnConvolutionForward(h, alpha, d.x.get(), b.x, d.w.get(), b.w, d.conv.get(), a, ws, bytes, beta,
                                   d.y.get(), b.y);
  }
};

struct BackwardData {
  using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
  using Algo = cudnnConvolutionBwdDataAlgo_t;
  static constexpr int kId = 1;
  static constexpr int kCount = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
  static constexpr const char* kOp = "conv2d_backward_input";
  static constexpr const char* kCall = "cudnnConvolutionBackwardData";
  static cudnnStatus_t heuristics(cudnnHandle_t h, const Descriptors& d, int* n, Perf* perf) {
    return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w.get(), d.y.get(), d.conv.get(), d.x.get(), kCount, n,
                                                       perf);
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const Descriptors& d, Algo a, size_t* bytes) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w.get(), d.y.get(), d.conv.get(), d.x.get(), a, bytes);
  }
  // x = alpha * conv^T(y, w) + beta * x
  static cudnnStatus_t run(cudnnHandle_t h, const Descriptors& d, Algo a, void* ws, size_t bytes, const void* alpha,
                           const void* beta, const Buffers& b) {
    return cudnnConvolutionBackwardData(h, alpha, d.w.get(), b.w, d.y.get(), b.y, d.conv.get(), a, ws, bytes, beta,
                                        d.x.get(), b.x);
  }
};

struct BackwardFilter {
  using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
  using Algo = cudnnConvolutionBwdFilterAlgo_t;
  static constexpr int kId = 2;
  static constexpr int kCount = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
  static constexpr const char* kOp = "conv2d_backward_weight";
  static constexpr const char* kCall = "cudnnConvolutionBackwardFilter";
  static cudnnStatus_t heuristics(cudnnHandle_t h, const Descriptors& d, int* n, Perf* perf) {
    return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x.get(), d.y.get(), d.conv.get(), d.w.get(), kCount, n,
                                                         perf);
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const Descriptors& d, Algo a, size_t* bytes) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x.get(), d.y.get(), d.conv.get(), d.w.get(), a, bytes);
  }
  // w = alpha * (the weight gradient of x and y) + beta * w
  static cudnnStatus_t run(cudnnHandle_t h, const Descriptors& d, Algo a, void* ws, size_t bytes, const void* alpha,
                           const void* beta, const Buffers& b) {
    return cudnnConvolutionBackwardFilter(h, alpha, d.x.get(), b.x, d.y.get(), b.y, d.conv.get(), a, ws, bytes, beta,
                                          d.w.get(), b.w);
  }
};

// An algorithm the heuristics offered and this configuration allows, with the math type and
// workspace it runs with.
struct Candidate {
  int algo;
  cudnnMathType_t math;
  size_t workspace;
  bool deterministic;
};
// Usable algorithms of one problem, best first.
using ConvPlan = std::vector<Candidate>;

// direction, device, dtype, images, c, h, w, o, kh, kw, stride, padding, dilation (two each), groups,
// math type, deterministic mode.
constexpr size_t kConvKeySize = 19;
detail::PlanCache<kConvKeySize, ConvPlan>& conv_plans() {
  static auto* cache = new detail::PlanCache<kConvKeySize, ConvPlan>();
  return *cache;
}

template <typename Dir>
ConvPlan choose_algorithms(cudnnHandle_t h, const Descriptors& d, cudnnMathType_t math, bool deterministic) {
  typename Dir::Perf perf[Dir::kCount];
  int found = 0;
  RTX_CUDNN_CHECK(Dir::heuristics(h, d, &found, perf));
  ConvPlan plan;
  for (int i = 0; i < found; ++i) {
    const typename Dir::Perf& r = perf[i];
    if (r.status != CUDNN_STATUS_SUCCESS) continue;
    if (deterministic && r.determinism != CUDNN_DETERMINISTIC) continue;
    // Exact float32 keeps FMA math: algorithms that need tensor cores (TF32) are out.
    const bool tensor_op = r.mathType == CUDNN_TENSOR_OP_MATH || r.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    if (math == CUDNN_FMA_MATH && tensor_op) continue;
    const cudnnMathType_t run_math = math == CUDNN_FMA_MATH ? math : r.mathType;
    RTX_CUDNN_CHECK(cudnnSetConvolutionMathType(d.conv.get(), run_math));
    size_t bytes = 0;
    if (Dir::workspace(h, d, r.algo, &bytes) != CUDNN_STATUS_SUCCESS) continue;
    plan.push_back({static_cast<int>(r.algo), run_math, bytes, r.determinism == CUDNN_DETERMINISTIC});
  }
  return plan;
}

// Runs candidate c: its workspace from the caching allocator (OutOfMemoryError when it cannot be had),
// its math type, the call; returns cuDNN's status.
template <typename Dir>
cudnnStatus_t run_candidate(cudnnHandle_t h, const Descriptors& d, const Candidate& c, const Buffers& b,
                            const void* alpha, const void* beta, Device device) {
  Tensor ws;
  if (c.workspace > 0) ws = rtx::detail::make_tensor({static_cast<int64_t>(c.workspace)}, kUInt8, device);
  RTX_CUDNN_CHECK(cudnnSetConvolutionMathType(d.conv.get(), c.math));
  return Dir::run(h, d, static_cast<typename Dir::Algo>(c.algo), ws.defined() ? ws.data_ptr() : nullptr, c.workspace,
                  alpha, beta, b);
}

// Runs the first candidate whose workspace can be allocated and that cuDNN accepts (a later one when
// memory runs short or cuDNN turns an offered algorithm down before launching it).
template <typename Dir>
void convolve(cudnnHandle_t h, const Descriptors& d, const ConvPlan& plan, const Buffers& b, const void* alpha,
              const void* beta, Device device) {
  for (size_t i = 0; i < plan.size(); ++i) {
    cudnnStatus_t status;
    try {
      status = run_candidate<Dir>(h, d, plan[i], b, alpha, beta, device);
    } catch (const OutOfMemoryError&) {
      if (i + 1 < plan.size()) continue;
      throw;
    }
    if (status == CUDNN_STATUS_NOT_SUPPORTED && i + 1 < plan.size()) continue;
    if (status != CUDNN_STATUS_SUCCESS) throw_cudnn_error(status, Dir::kCall, __FILE__, __LINE__);
    detail::count_library_call();
    return;
  }
}

// A scale factor in the type cuDNN expects: double for float64 data, float otherwise.
struct Scale {
  double d;
  float f;
  explicit Scale(double v) : d(v), f(static_cast<float>(v)) {}
  const void* ptr(DType t) const { return t == kFloat64 ? static_cast<const void*>(&d) : &f; }
};

// Candidates whose workspace exceeds both this and the heuristic's first choice's are not timed.
constexpr size_t kTrialWorkspaceBytes = size_t{64} << 20;

// plan with the tuner's choice first (the heuristic's order otherwise). Each trial writes the outputs
// from the inputs alone (beta = 0); refill (if any) then writes again what the real call adds onto.
template <typename Dir, typename Key>
ConvPlan tuned_plan(ConvPlan plan, cudnnHandle_t h, const Descriptors& d, const Buffers& b, DType dtype, Device device,
                    cudaStream_t stream, const Key& key, const std::function<void()>& refill) {
  if (plan.size() < 2) return plan;
  const size_t budget = std::max(kTrialWorkspaceBytes, plan[0].workspace);
  static const std::string kernel = fmt::format("cudnn{}_{}", cudnnGetVersion(), Dir::kOp);
  // The key after its direction and device, in its order.
  const std::string shape_class = fmt::format("{}", fmt::join(key.begin() + 2, key.end(), ","));
  const Scale one(1.0), zero(0.0);
  bool tried = false;
  const int choice = detail::tuned_choice(
      device.index, stream, kernel, shape_class, static_cast<int>(plan.size()), 0, [&](int c) {
        tried = true;
        const bool less_reproducible = plan[0].deterministic && !plan[c].deterministic;
        if (less_reproducible || plan[c].workspace > budget) return false;
        try {
          return run_candidate<Dir>(h, d, plan[c], b, one.ptr(dtype), zero.ptr(dtype), device) == CUDNN_STATUS_SUCCESS;
        } catch (const OutOfMemoryError&) {
          return false;
        }
      });
  if (tried && refill) refill();
  std::rotate(plan.begin(), plan.begin() + choice, plan.begin() + choice + 1);
  return plan;
}

// Images per cuDNN call: as many as keep x and y of the call under 2^31 elements.
int64_t images_per_call(const ConvShape& s) {
  const int64_t per_image = std::max<int64_t>({s.c * s.h * s.w, s.o * s.oh * s.ow, 1});
  return std::max<int64_t>(1, std::min<int64_t>(s.n, INT_MAX / per_image));
}

// Runs direction Dir over the images of x [n, c, h, w] and y [n, o, oh, ow] with weight w, in chunks of
// images; beta is the first chunk's, and later chunks accumulate into w when accumulate (the weight
// gradient sums over images). A problem's first chunk may time the algorithms, which overwrites the
// output: refill (if any) then writes what beta = 1 adds onto again.
template <typename Dir>
void run(const ConvShape& s, const Conv2dParams& p, DType dtype, Device device, char* x, char* w, char* y,
         double beta, bool accumulate, const std::function<void()>& refill = {}) {
  detail::KernelScope scope(device);
  HandleLease handle(device.index, scope.stream());
  const cudnnMathType_t math = math_type(dtype);
  const bool deterministic = are_deterministic_algorithms_enabled();
  const int64_t chunk = images_per_call(s), es = static_cast<int64_t>(element_size(dtype));
  const Scale one(1.0);
  for (int64_t n0 = 0; n0 < s.n; n0 += chunk) {
    const int64_t images = std::min(chunk, s.n - n0);
    const Descriptors d(s, images, dtype, p, math);
    const std::array<int64_t, kConvKeySize> key{
        Dir::kId,     device.index, static_cast<int64_t>(dtype), images,        s.c,           s.h,
        s.w,          s.o,          s.kh,                        s.kw,          p.stride[0],   p.stride[1],
        p.padding[0], p.padding[1], p.dilation[0],               p.dilation[1], p.groups,      static_cast<int64_t>(math),
        deterministic};
    const Buffers b{x + n0 * s.c * s.h * s.w * es, w, y + n0 * s.o * s.oh * s.ow * es};
    const ConvPlan plan = conv_plans().get(key, [&] {
      ConvPlan first = choose_algorithms<Dir>(handle.get(), d, math, deterministic);
      if (n0 > 0) return first;  // trials would overwrite what earlier chunks wrote
      return tuned_plan<Dir>(std::move(first), handle.get(), d, b, dtype, device, scope.stream(), key, refill);
    });
    RTX_CHECK(!plan.empty(), Error,
              "[{}] cuDNN offers no {}algorithm for input [{}, {}, {}, {}] and weight [{}, {}, {}, {}]",
              Dir::kOp, deterministic ? "deterministic " : "", images, s.c, s.h, s.w, s.o, s.c / p.groups, s.kh, s.kw);
    const Scale scale(n0 > 0 && accumulate ? 1.0 : beta);
    convolve<Dir>(handle.get(), d, plan, b, one.ptr(dtype), scale.ptr(dtype), device);
  }
}

char* bytes(const Tensor& t) { return static_cast<char*>(t.data_ptr()); }

void conv2d_cuda(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dParams& p) {
  const ConvShape s = shape_of(x.sizes(), weight.sizes(), out.sizes());
  // The bias goes in first and the convolution adds onto it.
  const auto prefill = [&] {
    copy_cuda(out, rtx::detail::make_view(bias, out.sizes(), {0, bias.stride(0), 0, 0}, bias.storage_offset()));
  };
  if (bias.defined()) prefill();
  if (weight.numel() == 0) {  // no input channels or an empty kernel: the bias alone
    if (!bias.defined()) fill_cuda(out, 0);
    return;
  }
  run<Forward>(s, p, out.dtype(), out.device(), bytes(x), bytes(weight), bytes(out), bias.defined() ? 1.0 : 0.0, false,
               bias.defined() ? std::function<void()>(prefill) : std::function<void()>());
}

void conv2d_backward_input_cuda(const Tensor& grad_x, const Tensor& grad_out, const Tensor& weight,
                                const Conv2dParams& p) {
  if (weight.numel() == 0) {  // no output channels: nothing flows back
    fill_cuda(grad_x, 0);
    return;
  }
  const ConvShape s = shape_of(grad_x.sizes(), weight.sizes(), grad_out.sizes());
  run<BackwardData>(s, p, grad_x.dtype(), grad_x.device(), bytes(grad_x), bytes(weight), bytes(grad_out), 0.0, false);
}

// The bias gradient is left to the front-end's sum (cuDNN computes it in a call of its own).
bool conv2d_backward_weight_cuda(const Tensor& grad_w, const Tensor&, const Tensor& grad_out, const Tensor& x,
                                 const Conv2dParams& p) {
  if (x.numel() == 0) {  // no images
    fill_cuda(grad_w, 0);
    return false;
  }
  const ConvShape s = shape_of(x.sizes(), grad_w.sizes(), grad_out.sizes());
  run<BackwardFilter>(s, p, grad_w.dtype(), grad_w.device(), bytes(x), bytes(grad_w), bytes(grad_out), 0.0, true);
  return false;
}

#else  // no cuDNN in this build

[[noreturn]] void no_cudnn(const char* op) {
  RTX_THROW(DeviceError, "[{}] this build has no cuDNN (configure with -DRTX_WITH_CUDNN=ON)", op);
}
void conv2d_cuda(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Conv2dParams&) {
  no_cudnn("conv2d");
}
void conv2d_backward_input_cuda(const Tensor&, const Tensor&, const Tensor&, const Conv2dParams&) {
  no_cudnn("conv2d");
}
bool conv2d_backward_weight_cuda(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Conv2dParams&) {
  no_cudnn("conv2d");
}

#endif

}  // namespace

RTX_REGISTER_KERNELS(conv_cuda) { RTX_CONV_KERNELS(RTX_SET_CUDA_KERNEL) }

void detail::prepare_cudnn_for_capture(int device, cudaStream_t stream) {
#if RTX_WITH_CUDNN
  DeviceGuard guard(device);
  HandleLease lease(device, stream);  // made if the pool had none, and left in it
#else
  (void)device;
  (void)stream;
#endif
}

}  // namespace rtx::cuda
