// CUDA matmul kernel. Floating products go to cuBLASLt: the row-major product out = a @ b runs as the
// column-major product out^T = b^T @ a^T, each operand handed over as it is when one of its matrix dims
// has unit stride (a transposed operand costs no copy) and its batch dims collapse to one stride
// (stride 0: a broadcast batch), and copied to contiguous memory otherwise. float32 computes in exact
// float32 unless the float32 matmul precision allows TF32 tensor cores; float16/bfloat16 accumulate
// and reduce split-K partial sums in float32; float64 computes in float64. Deterministic mode also
// rules out the in-place split-K reduction, leaving only reductions done in a separate pass. One
// handle per device, a workspace per device and stream, and one algorithm cached per problem: the
// fastest of the heuristic's first eight as the tuner measured it (backend/cuda/tuner.h), or the
// heuristic's first. Integer products run a tiled kernel of their own (linalg_int.cu).
#include <cublasLt.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "backend/cuda/capture.h"
#include "backend/cuda/plan_cache.h"
#include "backend/cuda/runtime.h"
#include "backend/cuda/tuner.h"
#include "core/check.h"
#include "core/tensor_impl.h"
#include "core/tuning.h"
#include "kernels/cuda/copy.h"
#include "dispatch/linalg.h"
#include "rtx/settings.h"

namespace rtx::cuda {

void int_matmul(const Tensor& out, const Tensor& a, const Tensor& b);  // linalg_int.cu

namespace {

[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  RTX_THROW(Error, "[cublas] {} failed: {} ({}) at {}:{}", call, cublasLtGetStatusString(status),
            cublasLtGetStatusName(status), file, line);
}

// Raises rtx::Error quoting the call and cuBLAS's status when a cuBLASLt call fails.
#define RTX_CUBLAS_CHECK(call)                                                                               \
  do {                                                                                                       \
    const cublasStatus_t rtx_status_ = (call);                                                               \
    if (rtx_status_ != CUBLAS_STATUS_SUCCESS) throw_cublas_error(rtx_status_, #call, __FILE__, __LINE__); \
  } while (0)

constexpr size_t kWorkspaceBytes = size_t{32} << 20;
// Batches per cuBLASLt call at most (one grid dimension's limit).
constexpr int64_t kMaxBatch = 65535;

// A cuBLASLt object destroyed with its scope.
template <typename Handle, cublasStatus_t (*Destroy)(Handle)>
class LtObject {
 public:
  LtObject() = default;
  ~LtObject() {
    if (handle_ != nullptr) Destroy(handle_);
  }
  LtObject(const LtObject&) = delete;
  LtObject& operator=(const LtObject&) = delete;
  Handle* out() { return &handle_; }
  Handle get() const { return handle_; }

 private:
  Handle handle_ = nullptr;
};
using MatmulDesc = LtObject<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>;
using Layout = LtObject<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;
using Preference = LtObject<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>;

template <typename V>
void set(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const V& v) {
  RTX_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof(v)));
}
template <typename V>
void set(cublasLtMatrixLayout_t d, cublasLtMatrixLayoutAttribute_t attr, const V& v) {
  RTX_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(d, attr, &v, sizeof(v)));
}
template <typename V>
void set(cublasLtMatmulPreference_t d, cublasLtMatmulPreferenceAttributes_t attr, const V& v) {
  RTX_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(d, attr, &v, sizeof(v)));
}

// The cuBLASLt handle of `device` (made on first use with the device current, and never destroyed:
// at process exit the driver may already be gone). A cuBLASLt handle holds no stream, so threads
// share it.
cublasLtHandle_t lt_handle(int device) {
  static std::mutex mutex;
  static auto* handles = new std::map<int, cublasLtHandle_t>();
  std::lock_guard<std::mutex> lock(mutex);
  cublasLtHandle_t& h = (*handles)[device];
  if (h == nullptr) RTX_CUBLAS_CHECK(cublasLtCreate(&h));
  return h;
}

