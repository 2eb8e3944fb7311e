// The cache key (cache/key.h) and the store path (cache/paths.h).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <set>

#include "cache/key.h"
#include "cache/paths.h"
#include "base/sha256.h"

namespace mlk::cache {
namespace {

KeyInputs sample() {
  KeyInputs in;
  in.ir_hash = sha256_hex("fn f(x: Tensor[F32, [N]]) -> Tensor[F32, [N]] = x * x");
  in.entry = "f";
  in.dims = {{"B", 8}, {"S", 128}};
  in.profile = "x86-64-avx2";
  in.capability_fingerprint = "avx2,fma,f16c";
  in.mlk_version = "0.1.0";
  in.halide_version = "21.0.0";
  in.llvm_version = "20.1";
  in.schedule_space_version = "1";
  return in;
}

TEST(CacheKey, SameInputsSameKey) {
  std::string k = cache_key(sample());
  EXPECT_EQ(k.size(), 64u);
  EXPECT_EQ(k, cache_key(sample()));
  KeyInputs copy = sample();
  EXPECT_EQ(k, cache_key(copy));
}

// The key format is part of the on-disk contract: a change here must be
// deliberate (and bump the version line in canonical_key_text).
TEST(CacheKey, GoldenValue) {
  EXPECT_EQ(canonical_key_text(sample()).substr(0, 16), "mlk-cache-key/2\n");
  EXPECT_EQ(cache_key(sample()), "f2b77aee0e2bd6aa88e0a2295dbf4a291a908f49ddd83b084b8d91d1b4f5fabd");
}

TEST(CacheKey, SameKeyInAnotherProcess) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::string k = cache_key(sample());
    ssize_t n = write(fds[1], k.data(), k.size());
    _exit(n == static_cast<ssize_t>(k.size()) ? 0 : 1);
  }
  close(fds[1]);
  char buf[64];
  size_t got = 0;
  while (got < sizeof buf) {
    ssize_t n = read(fds[0], buf + got, sizeof buf - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(std::string(buf, got), cache_key(sample()));
}

TEST(CacheKey, EveryFieldChangesTheKey) {
  std::vector<std::pair<const char*, std::function<void(KeyInputs&)>>> changes = {
      {"ir_hash", [](KeyInputs& k) { k.ir_hash[0] = k.ir_hash[0] == 'a' ? 'b' : 'a'; }},
      {"entry", [](KeyInputs& k) { k.entry = "g"; }},
      {"dim value", [](KeyInputs& k) { k.dims["B"] = 9; }},
      {"dim name", [](KeyInputs& k) { k.dims = {{"b", 8}, {"S", 128}}; }},
      {"dim added", [](KeyInputs& k) { k.dims["D"] = 64; }},
      {"dim removed", [](KeyInputs& k) { k.dims.erase("S"); }},
      {"negative dim", [](KeyInputs& k) { k.dims["B"] = -8; }},
      {"profile", [](KeyInputs& k) { k.profile = "x86-64-avx512"; }},
      {"capability_fingerprint", [](KeyInputs& k) { k.capability_fingerprint = "avx2,fma"; }},
      {"mlk_version", [](KeyInputs& k) { k.mlk_version = "0.1.1"; }},
      {"halide_version", [](KeyInputs& k) { k.halide_version = "21.0.1"; }},
      {"llvm_version", [](KeyInputs& k) { k.llvm_version = "20.2"; }},
      {"schedule_space_version", [](KeyInputs& k) { k.schedule_space_version = "2"; }},
  };
  std::set<std::string> keys = {cache_key(sample())};
  for (const auto& [what, change] : changes) {
    KeyInputs k = sample();
    change(k);
    EXPECT_TRUE(keys.insert(cache_key(k)).second) << "changing " << what << " did not give a new key";
  }
}

// Moving bytes between adjacent fields, or smuggling a field separator into a
// value, must never produce the same serialisation.
TEST(CacheKey, SerialisationIsUnambiguous) {
  KeyInputs a = sample(), b = sample();
  a.entry = "ab";
  a.profile = "c";
  b.entry = "a";
  b.profile = "bc";
  EXPECT_NE(cache_key(a), cache_key(b));

  KeyInputs c = sample(), d = sample();
  c.entry = "f\nprofile=1:x";
  c.profile = "";
  d.entry = "f";
  d.profile = "x";
  EXPECT_NE(canonical_key_text(c), canonical_key_text(d));
  EXPECT_NE(cache_key(c), cache_key(d));

  KeyInputs e = sample(), f = sample();
  e.dims = {{"B=8\ndim=1:S", 128}};
  f.dims = {{"B", 8}, {"S", 128}};
  EXPECT_NE(cache_key(e), cache_key(f));

  KeyInputs g = sample(), h = sample();
  g.mlk_version = "";
  g.halide_version = "0.1.021.0.0";
  h.mlk_version = "0.1.0";
  h.halide_version = "21.0.0";
  EXPECT_NE(cache_key(g), cache_key(h));
}

class EnvGuard {
 public:
  explicit EnvGuard(std::vector<std::string> names) : names_(std::move(names)) {
    for (const auto& n : names_) {
      const char* v = std::getenv(n.c_str());
      saved_.push_back(v ? std::optional<std::string>(v) : std::nullopt);
    }
  }
  ~EnvGuard() {
    for (size_t i = 0; i < names_.size(); ++i) {
      if (saved_[i]) setenv(names_[i].c_str(), saved_[i]->c_str(), 1);
      else unsetenv(names_[i].c_str());
    }
  }

 private:
  std::vector<std::string> names_;
  std::vector<std::optional<std::string>> saved_;
};

TEST(DefaultStorePath, FlagThenEnvThenXdgThenHome) {
  EnvGuard guard({"MLK_CACHE", "XDG_CACHE_HOME", "HOME"});
  setenv("MLK_CACHE", "/env/cache.db", 1);
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  setenv("HOME", "/home/u", 1);
  EXPECT_EQ(default_store_path("/flag.db"), "/flag.db");
  EXPECT_EQ(default_store_path(""), "/env/cache.db");
  unsetenv("MLK_CACHE");
  EXPECT_EQ(default_store_path(""), "/xdg/mlk/cache.db");
  setenv("MLK_CACHE", "", 1);  // empty counts as unset
  EXPECT_EQ(default_store_path(""), "/xdg/mlk/cache.db");
  setenv("XDG_CACHE_HOME", "relative/dir", 1);  // the XDG spec ignores relative paths
  EXPECT_EQ(default_store_path(""), "/home/u/.cache/mlk/cache.db");
  unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(default_store_path(""), "/home/u/.cache/mlk/cache.db");
  unsetenv("HOME");  // falls back to the password database
  std::string p = default_store_path("");
  EXPECT_TRUE(p.size() > 20 && p.substr(p.size() - 20) == "/.cache/mlk/cache.db") << p;
}

}  // namespace
}  // namespace mlk::cache
