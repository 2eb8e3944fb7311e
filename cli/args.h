// Flag values of the mlk commands that need the front end's types: shapes
// (--dims). The flag tables and the parse loop are in cli/flags.h.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "base/status.h"
#include "cli/flags.h"
#include "lang/precision.h"

namespace mlk::cli {

// "B=8,S=128" -> {B: 8, S: 128}. Usage errors name the bad item.
Expected<std::map<std::string, int64_t>> parse_dims(const std::string& text);

// parse_dims into `out`; given twice, the last one wins.
FlagSetter store_dims(std::map<std::string, int64_t>& out);

// `--namespaces LIST`, the same in every command that reads the artifact
// cache: the read order of a cache server (client/cli_cache.h), stored in
// `out` after its syntax is checked ("--namespaces: the read order `a` must
// name `own` ..."). CliCache::Open applies it, in place of $MLK_NAMESPACES.
Flag namespaces_flag(std::string& out);

// `--precision f32|bf16|f16`, the same in every command that compiles a
// program: the policy lang/precision.h applies to the module before anything
// else sees it (docs/numerics.md, "Precision policies").
Flag precision_flag(Precision& out);

}  // namespace mlk::cli
