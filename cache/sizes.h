// Byte counts as people write and read them: the SIZE of `mlk cache gc
// --max-size` and `mlk serve --quota`, and the sizes in messages.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace mlk::cache {

// "1234", "64K", "512M", "10G" (K, M, G: powers of 1024, either case, an
// optional trailing B or iB) -> bytes. Usage errors say what is accepted.
Expected<int64_t> parse_size(const std::string& text);

// 1536 -> "1.5 KiB".
std::string human_bytes(int64_t n);

}  // namespace mlk::cache
