#include "verify/verify.h"

#include <chrono>

#include "verify/levels.h"

namespace mlk::verify {

Expected<Report> verify_artifact(const VerifyRequest& r) {
  const ir::Function* f = r.module ? r.module->find(r.fn) : nullptr;
  if (!f) return Status::NotFound("no fn `" + r.fn + "` in the program");
  for (const auto& d : f->dim_vars)
    if (!r.dims.count(d))
      return Status::Usage("verification runs at a concrete shape: --dims must give `" + d + "` (e.g. --dims " + d + "=4)");
  auto man = r.files.find("manifest.json");
  if (man == r.files.end()) return Status::InvalidArgument("the artifact has no manifest.json");
  Report rep;
  rep.fn = r.fn;
  rep.target = r.profile.name;
  for (const auto& [k, v] : r.dims) rep.dims += (rep.dims.empty() ? "" : ",") + k + "=" + std::to_string(v);
  const Context c{*r.module, *f, r.fn, r.profile, r.dims, r.files, man->second, r.seed};
  for (Level l : r.levels) {
    auto t0 = std::chrono::steady_clock::now();
    LevelReport lr;
    switch (l) {
      case Level::kTypes: lr = check_types(c); break;
      case Level::kIdentity: lr = check_identity(c); break;
      case Level::kEnvelope: lr = check_envelope(c); break;
      case Level::kMemory: lr = check_memory(c); break;
      case Level::kEquivalence: lr = check_equivalence(c); break;
    }
    lr.level = l;
    lr.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rep.levels.push_back(std::move(lr));
  }
  return rep;
}

}  // namespace mlk::verify
