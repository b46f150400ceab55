// Library logging through spdlog; the level comes from RTX_LOG_LEVEL (trace, debug, info, warn,
// error, critical, off; default warn). Internal only: spdlog never appears in public headers.
#pragma once

#include <spdlog/spdlog.h>

namespace rtx::detail {
void init_logging();
spdlog::logger& logger();
}  // namespace rtx::detail

#define RTX_LOG_DEBUG(...) ::rtx::detail::logger().debug(__VA_ARGS__)
#define RTX_LOG_INFO(...) ::rtx::detail::logger().info(__VA_ARGS__)
#define RTX_LOG_WARN(...) ::rtx::detail::logger().warn(__VA_ARGS__)
