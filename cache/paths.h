// Where the artifact store lives when the user does not say.
#pragma once

#include <string>

namespace mlk::cache {

// The store path, first match wins: `flag_value` (from --cache PATH) when not
// empty; $MLK_CACHE when set and not empty; $XDG_CACHE_HOME/mlk/cache.db when
// $XDG_CACHE_HOME is an absolute path (the XDG spec ignores relative ones);
// $HOME/.cache/mlk/cache.db (HOME from the password database when unset).
// Falls back to ./.mlk-cache.db only when no home directory can be found.
std::string default_store_path(const std::string& flag_value);

}  // namespace mlk::cache
