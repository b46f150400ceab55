// The kernel tuning cache (core/tuning.h): the RTX_TUNE switch, where the files live, and the
// tab-separated file of one GPU model's choices.
#include "core/tuning.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "core/logging.h"
#include "rtx/data.h"
#include "rtx/error.h"

namespace rtx::detail {
namespace {

constexpr double kTrialUs = 1000.0;
constexpr double kLongestTrialUs = 50000.0;
constexpr int kMinReps = 2, kMaxReps = 20;

constexpr const char* kHeader =
    "# rustytorch kernel tuning cache, one GPU model: kernel, shape class, chosen candidate, its time (us), "
    "the built-in choice's time (us)";

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

// A record line's fields, or nullopt when it is not one.
std::optional<std::pair<std::pair<std::string, std::string>, TuneRecord>> parse_line(const std::string& line) {
  std::vector<std::string> fields;
  std::stringstream in(line);
  for (std::string f; std::getline(in, f, '\t');) fields.push_back(f);
  if (fields.size() != 5 || fields[0].empty() || fields[1].empty()) return std::nullopt;
  TuneRecord r;
  char* end = nullptr;
  errno = 0;
  const long choice = std::strtol(fields[2].c_str(), &end, 10);
  if (errno != 0 || end == fields[2].c_str() || *end != '\0' || choice < 0 || choice > 1 << 20) return std::nullopt;
  r.choice = static_cast<int>(choice);
  for (auto [text, value] : {std::pair{&fields[3], &r.best_us}, std::pair{&fields[4], &r.default_us}}) {
    *value = std::strtod(text->c_str(), &end);
    if (end == text->c_str() || *end != '\0') return std::nullopt;
  }
  return std::pair{std::pair{fields[0], fields[1]}, r};
}

}  // namespace

std::optional<TuneRecord> measure_candidates(int candidates, int fallback,
                                            const std::function<std::optional<double>(int, int)>& time) {
  std::optional<double> probe;
  int first = fallback;
  for (int i = 0; i < candidates && !probe; ++i) {
    first = i == 0 ? fallback : (i <= fallback ? i - 1 : i);  // the fallback, then the others in order
    probe = time(first, 1);
  }
  if (!probe) return std::nullopt;
  TuneRecord record{first, *probe, first == fallback ? *probe : 0};
  if (*probe > kLongestTrialUs) return record;
  const int reps = std::clamp(static_cast<int>(std::ceil(kTrialUs / std::max(*probe, 1.0))), kMinReps, kMaxReps);
  record.best_us = INFINITY;
  for (int c = 0; c < candidates; ++c) {
    const std::optional<double> t = time(c, reps);
    if (t && c == fallback) record.default_us = *t;
    if (t && *t < record.best_us) {
      record.choice = c;
      record.best_us = *t;
    }
  }
  if (std::isinf(record.best_us)) return std::nullopt;
  return record;
}

bool tuning_enabled() {
  static const bool enabled = [] {
    const std::string v = env_or_empty("RTX_TUNE");
    if (v.empty() || v == "1") return true;
    if (v == "0") return false;
    logger().warn("RTX_TUNE='{}' is neither 0 nor 1; kernels tune (RTX_TUNE=1)", v);
    return true;
  }();
  return enabled;
}

std::string tune_cache_directory() {
  if (std::string dir = env_or_empty("RTX_TUNE_CACHE"); !dir.empty()) return dir;
  if (std::string xdg = env_or_empty("XDG_CACHE_HOME"); !xdg.empty()) return xdg + "/rustytorch";
  if (std::string home = env_or_empty("HOME"); !home.empty()) return home + "/.cache/rustytorch";
  return {};
}

std::string tune_cache_path(const std::string& model) {
  const std::string dir = tune_cache_directory();
  if (dir.empty()) return {};
  std::string name = model;
  for (char& c : name) {
    const bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
                       c == '_' || c == '-';
    if (!plain) c = '_';
  }
  return dir + "/tune-" + name + ".tsv";
}

TuneCache::TuneCache(std::string path) : path_(std::move(path)) { read_into(records_, true); }

void TuneCache::read_into(std::map<Key, TuneRecord>& records, bool warn) const {
  if (path_.empty()) return;
  std::ifstream in(path_);
  if (!in) return;  // no file yet
  int bad = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    if (auto parsed = parse_line(line)) records.insert_or_assign(parsed->first, parsed->second);
    else ++bad;
  }
  if (bad > 0 && warn)
    logger().warn("kernel tuning cache {}: skipped {} malformed line(s); they will be measured again", path_, bad);
}

std::optional<TuneRecord> TuneCache::find(const std::string& kernel, const std::string& shape_class) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = records_.find({kernel, shape_class});
  if (it == records_.end()) return std::nullopt;
  return it->second;
}

void TuneCache::store(const std::string& kernel, const std::string& shape_class, const TuneRecord& record) {
  std::lock_guard<std::mutex> lock(mutex_);
  records_.insert_or_assign(Key{kernel, shape_class}, record);
  if (path_.empty()) return;
  // What other processes stored since, then ours on top.
  std::map<Key, TuneRecord> merged;
  read_into(merged, false);
  for (const auto& [key, r] : records_) merged.insert_or_assign(key, r);
  std::string text = std::string(kHeader) + "\n";
  for (const auto& [key, r] : merged)
    text += fmt::format("{}\t{}\t{}\t{:.3f}\t{:.3f}\n", key.first, key.second, r.choice, r.best_us, r.default_us);
  try {
    const std::filesystem::path dir = std::filesystem::path(path_).parent_path();
    std::error_code error;
    if (!dir.empty()) std::filesystem::create_directories(dir, error);
    if (error) throw CheckpointError(fmt::format("cannot create the directory {}: {}", dir.string(), error.message()));
    rtx::data::AtomicFile file(path_, "kernel tuning cache");
    file.write(text);
    file.commit();
  } catch (const Error& e) {
    if (!warned_)
      logger().warn("kernel tuning cache not saved ({}); choices are kept for this process. Set RTX_TUNE_CACHE to a "
                    "writable directory, or RTX_TUNE=0", e.what());
    warned_ = true;
  }
}

TuneCache& tune_cache_for(const std::string& model) {
  static std::mutex mutex;
  static auto* caches = new std::map<std::string, std::unique_ptr<TuneCache>>();
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<TuneCache>& c = (*caches)[model];
  if (!c) c = std::make_unique<TuneCache>(tune_cache_path(model));
  return *c;
}

}  // namespace rtx::detail
