// ProcessGroupGloo: the collectives of rtx::dist on Gloo's algorithms and TCP transport, for CPU
// tensors. Gloo meets its peers through our Store (GlooStore adapts it); collectives run in issue
// order on one worker thread per group, each with the group's timeout; point-to-point operations are
// posted at once on Gloo's unbound buffers (so a send and the matching recv never wait on each
// other's queue). Built only with Gloo (RTX_WITH_GLOO); gloo_unavailable.cpp stands in otherwise.
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <thread>
#include <unistd.h>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/types.h>

#include "distributed/gloo_reduce.h"
#include "distributed/work.h"
#include "rtx/autograd.h"
#include "rtx/ops.h"

namespace rtx::dist {
namespace {

using gloo_detail::with_type;

// Gloo's rendezvous store over ours.
class GlooStore : public ::gloo::rendezvous::Store {
 public:
  explicit GlooStore(std::shared_ptr<dist::Store> store) : store_(std::move(store)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set(key, std::vector<uint8_t>(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    const auto v = store_->get(key);
    return std::vector<char>(v.begin(), v.end());
  }
  void wait(const std::vector<std::string>& keys) override { store_->wait(keys); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    store_->wait(keys, timeout);
  }

 private:
  std::shared_ptr<dist::Store> store_;
};

DistBackendError backend_error(const std::string& ident, const std::string& what, Timeout timeout,
                               const std::string& cause) {
  return DistBackendError("[" + what + "] " + ident + " failed (timeout " + format_timeout(timeout) + ")" +
                          ": " + cause);
}

// Slots of point-to-point messages: a prefix no Gloo collective uses, then the user's tag.
constexpr uint8_t kP2PSlotPrefix = 0x20;

// A tensor the backend works on: the user's tensor, or a contiguous copy of it that is copied back.
struct Staged {
  Tensor user;
  Tensor buf;
  explicit Staged(const Tensor& t) : user(t), buf(t.is_contiguous() ? t : t.contiguous()) {}
  void* data() const { return buf.data_ptr(); }
  size_t count() const { return static_cast<size_t>(buf.numel()); }
  size_t bytes() const { return buf.nbytes(); }
  void copy_back() {
    if (!user.is_contiguous()) user.copy_(buf);
  }
};

std::string shape_str(const Tensor& t) {
  std::string s;
  for (int64_t d : t.sizes()) s += (s.empty() ? "" : ", ") + std::to_string(d);
  return "[" + s + "]";
}

void check_tensor(const Tensor& t, const char* op) {
  if (!t.defined()) throw ValueError(std::string("[") + op + "] got an undefined tensor");
  if (!t.is_cpu()) {
    throw DeviceError(std::string("[") + op + "] the gloo backend takes CPU tensors, got one on " +
                      t.device().str() + " (the nccl backend, for CUDA tensors, is not built yet)");
  }
}

void check_same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  if (a.dtype() != b.dtype()) {
    throw DTypeError(std::string("[") + op + "] output dtype " + dtype_name(a.dtype()) + " != input dtype " +
                     dtype_name(b.dtype()));
  }
}

void check_avg(ReduceOp op, DType dtype, const char* what) {
  if (op == ReduceOp::Avg && !is_floating(dtype)) {
    throw DTypeError(std::string("[") + what + "] ReduceOp.AVG needs a floating-point tensor, got " +
                     dtype_name(dtype) + " (the average of integers is not an integer)");
  }
}

class ProcessGroupGloo final : public ProcessGroup {
 public:
  ProcessGroupGloo(std::shared_ptr<dist::Store> store, int rank, int size, Timeout timeout, std::vector<int> ranks,
                   const std::string& host)
      : ProcessGroup(rank, size, timeout, std::move(ranks)) {
    ::gloo::transport::tcp::attr attr;
    if (const char* iface = std::getenv("GLOO_SOCKET_IFNAME"); iface != nullptr && *iface != '\0') {
      attr.iface = iface;  // as PyTorch: the network interface to use, by name
    } else {
      attr.hostname = host.empty() ? this_host() : host;
    }
    try {
      auto device = ::gloo::transport::tcp::CreateDevice(attr);
      auto ctx = std::make_shared<::gloo::rendezvous::Context>(rank, size);
      ctx->setTimeout(timeout);
      GlooStore gs(std::move(store));
      ctx->connectFullMesh(gs, device);
      ctx_ = std::move(ctx);
    } catch (const ::gloo::Exception& e) {
      throw DistBackendError(connect_failure(rank, size, attr.iface.empty() ? attr.hostname : attr.iface, timeout,
                                             e.what()));
    } catch (const DistStoreError& e) {
      throw DistStoreError(connect_failure(rank, size, attr.iface.empty() ? attr.hostname : attr.iface, timeout,
                                           e.what()));
    }
    worker_ = std::thread([this] { run(); });
  }

