// FutureWork: a Work that another thread completes (a backend's worker), with the tensors it writes.
#pragma once

#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>

#include "rtx/distributed.h"

namespace rtx::dist {

class FutureWork : public Work {
 public:
  FutureWork(std::string what, std::vector<Tensor> outputs) : what_(std::move(what)), outputs_(std::move(outputs)) {}
  bool wait(std::optional<Timeout> timeout) override;
  bool is_completed() override;
  bool is_success() override;
  std::vector<Tensor> result() override { return outputs_; }
  // Marks the work done, with the error it failed with (or none).
  void finish(std::exception_ptr error);
  const std::string& what() const { return what_; }

 private:
  std::string what_;
  std::vector<Tensor> outputs_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

// "12.5 s"
std::string format_timeout(Timeout t);

}  // namespace rtx::dist
