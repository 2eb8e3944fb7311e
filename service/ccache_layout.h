// ccache's HTTP remote-storage protocol (ccache 4.7+, docs/api.md "ccache"):
// ccache GETs, PUTs, HEADs and DELETEs one object per cache key under the URL
// it is given, in one of three layouts. This maps the path below /ccache/ to
// the key of the store entry that holds the object (one file, "data", in the
// namespace of the request's token).
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace mlk::service {

// `rest` is the request path after "/ccache/":
//   subdirs (ccache's default)  "ab/cdef..."    -> "ccache/abcdef..."
//   flat                        "abcdef..."     -> "ccache/abcdef..."
//   bazel                       "ac/<64 hex>"   -> "ccache/ac/<64 hex>"
// A ccache key is 20-128 characters of [0-9a-z] (4.7-4.12 send 33 characters
// of hex and base32hex, 4.13+ 40 hex), so subdirs and flat name the same
// entry. Anything else (empty parts, "..", other characters or lengths) is
// InvalidArgument saying what is accepted.
Expected<std::string> ccache_store_key(std::string_view rest);

// The file name of the one blob of a ccache entry.
inline constexpr const char* kCcacheFile = "data";

}  // namespace mlk::service
