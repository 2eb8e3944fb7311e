// Flag values of the mlk commands that need the front end's types: shapes
// (--dims). The flag tables and the parse loop are in cli/flags.h.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "base/status.h"
#include "cli/flags.h"

namespace mlk::cli {

// "B=8,S=128" -> {B: 8, S: 128}. Usage errors name the bad item.
Expected<std::map<std::string, int64_t>> parse_dims(const std::string& text);

// parse_dims into `out`; given twice, the last one wins.
FlagSetter store_dims(std::map<std::string, int64_t>& out);

}  // namespace mlk::cli
