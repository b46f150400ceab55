// Command-line helpers the example trainers share: typed flag values and the --device choice, with
// UsageError for anything that cannot run.
#pragma once

#include <rtx/rtx.h>

#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>

namespace example_cli {

// A command line that cannot be run: reported with a pointer to --help.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline int64_t parse_integer(const std::string& flag, const std::string& text, int64_t min) {
  size_t used = 0;
  int64_t value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || value < min) {
    throw UsageError(flag + " expects an integer of at least " + std::to_string(min) + ", got '" + text + "'");
  }
  return value;
}

inline double parse_positive_number(const std::string& flag, const std::string& text) {
  size_t used = 0;
  double value = 0.0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !std::isfinite(value) || value <= 0.0) {
    throw UsageError(flag + " expects a positive number, got '" + text + "'");
  }
  return value;
}

// A trainer's flags, each bound to a field of its options; parse() fills the fields from argv.
class Flags {
 public:
  template <typename Int>
  void integer(const std::string& name, Int& field, int64_t min) {
    with_value_[name] = [&field, name, min](const std::string& v) { field = static_cast<Int>(parse_integer(name, v, min)); };
  }
  void positive_number(const std::string& name, double& field) {
    with_value_[name] = [&field, name](const std::string& v) { field = parse_positive_number(name, v); };
  }
  void text(const std::string& name, std::string& field) {
    with_value_[name] = [&field](const std::string& v) { field = v; };
  }
  void toggle(const std::string& name, bool& field) { toggles_[name] = &field; }

  // Fills the fields; false when --help (or -h) was given, which stops the parse.
  bool parse(int argc, char** argv) const {
    for (int i = 1; i < argc; ++i) {
      const std::string flag = argv[i];
      if (flag == "--help" || flag == "-h") return false;
      if (const auto t = toggles_.find(flag); t != toggles_.end()) {
        *t->second = true;
      } else if (const auto w = with_value_.find(flag); w != with_value_.end()) {
        if (i + 1 >= argc) throw UsageError(flag + " expects a value");
        w->second(argv[++i]);
      } else {
        throw UsageError("unknown option '" + flag + "'");
      }
    }
    return true;
  }

 private:
  std::map<std::string, std::function<void(const std::string&)>> with_value_;
  std::map<std::string, bool*> toggles_;
};

// The device --device names (cuda when available if unset); UsageError when CUDA is asked for but absent.
inline rtx::Device resolve_device(const std::string& name) {
  if (name.empty()) return rtx::cuda::is_available() ? rtx::Device(rtx::kCUDA) : rtx::Device(rtx::kCPU);
  if (name == "cpu") return rtx::Device(rtx::kCPU);
  if (name != "cuda") throw UsageError("--device expects cpu or cuda, got '" + name + "'");
  if (!rtx::cuda::is_available()) {
    throw UsageError("--device cuda: CUDA is not available (" + rtx::cuda::unavailable_reason() +
                     "); train with --device cpu");
  }
  return rtx::Device(rtx::kCUDA);
}

}  // namespace example_cli
