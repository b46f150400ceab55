// ProcessGroupNCCL: the collectives of rtx::dist on NCCL, for CUDA tensors, as PyTorch's NCCL
// backend runs them. A communicator is made at the first operation that needs it, on the device of
// its tensors: the group's own for the collectives, and one per pair of ranks for send/recv (so
// point-to-point traffic never queues behind a collective). Rank 0 of a communicator publishes
// NCCL's unique id in the store; every rank joins non-blocking and polls, aborting at the timeout.
// Each communicator has a high-priority stream; an operation waits there for the caller's current
// stream (an event, no device-wide sync), runs, records its end event and marks the memory it uses
// as used by that stream (record_stream). A watchdog thread polls the pending operations and NCCL's
// asynchronous errors; a timeout or an error aborts the communicators and fails the group: every
// later call and every wait() of an operation pending then raises that DistBackendError.
// Built only with NCCL (RTX_WITH_NCCL), whose library is loaded at run time (load_nccl);
// nccl_unavailable.cpp stands in otherwise.
#include <dlfcn.h>
#include <nccl.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "distributed/collective_checks.h"
#include "distributed/work.h"
#include "rtx/autograd.h"
#include "rtx/cuda.h"
#include "rtx/ops.h"

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error "the nccl backend needs NCCL 2.14 or later (non-blocking communicators, ncclAvg, bfloat16)"
#endif

namespace rtx::dist {
namespace {

using Clock = std::chrono::steady_clock;
// How often the watchdog looks at the pending operations (PyTorch's watchdog: 100 ms).
constexpr auto kWatchdogInterval = std::chrono::milliseconds(100);
// How often a host that waits (communicator set-up, blocking wait, barrier) polls.
constexpr auto kPollInterval = std::chrono::microseconds(200);

// NCCL, loaded when the first nccl group is made rather than linked: a process that imports
// rustytorch and then PyTorch leaves PyTorch free to load its own (often newer) libnccl.so.2, which a
// linked copy would shadow (the process keeps one library per soname). A library loaded earlier (by
// PyTorch) is the one used; else libnccl.so.2 from the usual search path, else the one CMake found.
#define RTX_NCCL_FUNCTIONS(X)                                                                          \
  X(ncclGetVersion) X(ncclGetErrorString) X(ncclGetLastError) X(ncclGetUniqueId) X(ncclCommInitRankConfig) \
  X(ncclCommGetAsyncError) X(ncclCommAbort) X(ncclAllReduce) X(ncclBroadcast) X(ncclReduce)            \
  X(ncclAllGather) X(ncclReduceScatter) X(ncclSend) X(ncclRecv) X(ncclGroupStart) X(ncclGroupEnd)

struct NcclLibrary {
#define RTX_NCCL_POINTER(name) decltype(&::name) name = nullptr;
  RTX_NCCL_FUNCTIONS(RTX_NCCL_POINTER)
#undef RTX_NCCL_POINTER
};

NcclLibrary load_nccl() {
  void* handle = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  std::string tried = "libnccl.so.2";
  if (handle == nullptr) {
    tried += " (" + std::string(dlerror()) + ") and " RTX_NCCL_LIBRARY_PATH;
    handle = dlopen(RTX_NCCL_LIBRARY_PATH, RTLD_NOW | RTLD_LOCAL);
  }
  if (handle == nullptr) {
    throw DistBackendError("[ProcessGroupNCCL] could not load NCCL: tried " + tried + " (" + dlerror() +
                           "); put libnccl.so.2 on LD_LIBRARY_PATH");
  }
  NcclLibrary lib;
#define RTX_NCCL_LOAD(name)                                                                                     \
  lib.name = reinterpret_cast<decltype(lib.name)>(dlsym(handle, #name));                                     \
  if (lib.name == nullptr) throw DistBackendError("[ProcessGroupNCCL] the NCCL library loaded has no " #name);
  RTX_NCCL_FUNCTIONS(RTX_NCCL_LOAD)
#undef RTX_NCCL_LOAD
  int version = 0;
  if (lib.ncclGetVersion(&version) != ncclSuccess || version < NCCL_VERSION(2, 14, 0)) {
    throw DistBackendError("[ProcessGroupNCCL] the NCCL library loaded is version " + std::to_string(version) +
                           "; the nccl backend needs 2.14 or later");
  }
  return lib;
}

// The NCCL functions (loaded on first use; a failure raises DistBackendError, and the next call tries again).
const NcclLibrary& nccl() {
  static const NcclLibrary lib = load_nccl();
  return lib;
}

// PyTorch's reading of a boolean environment variable: 1, true, yes or y (any case).
bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return false;
  std::string s;
  for (const char* c = v; *c != '\0'; ++c) s.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(*c))));
  return s == "1" || s == "true" || s == "yes" || s == "y";
}

// Whether the CUDA runtime can still be called: not while the process tears it down at exit.
bool cuda_runtime_alive() {
  int device = 0;
  return cudaGetDevice(&device) != cudaErrorCudartUnloading;
}

ncclDataType_t nccl_dtype(DType dtype) {
  switch (dtype) {
    case DType::Bool:  // as PyTorch: bool moves as uint8 (SUM reduces as MAX)
    case DType::UInt8: return ncclUint8;
    case DType::Int8: return ncclInt8;
    case DType::Int32: return ncclInt32;
    case DType::Int64: return ncclInt64;
    case DType::Float16: return ncclFloat16;
    case DType::BFloat16: return ncclBfloat16;
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::Int16: break;  // NCCL has no 16-bit integer type
  }
  throw DTypeError(std::string("[ProcessGroupNCCL] dtype ") + dtype_name(dtype) + " has no NCCL type");
}

ncclRedOp_t nccl_op(ReduceOp op, DType dtype) {
  switch (op) {
    // As PyTorch: the SUM of bools is their MAX (logical or; a uint8 sum could wrap to false).
    case ReduceOp::Sum: return dtype == DType::Bool ? ncclMax : ncclSum;
    case ReduceOp::Avg: return ncclAvg;
    case ReduceOp::Product: return ncclProd;
    case ReduceOp::Min: return ncclMin;
    case ReduceOp::Max: return ncclMax;
  }
  throw ValueError(std::string("[ProcessGroupNCCL] unknown ReduceOp ") + reduce_op_name(op));
}

// "unhandled system error: <NCCL's last message>"
std::string nccl_error(ncclResult_t result, ncclComm_t comm) {
  std::string s = nccl().ncclGetErrorString(result);
  const char* last = nccl().ncclGetLastError(comm);
  if (last != nullptr && *last != '\0') s += std::string(": ") + last;
  return s;
}

// One NCCL communicator on one device with the stream its operations run on.
struct Comm {
  Comm(std::string name, int device, ncclComm_t handle)
      : name(std::move(name)), device(device), handle(handle), stream(cuda::Stream::create(device, true)) {}

