#include "cache/entry_scan.h"

namespace mlk::cache {

Status scan_entries(ArtifactStore& store, const std::string& ns, const std::function<bool(EntryInfo&)>& visit,
                    int page_rows) {
  std::optional<ListCursor> after;
  while (true) {
    auto page = store.list_page(ns, after, page_rows);
    if (!page.ok()) return page.status();
    for (EntryInfo& e : page->entries)
      if (!visit(e)) return Status::Ok();
    if (!page->next) return Status::Ok();
    after = page->next;
  }
}

}  // namespace mlk::cache
