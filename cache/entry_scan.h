// Reading a namespace of any size with bounded memory: the entries a page at
// a time (ArtifactStore::list_page), so that a query, the dashboard or a
// nearest-shape search holds at most one page of manifests at once.
#pragma once

#include <functional>
#include <string>

#include "base/status.h"
#include "cache/store.h"

namespace mlk::cache {

// Calls visit on each entry of `ns`, most recently used first, until it
// returns false or the namespace ends. page_rows entries are read at a time.
// The store's error, if any; visiting never sees a page twice.
Status scan_entries(ArtifactStore& store, const std::string& ns, const std::function<bool(EntryInfo&)>& visit,
                    int page_rows = 16);

}  // namespace mlk::cache
