#include "base/log.h"

#include <cstdarg>
#include <cstdio>
#include <mutex>

namespace mlk {

namespace {

std::mutex& mu() {
  static std::mutex m;
  return m;
}

LogSink& sink() {
  static LogSink s;
  return s;
}

}  // namespace

LogSink set_log_sink(LogSink s) {
  std::lock_guard<std::mutex> lock(mu());
  LogSink old = std::move(sink());
  sink() = std::move(s);
  return old;
}

void log_line(LogLevel level, std::string_view line) {
  std::lock_guard<std::mutex> lock(mu());
  if (sink()) {
    sink()(level, line);
    return;
  }
  std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
}

void log_linef(LogLevel level, const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list again;
  va_copy(again, args);
  int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  std::string line(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(line.data(), line.size() + 1, format, again);
  va_end(again);
  log_line(level, line);
}

}  // namespace mlk
