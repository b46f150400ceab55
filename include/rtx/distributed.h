// rtx::dist: process groups and collectives across processes, in the spirit of torch.distributed.
// A Store (a TCP key-value server, the rendezvous every backend uses), the backend-neutral
// ProcessGroup interface with its Work handles, the Gloo backend for CPU tensors (built when
// libgloo is found: is_gloo_available()), the NCCL backend for CUDA tensors (built with CUDA when
// NCCL is found: is_nccl_available()), the group of both, and the default group of init_process_group.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rtx/error.h"
#include "rtx/export.h"
#include "rtx/tensor.h"

namespace rtx::dist {

using Timeout = std::chrono::milliseconds;
// PyTorch's default process group and store timeout: 30 minutes.
constexpr Timeout kDefaultTimeout = std::chrono::minutes(30);

// ---------------------------------------------------------------------------------------------------
// Store: the key-value rendezvous. get and wait block until the keys exist or the timeout passes
// (DistStoreError naming the keys and the timeout).
// ---------------------------------------------------------------------------------------------------
class RTX_API Store {
 public:
  virtual ~Store();
  virtual void set(const std::string& key, const std::vector<uint8_t>& value) = 0;
  virtual std::vector<uint8_t> get(const std::string& key) = 0;
  // Adds delta to the integer stored at key (0 when absent) and returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // True when every key exists, without waiting.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  virtual void wait(const std::vector<std::string>& keys, Timeout timeout) = 0;
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout()); }
  // True when the key existed.
  virtual bool delete_key(const std::string& key) = 0;
  virtual int64_t num_keys() = 0;
  Timeout timeout() const { return timeout_; }
  void set_timeout(Timeout timeout) { timeout_ = timeout; }

 protected:
  explicit Store(Timeout timeout) : timeout_(timeout) {}
  Timeout timeout_;
};

// A store served over TCP. The master (is_master) runs the server in a thread of this process and
// connects to it like every other client; port 0 on the master picks a free port (port()).
class RTX_API TCPStore : public Store {
 public:
  TCPStore(const std::string& host, int port, std::optional<int> world_size = std::nullopt,
           bool is_master = false, Timeout timeout = kDefaultTimeout);
  ~TCPStore() override;
  TCPStore(const TCPStore&) = delete;
  TCPStore& operator=(const TCPStore&) = delete;

  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool check(const std::vector<std::string>& keys) override;
  using Store::wait;
  void wait(const std::vector<std::string>& keys, Timeout timeout) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;

  const std::string& host() const { return host_; }
  int port() const { return port_; }
  std::optional<int> world_size() const { return world_size_; }

  struct Server;
  struct Client;

 private:
  std::string host_;
  int port_;
  std::optional<int> world_size_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<Client> client_;
};

// Every key of another store under "prefix/": what keeps groups sharing one store apart.
class RTX_API PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> store);
  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool check(const std::vector<std::string>& keys) override;
  using Store::wait;
  void wait(const std::vector<std::string>& keys, Timeout timeout) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;
  const std::shared_ptr<Store>& underlying_store() const { return store_; }

 private:
  std::string key(const std::string& k) const { return prefix_ + "/" + k; }
  std::vector<std::string> keys(const std::vector<std::string>& ks) const;
  std::string prefix_;
  std::shared_ptr<Store> store_;
};

// ---------------------------------------------------------------------------------------------------
// Work: the handle of one operation. wait() blocks until it is done and rethrows its error
// (DistBackendError); is_completed() does not block.
// ---------------------------------------------------------------------------------------------------
class RTX_API Work {
 public:
  virtual ~Work();
  // Returns true once done; a timeout (when given) that passes first raises DistBackendError.
  virtual bool wait(std::optional<Timeout> timeout = std::nullopt) = 0;
  virtual bool is_completed() = 0;
  // Completed without an error.
  virtual bool is_success() = 0;
  // The tensors the operation wrote.
  virtual std::vector<Tensor> result() = 0;
};

enum class ReduceOp { Sum, Avg, Product, Min, Max };
RTX_API const char* reduce_op_name(ReduceOp op);

// ---------------------------------------------------------------------------------------------------
// ProcessGroup: a set of ranks and the collectives among them, on one backend. Ranks passed to and
// returned by its methods are ranks within the group; ranks() maps them to the ranks of the world.
// Collectives of one group run in the order they are issued; each returns at once with a Work.
// Tensors must be dense; a non-contiguous one is staged through a contiguous copy (in-place results
// are copied back). Every operation waits at most timeout() for its peers.
// ---------------------------------------------------------------------------------------------------
class RTX_API ProcessGroup {
 public:
  virtual ~ProcessGroup();
  int rank() const { return rank_; }
  int size() const { return size_; }
  Timeout timeout() const { return timeout_; }
  // The world rank of each group rank.
  const std::vector<int>& ranks() const { return ranks_; }
  // The group rank of a world rank; ValueError naming `what` when the rank is not in the group.
  int group_rank(int world_rank, const char* what) const;
  virtual std::string backend_name() const = 0;

