// mlk-rank: one rank of an SPMD run (`mlk run --ranks N`, which starts N of
// these with mpirun; spmd/launch.h). Each rank checks the program, joins
// the mesh, takes its block of every input as the plan's layouts say
// (lang/shard_plan.h), runs the plan's kernels (ordinary fns at per-shard
// shapes: the artifact tuned for exactly that kernel and shape from the
// artifact cache, as `mlk run` resolves it, else the default schedule with
// Halide's JIT) and collectives, and reassembles the result; rank 0 writes it
// exactly as `mlk run` does and says which artifact each kernel used. Any
// failure is one line naming the rank, then every rank ends.
//
// usage (internal; the launcher builds it):
//   mlk-rank FILE.tl FN OUT.safetensors TIMEOUT_S DIMS CACHE NAMESPACE IN...
// DIMS is `-` or N=V,...; CACHE is `-` (no cache), `@default` or the --cache
// value. The test seam MLK_SPMD_FAULT=kill:R or hang:R makes rank R die or
// hang right after joining the mesh.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "interop/run_inputs.h"
#include "spmd/blocks.h"
#include "spmd/mesh.h"
#include "client/cli_cache.h"
#include "interop/tensor_files.h"
#include "lang/frontend.h"
#include "lang/ir_printer.h"
#include "runtime/resolve.h"
#include "scheduler/kernel.h"
#include "targets/detect.h"
#include "artifact/loaded.h"

