// Command-line helpers the example trainers share: typed flag values and the --device choice, with
// UsageError for anything that cannot run.
#pragma once

#include <rtx/rtx.h>

#include <cmath>
#include <cstdint>
#include <exception>
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
