// Helpers shared by the cache tests: a temporary directory, deterministic
// test bytes, and status assertions.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>

#include "base/files.h"
#include "cache/store.h"
#include "base/sha256.h"

namespace mlk::cache::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with its contents.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/mlk_cache_test.XXXXXX";
    char* p = mkdtemp(tmpl.data());
    if (!p) {
      std::perror("mkdtemp");
      std::abort();
    }
    path_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// n bytes determined by seed (all byte values, including NUL).
inline std::string bytes_of(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

inline Provenance test_provenance(const std::string& producer = "cache test") {
  Provenance p;
  p.producer = producer;
  p.toolchain = {{"mlk", "0.1.0"}, {"halide", "21.0.0"}, {"llvm", "20.1"}};
  p.measured = true;
  return p;
}

inline std::unique_ptr<Store> open_store(const std::string& path, StoreOptions o = {}) {
  auto s = Store::Open(path, std::move(o));
  if (!s.ok()) {
    std::fprintf(stderr, "cannot open test store %s: %s\n", path.c_str(), s.status().message().c_str());
    std::abort();
  }
  return std::move(s).value();
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

inline ::testing::AssertionResult IsOk(const Status& s) {
  if (s.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "status " << static_cast<int>(s.code()) << ": " << s.message();
}

template <typename T>
::testing::AssertionResult IsOk(const Expected<T>& e) {
  return IsOk(e.status());
}

inline ::testing::AssertionResult HasCode(const Status& s, Status::Code c) {
  if (s.code() == c) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected code " << static_cast<int>(c) << ", got "
                                       << static_cast<int>(s.code()) << ": " << s.message();
}

template <typename T>
::testing::AssertionResult HasCode(const Expected<T>& e, Status::Code c) {
  return HasCode(e.status(), c);
}

}  // namespace mlk::cache::testing
