// Halide's autoschedulers as schedule candidates: plugins loaded from the
// Halide SDK, run on shape estimates.
#include <dlfcn.h>

#include <mutex>

#include "scheduler/lower.h"
#include "scheduler/packed.h"

namespace mlk::lower {

namespace {

// The directory of the libHalide.so this process runs, where the SDK keeps
// its autoscheduler plugins (so an installed mlk finds them wherever the
// `halide` wheel is); "." when it cannot be told (the load then fails,
// naming the path).
std::string halide_lib_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&Halide::load_plugin), &info) != 0 && info.dli_fname) {
    std::string path = info.dli_fname;
    auto slash = path.rfind('/');
    if (slash != std::string::npos) return path.substr(0, slash);
  }
  return ".";
}

Status load_plugin_once(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, std::string> loaded;  // name -> "" or error
  std::lock_guard<std::mutex> lock(mu);
  auto it = loaded.find(name);
  if (it == loaded.end()) {
    std::string lib = name;
    for (auto& c : lib) c = static_cast<char>(std::tolower(c));
    std::string path = halide_lib_dir() + "/libautoschedule_" + lib + ".so";
    try {
      Halide::load_plugin(path);
      it = loaded.emplace(name, "").first;
    } catch (const Halide::Error& e) {
      it = loaded.emplace(name, std::string("cannot load ") + path + ": " + e.what()).first;
    }
  }
  return it->second.empty() ? Status::Ok() : Status::Unsupported(it->second);
}

}  // namespace

Status apply_autoscheduler(Pipeline& p, Halide::Pipeline& hp, const std::string& name, const DimEnv& env,
                           const Halide::Target& target) {
  MLK_RETURN_IF_ERROR(load_plugin_once(name));
  try {
    // Estimates: every input and the output at the shapes of `env`.
    for (Stage& s : p.stages) {
      if (s.kind != Stage::Kind::kOutput && s.kind != Stage::Kind::kInput) continue;
      Halide::Region r;
      for (int i = static_cast<int>(s.shape.size()) - 1; i >= 0; --i) {
        auto v = s.shape[i].eval(env);
        if (!v) return Status::InvalidArgument("autoscheduler " + name + " needs every dimension (give --dims)");
        r.push_back(Halide::Range(0, static_cast<int>(*v)));
      }
      if (s.kind == Stage::Kind::kOutput) s.func.set_estimates(r);
    }
    for (size_t i = 0; i < p.inputs.size(); ++i) {
      const Stage* in = nullptr;
      for (const Stage& s : p.stages)
        if (s.kind == Stage::Kind::kInput && s.name == "load_" + p.inputs[i].name().substr(3)) in = &s;
      if (!in) continue;
      int r = static_cast<int>(in->shape.size());
      for (int ax = 0; ax < r; ++ax)
        p.inputs[i].dim(halide_dim(r, ax)).set_estimate(0, static_cast<int>(*in->shape[ax].eval(env)));
    }
    for (Pack& pk : p.packs) {  // a weight read packed (lower::Pack): its pairs' shape
      auto k = pk.k.eval(env), n = pk.n.eval(env);
      if (!k || !n) return Status::InvalidArgument("autoscheduler " + name + " needs every dimension (give --dims)");
      const std::vector<int64_t> s = packed_shape(*k, *n, pk.k_quantum, pk.n_quantum);
      for (int d = 0; d < 4; ++d) pk.packed.dim(d).set_estimate(0, static_cast<int>(s[3 - d]));
    }
    for (auto& [d, prm] : p.dim_params) {
      auto it = env.find(d);
      if (it == env.end()) return Status::InvalidArgument("autoscheduler " + name + " needs a value for " + d);
      prm.set_estimate(static_cast<int32_t>(it->second));
    }
    std::map<std::string, std::string> extra;
    if (name == "Adams2019" || name == "Anderson2021" || name == "Mullapudi2016") {
      extra["parallelism"] = std::to_string(target.has_gpu_feature() ? 128 : 2);
    }
    int stages = 0;
    for (const Stage& s : p.stages) stages += s.kind != Stage::Kind::kInput;
    if (int beam = autoscheduler_budget(name, stages).beam_size; beam > 0) extra["beam_size"] = std::to_string(beam);
    hp.apply_autoscheduler(target, Halide::AutoschedulerParams(name, extra));
  } catch (const Halide::Error& e) {
    return Status::InvalidArgument("autoscheduler " + name + " failed: " + e.what());
  }
  return Status::Ok();
}

}  // namespace mlk::lower
