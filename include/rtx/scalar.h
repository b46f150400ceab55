// A number passed to an op (bool, integer or floating point), remembering which kind it is so that
// type promotion can treat it like a Python scalar: it never upcasts a tensor within its category.
#pragma once

#include <cstdint>
#include <ostream>
#include <type_traits>

#include "rtx/dtype.h"
#include "rtx/export.h"

namespace rtx {

class RTX_API Scalar {
 public:
  enum class Kind : uint8_t { Bool, Int, Float };

  Scalar() : Scalar(int64_t{0}) {}
  template <typename T, std::enable_if_t<std::is_same_v<T, bool>, int> = 0>
  Scalar(T v) : kind_(Kind::Bool), i_(v ? 1 : 0) {}  // NOLINT
  template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Scalar(T v) : kind_(Kind::Int), i_(static_cast<int64_t>(v)) {}  // NOLINT
  template <typename T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Scalar(T v) : kind_(Kind::Float), d_(static_cast<double>(v)) {}  // NOLINT
  Scalar(Half v) : Scalar(static_cast<float>(v)) {}                // NOLINT
  Scalar(BFloat16 v) : Scalar(static_cast<float>(v)) {}            // NOLINT

  Kind kind() const { return kind_; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_integral() const { return kind_ == Kind::Int; }
  bool is_floating() const { return kind_ == Kind::Float; }

  double to_double() const { return kind_ == Kind::Float ? d_ : static_cast<double>(i_); }
  int64_t to_int() const { return kind_ == Kind::Float ? static_cast<int64_t>(d_) : i_; }
  bool to_bool() const { return kind_ == Kind::Float ? d_ != 0.0 : i_ != 0; }

  template <typename T>
  T to() const {
    if constexpr (std::is_same_v<T, bool>) return to_bool();
    else if constexpr (std::is_integral_v<T>) return static_cast<T>(to_int());
    else return static_cast<T>(to_double());
  }

  // The dtype a tensor made from this scalar alone would have: bool, int64 or the default float.
  DType dtype() const { return kind_ == Kind::Bool ? kBool : kind_ == Kind::Int ? kInt64 : get_default_dtype(); }

 private:
  Kind kind_;
  union {
    int64_t i_;
    double d_;
  };
};

RTX_API std::ostream& operator<<(std::ostream& os, const Scalar& s);

}  // namespace rtx