  ~ProcessGroupGloo() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }

  std::string backend_name() const override { return "gloo"; }

  std::shared_ptr<Work> all_reduce(Tensor tensor, ReduceOp op) override {
    check_tensor(tensor, "all_reduce");
    check_avg(op, tensor.dtype(), "all_reduce");
    auto t = std::make_shared<Staged>(tensor);
    return enqueue("all_reduce", {tensor}, [this, t, op](uint32_t tag) {
      allreduce_raw(t->buf, op, tag);
      t->copy_back();
    });
  }

  std::shared_ptr<Work> broadcast(Tensor tensor, int src) override {
    check_tensor(tensor, "broadcast");
    check_rank(src, "broadcast", "src");
    auto t = std::make_shared<Staged>(tensor);
    return enqueue("broadcast", {tensor}, [this, t, src](uint32_t tag) {
      if (t->count() == 0) return;
      ::gloo::BroadcastOptions opts(ctx_);
      opts.setOutput(static_cast<uint8_t*>(t->data()), t->bytes());
      opts.setRoot(src);
      opts.setTag(tag);
      opts.setTimeout(timeout_);
      ::gloo::broadcast(opts);
      t->copy_back();
    });
  }

  std::shared_ptr<Work> reduce(Tensor tensor, int dst, ReduceOp op) override {
    check_tensor(tensor, "reduce");
    check_rank(dst, "reduce", "dst");
    check_avg(op, tensor.dtype(), "reduce");
    auto t = std::make_shared<Staged>(tensor);
    // Gloo uses the buffers of the other ranks as scratch space: they work on a copy.
    if (rank_ != dst && t->buf.data_ptr() == tensor.data_ptr()) t->buf = tensor.clone();
    return enqueue("reduce", {tensor}, [this, t, dst, op](uint32_t tag) {
      if (t->count() == 0) return;
      with_type(t->buf.dtype(), [&](auto v) {
        using T = decltype(v);
        ::gloo::ReduceOptions opts(ctx_);
        opts.setOutput(static_cast<T*>(t->data()), t->count());
        opts.setRoot(dst);
        opts.setReduceFunction(gloo_detail::reduce_func<T>(op));
        opts.setTag(tag);
        opts.setTimeout(timeout_);
        ::gloo::reduce(opts);
        if (rank_ == dst && op == ReduceOp::Avg) gloo_detail::divide<T>(t->data(), t->count(), size_);
      });
      if (rank_ == dst) t->copy_back();
    });
  }

  std::shared_ptr<Work> all_gather(std::vector<Tensor> outputs, Tensor input) override {
    check_tensor(input, "all_gather");
    if (static_cast<int>(outputs.size()) != size_) {
      throw ValueError("[all_gather] tensor_list has " + std::to_string(outputs.size()) +
                       " tensors, the group has " + std::to_string(size_) + " ranks");
    }
    for (const auto& o : outputs) {
      check_tensor(o, "all_gather");
      check_same_dtype(o, input, "all_gather");
      if (o.sizes() != input.sizes()) {
        throw ShapeError("[all_gather] output shape " + shape_str(o) + " != input shape " + shape_str(input));
      }
    }
    auto in = std::make_shared<Staged>(input);
    return enqueue("all_gather", outputs, [this, in, outputs](uint32_t tag) {
      Tensor flat = empty({static_cast<int64_t>(size_) * in->buf.numel()}, in->buf.dtype());
      gather_raw(*in, flat, tag);
      const size_t chunk = in->bytes();
      for (int r = 0; r < size_; ++r) {
        Staged out(outputs[r]);
        if (chunk) std::memcpy(out.data(), static_cast<uint8_t*>(flat.data_ptr()) + r * chunk, chunk);
        out.copy_back();
      }
    });
  }

