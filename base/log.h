// The log sink: how libraries report what is not an error of the call at
// hand (progress, notes, a server that is down and worked around). Libraries
// never print to stderr themselves; the program decides where lines go (the
// mlk command: stderr, with -q: nowhere above kNote; tests: captured).
//
// Thread-safe: the sink is called under a lock, one line at a time.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace mlk {

enum class LogLevel { kProgress, kNote, kWarning };

using LogSink = std::function<void(LogLevel, std::string_view line)>;

// Replaces the sink (nullptr: the default, which writes each line and a
// newline to stderr). Returns the previous one.
LogSink set_log_sink(LogSink sink);

// One line (no trailing newline) to the current sink.
void log_line(LogLevel level, std::string_view line);

}  // namespace mlk