  virtual std::shared_ptr<Work> all_reduce(Tensor tensor, ReduceOp op) = 0;
  virtual std::shared_ptr<Work> broadcast(Tensor tensor, int src) = 0;
  // The reduction lands in tensor on rank dst; the others' tensors are unchanged.
  virtual std::shared_ptr<Work> reduce(Tensor tensor, int dst, ReduceOp op) = 0;
  // outputs: size() tensors shaped like input.
  virtual std::shared_ptr<Work> all_gather(std::vector<Tensor> outputs, Tensor input) = 0;
  // output: size() inputs concatenated along dim 0.
  virtual std::shared_ptr<Work> all_gather_into_tensor(Tensor output, Tensor input) = 0;
  // input: size() outputs concatenated along dim 0; this rank receives the reduction of its slice.
  virtual std::shared_ptr<Work> reduce_scatter_tensor(Tensor output, Tensor input, ReduceOp op) = 0;
  // Splits along dim 0 (rows per rank); empty splits mean equal parts.
  virtual std::shared_ptr<Work> all_to_all_single(Tensor output, Tensor input, std::vector<int64_t> output_splits,
                                                  std::vector<int64_t> input_splits) = 0;
  virtual std::shared_ptr<Work> send(Tensor tensor, int dst, int tag) = 0;
  virtual std::shared_ptr<Work> recv(Tensor tensor, int src, int tag) = 0;
  virtual std::shared_ptr<Work> barrier() = 0;

 protected:
  ProcessGroup(int rank, int size, Timeout timeout, std::vector<int> ranks);
  int rank_;
  int size_;
  Timeout timeout_;
  std::vector<int> ranks_;
};

// True when the library was built with Gloo.
RTX_API bool is_gloo_available();
// A Gloo group of `size` processes meeting through store (each group of a shared store under its own
// PrefixStore); its TCP device listens on the interface GLOO_SOCKET_IFNAME names when that is set,
// else on host (empty: the address of this host's name). ranks: the world ranks of the group (empty:
// 0..size-1). DistBackendError when the build has no Gloo.
RTX_API std::shared_ptr<ProcessGroup> make_gloo_group(std::shared_ptr<Store> store, int rank, int size,
                                                      Timeout timeout, std::vector<int> ranks = {},
                                                      const std::string& host = "");

// True when the library was built with NCCL.
RTX_API bool is_nccl_available();
// An NCCL group of `size` processes meeting through store, for CUDA tensors. Each communicator is
// made at the first operation that needs it, on the device of its tensors (one device per group; a
// point-to-point pair gets its own), and runs on its own stream after the work the caller's current
// stream has queued; Work::wait() makes the caller's current stream wait for it (with
// TORCH_NCCL_BLOCKING_WAIT=1 it blocks the host, up to the timeout). A watchdog thread aborts the
// communicators when an operation exceeds the timeout or NCCL reports an error; the group then
// raises that DistBackendError from every call. DistBackendError when the build has no NCCL.
RTX_API std::shared_ptr<ProcessGroup> make_nccl_group(std::shared_ptr<Store> store, int rank, int size,
                                                      Timeout timeout, std::vector<int> ranks = {});
// The group of backend None ("cpu:gloo,cuda:nccl"): a gloo group (CPU tensors; host as in
// make_gloo_group) and an nccl group (CUDA tensors) of the same ranks, each under its own prefix of
// store; every operation goes to the group of its tensors' device, barrier to the gloo group.
// backend_name() is name: PyTorch's "undefined" for backend None, else the spelling asked for.
RTX_API std::shared_ptr<ProcessGroup> make_combined_group(std::shared_ptr<Store> store, int rank, int size,
                                                          Timeout timeout, std::vector<int> ranks = {},
                                                          const std::string& host = "",
                                                          const std::string& name = "cpu:gloo,cuda:nccl");

// ---------------------------------------------------------------------------------------------------
// The default group (torch.distributed's world).
// ---------------------------------------------------------------------------------------------------
struct InitOptions {
  std::string backend;      // "gloo", "nccl", "cpu:gloo,cuda:nccl" (empty: that pair when NCCL is built, else gloo)
  std::string init_method;  // "env://" (empty), "tcp://host:port"; ignored when store is given
  int rank = -1;            // -1: from the environment (RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID)
  int world_size = -1;      // -1: from the environment (WORLD_SIZE, OMPI_COMM_WORLD_SIZE, SLURM_NTASKS)
  Timeout timeout = kDefaultTimeout;
  std::shared_ptr<Store> store;
};

RTX_API void init_process_group(const InitOptions& options);
RTX_API void destroy_process_group();
RTX_API bool is_initialized();
// The default group; DistError when init_process_group has not been called.
RTX_API std::shared_ptr<ProcessGroup> default_group();
// The default group's store (the one new_group meets through).
RTX_API std::shared_ptr<Store> default_store();
// A group of the given world ranks (sorted, distinct), on the default group's backend; every process
// of the world must call it, in the same order. Ranks outside it get nullptr.
RTX_API std::shared_ptr<ProcessGroup> new_group(std::vector<int> ranks, std::optional<Timeout> timeout = std::nullopt,
                                                const std::string& backend = "");

}  // namespace rtx::dist