  std::shared_ptr<Work> all_gather_into_tensor(Tensor output, Tensor input) override {
    check_tensor(output, "all_gather_into_tensor");
    check_tensor(input, "all_gather_into_tensor");
    check_same_dtype(output, input, "all_gather_into_tensor");
    if (output.numel() != size_ * input.numel()) {
      throw ShapeError("[all_gather_into_tensor] output shape " + shape_str(output) + " must hold " +
                       std::to_string(size_) + " inputs of shape " + shape_str(input));
    }
    auto in = std::make_shared<Staged>(input);
    auto out = std::make_shared<Staged>(output);
    return enqueue("all_gather_into_tensor", {output}, [this, in, out](uint32_t tag) {
      gather_raw(*in, out->buf, tag);
      out->copy_back();
    });
  }

  std::shared_ptr<Work> reduce_scatter_tensor(Tensor output, Tensor input, ReduceOp op) override {
    check_tensor(output, "reduce_scatter_tensor");
    check_tensor(input, "reduce_scatter_tensor");
    check_same_dtype(output, input, "reduce_scatter_tensor");
    check_avg(op, input.dtype(), "reduce_scatter_tensor");
    if (input.numel() != size_ * output.numel()) {
      throw ShapeError("[reduce_scatter_tensor] input shape " + shape_str(input) + " must hold " +
                       std::to_string(size_) + " outputs of shape " + shape_str(output));
    }
    // Gloo's reduce-scatter is an old-style algorithm class; like PyTorch's gloo backend this is
    // an all-reduce of a copy of the input, of which each rank keeps its slice.
    auto work = std::make_shared<Tensor>(input.clone().contiguous());
    auto out = std::make_shared<Staged>(output);
    return enqueue("reduce_scatter_tensor", {output}, [this, work, out, op](uint32_t tag) {
      allreduce_raw(*work, op, tag);
      if (out->bytes()) {
        std::memcpy(out->data(), static_cast<uint8_t*>(work->data_ptr()) + rank_ * out->bytes(), out->bytes());
      }
      out->copy_back();
    });
  }

  std::shared_ptr<Work> all_to_all_single(Tensor output, Tensor input, std::vector<int64_t> output_splits,
                                          std::vector<int64_t> input_splits) override {
    check_tensor(output, "all_to_all_single");
    check_tensor(input, "all_to_all_single");
    check_same_dtype(output, input, "all_to_all_single");
    if (input.dim() == 0 || output.dim() == 0) throw ShapeError("[all_to_all_single] tensors must have a dim 0");
    const auto in_counts = split_counts(input, input_splits, "input_split_sizes");
    const auto out_counts = split_counts(output, output_splits, "output_split_sizes");
    auto in = std::make_shared<Staged>(input);
    auto out = std::make_shared<Staged>(output);
    return enqueue("all_to_all_single", {output}, [this, in, out, in_counts, out_counts](uint32_t tag) {
      with_type_bytes(in->buf.dtype(), [&](auto v) {
        using T = decltype(v);
        ::gloo::AlltoallvOptions opts(ctx_);
        opts.setInput(static_cast<T*>(in->data()), in_counts);
        opts.setOutput(static_cast<T*>(out->data()), out_counts);
        opts.setTag(tag);
        opts.setTimeout(timeout_);
        ::gloo::alltoallv(opts);
      });
      out->copy_back();
    });
  }

  std::shared_ptr<Work> send(Tensor tensor, int dst, int tag) override {
    check_tensor(tensor, "send");
    check_peer(dst, "send", "dst");
    auto t = std::make_shared<Staged>(tensor);
    auto buf = std::shared_ptr<::gloo::transport::UnboundBuffer>(ctx_->createUnboundBuffer(t->data(), t->bytes()));
    buf->send(dst, ::gloo::Slot::build(kP2PSlotPrefix, static_cast<uint32_t>(tag)));
    return std::make_shared<P2PWork>(ident(), timeout_, "send to rank " + std::to_string(dst), t, buf, false);
  }

  std::shared_ptr<Work> recv(Tensor tensor, int src, int tag) override {
    check_tensor(tensor, "recv");
    check_peer(src, "recv", "src");
    auto t = std::make_shared<Staged>(tensor);
    auto buf = std::shared_ptr<::gloo::transport::UnboundBuffer>(ctx_->createUnboundBuffer(t->data(), t->bytes()));
    buf->recv(src, ::gloo::Slot::build(kP2PSlotPrefix, static_cast<uint32_t>(tag)));
    return std::make_shared<P2PWork>(ident(), timeout_, "recv from rank " + std::to_string(src), t, buf, true);
  }

