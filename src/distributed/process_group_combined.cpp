// The group of backend None ("cpu:gloo,cuda:nccl"): a gloo group and an nccl group over the same
// ranks, each meeting under its own prefix of the store. Every operation goes to the group of its
// (input) tensor's device, which checks the others; barrier goes to the gloo group, as PyTorch's
// barrier does on a group without a single default backend.
#include "rtx/distributed.h"

namespace rtx::dist {
namespace {

class CombinedGroup final : public ProcessGroup {
 public:
  CombinedGroup(const std::shared_ptr<Store>& store, int rank, int size, Timeout timeout, std::vector<int> ranks,
                const std::string& host, std::string name)
      : ProcessGroup(rank, size, timeout, std::move(ranks)), name_(std::move(name)) {
    // The nccl group first: it meets its peers only at its first operation, and a build without NCCL
    // raises here before the gloo group waits for every rank.
    cuda_ = make_nccl_group(std::make_shared<PrefixStore>("nccl", store), rank, size, timeout, ranks_);
    cpu_ = make_gloo_group(std::make_shared<PrefixStore>("gloo", store), rank, size, timeout, ranks_, host);
  }

  std::string backend_name() const override { return name_; }

  std::shared_ptr<Work> all_reduce(Tensor tensor, ReduceOp op) override {
    return of(tensor, "all_reduce").all_reduce(tensor, op);
  }
  std::shared_ptr<Work> broadcast(Tensor tensor, int src) override {
    return of(tensor, "broadcast").broadcast(tensor, src);
  }
  std::shared_ptr<Work> reduce(Tensor tensor, int dst, ReduceOp op) override {
    return of(tensor, "reduce").reduce(tensor, dst, op);
  }
  std::shared_ptr<Work> all_gather(std::vector<Tensor> outputs, Tensor input) override {
    return of(input, "all_gather").all_gather(std::move(outputs), input);
  }
  std::shared_ptr<Work> all_gather_into_tensor(Tensor output, Tensor input) override {
    return of(input, "all_gather_into_tensor").all_gather_into_tensor(output, input);
  }
  std::shared_ptr<Work> reduce_scatter_tensor(Tensor output, Tensor input, ReduceOp op) override {
    return of(input, "reduce_scatter_tensor").reduce_scatter_tensor(output, input, op);
  }
  std::shared_ptr<Work> all_to_all_single(Tensor output, Tensor input, std::vector<int64_t> output_splits,
                                          std::vector<int64_t> input_splits) override {
    return of(input, "all_to_all_single")
        .all_to_all_single(output, input, std::move(output_splits), std::move(input_splits));
  }
  std::shared_ptr<Work> send(Tensor tensor, int dst, int tag) override {
    return of(tensor, "send").send(tensor, dst, tag);
  }
  std::shared_ptr<Work> recv(Tensor tensor, int src, int tag) override {
    return of(tensor, "recv").recv(tensor, src, tag);
  }
  std::shared_ptr<Work> barrier() override { return cpu_->barrier(); }

 private:
  ProcessGroup& of(const Tensor& t, const char* op) const {
    if (!t.defined()) throw ValueError(std::string("[") + op + "] got an undefined tensor");
    return t.is_cuda() ? *cuda_ : *cpu_;
  }

  std::string name_;
  std::shared_ptr<ProcessGroup> cpu_;
  std::shared_ptr<ProcessGroup> cuda_;
};

}  // namespace

std::shared_ptr<ProcessGroup> make_combined_group(std::shared_ptr<Store> store, int rank, int size, Timeout timeout,
                                                  std::vector<int> ranks, const std::string& host,
                                                  const std::string& name) {
  if (!store) throw ValueError("[make_combined_group] the store is None");
  return std::make_shared<CombinedGroup>(store, rank, size, timeout, std::move(ranks), host, name);
}

}  // namespace rtx::dist
