// JSON from outside the process (request bodies, server answers, stored
// metadata that a client wrote): parsed with a nesting limit checked before
// any tree is built.
//
// nlohmann::json parses iteratively, but dump(), copies and every recursive
// visitor recurse once per level: an array nested 100,000 deep (200 KB)
// parses, then overflows the stack. Untrusted text therefore goes through
// parse_json, never json::parse.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace mlk {

// Deeper than this, JSON from outside is refused. mlk's own documents
// (manifests, reports, schedules, job payloads) nest fewer than 12 levels.
constexpr int kMaxJsonDepth = 64;
// A server's answer wraps the documents it accepted (at kMaxJsonDepth) in a
// few levels of its own ({"entries":[{"manifest":..}]}, {"job":{"payload":..}}):
// its clients read answers this deep, so that a document a writer stored
// never makes another team's reads fail.
constexpr int kMaxAnswerDepth = kMaxJsonDepth + 8;

// Parses `text`. Returns a discarded value (is_discarded()) when it is not
// JSON, nests more than `max_depth` arrays and objects, or (with
// `max_values` > 0) holds more than `max_values` values, each of which costs
// a tree node (`[{},{},...]` is 3 bytes a value and about 80 parsed); `why`,
// when given, then says which ("nested deeper than 64 levels", "more than N
// values", or the parser's message). Never throws.
nlohmann::json parse_json(std::string_view text, std::string* why = nullptr, int max_depth = kMaxJsonDepth,
                          int64_t max_values = 0);

// json.dump() for text that must not throw: invalid UTF-8 in strings (a key
// or name echoed from a request) is replaced by U+FFFD.
std::string dump_json(const nlohmann::json& j);

}  // namespace mlk
