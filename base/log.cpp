#include "base/log.h"

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

}  // namespace mlk
