// `mlk run`: computes one function of a .tl program on safetensors inputs
// and Arrow IPC streams (interop/run_inputs.h), with the compiled (Halide JIT)
// kernel or the reference interpreter.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>

#include <filesystem>

#include "base/stats.h"
#include "autotune/cached_tune.h"
#include "cache/paths.h"
#include "cli/args.h"
#include "cli/command.h"
#include "cli/dump_after.h"
#include "interop/run_inputs.h"
#include "spmd/launch.h"
#include "interop/tensor_files.h"
#include "lang/frontend.h"
#include "lang/interpreter.h"
#include "lang/ir_printer.h"
#include "lang/memory_budget.h"
#include "runtime/resolve.h"
#include "runtime/shipped.h"
#include "scheduler/kernel.h"
#include "client/cli_cache.h"
#include "targets/detect.h"
#include "artifact/loaded.h"
#include "base/signing.h"

namespace mlk::cli {

using inputs::read_run_inputs;
using spmd::check_spmd;
using spmd::launch_spmd;
using spmd::SpmdRun;

namespace {

struct RunOptions {
  std::string file, fn, output, target = "host", cache, ns = "default", namespaces;
  std::vector<std::string> inputs;  // --inputs, in order
  bool no_cache = false;
  std::map<std::string, int64_t> dims;
  Precision precision = Precision::kF32;  // --precision
  int64_t repeat = 0;
  int64_t ranks = 0, collective_timeout = 60;
  bool reference = false;
  rt::Require require = rt::Require::kAny;
  std::vector<std::string> trusted;  // --require signed:KEYS
  DumpStage dump_after = DumpStage::kNone;
};

const char* kRunEpilogue =
    "Dimensions are inferred from the input shapes and checked against the signature\n"
    "and its refinements; a mismatch names the parameter, axis and symbol. Exit status\n"
    "0 on success, 1 on a bad program or input (also inputs and outputs larger than\n"
    "this machine's memory, refused before anything is allocated), 2 on bad usage,\n"
    "3 on an internal error (a bug in mlk).\n";

// --require any|tuned|exact|signed:KEYS; signed implies tuned.
FlagSetter store_require(rt::Require& out, std::vector<std::string>& trusted) {
  return [&out, &trusted](const std::string& flag, const std::string& value) -> Status {
    if (value.rfind("signed:", 0) == 0) {
      auto keys = parse_trusted_keys(value.substr(7));
      if (!keys.ok()) return Status::Usage(flag + ": " + keys.status().message());
      trusted = *keys;
      out = rt::Require::kTuned;
      return Status::Ok();
    }
    auto r = rt::parse_require(value);
    if (!r.ok()) return Status::Usage(flag + ": " + r.status().message());
    out = *r;
    return Status::Ok();
  };
}

// --inputs: every occurrence is kept, in order.
FlagSetter append(std::vector<std::string>& out) {
  return [&out](const std::string&, const std::string& value) -> Status {
    out.push_back(value);
    return Status::Ok();
  };
}

CommandSpec spec(RunOptions& o) {
  return {
      .name = "run",
      .summary = "compute a fn on safetensors inputs or Arrow streams (Halide JIT or --reference)",
      .positionals = "FILE.tl",
      .description = "Computes fn NAME of FILE.tl on the tensors of IN.safetensors (and the columns of\n"
                     "IN.arrows streams) and writes its result as the tensor \"output\" of OUT.safetensors\n"
                     "(a fn with several results: \"output0\", \"output1\", .. in that one file).\n",
      .flags =
          {
              {.name = "--fn", .metavar = "NAME", .help = "the fn to run; may be omitted when the file has one public fn",
               .set = store(o.fn)},
              {.name = "--inputs", .metavar = "IN.safetensors|IN.arrows",
               .help = "one tensor per parameter, matched by name; dtypes must match exactly and every other tensor "
                       "in the file is an error. Repeatable: each parameter from exactly one file. A file ending in "
                       ".arrows is an Arrow IPC stream whose columns bind the parameters of their names, Tensor[T, "
                       "[N]] from a column of T and Tensor[T, [N, D]] from a FixedSizeList[T, D] column, with no null row; "
                       "for a fn with a Dataframe parameter the stream binds it, checked against its Schema "
                       "(NAME=IN.arrows names the parameter when there are several); stderr says that its columns "
                       "were copied into the input tensors (docs/interop/arrow.md)",
               .set = append(o.inputs), .required = true, .repeatable = true},
              {.name = "--output", .metavar = "OUT.safetensors",
               .help = "where to write the result (written atomically); required unless --repeat is given",
               .set = store(o.output)},
              {.name = "--dims", .metavar = "N=V,...",
               .help = "values of dimensions no input binds (and checks on the rest)", .set = store_dims(o.dims)},
              precision_flag(o.precision),
              {.name = "--target", .metavar = "PROFILE",
               .help = "the profile to run. From the artifact cache (re-hashed, then loaded): the artifact tuned "
                       "for PROFILE, this fn and exactly this shape; else the one tuned at the nearest other shape "
                       "(whose required CPU features this machine has); else, for a CPU profile, the default "
                       "schedule with Halide's JIT. stderr says which was run and why",
               .default_value = "host", .set = store(o.target)},
              {.name = "--require", .metavar = "any|tuned|exact|signed:KEYS",
               .help = "any: a tuned artifact, else the JIT fallback; tuned: refuse the JIT fallback; exact: refuse all "
                       "but an artifact tuned at exactly this shape (exit 1, naming what is missing); signed:KEYS: "
                       "only a tuned artifact signed by one of KEYS (Ed25519 public keys or KEY.pub files, "
                       "comma-separated; docs/signing.md), any other refused before it is loaded",
               .default_value = "any, or signed:$MLK_TRUSTED_SIGNERS when set", .set = store_require(o.require, o.trusted)},
              cache_flag(o.cache, CacheFlag::kStoreOrServer),
              {.name = "--namespace", .metavar = "NAME", .help = "the cache namespace to look in",
               .default_value = "default", .set = store(o.ns)},
              namespaces_flag(o.namespaces),
              {.name = "--no-cache", .help = "never consult the cache", .set = set_bool(o.no_cache)},
              {.name = "--repeat", .metavar = "K", .help = "run K more times and print the median and minimum time",
               .set = store_count(o.repeat)},
              {.name = "--reference", .help = "use the reference interpreter (double precision) instead",
               .set = set_bool(o.reference)},
              {.name = "--dump-after", .metavar = "STAGE",
               .help = "print, on stdout, the kernel's compile stage STAGE (for a tuned artifact: rebuilt from its "
                       "schedule up to code generation) and go on: ir (typed IR), stages (stage table), schedule "
                       "(applied schedule JSON), loops (Halide's loop nest)",
               .set = store_dump_stage(o.dump_after)},
              {.name = "--ranks", .metavar = "N",
               .help = "run a fn defined by `shard` on N local ranks (its mesh's size) with mpirun over loopback: "
                       "each rank takes its blocks of the inputs, runs the per-rank kernels and the collectives of "
                       "the fn's plan; rank 0 writes the result (phase-0/transforms.md)",
               .set = store_count(o.ranks)},
              {.name = "--collective-timeout", .metavar = "SECONDS",
               .help = "with --ranks: a collective not complete after SECONDS ends the run with an error naming it "
                       "(a rank died or hangs)",
               .default_value = "60", .set = store_count(o.collective_timeout)},
          },
      .epilogue = kRunEpilogue,
      .positional = one_positional(o.file, " (one .tl file per run)"),
      .no_positional = "no input file",
  };
}

// What the table cannot say: flags that exclude or need each other.
Status check_options(const RunOptions& o) {
  if (o.reference && o.dump_after != DumpStage::kNone)
    return Status::Usage("--dump-after shows a compiled kernel; --reference runs the interpreter");
  if (o.ranks > 0 && (o.reference || o.repeat > 0 || o.dump_after != DumpStage::kNone))
    return Status::Usage("--ranks runs the per-rank kernels; it takes none of --reference, --repeat, --dump-after");
  if (o.ranks > 0 && o.precision != Precision::kF32)
    return Status::Usage("--ranks runs the program as written; it takes no --precision");
  if (o.output.empty() && o.repeat == 0)
    return Status::Usage("--output OUT.safetensors is required (or --repeat K to time only)");
  return Status::Ok();
}

int fail(const Status& s) {
  std::fprintf(stderr, "mlk run: %s\n", s.message().c_str());
  return s.exit_code();
}

// The fn to run: --fn, else the program's only public fn. Status::Usage when
// neither names one.
Status select_fn(RunOptions& o, const ir::Module& m) {
  if (!o.fn.empty()) return Status::Ok();
  std::vector<std::string> pub;
  for (const auto& f : m.functions)
    if (f.is_public) pub.push_back(f.name);
  if (pub.size() != 1) {
    std::string list;
    for (const auto& p : pub) list += (list.empty() ? "" : ", ") + p;
    return Status::Usage("--fn NAME is required: " + o.file + " has public fns " + (list.empty() ? "(none)" : list));
  }
  o.fn = pub[0];
  return Status::Ok();
}

// The result (and, with --repeat, the buffer timed runs reuse) must fit in
// memory next to the inputs, checked before it is allocated. When the shape
// does not bind, this passes and the run says why.
Status check_result_memory(const RunOptions& o, const ir::Function& f, const std::vector<HostTensor>& inputs) {
  std::vector<std::vector<int64_t>> in_shapes;
  for (const auto& t : inputs) in_shapes.push_back(t.shape);
  auto b = bind_dims(f, in_shapes, o.dims);
  std::string files;
  for (const auto& in : o.inputs) files += (files.empty() ? "" : ", ") + in;
  std::string label = o.dims.empty() ? "the inputs of " + files : "--dims " + dims_label(o.dims);
  if (!b.ok()) return Status::Ok();
  return check_memory_budget(f, *b, 1, o.repeat > 0 ? 2 : 1, label);
}

// What computes the fn: the reference interpreter (neither pointer set), a
// tuned artifact, or a kernel with the default schedule; `how` says which.
struct Executor {
  std::unique_ptr<Kernel> kernel;
  std::unique_ptr<LoadedArtifact> tuned;
  DimEnv env;
  std::string how = "reference interpreter";
};

// The compiled executor for `f` on --target. The shared resolver
// (runtime/resolve.h): the artifact tuned at this shape, else at the nearest
// other shape (--cache may name a `mlk serve`: then its entries count too),
// else, unless --require says otherwise, the default schedule with the JIT.
Expected<Executor> compile_executor(const RunOptions& o, const ir::Module& m, const ir::Function& f,
                                    const std::vector<HostTensor>& inputs) {
  Executor ex;
  auto profile = resolve_profile(o.target);
  if (!profile.ok()) return profile.status();
  Runnable rn = can_run(*profile, detect_cpu(), detect_cuda());
  if (!rn.ok) return Status::Unsupported("cannot run " + profile->name + " here: " + rn.reason);
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& t : inputs) shapes.push_back(t.shape);
  auto bound = bind_dims(f, shapes, o.dims);
  if (!bound.ok()) return bound.status();
  ex.env = *bound;
  std::unique_ptr<client::CliCache> cc;
  if (!o.no_cache) {
    auto c = client::CliCache::Open(o.cache, o.ns, "mlk run", /*create_if_missing=*/false, "", o.namespaces);
    if (!c.ok()) return c.status();
    cc = std::move(c).value();
  }
  // The shared resolver (runtime/resolve.h): the tuned artifact, else under
  // --require any the default schedule of this profile by the JIT.
  auto res = rt::resolve_executable({.lookup = {.cache = cc.get(),
                                                .ns = o.ns,
                                                .module = &m,
                                                .fn = o.fn,
                                                .fhash = ir::function_hash(m, f),
                                                .dims = ex.env,
                                                .require = o.require,
                                                .trusted = o.trusted,
                                                .cpu = detect_cpu()},
                                     .profiles = {*profile},
                                     .cuda = detect_cuda(),
                                     .jit_fallback = o.require == rt::Require::kAny});
  if (!res.ok()) return res.status();
  if (res->tuned) {
    const rt::Tuned& found = *res->tuned;
    auto a = LoadedArtifact::LoadFiles(found.entry.files);
    if (!a.ok()) return a.status();
    ex.tuned = std::move(a).value();
    const DumpRequest dump{.module = &m, .fn = o.fn, .profile = *profile, .dims = ex.env, .stage = o.dump_after};
    if (Status d = dump_stored(dump, found.entry.files); !d.ok()) return d;
    ex.how = "tuned artifact " + found.key.substr(0, 16) +
             (found.exact ? ", tuned at exactly " : ", tuned at the nearest shape ") + dims_str(found.tuned_dims) +
             " on " + found.entry.info.manifest.provenance.host +
             (found.signer.empty() ? "" : ", signed by key " + found.signer);
    return ex;
  }
  // The one profile runs here (checked above): its line is find_tuned's reason.
  const std::string reason = res->rejected.at(0).substr(profile->name.size() + 2);
  if (res->jit) {
    // A schedule shipped for this machine's family (runtime/shipped.h), as
    // the runtime chooses it; one Halide refuses gives way to the default.
    auto found = rt::shipped_for(res->profile.name, ir::function_hash(m, f), precision_name(o.precision), ex.env,
                                 detect_cpu());
    if (!found.ok()) return found.status();
    const std::optional<rt::ShippedChoice>& shipped = *found;
    std::string refused;
    if (shipped) {
      auto s = Schedule::from_json(shipped->entry.schedule);
      auto k = s.ok() ? Kernel::CompileJit(m, o.fn, res->profile, &*s, ex.env, o.dump_after, dump_to(stdout))
                      : Expected<std::unique_ptr<Kernel>>(Status::InvalidArgument(s.status().message()));
      if (k.ok()) {
        ex.kernel = std::move(k).value();
        ex.how = "shipped schedule (JIT), tuned at " + dims_str(shipped->entry.dims) + ", " +
                 shipped->entry.provenance + "; " + reason;
        return ex;
      }
      // As the runtime: only a schedule refused gives way to the default.
      if (k.status().code() != Status::Code::kInvalidArgument) return k.status();
      refused = "; the shipped schedule tuned at " + dims_str(shipped->entry.dims) +
                " was refused: " + k.status().message().substr(0, 300);
    }
    auto k = Kernel::CompileJit(m, o.fn, res->profile, nullptr, ex.env, o.dump_after, dump_to(stdout));
    if (!k.ok()) return k.status();
    ex.kernel = std::move(k).value();
    ex.how = "default schedule (JIT), not tuned: " + reason + refused;
    return ex;
  }
  if (o.require == rt::Require::kAny)  // a CUDA profile: no default schedule
    return Status::NotFound(reason + "; a CUDA profile has no JIT fallback: run `mlk tune " + o.file + " --target " +
                            profile->name + precision_flag_text(o.precision) + " --fn " + o.fn +
                            "` first, or use --target host");
  if (!o.trusted.empty())
    return Status::NotFound(reason + " (--require signed: only an artifact signed by a trusted key is loaded)");
  return Status::NotFound(reason + " (--require " + rt::require_name(o.require) + "; run `mlk tune " + o.file +
                          " --fn " + o.fn + " --target " + profile->name + precision_flag_text(o.precision) +
                          " --dims " + dims_str(ex.env) + "` first)");
}

// One run of the fn on its inputs, by whichever executor was chosen.
struct Computation {
  const RunOptions& o;
  const ir::Module& m;
  const ir::Function& f;
  const std::vector<HostTensor>& inputs;
  Executor& ex;

