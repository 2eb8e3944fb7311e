// The compile driver: the back end's stages in order (see compile.h), and the
// dumps `--dump-after` prints between them.
#include "scheduler/compile.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>

#include "base/files.h"
#include "base/log.h"
#include "lang/ir_printer.h"
#include "scheduler/algorithm.h"
#include "scheduler/jit_pipeline.h"
#include "scheduler/lower.h"
#include "scheduler/rules.h"
#include "targets/amx.h"
#include "targets/omp_par_for.h"
#include "targets/scratch_cache.h"

namespace mlk {

namespace {

constexpr struct {
  DumpStage stage;
  const char* name;
} kDumpStages[] = {
    {DumpStage::kIr, "ir"}, {DumpStage::kStages, "stages"}, {DumpStage::kSchedule, "schedule"}, {DumpStage::kLoops, "loops"}};

// ---- The dumps ----------------------------------------------------------

// The fn, then every fn it calls (directly or not), each once, by name.
std::string ir_text(const ir::Module& m, const ir::Function& f) {
  std::set<std::string> callees;
  std::vector<const ir::Node*> todo;
  std::set<const ir::Node*> seen;
  auto visit_fn = [&](const ir::Function& g) {
    for (const ir::Result& r : g.results())
      if (r.body) todo.push_back(r.body.get());
  };
  visit_fn(f);
  while (!todo.empty()) {
    const ir::Node* n = todo.back();
    todo.pop_back();
    if (!seen.insert(n).second) continue;
    if (n->op == ir::Op::kCall && n->callee != f.name && callees.insert(n->callee).second)
      if (const ir::Function* g = m.find(n->callee)) visit_fn(*g);
    for (const auto& o : n->operands) todo.push_back(o.get());
  }
  std::string out = ir::print_function(f);
  for (const auto& name : callees)
    if (const ir::Function* g = m.find(name)) out += "\n" + ir::print_function(*g);
  return out;
}

const char* kind_name(StageInfo::Kind k) {
  switch (k) {
    case StageInfo::Kind::kReduction: return "reduction";
    case StageInfo::Kind::kMatmul: return "matmul";
    case StageInfo::Kind::kSoftmaxMax: return "softmax_max";
    case StageInfo::Kind::kSoftmaxExp: return "softmax_exp";
    case StageInfo::Kind::kSoftmaxSum: return "softmax_sum";
    case StageInfo::Kind::kOutput: return "output";
    case StageInfo::Kind::kInput: return "input";
    case StageInfo::Kind::kOperand: return "operand";
  }
  return "?";
}

// One line per stage: `NAME KIND pure[a0=M:1024 ...] reduction[r0=K:1024]
// reads[load_a ...]`, extents as symbols and as estimated (0: unknown).
std::string stages_text(const lower::Pipeline& p, const std::vector<StageInfo>& infos) {
  std::ostringstream s;
  for (size_t i = 0; i < infos.size() && i < p.stages.size(); ++i) {
    const StageInfo& in = infos[i];
    const lower::Stage& st = p.stages[i];
    s << in.name << " " << kind_name(in.kind) << " pure[";
    for (size_t a = 0; a < in.extents.size(); ++a)
      s << (a ? " " : "") << "a" << a << "=" << (a < st.shape.size() ? st.shape[a].str() : "?") << ":" << in.extents[a];
    s << "] reduction[";
    for (size_t r = 0; r < in.rextents.size(); ++r)
      s << (r ? " " : "") << "r" << r << "=" << (r < st.rshape.size() ? st.rshape[r].str() : "?") << ":"
        << in.rextents[r];
    s << "]";
    if (!in.direct_inputs.empty()) {
      s << " reads[";
      // Halide's uniquifying suffix (`load_a$3`) differs between lowerings; the stage is `load_a`.
      for (size_t k = 0; k < in.direct_inputs.size(); ++k)
        s << (k ? " " : "") << in.direct_inputs[k].substr(0, in.direct_inputs[k].find('$'));
      s << "]";
    }
    s << "\n";
  }
  return s.str();
}

// Halide prints the loop nest on std::cerr; it is caught here. Not safe
// against other threads writing to std::cerr meanwhile.
std::string loops_text(Halide::Pipeline& hp) {
  std::ostringstream s;
  std::streambuf* old = std::cerr.rdbuf(s.rdbuf());
  try {
    hp.print_loop_nest();
  } catch (...) {
    std::cerr.rdbuf(old);
    throw;
  }
  std::cerr.rdbuf(old);
  return s.str();
}

void dump_at(const CompileRequest& req, DumpStage at, const std::function<std::string()>& text) {
  if (req.dump_after == at && req.dump) {
    std::string t = text();
    if (!t.empty() && t.back() != '\n') t += '\n';
    req.dump(t);
  }
}

// ---- The stages ---------------------------------------------------------

// What the stages before code generation leave for it.
struct Applied {
  const ir::Function* fn = nullptr;
  lower::Pipeline lowered;
  Schedule schedule;
  Halide::Pipeline pipeline;
  Halide::Target target;
  std::string algorithm_hash;  // of `lowered` before the schedule
  std::vector<Halide::Pipeline> packs;  // one per lowered.packs, scheduled
};

// The target as people name it in messages: the profile, or the Halide
// target string given instead.
std::string target_label(const CompileRequest& req) {
  return req.halide_target.empty() ? req.profile.name : req.halide_target;
}

Status halide_error(const CompileRequest& req, const Halide::Error& e) {
  return Status::InvalidArgument("Halide could not compile `" + req.fn + "` for " + target_label(req) +
                                 " with this schedule: " + e.what());
}

// The Halide target string compiled for: the request's, else the profile's.
const std::string& target_string(const CompileRequest& req) {
  return req.halide_target.empty() ? req.profile.halide_target : req.halide_target;
}

Halide::Target halide_target_of(const CompileRequest& req) {
  const std::string& t = target_string(req);
  return t == "host" ? Halide::get_host_target() : Halide::Target(t);
}

// typed IR -> Halide algorithm -> stage table -> schedule -> applied pipeline.
Expected<Applied> lower_and_schedule(const CompileRequest& req) {
  Applied a;
  a.fn = req.module ? req.module->find(req.fn) : nullptr;
  if (!a.fn) return Status::NotFound("no fn `" + req.fn + "` in the program");
  const bool gpu = req.profile.is_gpu();
  dump_at(req, DumpStage::kIr, [&] { return ir_text(*req.module, *a.fn); });

  const std::string& target = target_string(req);
  lower::LowerOptions options = lower::options_for(target);
  options.pack_weights = req.pack_weights;
  auto lowered = lower::lower_function(*req.module, req.fn, options);
  if (!lowered.ok()) return lowered.status();
  a.lowered = std::move(lowered).value();
  a.algorithm_hash = summarize_pipeline(a.lowered).hash;  // before the schedule touches the Funcs

  const std::vector<StageInfo> infos = lower::stage_infos(a.lowered, req.dims);
  dump_at(req, DumpStage::kStages, [&] { return stages_text(a.lowered, infos); });

  a.schedule = req.schedule ? *req.schedule
                            : schedule_from_knobs(infos, untuned_knobs(infos, req.profile), req.profile);

  MLK_RETURN_IF_ERROR(lower::apply_schedule(a.lowered, a.schedule, gpu));
  try {
    a.target = halide_target_of(req);
    a.pipeline = Halide::Pipeline(a.lowered.output_funcs());
    lower::schedule_packs(a.lowered);
    for (const lower::Pack& pk : a.lowered.packs) a.packs.emplace_back(pk.func);
    if (!a.schedule.autoscheduler.empty())
      MLK_RETURN_IF_ERROR(
          lower::apply_autoscheduler(a.lowered, a.pipeline, a.schedule.autoscheduler, req.dims, a.target));
    dump_at(req, DumpStage::kSchedule, [&] { return a.schedule.to_json(); });
    dump_at(req, DumpStage::kLoops, [&] { return loops_text(a.pipeline); });
  } catch (const Halide::Error& e) {
    return halide_error(req, e);
  }
  return a;
}

// The naive schedule of req's fn; nullopt where it is the default too (the
// rules have no seed for it).
Expected<std::optional<Schedule>> naive_unless_default(const CompileRequest& req) {
  auto lowered = lower::lower_function(*req.module, req.fn, lower::options_for(target_string(req)));
  if (!lowered.ok()) return lowered.status();
  const std::vector<StageInfo> infos = lower::stage_infos(*lowered, req.dims);
  const Knobs naive = default_knobs(infos, req.profile);
  if (untuned_knobs(infos, req.profile) == naive) return std::optional<Schedule>();
  return std::optional<Schedule>(schedule_from_knobs(infos, naive, req.profile));
}

// `attempt(req)`; when req gives no schedule and Halide refuses the default
// (the rules' first seed asks what this fn cannot take: an rfactor of a sum
// whose associativity Halide cannot prove, a row fused at a loop that
// another stage's tiles replaced), `attempt` again with the naive schedule,
// so that the untuned default always compiles: a warning names the fn and
// Halide's refusal (a rules defect), and the result's schedule is the naive
// one. The first attempt's dumps are held back and dropped when the second
// runs, so each dump is given once, of the schedule compiled. A schedule
// the caller gave, a default that is the naive one, and an error that is
// not Halide's refusal fail as they are; so does a naive schedule refused
// too (with the default's error).
template <typename F>
auto with_naive_fallback(const CompileRequest& req, F attempt) -> decltype(attempt(req)) {
  std::vector<std::string> held;
  CompileRequest first = req;
  if (req.dump) first.dump = [&held](const std::string& text) { held.push_back(text); };
  auto r = attempt(first);
  auto flush = [&] {
    for (const std::string& text : held) req.dump(text);
  };
  if (r.ok() || req.schedule || r.status().code() != Status::Code::kInvalidArgument) {
    flush();
    return r;
  }
  auto naive = naive_unless_default(req);
  if (!naive.ok() || !*naive) {
    flush();
    return r;
  }
  log_linef(LogLevel::kWarning, "mlk: the default schedule of `%s` for %s does not compile (%s); compiling the naive schedule",
            req.fn.c_str(), target_label(req).c_str(), r.status().message().substr(0, 300).c_str());
  CompileRequest again = req;
  again.schedule = &**naive;
  auto second = attempt(again);
  if (second.ok()) return second;
  return r;
}

}  // namespace

Expected<DumpStage> parse_dump_stage(const std::string& name) {
  for (const auto& d : kDumpStages)
    if (name == d.name) return d.stage;
  return Status::Usage("--dump-after: unknown stage `" + name + "` (stages: " + dump_stage_list() + ")");
}

const char* dump_stage_name(DumpStage s) {
  for (const auto& d : kDumpStages)
    if (s == d.stage) return d.name;
  return "none";
}

const char* dump_stage_list() { return "ir, stages, schedule, loops"; }

void JitPipelineDeleter::operator()(JitPipeline* p) const { delete p; }

Expected<Schedule> compile_until_codegen(const CompileRequest& req) {
  return with_naive_fallback(req, [](const CompileRequest& r) -> Expected<Schedule> {
    auto a = lower_and_schedule(r);
    if (!a.ok()) return a.status();
    return a->schedule;
  });
}

namespace {

Expected<JitPipelinePtr> jit_once(const CompileRequest& req) {
  auto a = lower_and_schedule(req);
  if (!a.ok()) return a.status();
  if (uses_amx_tiles(a->schedule)) MLK_RETURN_IF_ERROR(request_amx_tiles());
  try {
    a->pipeline.compile_jit(a->target);
  } catch (const Halide::Error& e) {
    return halide_error(req, e);
  }
  // Scratch as a built artifact allocates it (targets/scratch_cache.h), so a
  // candidate is measured the way it will run. In a process where PyTorch is
  // loaded when the pipeline is compiled, parallel loops run on PyTorch's
  // OpenMP team (targets/omp_par_for.h; once found, the team is kept, so
  // the handler always has it).
  mlk_omp_team_t team;
  const bool omp = mlk_omp_team(&team);
  auto handlers = [omp](Halide::Pipeline& p) {
    p.jit_handlers().custom_malloc = [](Halide::JITUserContext*, size_t n) { return mlk_scratch_get(n); };
    p.jit_handlers().custom_free = [](Halide::JITUserContext*, void* q) { mlk_scratch_put(q); };
    if (omp)
      p.jit_handlers().custom_do_par_for = [](Halide::JITUserContext* uc, int (*f)(Halide::JITUserContext*, int, uint8_t*),
                                              int min, int size, uint8_t* closure) {
        mlk_omp_team_t t;
        mlk_omp_team(&t);
        return mlk_omp_do_par_for(&t, uc, reinterpret_cast<int (*)(void*, int, uint8_t*)>(f), min, size, closure);
      };
  };
  handlers(a->pipeline);
  JitPipelinePtr out(new JitPipeline{std::move(a->lowered), std::move(a->pipeline), a->target, std::move(a->schedule)});
  return out;
}

Expected<CompiledObject> object_once(const CompileRequest& req, const std::string& dir) {
  namespace fs = std::filesystem;
  auto a = lower_and_schedule(req);
  if (!a.ok()) return a.status();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::IOError("cannot create " + dir + ": " + ec.message());
  const fs::path d(dir);
  CompiledObject out;
  out.schedule = a->schedule;
  out.algorithm_hash = a->algorithm_hash;
  out.amx_tiles = uses_amx_tiles(a->schedule);
  out.inner_entry = "mlk_halide_" + req.fn;
  for (const auto& [name, prm] : a->lowered.dim_params) out.unbound_dims.push_back(name);  // std::map: sorted
  try {
    out.halide_target = a->target.to_string();
    std::vector<Halide::Argument> args, dims;
    for (auto& ip : a->lowered.inputs) args.push_back(ip);
    for (auto& pk : a->lowered.packs) args.push_back(pk.packed);
    for (auto& [name, prm] : a->lowered.dim_params) dims.push_back(prm);
    args.insert(args.end(), dims.begin(), dims.end());
    Halide::Module mod = a->pipeline.compile_to_module(args, out.inner_entry, a->target);
    mod.compile({{Halide::OutputFileType::object, (d / (req.fn + ".o")).string()},
                 {Halide::OutputFileType::c_header, (d / (req.fn + "_halide.h")).string()}});
    out.files = {req.fn + ".o", req.fn + "_halide.h"};
    // Each pack's pipeline: the inputs (the weight, and those whose extents
    // bind its dims) and the dims in, the pairs out; one Halide runtime (the
    // main object's) serves them all.
    for (size_t k = 0; k < a->packs.size(); ++k) {
      const lower::Pack& pk = a->lowered.packs[k];
      CompiledObject::PackEntry e{pk.param, pk.k, pk.n, pk.k_quantum, pk.n_quantum,
                                  out.inner_entry + "_pack" + std::to_string(k)};
      std::vector<Halide::Argument> pargs(args.begin(), args.begin() + a->lowered.inputs.size());
      pargs.insert(pargs.end(), dims.begin(), dims.end());
      Halide::Module pm =
          a->packs[k].compile_to_module(pargs, e.entry, a->target.with_feature(Halide::Target::NoRuntime));
      const std::string file = req.fn + "_pack" + std::to_string(k) + ".o";
      pm.compile({{Halide::OutputFileType::object, (d / file).string()}});
      out.files.push_back(file);
      out.packs.push_back(std::move(e));
    }
    if (req.profile.is_gpu()) {
      for (const auto& b : mod.buffers())
        if (b.name().find("gpu_source_kernels") != std::string::npos)
          out.ptx.assign(reinterpret_cast<const char*>(b.data()), b.size_in_bytes());
      out.ptx.erase(std::remove(out.ptx.begin(), out.ptx.end(), '\0'), out.ptx.end());
      if (out.ptx.empty())
        return Status::Internal("Halide produced no PTX for `" + req.fn + "` (is every stage GPU-scheduled?)");
    }
  } catch (const Halide::Error& e) {
    return halide_error(req, e);
  }
  if (!out.ptx.empty()) {
    MLK_RETURN_IF_ERROR(write_file((d / (req.fn + ".ptx")).string(), out.ptx + "\n"));
    out.files.push_back(req.fn + ".ptx");
  }
  return out;
}

}  // namespace

bool uses_amx_tiles(const Schedule& s) {
  for (const auto& [stage, ds] : s.stages)
    for (const Directive& d : ds)
      if (d.op == "amx_tiles") return true;
  return false;
}

Expected<JitPipelinePtr> compile_jit(const CompileRequest& req) {
  const std::string label = target_label(req);
  // A kernel in memory is called with weights only: its packs would have no filler.
  if (req.pack_weights)
    return Status::Unsupported("`" + req.fn + "`: the JIT compiles in memory without packed weights (build an artifact)");
  if (req.profile.is_gpu() || label.find("cuda") != std::string::npos)
    return Status::Unsupported("JIT runs only on the host CPU; target `" + label + "` needs `mlk build`");
  return with_naive_fallback(req, jit_once);
}

Expected<CompiledObject> compile_object(const CompileRequest& req, const std::string& dir) {
  return with_naive_fallback(req, [&dir](const CompileRequest& r) { return object_once(r, dir); });
}

}  // namespace mlk
