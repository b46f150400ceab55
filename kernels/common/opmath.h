// The type arithmetic happens in: float for the 16-bit floats, the type itself otherwise.
#pragma once

#include "rtx/half.h"

namespace rtx::detail {
template <typename T>
struct opmath {
  using type = T;
};
template <>
struct opmath<Half> {
  using type = float;
};
template <>
struct opmath<BFloat16> {
  using type = float;
};
template <typename T>
using opmath_t = typename opmath<T>::type;
}  // namespace rtx::detail
