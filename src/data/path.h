// The check every file reader and writer makes of its path before handing it to the C library.
#pragma once

#include <string>

#include "rtx/error.h"

namespace rtx::data::detail {

// Throws ValueError "[op] path ...: a path cannot contain a NUL byte" when path has one: the C
// library would silently cut it there and open another file.
inline void check_path(const std::string& path, const char* op) {
  const size_t nul = path.find('\0');
  if (nul == std::string::npos) return;
  std::string shown = path;
  shown.replace(nul, 1, "\\0");
  throw ValueError(std::string("[") + op + "] path '" + shown + "': a path cannot contain a NUL byte (at byte " +
                   std::to_string(nul) + ")");
}

}  // namespace rtx::data::detail