  // Every result of the fn (one, but for a fn with several).
  Expected<std::vector<HostTensor>> run_once() const {
    if (o.reference) return interpret_all(m, o.fn, inputs, o.dims);
    std::vector<HostTensor> out(f.results().size());
    MLK_RETURN_IF_ERROR(run_into(out));
    return out;
  }
  // The same into `reuse`, so that timed runs time the kernel, not the allocator.
  Status run_into(std::vector<HostTensor>& reuse) const {
    if (o.reference) return run_once().status();
    if (ex.tuned) return ex.tuned->RunAllInto(f, inputs, ex.env, reuse);
    return ex.kernel->RunAllInto(inputs, o.dims, reuse);
  }
};

// --repeat K: K timed runs into one reused buffer (a copy of `first`); prints
// their median and minimum on stdout.
Status time_runs(const Computation& c, const std::vector<HostTensor>& first) {
  std::vector<HostTensor> reuse = first;
  std::vector<double> ms;
  for (int64_t i = 0; i < c.o.repeat; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    Status r = c.run_into(reuse);
    auto t1 = std::chrono::steady_clock::now();
    if (!r.ok()) return r;
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::printf("%s: median %.4f ms, min %.4f ms over %lld runs (%s)\n", c.o.fn.c_str(), median(ms),
              *std::min_element(ms.begin(), ms.end()), static_cast<long long>(c.o.repeat), c.ex.how.c_str());
  return Status::Ok();
}

// --output: the result as the safetensors tensor "output"; the results of a
// fn with several as "output0", "output1", .. in one file.
Status write_output(const std::string& path, const std::vector<HostTensor>& results) {
  std::map<std::string, HostTensor> named;
  for (size_t i = 0; i < results.size(); ++i)
    named[results.size() == 1 ? "output" : "output" + std::to_string(i)] = results[i];
  Status s = write_safetensors(path, named);
  if (!s.ok()) return s;
  for (const auto& [name, t] : named)
    std::fprintf(stderr, "wrote %s: \"%s\" %s %s\n", path.c_str(), name.c_str(), dtype_name(t.dtype),
                 t.shape_str().c_str());
  return Status::Ok();
}

}  // namespace

CommandSpec run_spec() {
  static RunOptions scratch;
  return spec(scratch);
}

int run_run(const std::vector<std::string>& args) {
  RunOptions o;
  if (int bad = parse_or_usage_error(spec(o), args)) return bad;
  if (Status s = check_options(o); !s.ok()) return usage_error("run", s.message());
  if (o.trusted.empty() && !o.no_cache) {  // $MLK_TRUSTED_SIGNERS: the machine's default policy
    auto keys = default_trusted_signers();
    if (!keys.ok()) return usage_error("run", keys.status().message());
    if (!keys->empty()) {
      o.trusted = *keys;
      if (o.require == rt::Require::kAny) o.require = rt::Require::kTuned;
    }
  }
  auto fe = compile_file(o.file);
  if (!fe.ok()) return fail(fe.status());
  if (!fe->ok()) {
    std::fputs(fe->rendered().c_str(), stderr);
    return 1;
  }
  fe->module = with_precision(fe->module, o.precision);
  const ir::Module& m = fe->module;
  if (Status s = select_fn(o, m); !s.ok()) return usage_error("run", s.message());
  const ir::Function* f = m.find(o.fn);
  if (!f) return fail(Status::NotFound(o.file + " has no fn `" + o.fn + "`"));
  std::vector<std::string> stream_notes;
  auto inputs = read_run_inputs(o.inputs, *f, o.dims, &stream_notes);
  if (!inputs.ok()) return fail(inputs.status());
  for (const auto& note : stream_notes) std::fprintf(stderr, "mlk run: %s\n", note.c_str());
  if (Status s = check_result_memory(o, *f, *inputs); !s.ok()) return fail(s);
  if (o.ranks > 0) {
    SpmdRun r{o.file, o.fn, o.output, o.cache, o.ns, o.no_cache, o.inputs, o.dims, o.ranks,
              static_cast<double>(o.collective_timeout), o.namespaces, o.trusted};
    if (!o.trusted.empty() && o.no_cache)
      return usage_error("run", "--require signed: loads signed artifacts from the cache; it cannot go with --no-cache");
    if (Status s = check_spmd(r, m); !s.ok()) return usage_error("run", s.message());
    if (!o.namespaces.empty() && !o.no_cache) {  // the ranks read it from $MLK_NAMESPACES: checked here, once
      auto c = client::CliCache::Open(o.cache, o.ns, "mlk run", /*create_if_missing=*/false, "", o.namespaces);
      if (!c.ok()) return fail(c.status());
    }
    if (Status s = launch_spmd(r, m); !s.ok()) return fail(s);
    return 0;
  }

  Executor ex;
  if (!o.reference) {
    auto compiled = compile_executor(o, m, *f, *inputs);
    if (!compiled.ok()) return fail(compiled.status());
    ex = std::move(compiled).value();
  }
  std::fprintf(stderr, "mlk run: %s: %s\n", o.fn.c_str(), ex.how.c_str());
  const Computation c{o, m, *f, *inputs, ex};
  auto result = c.run_once();
  if (!result.ok()) return fail(result.status());
  if (o.repeat > 0)
    if (Status s = time_runs(c, *result); !s.ok()) return fail(s);
  if (!o.output.empty())
    if (Status s = write_output(o.output, *result); !s.ok()) return fail(s);
  return 0;
}

}  // namespace mlk::cli
