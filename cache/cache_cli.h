// `mlk cache`: list, show, verify, gc, export, import, rm, pin and unpin
// entries of the artifact store. Lives in cache/ (not cli/) so that tests can
// run it with captured output; cli/cache_command.cpp registers it.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "base/status.h"

namespace mlk::cache {

extern const char kCacheUsageText[];

// Runs `mlk cache ARGS...`; returns the exit status: 0 success, 1 corruption
// found or bad input (no such key, damaged or unwritable store), 2 bad usage.
int run_cache_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// "1234", "64K", "512M", "10G" (K, M, G: powers of 1024, either case, an
// optional trailing B or iB) -> bytes. Usage errors say what is accepted.
Expected<int64_t> parse_size(const std::string& text);


// 1536 -> "1.5 KiB".
std::string human_bytes(int64_t n);

}  // namespace mlk::cache