  // NCCL's asynchronous error ("" while there is none).
  std::string async_error() {
    std::lock_guard<std::mutex> lock(mu);
    if (aborted) return "";
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = nccl().ncclCommGetAsyncError(handle, &state);
    if (r != ncclSuccess) state = r;
    return state == ncclSuccess || state == ncclInProgress ? "" : nccl_error(state, handle);
  }

  // Stops the communicator's operations and frees it (once).
  void abort() {
    std::lock_guard<std::mutex> lock(mu);
    if (aborted) return;
    aborted = true;
    if (cuda_runtime_alive()) (void)nccl().ncclCommAbort(handle);
  }

  const std::string name;  // "the group's communicator", "the communicator of ranks 0 and 1"
  const int device;
  const ncclComm_t handle;
  const cuda::Stream stream;
  std::mutex mu;  // serializes the calls on handle: issue, state queries, abort
  bool aborted = false;
};

// What the watchdog and the Work of one operation share.
struct Pending {
  Pending(std::string what, std::shared_ptr<Comm> comm) : what(std::move(what)), comm(std::move(comm)) {}
  const std::string what;
  const std::shared_ptr<Comm> comm;
  cuda::Event end;  // recorded on comm->stream after the operation (and its copies)
  const Clock::time_point start = Clock::now();
  std::exception_ptr error;  // under GroupState::mu: the group's error when it failed before this completed

  // Whether the end event has passed (queried on its device, from any thread).
  bool completed() const {
    cuda::DeviceGuard guard(comm->device);
    return end.query();
  }
};

// The state of a group that its works and its watchdog share (a Work may outlive its group).
struct GroupState {
  GroupState(std::string ident, Timeout timeout, bool blocking_wait)
      : ident(std::move(ident)), timeout(timeout), blocking_wait(blocking_wait) {}

