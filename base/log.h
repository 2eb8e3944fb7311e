// The log sink: how libraries report what is not an error of the call at
// hand (progress, notes, a server that is down and worked around). Libraries
// never print to stderr themselves; the program decides where lines go (the
// mlk command and the runtime keep the default sink, stderr; tests capture).
// Quiet modes (-q) are not a sink: a command turns progress off where it is
// made (e.g. autotune's TuneOptions::progress), so nothing reaches the sink.
//
// Thread-safe: the sink is called under a lock, one line at a time; a sink
// must not call log_line itself.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace mlk {

// kProgress: how far a long job is ("[tune f cpu] trial 3/40 ..."); kNote:
// what happened that the user may want to know (a pull from the server, a
// server down and worked around); kWarning: something looks wrong but the
// call goes on.
enum class LogLevel { kProgress, kNote, kWarning };

using LogSink = std::function<void(LogLevel, std::string_view line)>;

// Replaces the sink (nullptr: the default, which writes each line and a
// newline to stderr). Returns the previous one.
LogSink set_log_sink(LogSink sink);

// One line (no trailing newline) to the current sink.
void log_line(LogLevel level, std::string_view line);

// log_line of a printf-formatted line (no trailing newline).
void log_linef(LogLevel level, const char* format, ...) __attribute__((format(printf, 2, 3)));

}  // namespace mlk
