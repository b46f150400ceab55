// The default group: init_process_group's rendezvous (env:// and tcp://, rank and world size from
// torchrun's, OpenMPI's or Slurm's variables), the backend choice (gloo, nccl, or both for backend
// None when NCCL is built), new_group and teardown.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <mutex>

#include "rtx/cuda.h"
#include "rtx/distributed.h"

namespace rtx::dist {
namespace {

// A backend asked for by name, and the name its groups answer to.
struct Backend {
  enum Kind { Gloo, Nccl, Combined } kind = Gloo;
  std::string name = "gloo";
};

struct World {
  std::mutex mu;
  std::shared_ptr<ProcessGroup> group;
  std::shared_ptr<Store> store;
  std::string host;  // the address the Gloo devices listen on
  Backend backend;  // new_group's when it is given none
  int next_group = 0;
};

World& world() {
  static World w;
  return w;
}

const char* not_initialized() {
  return "Default process group has not been initialized, please make sure to call init_process_group.";
}

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

int parse_int(const std::string& s, const char* what) {
  try {
    size_t used = 0;
    const long v = std::stol(s, &used);
    if (used == s.size()) return static_cast<int>(v);
  } catch (const std::exception&) {
  }
  throw ValueError(std::string("[init_process_group] ") + what + " '" + s + "' is not an integer");
}

// The first of the variables that is set, parsed.
int from_env(std::initializer_list<const char*> names, const char* what) {
  for (const char* n : names)
    if (auto v = env(n)) return parse_int(*v, n);
  std::string list;
  for (const char* n : names) list += (list.empty() ? "" : ", ") + std::string(n);
  throw ValueError(std::string("[init_process_group] the ") + what + " was not given and none of " + list +
                   " is set");
}

std::string required_env(const char* name) {
  if (auto v = env(name)) return *v;
  throw ValueError(std::string("[init_process_group] env:// rendezvous: environment variable ") + name +
                   " expected, but not set");
}

bool is_loopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

// The backend a name asks for, checked to be buildable here. Empty (PyTorch's None): gloo for CPU
// tensors and nccl for CUDA tensors when the build has both (named "undefined", as PyTorch names it),
// else the one it has (nccl alone, whose CPU collectives then raise, or gloo).
Backend parse_backend(const std::string& backend, const char* op) {
  std::string b;
  for (char c : backend) b.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  Backend choice;
  if (b.empty()) {
    if (is_nccl_available()) {
      choice = is_gloo_available() ? Backend{Backend::Combined, "undefined"} : Backend{Backend::Nccl, "nccl"};
    } else {
      choice = {Backend::Gloo, "gloo"};
    }
  } else if (b == "gloo" || b == "cpu:gloo") {
    choice = {Backend::Gloo, "gloo"};
  } else if (b == "nccl" || b == "cuda:nccl") {
    choice = {Backend::Nccl, "nccl"};
  } else if (b == "cpu:gloo,cuda:nccl" || b == "cuda:nccl,cpu:gloo") {
    choice = {Backend::Combined, b};
  } else {
    throw ValueError(std::string("[") + op + "] unknown backend '" + backend +
                     "'; rustytorch has 'gloo', 'nccl' and 'cpu:gloo,cuda:nccl'");
  }
  // Before any rendezvous: a build without NCCL says so (make_nccl_group raises, naming how to get
  // it), and an nccl-only group needs a CUDA device, as PyTorch's does.
  if (choice.kind != Backend::Gloo && !is_nccl_available()) make_nccl_group(nullptr, 0, 1, kDefaultTimeout);
  if (choice.kind == Backend::Nccl && cuda::device_count() == 0) {
    throw DistBackendError(std::string("[") + op + "] backend 'nccl' needs a CUDA device: " +
                           cuda::unavailable_reason() + "; use backend='gloo' with CPU tensors");
  }
  return choice;
}

std::shared_ptr<ProcessGroup> make_group(const Backend& backend, std::shared_ptr<Store> store, int rank, int size,
                                         Timeout timeout, std::vector<int> ranks, const std::string& host) {
  switch (backend.kind) {
    case Backend::Gloo: return make_gloo_group(std::move(store), rank, size, timeout, std::move(ranks), host);
    case Backend::Nccl: return make_nccl_group(std::move(store), rank, size, timeout, std::move(ranks));
    case Backend::Combined:
      return make_combined_group(std::move(store), rank, size, timeout, std::move(ranks), host, backend.name);
  }
  return nullptr;
}

}  // namespace

void init_process_group(const InitOptions& o) {
  if (o.timeout.count() <= 0) throw ValueError("[init_process_group] the timeout must be positive");
  const Backend backend = parse_backend(o.backend, "init_process_group");
  World& w = world();
  std::lock_guard<std::mutex> lock(w.mu);
  if (w.group) throw ValueError("[init_process_group] trying to initialize the default process group twice!");
  const int rank = o.rank >= 0 ? o.rank : from_env({"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"}, "rank");
  const int size =
      o.world_size >= 0 ? o.world_size : from_env({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS"}, "world_size");
  if (size < 1 || rank < 0 || rank >= size) {
    throw ValueError("[init_process_group] rank " + std::to_string(rank) + " is not in [0, world_size " +
                     std::to_string(size) + ")");
  }
  std::shared_ptr<Store> store = o.store;
  if (!store) {
    std::string addr;
    int port;
    const std::string& m = o.init_method;
    if (m.empty() || m == "env://") {
      addr = required_env("MASTER_ADDR");
      port = parse_int(required_env("MASTER_PORT"), "MASTER_PORT");
    } else if (m.rfind("tcp://", 0) == 0) {
      const std::string rest = m.substr(6);
      const size_t colon = rest.rfind(':');
      if (colon == std::string::npos || colon == 0) {
        throw ValueError("[init_process_group] init_method '" + m + "' must be tcp://host:port");
      }
      addr = rest.substr(0, colon);
      if (addr.size() > 2 && addr.front() == '[' && addr.back() == ']') addr = addr.substr(1, addr.size() - 2);
      port = parse_int(rest.substr(colon + 1), "the port of init_method");
    } else {
      throw ValueError("[init_process_group] init_method '" + m + "' is not supported; use env:// or tcp://host:port");
    }
    store = std::make_shared<TCPStore>(addr, port, size, rank == 0, o.timeout);
  }
  // Peers that meet through a store on loopback are on this host: the Gloo devices listen there too.
  const auto* tcp = dynamic_cast<const TCPStore*>(store.get());
  const std::string host = tcp != nullptr && is_loopback(tcp->host()) ? "127.0.0.1" : "";
  w.group = make_group(backend, std::make_shared<PrefixStore>("default_pg", store), rank, size, o.timeout, {}, host);
  w.store = store;
  w.host = host;
  w.backend = backend;
  w.next_group = 0;
}

void destroy_process_group() {
  World& w = world();
  std::shared_ptr<ProcessGroup> group;
  std::shared_ptr<Store> store;
  {
    std::lock_guard<std::mutex> lock(w.mu);
    group = std::move(w.group);
    store = std::move(w.store);
  }
  // Released outside the lock: a group finishes its queued work first.
}

bool is_initialized() {
  World& w = world();
  std::lock_guard<std::mutex> lock(w.mu);
  return w.group != nullptr;
}

std::shared_ptr<ProcessGroup> default_group() {
  World& w = world();
  std::lock_guard<std::mutex> lock(w.mu);
  if (!w.group) throw ValueError(not_initialized());
  return w.group;
}

std::shared_ptr<Store> default_store() {
  World& w = world();
  std::lock_guard<std::mutex> lock(w.mu);
  if (!w.group) throw ValueError(not_initialized());
  return w.store;
}

std::shared_ptr<ProcessGroup> new_group(std::vector<int> ranks, std::optional<Timeout> timeout,
                                        const std::string& backend) {
  std::optional<Backend> asked;
  if (!backend.empty()) asked = parse_backend(backend, "new_group");
  World& w = world();
  std::shared_ptr<ProcessGroup> world_group;
  std::shared_ptr<Store> store;
  std::string host;
  Backend choice;
  int id;
  {
    std::lock_guard<std::mutex> lock(w.mu);
    if (!w.group) throw ValueError(not_initialized());
    world_group = w.group;
    store = w.store;
    host = w.host;
    choice = asked.value_or(w.backend);
    id = w.next_group++;
  }
  const int world_size = world_group->size();
  if (ranks.empty()) {
    for (int r = 0; r < world_size; ++r) ranks.push_back(r);
  }
  std::sort(ranks.begin(), ranks.end());
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= world_size) {
      throw ValueError("[new_group] rank " + std::to_string(ranks[i]) + " is not in [0, world_size " +
                       std::to_string(world_size) + ")");
    }
    if (i > 0 && ranks[i] == ranks[i - 1]) {
      throw ValueError("[new_group] rank " + std::to_string(ranks[i]) + " is listed twice");
    }
  }
  int mine = -1;
  for (size_t i = 0; i < ranks.size(); ++i)
    if (ranks[i] == world_group->rank()) mine = static_cast<int>(i);
  if (mine < 0) return nullptr;
  return make_group(choice, std::make_shared<PrefixStore>("group_" + std::to_string(id), store), mine,
                    static_cast<int>(ranks.size()), timeout.value_or(world_group->timeout()), ranks, host);
}

}  // namespace rtx::dist