// The workspace of `device` and `stream`, allocated on that stream on first use and kept: work queued
// on the stream uses it in order, and a stream of its own keeps concurrent streams apart.
void* workspace(int device, cudaStream_t stream) {
  static std::mutex mutex;
  static auto* buffers = new std::map<std::pair<int, cudaStream_t>, Tensor>();
  std::lock_guard<std::mutex> lock(mutex);
  Tensor& t = (*buffers)[{device, stream}];
  if (!t.defined())
    t = rtx::detail::make_tensor({static_cast<int64_t>(kWorkspaceBytes)}, kUInt8, Device(kCUDA, device));
  return t.data_ptr();
}

// One operand as cuBLASLt reads it. The product runs as out^T = b^T @ a^T, so an operand x [rows, cols]
// enters as x^T: its memory read column-major is x^T when x is stored row-major (op N) and x itself
// when x is stored column-major (op T).
struct Operand {
  Tensor t;  // what is read: the operand itself or a contiguous copy
  cublasOperation_t op;
  uint64_t rows, cols;  // the column-major layout of t's memory
  int64_t ld, batch_stride;
};

// The one element stride between consecutive matrices of t [..., rows, cols] when its batch dims
// collapse to one (0 for a broadcast batch), nullopt when they do not.
std::optional<int64_t> batch_stride(const Tensor& t) {
  std::optional<int64_t> stride;
  int64_t inner = 1;  // batches spanned by the dims already seen
  for (int64_t d = t.dim() - 3; d >= 0; --d) {
    if (t.size(d) == 1) continue;
    if (!stride) stride = t.stride(d);
    else if (t.stride(d) != *stride * inner) return std::nullopt;
    inner *= t.size(d);
  }
  return stride.value_or(0);
}

// t as cuBLASLt reads it in place, or nullopt when its strides do not allow that.
std::optional<Operand> describe(const Tensor& t) {
  const int64_t nd = t.dim();
  const int64_t r = t.size(nd - 2), c = t.size(nd - 1), s0 = t.stride(nd - 2), s1 = t.stride(nd - 1);
  const std::optional<int64_t> batch = batch_stride(t);
  if (!batch || *batch < 0) return std::nullopt;
  if ((c == 1 || s1 == 1) && (r == 1 || s0 >= std::max<int64_t>(1, c)))
    return Operand{t, CUBLAS_OP_N, static_cast<uint64_t>(c), static_cast<uint64_t>(r),
                   r == 1 ? std::max<int64_t>(1, c) : s0, *batch};
  if ((r == 1 || s0 == 1) && (c == 1 || s1 >= std::max<int64_t>(1, r)))
    return Operand{t, CUBLAS_OP_T, static_cast<uint64_t>(r), static_cast<uint64_t>(c),
                   c == 1 ? std::max<int64_t>(1, r) : s1, *batch};
  return std::nullopt;
}

// t as cuBLASLt reads it: in place when its strides allow, else a contiguous copy.
Operand operand(const Tensor& t) {
  if (auto o = describe(t)) return *o;
  return *describe(contiguous_cuda(t));
}

struct GemmTypes {
  cudaDataType_t data, scale;
  cublasComputeType_t compute;
};

GemmTypes gemm_types(DType t) {
  switch (t) {
    case kFloat64: return {CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F};
    case kFloat16: return {CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F};
    case kBFloat16: return {CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F};
    default: {
      const bool tf32 = get_float32_matmul_precision() != "highest";
      return {CUDA_R_32F, CUDA_R_32F, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F};
    }
  }
}

// The split-K reduction schemes allowed for an output of dtype t.
uint32_t reduction_schemes(DType t) {
  uint32_t mask = CUBLASLT_REDUCTION_SCHEME_MASK;
  if (t == kFloat16 || t == kBFloat16)  // partial sums are never reduced in 16 bits
    mask &= ~static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_INPLACE | CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE);
  if (are_deterministic_algorithms_enabled()) mask &= ~static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_INPLACE);
  return mask;
}

