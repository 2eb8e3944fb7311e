// libmlk_jit.so: the JIT plugin of the runtime (the C ABI of
// artifact/jit_plugin.h) over scheduler/kernel.h. The only part of the
// runtime that links the compiler; exports nothing but the mlk_jit_* entries
// (artifact/mlk_jit.map).
#include "artifact/jit_plugin.h"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "artifact/build.h"
#include "base/status.h"
#include "lang/frontend.h"
#include "lang/ir_printer.h"
#include "lang/precision.h"
#include "scheduler/kernel.h"
#include "targets/detect.h"

struct mlk_jit_kernel {
  std::unique_ptr<mlk::Kernel> kernel;
};

namespace {

using mlk::Status;

int32_t fail(const Status& s, char** error) {
  if (error) *error = strdup(s.message().c_str());
  return s.ok() ? static_cast<int32_t>(Status::Code::kInternal) : static_cast<int32_t>(s.code());
}

mlk::DimEnv dims_of(const char* const* names, const int64_t* values, int32_t n) {
  mlk::DimEnv d;
  for (int32_t i = 0; i < n; ++i)
    if (names && names[i] && values) d[names[i]] = values[i];
  return d;
}

// What mlk_jit_compile and mlk_jit_build share: the program checked, the
// precision policy applied, the fn's hash checked and the profile resolved.
struct Checked {
  mlk::FrontendResult fe;  // its module is the program, the policy applied
  mlk::Profile profile;
  mlk::DimEnv dims;
  std::optional<mlk::Schedule> schedule;  // none: the profile's default
};

mlk::Expected<Checked> checked(const char* name, const char* text, const char* precision, const char* fn,
                               const char* fn_hash, const char* profile, const char* schedule,
                               const char* const* dim_names, const int64_t* dim_values, int32_t ndims,
                               const char* entry) {
  if (!name || !text || !precision || !fn || !fn_hash || !profile || ndims < 0 ||
      (ndims > 0 && (!dim_names || !dim_values)))
    return Status::InvalidArgument(std::string(entry) + ": a NULL argument or a negative dim count");
  mlk::FrontendResult r = mlk::compile_source(name, text);
  if (!r.ok()) return Status::InvalidArgument(std::string(name) + " does not check:\n" + r.rendered());
  auto policy = mlk::parse_precision(precision);
  if (!policy.ok()) return policy.status();
  r.module = mlk::with_precision(r.module, *policy);
  const mlk::ir::Function* f = r.module.find(fn);
  if (!f) return Status::NotFound(std::string(name) + " has no fn `" + fn + "`");
  if (mlk::ir::function_hash(r.module, *f) != fn_hash)
    return Status::InvalidArgument("fn `" + std::string(fn) + "` of " + name + " does not have program hash " +
                                   std::string(fn_hash).substr(0, 16) +
                                   " in the JIT plugin: the plugin is not of this runtime's mlk version");
  auto p = mlk::resolve_profile(profile);
  if (!p.ok()) return p.status();
  std::optional<mlk::Schedule> given;
  if (schedule && *schedule) {
    auto s = mlk::Schedule::from_json(schedule);
    if (!s.ok()) return Status::InvalidArgument("the schedule given for `" + std::string(fn) + "`: " + s.status().message());
    given = std::move(s).value();
  }
  return Checked{std::move(r), *p, dims_of(dim_names, dim_values, ndims), std::move(given)};
}

}  // namespace

extern "C" {

int32_t mlk_jit_abi_version(void) { return MLK_JIT_ABI_VERSION; }

int32_t mlk_jit_compile(const char* name, const char* text, const char* precision, const char* fn, const char* fn_hash,
                        const char* profile, const char* schedule, const char* const* dim_names, const int64_t* dim_values, int32_t ndims,
                        mlk_jit_kernel** kernel, char** error) {
  if (!kernel) return fail(Status::InvalidArgument("mlk_jit_compile: a NULL argument"), error);
  try {
    auto c = checked(name, text, precision, fn, fn_hash, profile, schedule, dim_names, dim_values, ndims,
                     "mlk_jit_compile");
    if (!c.ok()) return fail(c.status(), error);
    auto k = mlk::Kernel::CompileJit(c->fe.module, fn, c->profile, c->schedule ? &*c->schedule : nullptr, c->dims);
    if (!k.ok()) return fail(k.status(), error);
    *kernel = new mlk_jit_kernel{std::move(k).value()};
    return 0;
  } catch (const std::exception& e) {
    return fail(Status::Internal(std::string("the JIT plugin failed compiling `") + fn + "`: " + e.what()), error);
  } catch (...) {
    return fail(Status::Internal(std::string("the JIT plugin failed compiling `") + fn + "`"), error);
  }
}

int32_t mlk_jit_build(const char* name, const char* text, const char* precision, const char* fn, const char* fn_hash,
                      const char* profile, const char* schedule, const char* const* dim_names, const int64_t* dim_values, int32_t ndims,
                      const char* out_dir, int32_t pack_weights, char** error) {
  if (!out_dir) return fail(Status::InvalidArgument("mlk_jit_build: a NULL argument"), error);
  try {
    auto c = checked(name, text, precision, fn, fn_hash, profile, schedule, dim_names, dim_values, ndims,
                     "mlk_jit_build");
    if (!c.ok()) return fail(c.status(), error);
    mlk::BuildRequest req;
    req.module = &c->fe.module;
    req.fn = fn;
    req.profile = c->profile;
    req.dims = c->dims;
    req.schedule = c->schedule;
    req.out_dir = out_dir;
    req.pack_weights = pack_weights != 0;
    auto built = mlk::build_artifact(req);
    return built.ok() ? 0 : fail(built.status(), error);
  } catch (const std::exception& e) {
    return fail(Status::Internal(std::string("the JIT plugin failed building `") + fn + "`: " + e.what()), error);
  } catch (...) {
    return fail(Status::Internal(std::string("the JIT plugin failed building `") + fn + "`"), error);
  }
}

int32_t mlk_jit_call(mlk_jit_kernel* kernel, const mlk_tensor_t* args, int32_t nargs, mlk_tensor_t* outs,
                     int32_t nouts, const char* const* dim_names, const int64_t* dim_values, int32_t ndims,
                     char** error) {
  if (!kernel || !outs || nargs < 0 || (nargs > 0 && !args) || ndims < 0 || (ndims > 0 && (!dim_names || !dim_values)))
    return fail(Status::InvalidArgument("mlk_jit_call: a NULL argument or a negative count"), error);
  const size_t results = kernel->kernel->function().results().size();
  if (nouts < 0 || static_cast<size_t>(nouts) != results)
    return fail(Status::InvalidArgument("mlk_jit_call: `" + kernel->kernel->function().name + "` has " +
                                        std::to_string(results) + " results, got " + std::to_string(nouts) + " outputs"),
                error);
  try {
    std::vector<mlk_tensor_t> a(args, args + nargs);
    std::vector<mlk_tensor_t> o(outs, outs + nouts);
    Status s = kernel->kernel->CallAll(a, o, dims_of(dim_names, dim_values, ndims));
    return s.ok() ? 0 : fail(s, error);
  } catch (const std::exception& e) {
    return fail(Status::Internal(std::string("the JIT plugin failed running a kernel: ") + e.what()), error);
  } catch (...) {
    return fail(Status::Internal("the JIT plugin failed running a kernel"), error);
  }
}

void mlk_jit_release(mlk_jit_kernel* kernel) { delete kernel; }

void mlk_jit_free_error(char* error) { std::free(error); }

}  // extern "C"
