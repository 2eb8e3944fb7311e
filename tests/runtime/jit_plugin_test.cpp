// The runtime's JIT fallback through the plugin (runtime/jit.h): found
// without help, and, when $MLK_JIT_PLUGIN names no file or a file that is not
// a plugin, refused with a message naming what is missing and how to get it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>

#include "lang/compare.h"
#include "lang/frontend.h"
#include "lang/interpreter.h"
#include "runtime/runtime.h"
#include "tests/runtime/dl_tensor.h"
#include "tests/runtime/scoped_env.h"

namespace mlk {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const std::string kNorms = std::string(MLK_SOURCE_DIR) + "/examples/norms.tl";

// Sets $MLK_JIT_PLUGIN for one scope (unset when `value` is null).
struct PluginEnv : ScopedEnv {
  explicit PluginEnv(const char* value) : ScopedEnv("MLK_JIT_PLUGIN", value) {}
};

// rmsnorm at B=2,S=4,D=48 on an empty cache: only the JIT can serve it.
Expected<std::shared_ptr<const rt::Kernel>> untuned_rmsnorm(const std::string& policy = "host") {
  const std::string store = (fs::temp_directory_path() / ("mlk_jit_plugin_test_" + std::to_string(getpid()) + ".db")).string();
  auto r = rt::Runtime::Open({store, "default", ""});
  if (!r.ok()) return r.status();
  return (*r)->GetKernel(kNorms, "rmsnorm", *rt::TargetPolicy::Parse(policy), {{"B", 2}, {"S", 4}, {"D", 48}});
}

TEST(JitPlugin, AMissingPluginSaysWhatIsMissingAndHowToGetIt) {
  PluginEnv env("/nonexistent/libmlk_jit.so");
  auto k = untuned_rmsnorm();
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), Status::Code::kNotFound);
  const std::string& m = k.status().message();
  EXPECT_THAT(m, HasSubstr("no tuned artifact of `rmsnorm` at B=2,D=48,S=4 under policy host"));
  EXPECT_THAT(m, HasSubstr("no default schedule either: the JIT plugin libmlk_jit.so, which compiles the default schedule"));
  EXPECT_THAT(m, HasSubstr("/nonexistent/libmlk_jit.so: "));
  EXPECT_THAT(m, HasSubstr("set $MLK_JIT_PLUGIN to its path"));
  EXPECT_THAT(m, HasSubstr("without it only tuned artifacts run"));
  EXPECT_THAT(m, HasSubstr("`mlk tune --fn rmsnorm --target host --dims B=2,D=48,S=4` tunes one"));
  // A policy that never falls back to the JIT does not need the plugin.
  auto tuned = untuned_rmsnorm("host;require=tuned");
  ASSERT_FALSE(tuned.ok());
  EXPECT_THAT(tuned.status().message(), ::testing::Not(HasSubstr("JIT plugin")));
}

TEST(JitPlugin, AFileThatIsNotAPluginIsRefused) {
  PluginEnv env(MLK_RUNTIME_LIB);  // a shared library without the mlk_jit_* entries
  auto k = untuned_rmsnorm();
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), Status::Code::kUnsupported);
  EXPECT_THAT(k.status().message(), HasSubstr(std::string(MLK_RUNTIME_LIB) + " is not an mlk JIT plugin"));
}

TEST(JitPlugin, FoundWithoutHelpAndComputesTheReference) {
  for (const char* given : {static_cast<const char*>(nullptr), MLK_JIT_PLUGIN_LIB}) {
    PluginEnv env(given);
    auto k = untuned_rmsnorm();
    ASSERT_TRUE(k.ok()) << k.status().message();
    EXPECT_EQ((*k)->selection().source, rt::Selection::Source::kDefaultJit);
    Dl x(DType::F32, {2, 4, 48}, 1), w(DType::F32, {48}, 2), eps(DType::F32, {}, 3), out(DType::F32, {2, 4, 48});
    eps.t.set(0, 1e-5);
    Status s = (*k)->Run({&x.d, &w.d, &eps.d}, &out.d);
    ASSERT_TRUE(s.ok()) << s.message();
    auto fe = compile_file(kNorms);
    ASSERT_TRUE(fe.ok() && fe->ok());
    auto want = interpret(fe->module, "rmsnorm", {x.t, w.t, eps.t}, {});
    ASSERT_TRUE(want.ok());
    Status cmp = compare(*want, out.t, tolerance_for(DType::F32, 48));
    EXPECT_TRUE(cmp.ok()) << cmp.message();
  }
}

}  // namespace
}  // namespace mlk