// The largest power of two up to 256 that divides the address (cuBLASLt's heuristic must be told).
uint32_t alignment(const void* p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && v % a != 0) a /= 2;
  return a;
}

void make_layout(Layout& layout, cudaDataType_t type, uint64_t rows, uint64_t cols, int64_t ld, int32_t batches,
                 int64_t batch_stride) {
  RTX_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(layout.out(), type, rows, cols, ld));
  if (batches > 1) {
    set(layout.get(), CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, batches);
    set(layout.get(), CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, batch_stride);
  }
}

struct GemmPlan {
  cublasLtMatmulAlgo_t algo;
  size_t workspace;
  bool found;  // false: the heuristic has no algorithm for this problem (with its epilogue)
};
// device, dtype, compute type, reduction schemes, both ops, both operand layouts (rows, cols, ld, batch
// stride), the output's rows and cols, the batch count, the three pointers' alignments and the fused
// epilogue (gemm's `fused`).
constexpr size_t kGemmKeySize = 21;
using GemmKey = std::array<int64_t, kGemmKeySize>;

detail::PlanCache<kGemmKeySize, GemmPlan>& gemm_plans() {
  static auto* cache = new detail::PlanCache<kGemmKeySize, GemmPlan>();
  return *cache;
}

// Algorithms the heuristic is asked for when the product is tuned (backend/cuda/tuner.h); one otherwise.
constexpr int kTunedAlgorithms = 8;

// The heuristic's first `count` algorithms for the product described by desc and the layouts, best
// first (none when it has none).
std::vector<GemmPlan> heuristic_algorithms(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                           cublasLtMatrixLayout_t la, cublasLtMatrixLayout_t lb,
                                           cublasLtMatrixLayout_t ld, uint32_t schemes,
                                           const std::array<uint32_t, 3>& align, int count) {
  Preference pref;
  RTX_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(pref.out()));
  set(pref.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(kWorkspaceBytes));
  set(pref.get(), CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, schemes);
  set(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align[0]);
  set(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align[1]);
  set(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align[2]);
  set(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align[2]);
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(count));
  int found = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(handle, desc, la, lb, ld, ld, pref.get(), count, results.data(), &found);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) return {};
  RTX_CUBLAS_CHECK(status);
  std::vector<GemmPlan> plans;
  for (int i = 0; i < found; ++i) plans.push_back({results[i].algo, results[i].workspaceSize, true});
  return plans;
}

// The tuning cache's name of a product's shape class: the key's fields after the device, in its order.
std::string shape_class_of(const GemmKey& key) {
  return fmt::format("{}", fmt::join(key.begin() + 1, key.end(), ","));
}

// The tuning cache's name for cuBLASLt's products: its version is part of it, since the heuristic's
// list of algorithms may differ between versions.
const std::string& tuning_kernel_name() {
  static const std::string name = fmt::format("cublaslt{}_matmul", cublasLtGetVersion());
  return name;
}

// Vectors the epilogue reads or writes are at least this aligned (a bias that is not is added by a prefill).
constexpr uint32_t kEpilogueAlignment = 16;

