// The C ABI (mlk_runtime.h) over the C++ runtime. No exception crosses it.
#include "runtime/mlk_runtime.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "runtime/runtime.h"

using mlk::Status;

struct mlk_kernel {
  std::shared_ptr<const mlk::rt::Kernel> k;
  std::string selection, profile;
};

struct mlk_runtime {
  std::unique_ptr<mlk::rt::Runtime> rt;
  std::mutex mu;  // guards handles
  std::map<const mlk::rt::Kernel*, std::unique_ptr<mlk_kernel>> handles;  // one per kernel, freed by close
};

namespace {

thread_local std::string g_last_error;

int code_of(const Status& s) {
  g_last_error = s.message();
  switch (s.code()) {
    case Status::Code::kOk: return MLK_RT_OK;
    case Status::Code::kNotFound: return MLK_RT_ERR_NOT_FOUND;
    case Status::Code::kCorruption: return MLK_RT_ERR_CORRUPT;
    case Status::Code::kIOError: return MLK_RT_ERR_IO;
    case Status::Code::kUnsupported: return MLK_RT_ERR_UNSUPPORTED;
    case Status::Code::kInternal: return MLK_RT_ERR_INTERNAL;
    default: return MLK_RT_ERR_INVALID;
  }
}

int invalid(const std::string& m) { return code_of(Status::InvalidArgument(m)); }

template <typename F>
int guarded(F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return code_of(Status::Internal(std::string("mlk runtime: ") + e.what()));
  } catch (...) {
    return code_of(Status::Internal("mlk runtime: unknown exception"));
  }
}

std::vector<const DLTensor*> arg_list(const DLTensor* const* args, int32_t nargs) {
  return std::vector<const DLTensor*>(args, args + nargs);
}

}  // namespace

