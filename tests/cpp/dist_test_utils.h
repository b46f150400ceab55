// Process groups whose ranks are threads of the test: a TCPStore master in the test, one client store
// and one group per rank thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "rtx/distributed.h"

namespace rtx::testing {

// Makes rank's group of `size` over its own client store.
using MakeGroup = std::function<std::shared_ptr<dist::ProcessGroup>(std::shared_ptr<dist::Store>, int rank, int size)>;

// Runs fn(rank, group) for each of `size` ranks in its own thread; returns each rank's error message
// ("" when it raised none).
inline std::vector<std::string> run_rank_threads(int size, dist::Timeout store_timeout, const MakeGroup& make_group,
                                                 const std::function<void(int, const std::shared_ptr<dist::ProcessGroup>&)>& fn) {
  dist::TCPStore master("127.0.0.1", 0, size, true, store_timeout);
  std::vector<std::string> errors(size);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        auto store = std::make_shared<dist::TCPStore>("127.0.0.1", master.port(), size, false, store_timeout);
        auto pg = make_group(store, rank, size);
        fn(rank, pg);
      } catch (const std::exception& e) {
        errors[rank] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

// A gloo group of 2 ranks on loopback.
inline MakeGroup gloo_group(dist::Timeout timeout) {
  return [timeout](std::shared_ptr<dist::Store> store, int rank, int size) {
    return dist::make_gloo_group(std::move(store), rank, size, timeout, {}, "127.0.0.1");
  };
}

}  // namespace rtx::testing
