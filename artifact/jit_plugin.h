/* The C ABI of the JIT plugin, libmlk_jit.so: the default schedule of a fn
 * compiled by Halide's JIT for this machine and called on mlk_tensor_t
 * arguments. The runtime (runtime/jit.h) loads the plugin with dlopen the
 * first time a kernel has no tuned artifact, so libmlk_runtime.so and the
 * Python module link neither Halide nor LLVM; the plugin links the
 * scheduler and libHalide.so.
 *
 * Contracts: no entry throws or aborts. A failing entry returns a non-zero
 * code, the value of the mlk::Status::Code it failed with, and sets *error
 * to a message the plugin allocated (free it with mlk_jit_free_error); on
 * success it returns 0 and leaves *error alone. A kernel is not thread-safe:
 * callers serialise the calls of one kernel. Dims are given as parallel
 * arrays of names and values.
 */
#ifndef MLK_JIT_PLUGIN_H
#define MLK_JIT_PLUGIN_H

#include <stdint.h>

#include "targets/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever an entry below changes; the runtime refuses another.
 * 3: mlk_jit_call takes one output per result of the fn, and their count.
 * 4: mlk_jit_compile takes a profile's name, not a Halide target string.
 * 5: mlk_jit_build.
 * 6: mlk_jit_compile and mlk_jit_build take a schedule (a shipped one).
 * 7: mlk_jit_build takes pack_weights. */
#define MLK_JIT_ABI_VERSION 7

typedef struct mlk_jit_kernel mlk_jit_kernel;

int32_t mlk_jit_abi_version(void);

/* Checks the program `text` (called `name` in messages), applies the
 * precision policy `precision` ("f32", "bf16" or "f16"; lang/precision.h),
 * checks that fn `fn` then has the program hash `fn_hash`
 * (ir::function_hash), and compiles it for the CPU profile named `profile`
 * ("host": this machine's, as detected; or a profile of `mlk targets` this
 * machine runs), for that profile's Halide target, extents estimated from
 * the dims, under `schedule`: a schedule's JSON as `mlk build --schedule`
 * reads it (a shipped schedule, runtime/shipped.h), or NULL or "" for the
 * profile's default schedule. A schedule Halide or the validator refuses is
 * InvalidArgument; the default is never refused. Sets *kernel on success. */
int32_t mlk_jit_compile(const char* name, const char* text, const char* precision, const char* fn, const char* fn_hash,
                        const char* profile, const char* schedule,
                        const char* const* dim_names, const int64_t* dim_values, int32_t ndims,
                        mlk_jit_kernel** kernel, char** error);

/* The same compile ahead of time: writes the artifact directory of fn `fn`
 * (as `mlk build -o out_dir` writes it: the shared library with the C ABI
 * entry, its header and manifest.json; docs/artifacts.md) under `schedule`
 * (as for mlk_jit_compile), into the directory `out_dir`, which exists and
 * is empty. pack_weights != 0: its products read weights packed
 * (docs/artifacts.md, "Packed weights"), as a model's kernels do.
 * Links with $CC, else `cc`: IOError when no C compiler links it. The
 * runtime keeps such directories in its JIT store, so that a later process
 * loads the kernel instead of compiling it again. */
int32_t mlk_jit_build(const char* name, const char* text, const char* precision, const char* fn, const char* fn_hash,
                      const char* profile, const char* schedule, const char* const* dim_names, const int64_t* dim_values, int32_t ndims,
                      const char* out_dir, int32_t pack_weights, char** error);

/* Runs the kernel on arguments the caller has checked (runtime/boundary.h)
 * into `outs`, one tensor per result of the fn (nouts must be their count);
 * the dims give every dimension variable of the fn. */
int32_t mlk_jit_call(mlk_jit_kernel* kernel, const mlk_tensor_t* args, int32_t nargs, mlk_tensor_t* outs,
                     int32_t nouts, const char* const* dim_names, const int64_t* dim_values, int32_t ndims,
                     char** error);

void mlk_jit_release(mlk_jit_kernel* kernel);
void mlk_jit_free_error(char* error);

#ifdef __cplusplus
}
#endif

#endif /* MLK_JIT_PLUGIN_H */