extern "C" {

int mlk_runtime_abi_version(void) { return MLK_RUNTIME_ABI_VERSION; }

const char* mlk_runtime_last_error(void) { return g_last_error.c_str(); }

int mlk_runtime_open(const char* cache, const char* ns, const char* token, mlk_runtime_t** out) {
  return guarded([&]() -> int {
    if (!out) return invalid("mlk_runtime_open: out is NULL");
    *out = nullptr;
    mlk::rt::Options o;
    o.cache = cache ? cache : "";
    o.ns = ns && *ns ? ns : "default";
    o.token = token ? token : "";
    auto rt = mlk::rt::Runtime::Open(o);
    if (!rt.ok()) return code_of(rt.status());
    *out = new mlk_runtime;
    (*out)->rt = std::move(rt).value();
    return MLK_RT_OK;
  });
}

void mlk_runtime_close(mlk_runtime_t* rt) { delete rt; }

int mlk_runtime_get_kernel(mlk_runtime_t* rt, const char* program_file, const char* program_hash, const char* fn,
                           const char* targets, const char* dims, mlk_kernel_t** out) {
  return guarded([&]() -> int {
    if (!out) return invalid("mlk_runtime_get_kernel: out is NULL");
    *out = nullptr;
    if (!rt || !fn) return invalid("mlk_runtime_get_kernel: runtime and fn must not be NULL");
    if ((program_file == nullptr) == (program_hash == nullptr))
      return invalid("mlk_runtime_get_kernel: give exactly one of program_file and program_hash");
    auto policy = mlk::rt::TargetPolicy::Parse(targets ? targets : "");
    if (!policy.ok()) return code_of(policy.status());
    auto d = mlk::parse_dim_list(dims ? dims : "");
    if (!d.ok()) return invalid(std::string("dims `") + (dims ? dims : "") + "`: " + d.status().message());
    auto k = program_file ? rt->rt->GetKernel(program_file, fn, *policy, *d)
                          : rt->rt->GetKernelByHash(program_hash, fn, *policy, *d);
    if (!k.ok()) return code_of(k.status());
    std::lock_guard<std::mutex> lock(rt->mu);
    auto& h = rt->handles[k->get()];
    if (!h) h.reset(new mlk_kernel{*k, (*k)->selection().explain(), (*k)->selection().profile});
    *out = h.get();
    return MLK_RT_OK;
  });
}

const char* mlk_kernel_selection(const mlk_kernel_t* k) { return k ? k->selection.c_str() : ""; }
const char* mlk_kernel_profile(const mlk_kernel_t* k) { return k ? k->profile.c_str() : ""; }

int mlk_kernel_output_shape(const mlk_kernel_t* k, const DLTensor* const* args, int32_t nargs, int64_t* shape,
                            int32_t max_rank, int32_t* rank) {
  return guarded([&]() -> int {
    if (!k || (!args && nargs) || nargs < 0 || !rank) return invalid("mlk_kernel_output_shape: NULL argument");
    auto s = k->k->OutputShape(arg_list(args, nargs));
    if (!s.ok()) return code_of(s.status());
    if (static_cast<int32_t>(s->size()) > max_rank || (!shape && !s->empty()))
      return invalid("mlk_kernel_output_shape: the result has rank " + std::to_string(s->size()) + ", max_rank is " +
                     std::to_string(max_rank));
    *rank = static_cast<int32_t>(s->size());
    for (size_t i = 0; i < s->size(); ++i) shape[i] = (*s)[i];
    return MLK_RT_OK;
  });
}

int mlk_kernel_run(const mlk_kernel_t* k, const DLTensor* const* args, int32_t nargs, DLTensor* out) {
  return guarded([&]() -> int {
    if (!k || (!args && nargs) || nargs < 0) return invalid("mlk_kernel_run: NULL kernel or arguments");
    return code_of(k->k->Run(arg_list(args, nargs), out));
  });
}

int mlk_kernel_run_on_stream(const mlk_kernel_t* k, const DLTensor* const* args, int32_t nargs, DLTensor* out,
                             void* cuda_stream) {
  return guarded([&]() -> int {
    if (!k || (!args && nargs) || nargs < 0) return invalid("mlk_kernel_run_on_stream: NULL kernel or arguments");
    mlk::rt::RunOptions o;
    o.cuda_stream = cuda_stream;
    return code_of(k->k->Run(arg_list(args, nargs), out, o));
  });
}

int mlk_kernel_on_cuda(const mlk_kernel_t* k) { return k && k->k->on_cuda() ? 1 : 0; }

int32_t mlk_kernel_num_results(const mlk_kernel_t* k) {
  return k ? static_cast<int32_t>(k->k->signature().results().size()) : 0;
}

int mlk_kernel_result_shape(const mlk_kernel_t* k, const DLTensor* const* args, int32_t nargs, int32_t index,
                            int64_t* shape, int32_t max_rank, int32_t* rank) {
  return guarded([&]() -> int {
    if (!k || (!args && nargs) || nargs < 0 || !rank) return invalid("mlk_kernel_result_shape: NULL argument");
    const int32_t n = static_cast<int32_t>(k->k->signature().results().size());
    if (index < 0 || index >= n)
      return invalid("mlk_kernel_result_shape: result " + std::to_string(index) + " of a fn with " +
                     std::to_string(n) + (n == 1 ? " result" : " results"));
    auto s = k->k->OutputShapes(arg_list(args, nargs));
    if (!s.ok()) return code_of(s.status());
    const std::vector<int64_t>& one = (*s)[static_cast<size_t>(index)];
    if (static_cast<int32_t>(one.size()) > max_rank || (!shape && !one.empty()))
      return invalid("mlk_kernel_result_shape: result " + std::to_string(index) + " has rank " +
                     std::to_string(one.size()) + ", max_rank is " + std::to_string(max_rank));
    *rank = static_cast<int32_t>(one.size());
    for (size_t i = 0; i < one.size(); ++i) shape[i] = one[i];
    return MLK_RT_OK;
  });
}

int mlk_kernel_run_all(const mlk_kernel_t* k, const DLTensor* const* args, int32_t nargs, DLTensor* const* outs,
                       int32_t nouts) {
  return guarded([&]() -> int {
    if (!k || (!args && nargs) || nargs < 0 || !outs || nouts < 0)
      return invalid("mlk_kernel_run_all: NULL kernel, arguments or outputs");
    const int32_t n = static_cast<int32_t>(k->k->signature().results().size());
    if (nouts != n)
      return invalid("mlk_kernel_run_all: `" + k->k->signature().name + "` has " + std::to_string(n) +
                     (n == 1 ? " result" : " results") + ", got " + std::to_string(nouts) + " outputs");
    return code_of(k->k->RunAll(arg_list(args, nargs), std::vector<DLTensor*>(outs, outs + nouts)));
  });
}

}  // extern "C"
