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

#include "distributed/collective_checks.h"
#include "distributed/gloo_reduce.h"
#include "distributed/work.h"
#include "rtx/autograd.h"
#include "rtx/ops.h"

namespace rtx::dist {
namespace {

using detail::check_avg;
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

void check_tensor(const Tensor& t, const char* op) {
  detail::check_defined(t, op);
  if (!t.is_cpu()) {
    throw DeviceError(std::string("[") + op + "] the gloo backend takes CPU tensors, got one on " +
                      t.device().str() + "; use the nccl backend for CUDA tensors, or backend=None for both");
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
      // Every rank has connected before any returns: a rank that returned and closed its group at
      // once would otherwise cut the connections a slower peer is still setting up.
      ::gloo::BarrierOptions connected(ctx);
      connected.setTag(kConnectedTag);
      connected.setTimeout(timeout);
      ::gloo::barrier(connected);
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
    detail::check_rank(src, size_, "broadcast", "src");
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
    detail::check_rank(dst, size_, "reduce", "dst");
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
    for (const auto& o : outputs) check_tensor(o, "all_gather");
    detail::check_all_gather(outputs, input, size_);
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
    detail::check_all_gather_into_tensor(output, input, size_);
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
    detail::check_reduce_scatter_tensor(output, input, op, size_);
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
    detail::check_all_to_all(output, input);
    const auto in_counts = detail::split_counts(input, input_splits, size_, "input_split_sizes");
    const auto out_counts = detail::split_counts(output, output_splits, size_, "output_split_sizes");
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
    detail::check_peer(dst, rank_, size_, "send", "dst");
    auto t = std::make_shared<Staged>(tensor);
    auto buf = std::shared_ptr<::gloo::transport::UnboundBuffer>(ctx_->createUnboundBuffer(t->data(), t->bytes()));
    buf->send(dst, ::gloo::Slot::build(kP2PSlotPrefix, static_cast<uint32_t>(tag)));
    return std::make_shared<P2PWork>(ident(), timeout_, "send to rank " + std::to_string(dst), t, buf, false);
  }

  std::shared_ptr<Work> recv(Tensor tensor, int src, int tag) override {
    check_tensor(tensor, "recv");
    detail::check_peer(src, rank_, size_, "recv", "src");
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

  std::string ident() const { return detail::group_ident("a gloo group", rank_, size_, ranks_); }

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
  // The tag of the barrier that ends the connection; the collectives number theirs after it.
  static constexpr uint32_t kConnectedTag = 0;
  uint32_t next_tag_ = kConnectedTag + 1;  // only the worker touches it: every rank numbers its collectives alike
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