  // Fails the group (the first failure is kept): "[what] <ident> <why>", raised by every later call
  // and every wait() of an operation pending now; aborts every communicator.
  void fail(const std::string& what, const std::string& why) {
    std::vector<std::shared_ptr<Comm>> to_abort;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!error) error = std::make_exception_ptr(DistBackendError("[" + what + "] " + ident + " " + why));
      for (const auto& p : pending) p->error = error;
      pending.clear();
      to_abort = comms;
    }
    cv.notify_all();
    for (const auto& c : to_abort) c->abort();
  }

  void raise_if_failed() {
    std::lock_guard<std::mutex> lock(mu);
    if (error) std::rethrow_exception(error);
  }

  // fail, then raise the group's error.
  [[noreturn]] void fail_and_raise(const std::string& what, const std::string& why) {
    fail(what, why);
    std::lock_guard<std::mutex> lock(mu);
    std::rethrow_exception(error);
  }

  // p has completed: it no longer fails with the group.
  void complete(const std::shared_ptr<Pending>& p) {
    std::lock_guard<std::mutex> lock(mu);
    pending.erase(std::remove(pending.begin(), pending.end(), p), pending.end());
  }

  const std::string ident;  // "rank 0 of an nccl group of 2 (world ranks [0, 1])"
  const Timeout timeout;
  const bool blocking_wait;  // TORCH_NCCL_BLOCKING_WAIT
  std::mutex mu;
  std::condition_variable cv;
  std::exception_ptr error;
  std::vector<std::shared_ptr<Comm>> comms;
  std::vector<std::shared_ptr<Pending>> pending;
  bool stop = false;  // the group is going: the watchdog ends once nothing is pending
};

// The watchdog: fails the group when NCCL reports an error on a communicator or an operation is still
// pending after the timeout.
void watch(const std::shared_ptr<GroupState>& s) {
  for (;;) {
    std::vector<std::shared_ptr<Pending>> works;
    std::vector<std::shared_ptr<Comm>> comms;
    {
      std::unique_lock<std::mutex> lock(s->mu);
      s->cv.wait_for(lock, kWatchdogInterval, [&] { return s->stop && s->pending.empty(); });
      if (s->stop && s->pending.empty()) return;
      works = s->pending;
      comms = s->comms;
    }
    std::string what = "ProcessGroupNCCL";
    try {
      for (const auto& c : comms) {
        const std::string err = c->async_error();
        if (err.empty()) continue;
        for (const auto& w : works) {
          if (w->comm == c) {
            what = w->what;
            break;
          }
        }
        throw DistBackendError("failed on " + c->name + " (cuda:" + std::to_string(c->device) + "): " + err);
      }
      for (const auto& w : works) {
        what = w->what;
        if (w->completed()) {
          s->complete(w);
        } else if (Clock::now() - w->start > s->timeout) {
          throw DistBackendError("did not complete within " + format_timeout(s->timeout) + " (a peer died, hangs or "
                                 "did not call the same collective)");
        }
      }
    } catch (const std::exception& e) {
      s->fail(what, e.what());
    }
  }
}

// The Work of an NCCL operation.
class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<GroupState> state, std::shared_ptr<Pending> p, std::vector<Tensor> outputs, bool host_wait)
      : state_(std::move(state)), p_(std::move(p)), outputs_(std::move(outputs)), host_wait_(host_wait) {}

  // The caller's current stream waits for the operation; the host too with TORCH_NCCL_BLOCKING_WAIT,
  // a timeout, or for barrier (up to the timeout, then the group fails).
  bool wait(std::optional<Timeout> timeout) override {
    raise_error();
    cuda::current_stream(p_->comm->device).wait(p_->end);
    if (state_->blocking_wait || timeout || host_wait_) {
      const Timeout limit = timeout.value_or(state_->timeout);
      while (!p_->completed()) {
        raise_error();
        if (Clock::now() - p_->start > limit) {
          state_->fail_and_raise(p_->what, "did not complete within " + format_timeout(limit) + " (a blocking wait)");
        }
        std::this_thread::sleep_for(kPollInterval);
      }
      state_->complete(p_);
    }
    raise_error();
    return true;
  }

  bool is_completed() override { return failed() || p_->completed(); }
  bool is_success() override { return !failed() && p_->completed(); }
  std::vector<Tensor> result() override { return outputs_; }

 private:
  bool failed() {
    std::lock_guard<std::mutex> lock(state_->mu);
    return p_->error != nullptr;
  }
  void raise_error() {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (p_->error) std::rethrow_exception(p_->error);
  }

  std::shared_ptr<GroupState> state_;
  std::shared_ptr<Pending> p_;
  std::vector<Tensor> outputs_;
  bool host_wait_;
};

