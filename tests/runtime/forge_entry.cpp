// forge_entry STORE NAMESPACE FN: what a writer without the signing key can
// do to a cache entry (issue 28, finding 6). The entry of fn FN gets, under
// the same key, a library that is not a shared library at all (so that
// opening it could only fail in dlopen) and a manifest.json whose sha256s
// match it, with the entry's signatures dropped. Every store check passes;
// only a signature check can refuse it. Prints the key.
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "base/sha256.h"
#include "cache/store.h"

int main(int argc, char** argv) {
  using nlohmann::json;
  if (argc != 4) {
    std::fprintf(stderr, "usage: forge_entry STORE NAMESPACE FN\n");
    return 2;
  }
  auto store = mlk::cache::Store::Open(argv[1]);
  if (!store.ok()) return std::fprintf(stderr, "%s\n", store.status().message().c_str()), 1;
  auto entries = (*store)->list(std::string(argv[2]));
  if (!entries.ok()) return std::fprintf(stderr, "%s\n", entries.status().message().c_str()), 1;
  for (const auto& e : *entries) {
    json meta = json::parse(e.manifest.meta_json, nullptr, false);
    if (!meta.is_object() || meta.value("fn", "") != argv[3]) continue;
    auto a = (*store)->get_entry(argv[2], e.key);
    if (!a.ok()) return std::fprintf(stderr, "%s\n", a.status().message().c_str()), 1;
    auto files = a->files;
    json man = json::parse(files.at("manifest.json"));
    const std::string lib = man.at("library").get<std::string>();
    files[lib] = "this is not a shared library: dlopen would fail on it\n";
    man["files"][lib] = mlk::sha256_hex(files[lib]);
    man.erase("signatures");
    files["manifest.json"] = man.dump(2);
    meta.erase("signatures");
    auto s = (*store)->put_entry(argv[2], e.key, meta.dump(), a->info.manifest.provenance, files);
    if (!s.ok()) return std::fprintf(stderr, "%s\n", s.message().c_str()), 1;
    std::printf("%s\n", e.key.c_str());
    return 0;
  }
  std::fprintf(stderr, "no entry of fn `%s` in namespace %s of %s\n", argv[3], argv[2], argv[1]);
  return 1;
}