// out [..., m, n] = a @ b for floating dtypes through cuBLASLt, with the epilogue's bias (added in
// cuBLASLt's epilogue where it has an algorithm for it, otherwise out is prefilled with the bias rows and
// the product accumulates onto them, beta = 1) and a_sums (cuBLASLt's bias-gradient epilogue, which
// sums its second operand, a^T, over the product's inner dim). Returns whether a_sums was written.
bool gemm(const Tensor& out, const Tensor& a, const Tensor& b, const kernels::MatmulEpilogue& epilogue, int64_t m,
          int64_t n, int64_t batches) {
  const Tensor& bias = epilogue.bias;
  detail::KernelScope scope(out.device());
  const int device = out.device().index;
  const Operand A = operand(b), B = operand(a);  // out^T = b^T @ a^T: b is cuBLAS's first operand
  const GemmTypes types = gemm_types(out.dtype());
  const uint32_t schemes = reduction_schemes(out.dtype());
  // The plain product's description, and the fused one's (the epilogue's attributes on top): kept
  // apart, so that a product that falls back runs with no epilogue attribute left set.
  MatmulDesc desc, fused_desc;
  for (MatmulDesc* d : {&desc, &fused_desc}) {
    RTX_CUBLAS_CHECK(cublasLtMatmulDescCreate(d->out(), types.compute, types.scale));
    set(d->get(), CUBLASLT_MATMUL_DESC_TRANSA, static_cast<int32_t>(A.op));
    set(d->get(), CUBLASLT_MATMUL_DESC_TRANSB, static_cast<int32_t>(B.op));
  }
  const double one = 1.0, zero = 0.0;
  const float one_f = 1.0f, zero_f = 0.0f;
  const bool dbl = types.scale == CUDA_R_64F;
  const void* alpha = dbl ? static_cast<const void*>(&one) : &one_f;
  const void* beta = dbl ? static_cast<const void*>(&zero) : &zero_f;
  // The fused epilogue, if any: 1 adds the bias, 2 writes a_sums.
  const Tensor& vector = bias.defined() ? bias : epilogue.a_sums;
  int64_t fused = !vector.defined() || alignment(vector.data_ptr()) < kEpilogueAlignment ? 0 : bias.defined() ? 1 : 2;
  if (fused != 0) {
    set(fused_desc.get(), CUBLASLT_MATMUL_DESC_EPILOGUE,
        fused == 1 ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_BGRADB);
    set(fused_desc.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, vector.data_ptr());
  }
  const cublasLtHandle_t handle = lt_handle(device);
  void* ws = workspace(device, scope.stream());
  const Tensor& sums = epilogue.a_sums;
  const bool repeatable = !out.shares_storage(a) && !out.shares_storage(b) &&
                          !(sums.defined() && (sums.shares_storage(a) || sums.shares_storage(b)));
  const int64_t es = static_cast<int64_t>(out.element_size());
  for (int64_t b0 = 0; b0 < batches; b0 += kMaxBatch) {
    const auto count = static_cast<int32_t>(std::min(kMaxBatch, batches - b0));
    const int64_t sa = count > 1 ? A.batch_stride : 0, sb = count > 1 ? B.batch_stride : 0;
    const char* pa = static_cast<const char*>(A.t.data_ptr()) + b0 * A.batch_stride * es;
    const char* pb = static_cast<const char*>(B.t.data_ptr()) + b0 * B.batch_stride * es;
    char* pd = static_cast<char*>(out.data_ptr()) + b0 * m * n * es;
    Layout la, lb, ld;
    make_layout(la, types.data, A.rows, A.cols, A.ld, count, sa);
    make_layout(lb, types.data, B.rows, B.cols, B.ld, count, sb);
    make_layout(ld, types.data, static_cast<uint64_t>(n), static_cast<uint64_t>(m), n, count, m * n);
    const std::array<uint32_t, 3> align{alignment(pa), alignment(pb), alignment(pd)};
    const auto key_for = [&](int64_t epilogue_kind) {
      return GemmKey{device, static_cast<int64_t>(out.dtype()), static_cast<int64_t>(types.compute), schemes,
                     static_cast<int64_t>(A.op), static_cast<int64_t>(A.rows), static_cast<int64_t>(A.cols), A.ld, sa,
                     static_cast<int64_t>(B.op), static_cast<int64_t>(B.rows), static_cast<int64_t>(B.cols), B.ld, sb,
                     n, m, count, align[0], align[1], align[2], epilogue_kind};
    };
    const auto desc_of = [&](int64_t epilogue_kind) { return epilogue_kind == 0 ? desc.get() : fused_desc.get(); };
    const auto run = [&](const GemmPlan& plan, int64_t epilogue_kind) {
      detail::count_library_call();
      return cublasLtMatmul(handle, desc_of(epilogue_kind), alpha, pa, la.get(), pb, lb.get(), beta, pd, ld.get(), pd,
                            ld.get(), &plan.algo, ws, plan.workspace, scope.stream());
    };
    // The plan of a problem: the heuristic's best algorithm, or, where the product can run repeatedly
    // (it writes out and a_sums from a and b alone: no prefilled bias, no operand sharing out's
    // memory), the fastest of its first kTunedAlgorithms as timed once per GPU model.
    const auto plan_for = [&](int64_t epilogue_kind, bool tunable) {
      return gemm_plans().get(key_for(epilogue_kind), [&] {
        const std::vector<GemmPlan> plans =
            heuristic_algorithms(handle, desc_of(epilogue_kind), la.get(), lb.get(), ld.get(), schemes, align,
                                 tunable && rtx::detail::tuning_enabled() ? kTunedAlgorithms : 1);
        if (plans.empty()) return GemmPlan{{}, 0, false};
        const int choice = detail::tuned_choice(
            device, scope.stream(), tuning_kernel_name(), shape_class_of(key_for(epilogue_kind)),
            static_cast<int>(plans.size()), 0,
            [&](int c) { return run(plans[c], epilogue_kind) == CUBLAS_STATUS_SUCCESS; });
        return plans[choice];
      });
    };
    // Without the epilogue: the plain product, with the bias prefilled into out when there is one.
    const auto run_unfused = [&] {
      const GemmPlan plan = plan_for(0, repeatable && !bias.defined());
      RTX_CHECK(plan.found, Error, "[matmul] cuBLASLt found no algorithm for this product");
      if (bias.defined()) {
        copy_cuda(out, rtx::detail::make_view(bias, {m, n}, {0, 1}, bias.storage_offset()));
        beta = alpha;  // both are one
      }
      RTX_CUBLAS_CHECK(run(plan, 0));
    };
    if (fused == 0) {
      run_unfused();
      continue;
    }
    GemmPlan plan = plan_for(fused, repeatable);
    // The heuristic may offer an algorithm for the epilogue that the call then refuses
    // (CUBLAS_STATUS_INVALID_VALUE or NOT_SUPPORTED for some shapes): that problem runs unfused from then on.
    const cublasStatus_t status = plan.found ? run(plan, fused) : CUBLAS_STATUS_NOT_SUPPORTED;
    if (status == CUBLAS_STATUS_SUCCESS) continue;
    if (plan.found && status != CUBLAS_STATUS_INVALID_VALUE && status != CUBLAS_STATUS_NOT_SUPPORTED)
      RTX_CUBLAS_CHECK(status);
    if (plan.found) gemm_plans().put(key_for(fused), GemmPlan{plan.algo, 0, false});
    fused = 0;
    run_unfused();
  }
  return fused == 2;
}