void check_cuda(const Tensor& t, const char* op) {
  detail::check_defined(t, op);
  if (!t.is_cuda()) {
    throw DeviceError(std::string("[") + op + "] the nccl backend takes CUDA tensors, got one on " + t.device().str() +
                      "; use the gloo backend for CPU tensors, or backend=None for both");
  }
}

// The contiguous buffer NCCL reads (and writes in place) for t: t, or a copy made on the caller's stream.
Tensor in_buffer(const Tensor& t) {
  NoGradGuard no_grad;
  return t.is_contiguous() ? t : t.contiguous();
}

// A contiguous buffer NCCL only writes for t: t, or a new one copied into t afterwards.
Tensor out_buffer(const Tensor& t) { return t.is_contiguous() ? t : empty(t.sizes(), t.options()); }

// Copies buf into user after the operation (nothing when they are one tensor).
std::function<void()> copy_back(const Tensor& user, const Tensor& buf) {
  if (user.is_same(buf)) return {};
  return [target = user, buf]() mutable { target.copy_(buf); };
}

using NcclCall = std::function<ncclResult_t(ncclComm_t, cudaStream_t)>;

class ProcessGroupNCCL final : public ProcessGroup {
 public:
  ProcessGroupNCCL(std::shared_ptr<Store> store, int rank, int size, Timeout timeout, std::vector<int> ranks)
      : ProcessGroup(rank, size, timeout, std::move(ranks)), store_(std::move(store)) {
    nccl();  // loads NCCL now: a library that cannot be loaded fails init_process_group
    state_ = std::make_shared<GroupState>(detail::group_ident("an nccl group", rank_, size_, ranks_), timeout_,
                                          env_flag("TORCH_NCCL_BLOCKING_WAIT") || env_flag("NCCL_BLOCKING_WAIT"));
    watchdog_ = std::thread([s = state_] { watch(s); });
  }