  std::shared_ptr<Work> barrier() override {
    return enqueue("barrier", {}, [this](uint32_t tag) {
      ::gloo::BarrierOptions opts(ctx_);
      opts.setTag(tag);
      opts.setTimeout(timeout_);
      ::gloo::barrier(opts);
    });
  }

 private:
  // A point-to-point operation: already posted; wait() waits for Gloo to finish it.
  class P2PWork final : public Work {
   public:
    P2PWork(std::string ident, Timeout timeout, std::string what, std::shared_ptr<Staged> t,
            std::shared_ptr<::gloo::transport::UnboundBuffer> buf, bool is_recv)
        : ident_(std::move(ident)), timeout_(timeout), what_(std::move(what)), t_(std::move(t)),
          buf_(std::move(buf)), is_recv_(is_recv) {}
    bool wait(std::optional<Timeout> timeout) override {
      std::lock_guard<std::mutex> lock(mu_);
      if (done_) {
        if (error_) std::rethrow_exception(error_);
        return true;
      }
      const Timeout limit = timeout ? *timeout : timeout_;
      try {
        is_recv_ ? buf_->waitRecv(limit) : buf_->waitSend(limit);
        if (is_recv_) t_->copy_back();
      } catch (const ::gloo::Exception& e) {
        error_ = std::make_exception_ptr(backend_error(ident_, what_, limit, e.what()));
      }
      done_ = true;
      if (error_) std::rethrow_exception(error_);
      return true;
    }
    bool is_completed() override {
      std::lock_guard<std::mutex> lock(mu_);
      return done_;
    }
    bool is_success() override {
      std::lock_guard<std::mutex> lock(mu_);
      return done_ && !error_;
    }
    std::vector<Tensor> result() override { return {t_->user}; }

   private:
    std::string ident_;
    Timeout timeout_;
    std::string what_;
    std::shared_ptr<Staged> t_;
    std::shared_ptr<::gloo::transport::UnboundBuffer> buf_;
    bool is_recv_;
    std::mutex mu_;
    bool done_ = false;
    std::exception_ptr error_;
  };

  static std::string connect_failure(int rank, int size, const std::string& host, Timeout timeout,
                                     const std::string& cause) {
    return "[init_process_group] rank " + std::to_string(rank) + " of a gloo group of " + std::to_string(size) +
           " could not connect to its peers from '" + host + "' within " + format_timeout(timeout) + ": " + cause;
  }

  static std::string this_host() {
    char name[256] = {0};
    if (::gethostname(name, sizeof(name) - 1) != 0) return "127.0.0.1";
    return name;
  }

  // Calls f(T{}) with an unsigned type of the element size of dtype: what moves bytes.
  template <typename F>
  static void with_type_bytes(DType dtype, F&& f) {
    switch (element_size(dtype)) {
      case 1: return f(uint8_t{});
      case 2: return f(uint16_t{});
      case 4: return f(uint32_t{});
      default: return f(uint64_t{});
    }
  }

  // "rank 1 of a gloo group of 2 (world ranks [0, 1])": who failed, for error messages.
  std::string ident() const {
    std::string s;
    for (int r : ranks_) s += (s.empty() ? "" : ", ") + std::to_string(r);
    return "rank " + std::to_string(rank_) + " of a gloo group of " + std::to_string(size_) + " (world ranks [" + s +
           "])";
  }

  void check_rank(int r, const char* op, const char* name) const {
    if (r < 0 || r >= size_) {
      throw ValueError(std::string("[") + op + "] " + name + " rank " + std::to_string(r) + " is not in [0, " +
                       std::to_string(size_) + ")");
    }
  }
  void check_peer(int r, const char* op, const char* name) const {
    check_rank(r, op, name);
    if (r == rank_) {
      throw ValueError(std::string("[") + op + "] " + name + " rank " + std::to_string(r) + " is this rank");
    }
  }

