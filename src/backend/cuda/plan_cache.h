// A thread-safe cache of library plans (the algorithm a cuBLASLt or cuDNN heuristic chose), keyed by
// a fixed-size array of integers describing the problem, so that a repeated problem skips the
// heuristic query. Plans are small values; the cache lives as long as the process.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace rtx::cuda::detail {

template <size_t N, typename Plan>
class PlanCache {
 public:
  using Key = std::array<int64_t, N>;

  // Replaces the plan of key (a plan the library refused when it ran).
  void put(const Key& key, Plan plan) {
    std::lock_guard<std::mutex> lock(mutex_);
    plans_.insert_or_assign(key, std::move(plan));
  }

  // The plan of key, made by make() on first use. make runs outside the lock (heuristics can be
  // slow); two threads racing on a new key both make it and the first one stored wins.
  template <typename Make>
  Plan get(const Key& key, const Make& make) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = plans_.find(key);
      if (it != plans_.end()) return it->second;
    }
    Plan plan = make();
    std::lock_guard<std::mutex> lock(mutex_);
    return plans_.emplace(key, std::move(plan)).first->second;
  }

 private:
  struct Hash {
    size_t operator()(const Key& key) const {
      uint64_t h = 1469598103934665603ULL;  // FNV-1a over the words
      for (int64_t v : key) h = (h ^ static_cast<uint64_t>(v)) * 1099511628211ULL;
      return static_cast<size_t>(h);
    }
  };
  std::mutex mutex_;
  std::unordered_map<Key, Plan, Hash> plans_;
};

}  // namespace rtx::cuda::detail
