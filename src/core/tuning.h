// Kernel tuning without a device: how a kernel's candidate launches (a cuBLASLt algorithm, lanes per
// row, ...) are measured and the fastest picked, and the cache that keeps each GPU model's choices in
// a file so that later processes start with them. RTX_TUNE=0 turns tuning off (every kernel takes its
// built-in choice, no file is read or written); RTX_TUNE_CACHE names the cache's directory (default
// $XDG_CACHE_HOME/rustytorch, else ~/.cache/rustytorch). The timing itself is the backend's
// (backend/cuda/tuner.h); this part knows nothing of devices and is tested without one.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "rtx/export.h"

namespace rtx::detail {

// A shape class's measured choice: the candidate's index, its time and the built-in choice's time
// (microseconds; the times are a record for people, lookups use only the choice).
struct TuneRecord {
  int choice = 0;
  double best_us = 0;
  double default_us = 0;
};

// Times candidates 0..candidates-1 and picks the fastest. time(c, reps) runs candidate c once to warm
// it up, then reps times, and returns its microseconds per launch, or nullopt when c cannot run. One
// launch of the first candidate that runs, the built-in `fallback` first, sizes the trials: each gets
// about a millisecond of launches (2 to 20); a first candidate slower than 50 ms a launch is chosen
// untimed against the others (their trials would cost more than they could save). nullopt when no
// candidate runs.
RTX_API std::optional<TuneRecord> measure_candidates(int candidates, int fallback,
                                                     const std::function<std::optional<double>(int, int)>& time);

// Whether kernels tune (RTX_TUNE: "1", the default, or "0"; anything else warns and counts as 1).
// Read once per process.
RTX_API bool tuning_enabled();

// The directory of the cache files ("" when neither RTX_TUNE_CACHE, XDG_CACHE_HOME nor HOME is set:
// choices then live for the process only).
RTX_API std::string tune_cache_directory();

// The cache file of a GPU model, "<directory>/tune-<model>.tsv" with every character of model
// outside [A-Za-z0-9._-] replaced by '_' ("" without a directory).
RTX_API std::string tune_cache_path(const std::string& model);

// One model's choices, backed by its file: lines "kernel<TAB>shape class<TAB>choice<TAB>best us<TAB>
// default us" below a header comment. Thread-safe.
class RTX_API TuneCache {
 public:
  // Reads path when it exists; lines that do not parse are skipped with a warning (a damaged file
  // costs a re-measurement, never an error). An empty path keeps the choices in memory only.
  explicit TuneCache(std::string path);

  std::optional<TuneRecord> find(const std::string& kernel, const std::string& shape_class) const;

  // Keeps record and rewrites the file atomically (a temporary file renamed over it), merged with
  // what other processes wrote to it since. A file that cannot be written leaves a warning, once,
  // and the record in memory.
  void store(const std::string& kernel, const std::string& shape_class, const TuneRecord& record);

  const std::string& path() const { return path_; }

 private:
  using Key = std::pair<std::string, std::string>;
  // Adds the file's records to records; warn: say how many lines were skipped.
  void read_into(std::map<Key, TuneRecord>& records, bool warn) const;

  std::string path_;
  mutable std::mutex mutex_;
  std::map<Key, TuneRecord> records_;
  bool warned_ = false;
};

// The process's cache of a GPU model (made on first use from tune_cache_path(model), kept for the
// life of the process).
RTX_API TuneCache& tune_cache_for(const std::string& model);

}  // namespace rtx::detail