bool matmul_cuda(const Tensor& out, const Tensor& a, const Tensor& b, const kernels::MatmulEpilogue& epilogue) {
  const int64_t nd = out.dim();
  const int64_t m = out.size(nd - 2), n = out.size(nd - 1), k = a.size(nd - 1);
  if (k == 0) {
    if (epilogue.bias.defined()) {
      copy_cuda(out, rtx::detail::make_view(epilogue.bias, {m, n}, {0, 1}, epilogue.bias.storage_offset()));
    } else {
      detail::KernelScope scope(out.device());
      RTX_CUDA_CHECK(cudaMemsetAsync(out.data_ptr(), 0, out.nbytes(), scope.stream()));  // zero bits are zero
    }
    return false;
  }
  if (is_integral(out.dtype())) {
    int_matmul(out, a, b);
    return false;
  }
  return gemm(out, a, b, epilogue, m, n, out.numel() / (m * n));
}

}  // namespace

RTX_REGISTER_KERNELS(linalg_cuda) { RTX_LINALG_KERNELS(RTX_SET_CUDA_KERNEL) }

void detail::prepare_blas_for_capture(int device, cudaStream_t stream) {
  DeviceGuard guard(device);
  (void)lt_handle(device);
  (void)workspace(device, stream);
}

}  // namespace rtx::cuda
