// Internal error helpers: RTX_CHECK builds its message (with fmt) only when the check fails.
#pragma once

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include "rtx/device.h"
#include "rtx/dtype.h"
#include "rtx/error.h"

template <>
struct fmt::formatter<rtx::DType> : fmt::ostream_formatter {};
template <>
struct fmt::formatter<rtx::Device> : fmt::ostream_formatter {};

// RTX_CHECK(cond, ErrorType, "[op] format", args...)
#define RTX_CHECK(cond, ErrorType, ...)                  \
  do {                                                  \
    if (!(cond)) throw ErrorType(fmt::format(__VA_ARGS__)); \
  } while (0)

#define RTX_THROW(ErrorType, ...) throw ErrorType(fmt::format(__VA_ARGS__))