namespace mlk::spmd {
namespace {

struct Args {
  std::string file, fn, output, dims;
  double timeout_s = 60;
  std::string cache, ns;
  std::vector<std::string> inputs;
};

// One step's kernel: the tuned artifact for exactly this fn and shape when
// the cache has one, else the default schedule with the JIT.
struct StepKernel {
  std::unique_ptr<LoadedArtifact> tuned;
  std::unique_ptr<Kernel> jit;
  std::string how;
  Expected<HostTensor> run(const ir::Function& f, const std::vector<HostTensor>& in, const DimEnv& env) const {
    return tuned ? tuned->Run(f, in, env) : jit->Run(in, env);
  }
};

// With `trusted` (the launcher's --require signed:KEYS), only an artifact
// one of those keys signed, and no JIT fallback.
Expected<StepKernel> kernel_for(const ir::Module& m, const std::string& fn, const DimEnv& env,
                                client::CliCache* cache, const std::string& ns, const std::vector<std::string>& trusted) {
  StepKernel k;
  auto profile = resolve_profile("host");
  if (!profile.ok()) return profile.status();
  auto found = rt::find_tuned({.cache = cache, .ns = ns, .module = &m, .fn = fn,
                               .fhash = ir::function_hash(m, *m.find(fn)), .profile = *profile, .dims = env,
                               .require = rt::Require::kExact, .trusted = trusted, .cpu = detect_cpu()});
  if (found.ok()) {
    auto a = LoadedArtifact::LoadFiles(found->entry.files);
    if (!a.ok()) return a.status();
    k.tuned = std::move(a).value();
    k.how = "tuned artifact " + found->key.substr(0, 16) + ", tuned at exactly " + dims_str(found->tuned_dims);
    return k;
  }
  if (found.status().code() != Status::Code::kNotFound) return found.status();
  if (!trusted.empty())
    return Status::NotFound("no signed artifact for `" + fn + "` (--require signed: only an artifact signed by a "
                            "trusted key is loaded): " + found.status().message());
  auto j = Kernel::CompileJit(m, fn, *profile, nullptr, env);
  if (!j.ok()) return j.status();
  k.jit = std::move(j).value();
  k.how = "default schedule (JIT), not tuned: " + found.status().message();
  return k;
}

// The launcher's --dims ("-": none), read as `mlk run` reads them.
Expected<DimEnv> parse_dims(const std::string& s) {
  if (s == "-") return DimEnv{};
  auto d = parse_dim_list(s);
  if (!d.ok()) return Status::InvalidArgument("--dims: " + d.status().message());
  return d;
}

std::string axes_text(const ir::ShardPlan& p, const std::vector<int>& axes) {
  std::string s;
  for (int a : axes) s += (s.empty() ? "`" : ", `") + p.mesh[a].name + "`";
  return s;
}

std::string collective_text(const ir::ShardPlan& p, const ir::ShardStep& step, const ir::Collective& c) {
  std::string s = std::string(ir::collective_name(c.kind)) + " over " + axes_text(p, c.axes);
  if (c.kind == ir::Collective::Kind::kAllGather) s += " along dimension " + std::to_string(c.dim);
  return s + " after `" + step.kernel + "` (" + step.why + ")";
}

void fault_seam(int64_t rank) {
  const char* f = std::getenv("MLK_SPMD_FAULT");
  if (!f) return;
  std::string v = f;
  auto colon = v.find(':');
  if (colon == std::string::npos || std::stoll(v.substr(colon + 1)) != rank) return;
  if (v.substr(0, colon) == "kill") raise(SIGKILL);
  if (v.substr(0, colon) == "hang")
    for (;;) pause();
}

// The plan's steps on this rank's blocks; the assembled global result.
Expected<HostTensor> run_plan(Mesh& mesh, const ir::Module& m, const ir::ShardPlan& p, const Args& a) {
  const ir::Function* f = m.find(p.fn);
  auto parsed = parse_dims(a.dims);
  if (!parsed.ok()) return parsed.status();
  DimEnv& dims = *parsed;
  auto inputs = inputs::read_run_inputs(a.inputs, *f, dims);
  if (!inputs.ok()) return inputs.status();
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& t : *inputs) shapes.push_back(t.shape);
  auto env = bind_dims(*f, shapes, dims);
  if (!env.ok()) return env.status();
  std::vector<HostTensor> args;
  for (size_t j = 0; j < inputs->size(); ++j)
    args.push_back(local_block((*inputs)[j], p.param_layout[j], p.mesh, mesh.coords()));
  std::unique_ptr<client::CliCache> cache;
  if (a.cache != "-") {
    auto c = client::CliCache::Open(a.cache == "@default" ? "" : a.cache, a.ns, "mlk run", false);
    if (!c.ok()) return c.status();
    cache = std::move(c).value();
  }
  std::vector<std::string> trusted;  // the launcher's --require signed:KEYS (spmd/launch.h)
  if (const char* t = std::getenv("MLK_RANK_TRUSTED"); t && *t) {
    std::stringstream ss(t);
    for (std::string k; std::getline(ss, k, ',');)
      if (!k.empty()) trusted.push_back(k);
  }
  HostTensor out;
  for (const ir::ShardStep& step : p.steps) {
    auto k = kernel_for(m, step.kernel, *env, cache.get(), a.ns, trusted);
    if (!k.ok()) return k.status();
    if (mesh.rank() == 0) std::fprintf(stderr, "mlk run: %s: %s\n", step.kernel.c_str(), k->how.c_str());
    auto r = k->run(*m.find(step.kernel), args, *env);
    if (!r.ok()) return Status::InvalidArgument("`" + step.kernel + "`: " + r.status().message());
    out = std::move(r).value();
    for (const ir::Collective& c : step.after)
      if (Status s = mesh.apply(c, out, collective_text(p, step, c)); !s.ok()) return s;
    args.push_back(out);
  }
  for (size_t d = 0; d < p.result_layout.size(); ++d) {
    if (p.result_layout[d] < 0) continue;
    ir::Collective g{ir::Collective::Kind::kAllGather, {p.result_layout[d]}, static_cast<int64_t>(d)};
    if (Status s = mesh.apply(g, out, "the gather of the result's blocks along dimension " + std::to_string(d));
        !s.ok())
      return s;
  }
  return out;
}

int rank_main(int argc, char** argv) {
  if (argc < 8) {
    std::fprintf(stderr, "usage: mlk-rank FILE.tl FN OUT.safetensors TIMEOUT_S DIMS CACHE NAMESPACE IN... (started by "
                         "mlk run --ranks)\n");
    return 2;
  }
  Args a{argv[1], argv[2], argv[3], argv[5], std::atof(argv[4]), argv[6], argv[7], {}};
  for (int i = 8; i < argc; ++i) a.inputs.push_back(argv[i]);
  auto fe = compile_file(a.file);
  if (!fe.ok() || !fe->ok()) {
    std::fprintf(stderr, "mlk run: %s does not check (run `mlk check %s`)\n", a.file.c_str(), a.file.c_str());
    return 1;
  }
  const ir::ShardPlan* p = fe->module.find_shard(a.fn);
  if (!p) {
    std::fprintf(stderr, "mlk run: `%s` is not a fn defined by `shard`\n", a.fn.c_str());
    return 1;
  }
  std::vector<std::vector<int>> groups;
  for (const auto& s : p->steps)
    for (const auto& c : s.after) groups.push_back(c.axes);
  for (int ax : p->result_layout)
    if (ax >= 0) groups.push_back({ax});
  auto mesh = Mesh::Join(&argc, &argv, p->mesh, groups, a.timeout_s);
  if (!mesh.ok()) {
    std::fprintf(stderr, "mlk run: %s\n", mesh.status().message().c_str());
    return 1;
  }
  fault_seam((*mesh)->rank());
  auto out = run_plan(**mesh, fe->module, *p, a);
  if (!out.ok()) {
    std::fprintf(stderr, "mlk run: rank %lld of %lld: %s\n", static_cast<long long>((*mesh)->rank()),
                 static_cast<long long>((*mesh)->size()), out.status().message().c_str());
    std::fflush(stderr);
    (*mesh)->abort(1);
  }
  if ((*mesh)->rank() == 0) {
    if (Status s = write_safetensors(a.output, {{"output", *out}}); !s.ok()) {
      std::fprintf(stderr, "mlk run: rank 0: %s\n", s.message().c_str());
      (*mesh)->abort(1);
    }
    std::fprintf(stderr, "wrote %s: \"output\" %s %s\n", a.output.c_str(), dtype_name(out->dtype),
                 out->shape_str().c_str());
  }
  return 0;
}

}  // namespace
}  // namespace mlk::spmd

int main(int argc, char** argv) { return mlk::spmd::rank_main(argc, argv); }