  // Elements per rank along dim 0 for all_to_all_single.
  std::vector<int64_t> split_counts(const Tensor& t, const std::vector<int64_t>& splits, const char* name) const {
    const int64_t rows = t.sizes()[0];
    const int64_t row = rows == 0 ? 0 : t.numel() / rows;
    std::vector<int64_t> counts;
    if (splits.empty()) {
      if (rows % size_ != 0) {
        throw ShapeError(std::string("[all_to_all_single] dim 0 of shape ") + shape_str(t) +
                         " does not split into " + std::to_string(size_) + " equal parts; pass " + name);
      }
      counts.assign(size_, rows / size_ * row);
      return counts;
    }
    if (static_cast<int>(splits.size()) != size_) {
      throw ValueError(std::string("[all_to_all_single] ") + name + " has " + std::to_string(splits.size()) +
                       " entries, the group has " + std::to_string(size_) + " ranks");
    }
    int64_t total = 0;
    for (int64_t s : splits) {
      if (s < 0) throw ValueError(std::string("[all_to_all_single] ") + name + " has a negative entry");
      total += s;
      counts.push_back(s * row);
    }
    if (total != rows) {
      throw ShapeError(std::string("[all_to_all_single] ") + name + " sums to " + std::to_string(total) +
                       ", dim 0 of shape " + shape_str(t) + " is " + std::to_string(rows));
    }
    return counts;
  }

  void allreduce_raw(Tensor& buf, ReduceOp op, uint32_t tag) {
    if (buf.numel() == 0) return;
    with_type(buf.dtype(), [&](auto v) {
      using T = decltype(v);
      ::gloo::AllreduceOptions opts(ctx_);
      opts.setOutput(static_cast<T*>(buf.data_ptr()), static_cast<size_t>(buf.numel()));
      opts.setReduceFunction(gloo_detail::reduce_func<T>(op));
      opts.setTag(tag);
      opts.setTimeout(timeout_);
      ::gloo::allreduce(opts);
      if (op == ReduceOp::Avg) gloo_detail::divide<T>(buf.data_ptr(), static_cast<size_t>(buf.numel()), size_);
    });
  }

  void gather_raw(const Staged& in, const Tensor& out, uint32_t tag) {
    if (in.count() == 0) return;
    ::gloo::AllgatherOptions opts(ctx_);
    opts.setInput(static_cast<uint8_t*>(in.data()), in.bytes());
    opts.setOutput(static_cast<uint8_t*>(out.data_ptr()), in.bytes() * size_);
    opts.setTag(tag);
    opts.setTimeout(timeout_);
    ::gloo::allgather(opts);
  }

  std::shared_ptr<Work> enqueue(const char* what, std::vector<Tensor> outputs, std::function<void(uint32_t)> fn) {
    auto work = std::make_shared<FutureWork>(what, std::move(outputs));
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.emplace_back(work, std::move(fn));
    }
    cv_.notify_one();
    return work;
  }

  void run() {
    NoGradGuard no_grad;
    for (;;) {
      std::pair<std::shared_ptr<FutureWork>, std::function<void(uint32_t)>> item;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        item = std::move(queue_.front());
        queue_.pop_front();
      }
      std::exception_ptr error;
      try {
        item.second(next_tag_++);
      } catch (const ::gloo::Exception& e) {
        error = std::make_exception_ptr(backend_error(ident(), item.first->what(), timeout_, e.what()));
      } catch (const rtx::Error&) {
        error = std::current_exception();
      } catch (const std::exception& e) {
        error = std::make_exception_ptr(backend_error(ident(), item.first->what(), timeout_, e.what()));
      }
      item.first->finish(error);
    }
  }

  std::shared_ptr<::gloo::Context> ctx_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::shared_ptr<FutureWork>, std::function<void(uint32_t)>>> queue_;
  bool stop_ = false;
  uint32_t next_tag_ = 0;  // only the worker touches it: every rank numbers its collectives alike
  std::thread worker_;
};

}  // namespace

bool is_gloo_available() { return true; }

std::shared_ptr<ProcessGroup> make_gloo_group(std::shared_ptr<Store> store, int rank, int size, Timeout timeout,
                                              std::vector<int> ranks, const std::string& host) {
  if (!store) throw ValueError("[ProcessGroupGloo] the store is None");
  return std::make_shared<ProcessGroupGloo>(std::move(store), rank, size, timeout, std::move(ranks), host);
}

}  // namespace rtx::dist
