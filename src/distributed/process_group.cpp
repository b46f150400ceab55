// The backend-neutral pieces: Work, FutureWork, ProcessGroup's rank bookkeeping and ReduceOp names.
#include <sstream>

#include "distributed/work.h"

namespace rtx::dist {

Work::~Work() = default;

std::string format_timeout(Timeout t) {
  std::ostringstream os;
  os << static_cast<double>(t.count()) / 1000.0 << " s";
  return os.str();
}

bool FutureWork::wait(std::optional<Timeout> timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (timeout) {
    if (!cv_.wait_for(lock, *timeout, [this] { return done_; })) {
      throw DistBackendError("[Work.wait] " + what_ + " did not complete within " + format_timeout(*timeout));
    }
  } else {
    cv_.wait(lock, [this] { return done_; });
  }
  if (error_) std::rethrow_exception(error_);
  return true;
}

bool FutureWork::is_completed() {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

bool FutureWork::is_success() {
  std::lock_guard<std::mutex> lock(mu_);
  return done_ && !error_;
}

void FutureWork::finish(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    error_ = std::move(error);
  }
  cv_.notify_all();
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "SUM";
    case ReduceOp::Avg: return "AVG";
    case ReduceOp::Product: return "PRODUCT";
    case ReduceOp::Min: return "MIN";
    case ReduceOp::Max: return "MAX";
  }
  return "?";
}

ProcessGroup::ProcessGroup(int rank, int size, Timeout timeout, std::vector<int> ranks)
    : rank_(rank), size_(size), timeout_(timeout), ranks_(std::move(ranks)) {
  if (size < 1) throw ValueError("[ProcessGroup] world size " + std::to_string(size) + " must be positive");
  if (rank < 0 || rank >= size) {
    throw ValueError("[ProcessGroup] rank " + std::to_string(rank) + " is not in [0, " + std::to_string(size) + ")");
  }
  if (timeout.count() <= 0) throw ValueError("[ProcessGroup] the timeout must be positive");
  if (ranks_.empty()) {
    for (int r = 0; r < size; ++r) ranks_.push_back(r);
  }
  if (static_cast<int>(ranks_.size()) != size) {
    throw ValueError("[ProcessGroup] " + std::to_string(ranks_.size()) + " world ranks given for a group of size " +
                     std::to_string(size));
  }
}

ProcessGroup::~ProcessGroup() = default;

int ProcessGroup::group_rank(int world_rank, const char* what) const {
  for (int i = 0; i < size_; ++i)
    if (ranks_[i] == world_rank) return i;
  std::string all;
  for (int r : ranks_) all += (all.empty() ? "" : ", ") + std::to_string(r);
  throw ValueError(std::string("[") + what + "] rank " + std::to_string(world_rank) +
                   " is not in the group (world ranks [" + all + "])");
}

}  // namespace rtx::dist