  // Lets the pending operations finish (or fail at the timeout), then frees the communicators.
  ~ProcessGroupNCCL() override {
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->stop = true;
    }
    state_->cv.notify_all();
    watchdog_.join();
    std::vector<std::shared_ptr<Comm>> comms;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      comms = state_->comms;
    }
    for (const auto& c : comms) c->abort();
  }

  std::string backend_name() const override { return "nccl"; }

  std::shared_ptr<Work> all_reduce(Tensor tensor, ReduceOp op) override {
    check_cuda(tensor, "all_reduce");
    detail::check_avg(op, tensor.dtype(), "all_reduce");
    auto comm = group_comm({tensor}, "all_reduce");
    Tensor buf = in_buffer(tensor);
    const ncclDataType_t type = nccl_dtype(buf.dtype());
    const ncclRedOp_t red = nccl_op(op, buf.dtype());
    const size_t count = static_cast<size_t>(buf.numel());
    void* data = buf.data_ptr();
    return launch(
        "all_reduce", comm, {buf, tensor}, {tensor},
        [=](ncclComm_t c, cudaStream_t s) {
          return count == 0 ? ncclSuccess : nccl().ncclAllReduce(data, data, count, type, red, c, s);
        },
        copy_back(tensor, buf));
  }

  std::shared_ptr<Work> broadcast(Tensor tensor, int src) override {
    check_cuda(tensor, "broadcast");
    detail::check_rank(src, size_, "broadcast", "src");
    auto comm = group_comm({tensor}, "broadcast");
    Tensor buf = rank_ == src ? in_buffer(tensor) : out_buffer(tensor);
    const ncclDataType_t type = nccl_dtype(buf.dtype());
    const size_t count = static_cast<size_t>(buf.numel());
    void* data = buf.data_ptr();
    return launch(
        "broadcast", comm, {buf, tensor}, {tensor},
        [=](ncclComm_t c, cudaStream_t s) {
          return count == 0 ? ncclSuccess : nccl().ncclBroadcast(data, data, count, type, src, c, s);
        },
        rank_ == src ? nullptr : copy_back(tensor, buf));
  }

  // NCCL only reads the send buffer of the ranks other than dst: their tensors stay unchanged.
  std::shared_ptr<Work> reduce(Tensor tensor, int dst, ReduceOp op) override {
    check_cuda(tensor, "reduce");
    detail::check_rank(dst, size_, "reduce", "dst");
    detail::check_avg(op, tensor.dtype(), "reduce");
    auto comm = group_comm({tensor}, "reduce");
    Tensor buf = in_buffer(tensor);
    const ncclDataType_t type = nccl_dtype(buf.dtype());
    const ncclRedOp_t red = nccl_op(op, buf.dtype());
    const size_t count = static_cast<size_t>(buf.numel());
    void* data = buf.data_ptr();
    return launch(
        "reduce", comm, {buf, tensor}, {tensor},
        [=](ncclComm_t c, cudaStream_t s) {
          return count == 0 ? ncclSuccess : nccl().ncclReduce(data, data, count, type, red, dst, c, s);
        },
        rank_ == dst ? copy_back(tensor, buf) : nullptr);
  }

  // Gathers into one flat buffer, then copies each rank's part into its output on the NCCL stream.
  std::shared_ptr<Work> all_gather(std::vector<Tensor> outputs, Tensor input) override {
    check_cuda(input, "all_gather");
    for (const auto& o : outputs) check_cuda(o, "all_gather");
    detail::check_all_gather(outputs, input, size_);
    std::vector<Tensor> tensors = outputs;
    tensors.push_back(input);
    auto comm = group_comm(tensors, "all_gather");
    Tensor in = in_buffer(input);
    const int64_t n = in.numel();
    Tensor flat = empty({size_ * n}, in.options());
    const ncclDataType_t type = nccl_dtype(in.dtype());
    tensors.push_back(in);
    tensors.push_back(flat);
    auto copy_out = [outputs, flat, n, shape = input.sizes()]() mutable {
      for (size_t r = 0; r < outputs.size(); ++r) {
        outputs[r].copy_(flat.narrow(0, static_cast<int64_t>(r) * n, n).view(shape));
      }
    };
    const size_t count = static_cast<size_t>(n);
    const void* from = in.data_ptr();
    void* to = flat.data_ptr();
    return launch(
        "all_gather", comm, tensors, outputs,
        [=](ncclComm_t c, cudaStream_t s) {
          return count == 0 ? ncclSuccess : nccl().ncclAllGather(from, to, count, type, c, s);
        },
        copy_out);
  }

  std::shared_ptr<Work> all_gather_into_tensor(Tensor output, Tensor input) override {
    check_cuda(output, "all_gather_into_tensor");
    check_cuda(input, "all_gather_into_tensor");
    detail::check_all_gather_into_tensor(output, input, size_);
    auto comm = group_comm({output, input}, "all_gather_into_tensor");
    Tensor in = in_buffer(input);
    Tensor out = out_buffer(output);
    const ncclDataType_t type = nccl_dtype(in.dtype());
    const size_t count = static_cast<size_t>(in.numel());
    const void* from = in.data_ptr();
    void* to = out.data_ptr();
    return launch(
        "all_gather_into_tensor", comm, {in, out, output, input}, {output},
        [=](ncclComm_t c, cudaStream_t s) {
          return count == 0 ? ncclSuccess : nccl().ncclAllGather(from, to, count, type, c, s);
        },
        copy_back(output, out));
  }

  std::shared_ptr<Work> reduce_scatter_tensor(Tensor output, Tensor input, ReduceOp op) override {
    check_cuda(output, "reduce_scatter_tensor");
    check_cuda(input, "reduce_scatter_tensor");
    detail::check_reduce_scatter_tensor(output, input, op, size_);
    auto comm = group_comm({output, input}, "reduce_scatter_tensor");
    Tensor in = in_buffer(input);
    Tensor out = out_buffer(output);
    const ncclDataType_t type = nccl_dtype(in.dtype());
    const ncclRedOp_t red = nccl_op(op, in.dtype());
    const size_t count = static_cast<size_t>(out.numel());
    const void* from = in.data_ptr();
    void* to = out.data_ptr();
    return launch(
        "reduce_scatter_tensor", comm, {in, out, output, input}, {output},
        [=](ncclComm_t c, cudaStream_t s) {
          return count == 0 ? ncclSuccess : nccl().ncclReduceScatter(from, to, count, type, red, c, s);
        },
        copy_back(output, out));
  }

  // One NCCL group of a send and a receive per peer (bytes; peers with nothing to exchange skipped on
  // both sides).
  std::shared_ptr<Work> all_to_all_single(Tensor output, Tensor input, std::vector<int64_t> output_splits,
                                          std::vector<int64_t> input_splits) override {
    check_cuda(output, "all_to_all_single");
    check_cuda(input, "all_to_all_single");
    detail::check_all_to_all(output, input);
    const auto in_counts = detail::split_counts(input, input_splits, size_, "input_split_sizes");
    const auto out_counts = detail::split_counts(output, output_splits, size_, "output_split_sizes");
    auto comm = group_comm({output, input}, "all_to_all_single");
    Tensor in = in_buffer(input);
    Tensor out = out_buffer(output);
    const size_t esize = in.element_size();
    const auto* from = static_cast<const uint8_t*>(in.data_ptr());
    auto* to = static_cast<uint8_t*>(out.data_ptr());
    auto call = [=](ncclComm_t c, cudaStream_t s) {
      ncclResult_t first = nccl().ncclGroupStart();
      if (first != ncclSuccess) return first;
      size_t sent = 0, got = 0;  // bytes so far
      for (size_t p = 0; p < in_counts.size(); ++p) {
        const size_t send_bytes = static_cast<size_t>(in_counts[p]) * esize;
        const size_t recv_bytes = static_cast<size_t>(out_counts[p]) * esize;
        const int peer = static_cast<int>(p);
        ncclResult_t r = ncclSuccess;
        if (send_bytes > 0) r = nccl().ncclSend(from + sent, send_bytes, ncclUint8, peer, c, s);
        if (first == ncclSuccess) first = r;
        if (recv_bytes > 0) r = nccl().ncclRecv(to + got, recv_bytes, ncclUint8, peer, c, s);
        if (first == ncclSuccess) first = r;
        sent += send_bytes;
        got += recv_bytes;
      }
      const ncclResult_t end = nccl().ncclGroupEnd();  // closes the group whatever failed in it
      return first != ncclSuccess ? first : end;
    };
    return launch("all_to_all_single", comm, {in, out, output, input}, {output}, call, copy_back(output, out));
  }

  // NCCL has no tags: tag is accepted and ignored (as PyTorch's NCCL backend does); messages between
  // two ranks match in the order they are posted.
  std::shared_ptr<Work> send(Tensor tensor, int dst, int /*tag*/) override {
    check_cuda(tensor, "send");
    detail::check_peer(dst, rank_, size_, "send", "dst");
    auto comm = pair_comm(tensor, dst, "send");
    Tensor buf = in_buffer(tensor);
    const int peer = dst < rank_ ? 0 : 1;  // the peer's rank in the pair's communicator
    const void* data = buf.data_ptr();
    const size_t bytes = buf.nbytes();
    return launch(
        "send", comm, {buf, tensor}, {tensor},
        [=](ncclComm_t c, cudaStream_t s) { return nccl().ncclSend(data, bytes, ncclUint8, peer, c, s); }, nullptr);
  }

  std::shared_ptr<Work> recv(Tensor tensor, int src, int /*tag*/) override {
    check_cuda(tensor, "recv");
    detail::check_peer(src, rank_, size_, "recv", "src");
    auto comm = pair_comm(tensor, src, "recv");
    Tensor buf = out_buffer(tensor);
    const int peer = src < rank_ ? 0 : 1;
    void* data = buf.data_ptr();
    const size_t bytes = buf.nbytes();
    return launch(
        "recv", comm, {buf, tensor}, {tensor},
        [=](ncclComm_t c, cudaStream_t s) { return nccl().ncclRecv(data, bytes, ncclUint8, peer, c, s); },
        copy_back(tensor, buf));
  }

  // A one-element all_reduce whose end the host waits for. Its device: the group's, else (nothing
  // ran yet) the world rank modulo the device count, as PyTorch guesses it.
  std::shared_ptr<Work> barrier() override {
    int device;
    {
      std::lock_guard<std::mutex> lock(comms_mu_);
      if (device_) {
        device = *device_;
      } else {
        if (cuda::device_count() == 0) {
          throw DeviceError("[barrier] the nccl backend needs a CUDA device: " + cuda::unavailable_reason());
        }
        device = ranks_[rank_] % cuda::device_count();
      }
    }
    Tensor t = zeros({1}, TensorOptions(kFloat32, Device(kCUDA, device)));
    auto comm = group_comm({t}, "barrier");
    void* data = t.data_ptr();
    return launch(
        "barrier", comm, {t}, {},
        [=](ncclComm_t c, cudaStream_t s) { return nccl().ncclAllReduce(data, data, 1, ncclFloat32, ncclSum, c, s); },
        nullptr, /*host_wait=*/true);
  }

 private:
  // The group's communicator, on the device of tensors (all on one, the group's).
  std::shared_ptr<Comm> group_comm(const std::vector<Tensor>& tensors, const char* op) {
    for (const auto& t : tensors) {
      if (t.device() != tensors[0].device()) {
        throw DeviceError(std::string("[") + op + "] tensors on " + tensors[0].device().str() + " and " +
                          t.device().str() + ": an nccl group works on one device");
      }
    }
    std::lock_guard<std::mutex> lock(comms_mu_);
    const int device = use_device(tensors[0], op);
    if (!comm_) comm_ = make_comm("group", "the group's communicator", rank_, size_, device, op);
    return comm_;
  }

  // The communicator of this rank and peer (its rank 0 is the lower rank), for send and recv.
  std::shared_ptr<Comm> pair_comm(const Tensor& t, int peer, const char* op) {
    std::lock_guard<std::mutex> lock(comms_mu_);
    const int device = use_device(t, op);
    auto& comm = pairs_[peer];
    if (!comm) {
      const int low = std::min(rank_, peer), high = std::max(rank_, peer);
      const std::string pair = std::to_string(low) + " and " + std::to_string(high);
      comm = make_comm("p2p_" + std::to_string(low) + "_" + std::to_string(high), "the communicator of ranks " + pair,
                       rank_ == low ? 0 : 1, 2, device, op);
    }
    return comm;
  }

  // The group's device, set by its first operation; DeviceError for a tensor on another. Under comms_mu_.
  int use_device(const Tensor& t, const char* op) {
    state_->raise_if_failed();
    if (device_ && *device_ != t.device().index) {
      throw DeviceError(std::string("[") + op + "] this nccl group works on cuda:" + std::to_string(*device_) +
                        ", got a tensor on " + t.device().str() + " (a group's tensors must all be on one device)");
    }
    device_ = t.device().index;
    return *device_;
  }

  // Makes a communicator of comm_size ranks on device: rank 0 publishes NCCL's unique id under
  // "ncclUniqueId/<key>" in the group's store, every rank joins non-blocking and polls up to the
  // timeout; a failure aborts it and fails the group. Under comms_mu_.
  std::shared_ptr<Comm> make_comm(const std::string& key, const std::string& name, int comm_rank, int comm_size,
                                  int device, const char* op) {
    cuda::DeviceGuard guard(device);
    const std::string id_key = "ncclUniqueId/" + key;
    ncclUniqueId id;
    if (comm_rank == 0) {
      const ncclResult_t r = nccl().ncclGetUniqueId(&id);
      if (r != ncclSuccess) fail_setup(op, name, device, "ncclGetUniqueId: " + nccl_error(r, nullptr));
      const auto* bytes = reinterpret_cast<const uint8_t*>(&id);
      store_->set(id_key, std::vector<uint8_t>(bytes, bytes + sizeof(id)));
    } else {
      std::vector<uint8_t> bytes;
      try {
        bytes = store_->get(id_key);
      } catch (const DistStoreError& e) {
        throw DistStoreError(std::string("[") + op + "] " + state_->ident + " did not get the NCCL id of " + name +
                             " from its rank 0: " + e.what());
      }
      if (bytes.size() != sizeof(id)) {
        fail_setup(op, name, device, "the store holds " + std::to_string(bytes.size()) + " bytes under '" + id_key +
                                         "', not an NCCL id of " + std::to_string(sizeof(id)));
      }
      std::memcpy(&id, bytes.data(), sizeof(id));
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t handle = nullptr;
    ncclResult_t r = nccl().ncclCommInitRankConfig(&handle, comm_size, id, comm_rank, &config);
    const auto deadline = Clock::now() + timeout_;
    while (r == ncclInProgress && Clock::now() < deadline) {
      std::this_thread::sleep_for(kPollInterval);
      ncclResult_t state = ncclInProgress;
      const ncclResult_t q = nccl().ncclCommGetAsyncError(handle, &state);
      r = q != ncclSuccess ? q : state;
    }
    if (r != ncclSuccess) {
      const std::string why = r == ncclInProgress
                                  ? "its peers did not join within " + format_timeout(timeout_) +
                                        " (did every rank of the group call the same operation?)"
                                  : nccl_error(r, handle);
      if (handle != nullptr) (void)nccl().ncclCommAbort(handle);
      fail_setup(op, name, device, why);
    }
    auto comm = std::make_shared<Comm>(name, device, handle);
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->comms.push_back(comm);
    return comm;
  }

  [[noreturn]] void fail_setup(const char* op, const std::string& name, int device, const std::string& why) {
    state_->fail_and_raise(op, "could not create " + name + " on cuda:" + std::to_string(device) + ": " + why);
  }

  // Runs call on comm's stream after the work queued so far on the caller's current stream, then
  // after (copies into the user's tensors) on the same stream; every tensor in used is marked as used
  // by that stream. host_wait: the Work's wait() blocks the host (barrier).
  std::shared_ptr<Work> launch(const char* op, const std::shared_ptr<Comm>& comm, const std::vector<Tensor>& used,
                               std::vector<Tensor> outputs, const NcclCall& call, const std::function<void()>& after,
                               bool host_wait = false) {
    auto p = std::make_shared<Pending>(op, comm);
    {
      cuda::Event ready;
      ready.record(cuda::current_stream(comm->device));
      comm->stream.wait(ready);
    }
    run(*comm, op, call);
    if (after) {
      NoGradGuard no_grad;
      cuda::StreamGuard on_comm_stream(comm->stream);
      after();
    }
    p->end.record(comm->stream);
    for (const auto& t : used) cuda::record_stream(t, comm->stream);
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      if (state_->error) std::rethrow_exception(state_->error);
      state_->pending.push_back(p);
    }
    return std::make_shared<NcclWork>(state_, p, std::move(outputs), host_wait);
  }

  // Calls NCCL, then polls while the non-blocking communicator reports the call in progress (up to
  // the timeout); a failure fails the group.
  void run(Comm& comm, const char* op, const NcclCall& call) {
    std::string failure;
    {
      std::lock_guard<std::mutex> lock(comm.mu);
      if (!comm.aborted) {
        cuda::DeviceGuard guard(comm.device);
        ncclResult_t r = call(comm.handle, static_cast<cudaStream_t>(comm.stream.handle()));
        const auto deadline = Clock::now() + timeout_;
        while (r == ncclInProgress && Clock::now() < deadline) {
          std::this_thread::yield();
          ncclResult_t state = ncclInProgress;
          const ncclResult_t q = nccl().ncclCommGetAsyncError(comm.handle, &state);
          r = q != ncclSuccess ? q : state;
        }
        if (r == ncclInProgress) {
          failure = "was still being enqueued on " + comm.name + " after " + format_timeout(timeout_);
        } else if (r != ncclSuccess) {
          failure = "failed on " + comm.name + " (cuda:" + std::to_string(comm.device) + "): " +
                    nccl_error(r, comm.handle);
        }
      }
    }
    if (!failure.empty()) state_->fail(op, failure);
    state_->raise_if_failed();
  }

  std::shared_ptr<Store> store_;
  std::shared_ptr<GroupState> state_;
  std::mutex comms_mu_;  // the communicators and the device, made by the first operations
  std::optional<int> device_;
  std::shared_ptr<Comm> comm_;
  std::map<int, std::shared_ptr<Comm>> pairs_;  // by peer
  std::thread watchdog_;
};

}  // namespace

bool is_nccl_available() { return true; }

std::shared_ptr<ProcessGroup> make_nccl_group(std::shared_ptr<Store> store, int rank, int size, Timeout timeout,
                                              std::vector<int> ranks) {
  if (!store) throw ValueError("[ProcessGroupNCCL] the store is None");
  return std::make_shared<ProcessGroupNCCL>(std::move(store), rank, size, timeout, std::move(ranks));
}

}  // namespace rtx::dist
