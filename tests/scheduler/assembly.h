// The assembly of a one-fn program under the seed schedule (for tests that
// check which instructions, or which library calls, a kernel's code holds).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "lang/frontend.h"
#include "lang/precision.h"
#include "scheduler/lower.h"
#include "scheduler/rules.h"
#include "targets/profile.h"

namespace mlk::testing_asm {

// The assembly of `src`'s fn `f` under the precision policy `policy` and the
// seed schedule of `profile` at `d`.
inline std::string assembly(const std::string& src, const Profile& profile, const DimEnv& d,
                            Precision policy = Precision::kF32) {
  auto fe = compile_source("p.tl", src);
  EXPECT_TRUE(fe.ok());
  auto p = lower::lower_function(with_precision(fe.module, policy), "f", lower::options_for(profile.halide_target));
  EXPECT_TRUE(p.ok());
  auto infos = lower::stage_infos(*p, d);
  Schedule s = schedule_from_knobs(infos, untuned_knobs(infos, profile), profile);
  Status st = lower::apply_schedule(*p, s, false);
  EXPECT_TRUE(st.ok()) << st.message() << "\n" << s.to_json();
  std::vector<Halide::Argument> args;
  for (const Halide::ImageParam& in : p->inputs) args.push_back(in);
  for (const lower::Pack& pk : p->packs) args.push_back(pk.packed);  // weights read packed
  for (const auto& [name, param] : p->dim_params) args.push_back(param);
  // A name of this process's own: ctest runs each test as its own process, two at a time.
  static int n = 0;
  const std::string path = ::testing::TempDir() + "asm." + std::to_string(getpid()) + "." + std::to_string(n++) + ".s";
  Halide::Pipeline(p->outputs[0].func).compile_to_assembly(path, args, "f", Halide::Target(profile.halide_target));
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::remove(path.c_str());
  return text.str();
}

inline int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

}  // namespace mlk::testing_asm
