// `mlk run`: computes one function of a .tl program on safetensors inputs,
// with the compiled (Halide JIT) kernel or the reference interpreter.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>

#include <filesystem>

#include "autotune/cached_tune.h"
#include "cache/paths.h"
#include "cli/args.h"
#include "cli/command.h"
#include "cli/dump_after.h"
#include "interop/tensor_files.h"
#include "lang/frontend.h"
#include "lang/interpreter.h"
#include "lang/ir_printer.h"
#include "lang/memory_budget.h"
#include "runtime/resolve.h"
#include "scheduler/kernel.h"
#include "client/cli_cache.h"
#include "targets/detect.h"
#include "targets/loaded_artifact.h"

namespace mlk::cli {

namespace {

struct RunOptions {
  std::string file, fn, inputs, output, target = "host", cache, ns = "default";
  bool no_cache = false;
  std::map<std::string, int64_t> dims;
  int64_t repeat = 0;
  bool reference = false;
  rt::Require require = rt::Require::kAny;
  DumpStage dump_after = DumpStage::kNone;
};

Expected<RunOptions> parse(const std::vector<std::string>& args) {
  RunOptions o;
  ArgReader r(args);
  while (!r.done()) {
    std::string a = r.next();
    auto val = [&]() { return r.value(); };
    if (a == "--fn" || a == "--inputs" || a == "--output" || a == "--dims" || a == "--target" || a == "--repeat" ||
        a == "--cache" || a == "--namespace" || a == "--require" || a == "--dump-after") {
      auto v = val();
      if (!v.ok()) return v.status();
      if (a == "--fn") o.fn = *v;
      if (a == "--inputs") o.inputs = *v;
      if (a == "--output") o.output = *v;
      if (a == "--target") o.target = *v;
      if (a == "--cache") o.cache = *v;
      if (a == "--namespace") o.ns = *v;
      if (a == "--dump-after") {
        auto d = parse_dump_stage(*v);
        if (!d.ok()) return d.status();
        o.dump_after = *d;
      }
      if (a == "--require") {
        auto r = rt::parse_require(*v);
        if (!r.ok()) return Status::Usage("--require: " + r.status().message());
        o.require = *r;
      }
      if (a == "--dims") {
        auto d = parse_dims(*v);
        if (!d.ok()) return d.status();
        o.dims = *d;
      }
      if (a == "--repeat") {
        auto k = parse_count("--repeat", *v);
        if (!k.ok()) return k.status();
        o.repeat = *k;
      }
    } else if (a == "--reference") {
      o.reference = true;
    } else if (a == "--no-cache") {
      o.no_cache = true;
    } else if (!a.empty() && a[0] == '-') {
      return Status::Usage("unknown option `" + a + "`");
    } else if (o.file.empty()) {
      o.file = a;
    } else {
      return Status::Usage("unexpected argument `" + a + "` (one .tl file per run)");
    }
  }
  if (o.file.empty()) return Status::Usage("no input file");
  if (o.reference && o.dump_after != DumpStage::kNone)
    return Status::Usage("--dump-after shows a compiled kernel; --reference runs the interpreter");
  if (o.inputs.empty()) return Status::Usage("--inputs IN.safetensors is required");
  if (o.output.empty() && o.repeat == 0) return Status::Usage("--output OUT.safetensors is required (or --repeat K to time only)");
  return o;
}

int fail(const Status& s) {
  std::fprintf(stderr, "mlk run: %s\n", s.message().c_str());
  return s.exit_code();
}

}  // namespace

int run_run(const std::vector<std::string>& args) {
  auto opts = parse(args);
  if (!opts.ok()) return opts.status().code() == Status::Code::kUsage ? usage_error(command("run"), opts.status().message())
                                                                      : fail(opts.status());
  RunOptions& o = *opts;
  auto fe = compile_file(o.file);
  if (!fe.ok()) return fail(fe.status());
  if (!fe->ok()) {
    std::fputs(fe->rendered().c_str(), stderr);
    return 1;
  }
  const ir::Module& m = fe->module;
  if (o.fn.empty()) {
    std::vector<std::string> pub;
    for (const auto& f : m.functions)
      if (f.is_public) pub.push_back(f.name);
    if (pub.size() != 1) {
      std::string list;
      for (const auto& p : pub) list += (list.empty() ? "" : ", ") + p;
      return usage_error(command("run"), "--fn NAME is required: " + o.file + " has public fns " + (list.empty() ? "(none)" : list));
    }
    o.fn = pub[0];
  }
  const ir::Function* f = m.find(o.fn);
  if (!f) return fail(Status::NotFound(o.file + " has no fn `" + o.fn + "`"));
  auto tensors = read_safetensors(o.inputs);
  if (!tensors.ok()) return fail(tensors.status());
  std::vector<HostTensor> inputs;
  std::string names;
  for (const auto& p : f->params) names += (names.empty() ? "" : ", ") + p.name;
  for (const auto& p : f->params) {
    auto it = tensors->find(p.name);
    if (it == tensors->end())
      return fail(Status::InvalidArgument(o.inputs + " has no tensor \"" + p.name + "\" for parameter `" + p.name +
                                          "` of `" + f->name + "`"));
    inputs.push_back(it->second);
  }
  for (const auto& [name, t] : *tensors) {
    bool used = false;
    for (const auto& p : f->params) used = used || p.name == name;
    if (!used)
      return fail(Status::InvalidArgument(o.inputs + ": tensor \"" + name + "\" matches no parameter of `" + f->name +
                                          "` (parameters: " + names + ")"));
  }

  // The result (and, with --repeat, the buffer timed runs reuse) must fit in
  // memory next to the inputs, checked before it is allocated. When the shape
  // does not bind, the run below says why.
  {
    std::vector<std::vector<int64_t>> in_shapes;
    for (const auto& t : inputs) in_shapes.push_back(t.shape);
    auto b = bind_dims(*f, in_shapes, o.dims);
    std::string label = o.dims.empty() ? "the inputs of " + o.inputs : "--dims " + dims_label(o.dims);
    if (b.ok())
      if (Status s = check_memory_budget(*f, *b, 1, o.repeat > 0 ? 2 : 1, label); !s.ok()) return fail(s);
  }

  std::unique_ptr<Kernel> kernel;
  std::unique_ptr<LoadedArtifact> tuned;
  DimEnv env;
  std::string how = "reference interpreter";
  if (!o.reference) {
    auto profile = resolve_profile(o.target);
    if (!profile.ok()) return fail(profile.status());
    Runnable rn = can_run(*profile, detect_cpu(), detect_cuda());
    if (!rn.ok) return fail(Status::Unsupported("cannot run " + profile->name + " here: " + rn.reason));
    std::vector<std::vector<int64_t>> shapes;
    for (const auto& t : inputs) shapes.push_back(t.shape);
    auto bound = bind_dims(*f, shapes, o.dims);
    if (!bound.ok()) return fail(bound.status());
    env = *bound;
    // The shared resolver (runtime/resolve.h): the artifact tuned at this
    // shape, else at the nearest other shape (--cache may name a `mlk serve`:
    // then its entries count too), else, unless --require says otherwise,
    // the default schedule with the JIT.
    std::unique_ptr<client::CliCache> cc;
    if (!o.no_cache) {
      auto c = client::CliCache::Open(o.cache, o.ns, "mlk run", /*create_if_missing=*/false);
      if (!c.ok()) return fail(c.status());
      cc = std::move(c).value();
    }
    auto found = rt::find_tuned(cc.get(), o.ns, m, o.fn, ir::function_hash(m, *f), *profile, env, o.require, detect_cpu());
    if (found.ok()) {
      auto a = LoadedArtifact::LoadFiles(found->entry.files);
      if (!a.ok()) return fail(a.status());
      tuned = std::move(a).value();
      if (Status d = dump_stored(m, o.fn, *profile, env, found->entry.files, o.dump_after, stdout); !d.ok())
        return fail(d);
      how = "tuned artifact " + found->key.substr(0, 16) +
            (found->exact ? ", tuned at exactly " : ", tuned at the nearest shape ") + rt::dims_str(found->tuned_dims) +
            " on " + found->entry.info.manifest.provenance.host;
    } else if (found.status().code() != Status::Code::kNotFound) {
      return fail(found.status());
    } else if (o.require != rt::Require::kAny) {
      return fail(Status::NotFound(found.status().message() + " (--require " + rt::require_name(o.require) +
                                   "; run `mlk tune " + o.file + " --fn " + o.fn + " --target " + profile->name +
                                   " --dims " + rt::dims_str(env) + "` first)"));
    } else if (profile->is_gpu()) {
      return fail(Status::NotFound(found.status().message() + "; a CUDA profile has no JIT fallback: run `mlk tune " +
                                   o.file + " --target " + profile->name + " --fn " + o.fn + "` first, or use --target host"));
    } else {
      auto k = Kernel::CompileJit(m, o.fn, profile->name == "host" ? "host" : profile->halide_target, nullptr, env,
                                  o.dump_after, dump_to(stdout));
      if (!k.ok()) return fail(k.status());
      kernel = std::move(k).value();
      how = "default schedule (JIT), not tuned: " + found.status().message();
    }
  }
  std::fprintf(stderr, "mlk run: %s: %s\n", o.fn.c_str(), how.c_str());
  auto run_once = [&]() -> Expected<HostTensor> {
    if (o.reference) return interpret(m, o.fn, inputs, o.dims);
    if (tuned) return tuned->Run(*f, inputs, env);
    return kernel->Run(inputs, o.dims);
  };
  auto result = run_once();
  if (!result.ok()) return fail(result.status());
  if (o.repeat > 0) {
    // Timed runs write into one reused buffer: the kernel is timed, not the allocator.
    HostTensor reuse = *result;
    auto run_into = [&]() -> Status {
      if (o.reference) return run_once().status();
      if (tuned) return tuned->RunInto(*f, inputs, env, reuse);
      return kernel->RunInto(inputs, o.dims, reuse);
    };
    std::vector<double> ms;
    for (int64_t i = 0; i < o.repeat; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      Status r = run_into();
      auto t1 = std::chrono::steady_clock::now();
      if (!r.ok()) return fail(r);
      ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    std::printf("%s: median %.4f ms, min %.4f ms over %lld runs (%s)\n", o.fn.c_str(), ms[ms.size() / 2], ms.front(),
                static_cast<long long>(o.repeat), how.c_str());
  }
  if (!o.output.empty()) {
    Status s = write_safetensors(o.output, {{"output", *result}});
    if (!s.ok()) return fail(s);
    std::fprintf(stderr, "wrote %s: \"output\" %s %s\n", o.output.c_str(), dtype_name(result->dtype),
                 result->shape_str().c_str());
  }
  return 0;
}

}  // namespace mlk::cli
