// spdlog logger "rtx" on stderr, level from RTX_LOG_LEVEL.
#include "core/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <string>

namespace rtx::detail {

spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> l = [] {
    auto lg = spdlog::stderr_color_mt("rtx");
    lg->set_pattern("[rtx %L %H:%M:%S.%e] %v");
    return lg;
  }();
  return *l;
}

void init_logging() {
  const char* env = std::getenv("RTX_LOG_LEVEL");
  spdlog::level::level_enum level = spdlog::level::warn;
  if (env != nullptr && *env != '\0') {
    level = spdlog::level::from_str(env);
    // from_str maps unknown names to off; say so instead of going silent.
    if (level == spdlog::level::off && std::string(env) != "off") {
      level = spdlog::level::warn;
      logger().set_level(level);
      logger().warn("RTX_LOG_LEVEL='{}' is not a level (trace, debug, info, warn, error, critical, off); using warn", env);
      return;
    }
  }
  logger().set_level(level);
  logger().debug("rtx loaded, log level {}", spdlog::level::to_string_view(level));
}

}  // namespace rtx::detail
