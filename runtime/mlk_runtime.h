/* mlk_runtime.h: the stable C ABI of the mlk runtime (version 1).
 *
 * Pretuned kernels from an artifact cache (a store file or a `mlk serve`
 * URL), chosen per machine by a target policy, run on DLPack tensors
 * (dlpack.h, DLPACK_VERSION 60 and later) after loud boundary checks:
 * device (CPU kernels: kDLCPU; CUDA kernels: kDLCUDA on the process's CUDA
 * device, used in place, or host memory, copied each way), dtype, rank, every extent against the signature's symbols,
 * refinements, compact row-major strides, alignment, and an output disjoint
 * from every argument. On any violation nothing is written and the call
 * returns a negative MLK_RT_ERR_* code; mlk_runtime_last_error() names the
 * argument, axis and rule (thread-local, valid until this thread's next
 * call).
 *
 * Ownership: the runtime owns its kernels; a kernel handle is valid until
 * mlk_runtime_close(). All functions are thread-safe. Tensors stay owned by
 * the caller; the output is allocated by the caller (mlk_kernel_output_shape
 * says its shape; its dtype is the fn's result dtype).
 */
#ifndef MLK_RUNTIME_H
#define MLK_RUNTIME_H

#include <dlpack/dlpack.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MLK_RUNTIME_ABI_VERSION 1

typedef struct mlk_runtime mlk_runtime_t;
typedef struct mlk_kernel mlk_kernel_t;

enum {
  MLK_RT_OK = 0,
  MLK_RT_ERR_INVALID = -1,     /* a bad argument: tensor, dims, policy, program */
  MLK_RT_ERR_NOT_FOUND = -2,   /* no artifact, no fn, no file */
  MLK_RT_ERR_CORRUPT = -3,     /* stored bytes fail their hash: not loaded */
  MLK_RT_ERR_IO = -4,          /* the store or the server cannot be read */
  MLK_RT_ERR_UNSUPPORTED = -5, /* nothing this machine can run */
  MLK_RT_ERR_INTERNAL = -6
};

int mlk_runtime_abi_version(void);
const char* mlk_runtime_last_error(void);

/* cache: a store path or http://HOST:PORT (NULL or "": $MLK_CACHE, else the
 * default store); ns: the namespace (NULL: "default"); token: bearer token
 * for a server (NULL: $MLK_TOKEN). */
int mlk_runtime_open(const char* cache, const char* ns, const char* token, mlk_runtime_t** out);
void mlk_runtime_close(mlk_runtime_t* rt);

/* The kernel of fn `fn` of a program, given by its file (program_file) or by
 * the fn's program hash (`mlk check --hash`; program_file NULL). targets: the
 * policy, profiles best first ("cuda_sm90,host"; NULL: "host"), optionally
 * followed by ";require=tuned" or ";require=exact", ";require=verified:LEVELS"
 * and ";require=signed:KEYS" (Ed25519 public keys, 64 hex, or KEY.pub files,
 * comma-separated: only an artifact one of them signed is loaded; any other is
 * refused before it is opened, MLK_RT_ERR_NOT_FOUND, and the last error names
 * the entry and its signer; docs/signing.md). dims: the shape to select
 * the artifact for ("B=1,S=128,D=4096": every dimension variable). The
 * artifact tuned at exactly that shape is taken, else the one tuned at the
 * nearest other shape, else (unless require says otherwise) the default
 * schedule compiled by Halide's JIT (the plugin libmlk_jit.so, loaded on
 * first use; MLK_RT_ERR_NOT_FOUND when it cannot be: docs/runtime.md);
 * mlk_kernel_selection() says which. The kernel runs at every shape its
 * signature admits. */
int mlk_runtime_get_kernel(mlk_runtime_t* rt, const char* program_file, const char* program_hash, const char* fn,
                           const char* targets, const char* dims, mlk_kernel_t** out);

/* Which profile and artifact the kernel runs, and why the policy's earlier
 * profiles were passed over. Owned by the kernel. */
const char* mlk_kernel_selection(const mlk_kernel_t* k);
const char* mlk_kernel_profile(const mlk_kernel_t* k);

/* The result's rank and shape for these arguments (checked as a run checks
 * them); shape must hold max_rank entries. */
int mlk_kernel_output_shape(const mlk_kernel_t* k, const DLTensor* const* args, int32_t nargs, int64_t* shape,
                            int32_t max_rank, int32_t* rank);

int mlk_kernel_run(const mlk_kernel_t* k, const DLTensor* const* args, int32_t nargs, DLTensor* out);

/* mlk_kernel_run on a CUDA stream (a CUstream; NULL: the legacy default
 * stream) for a CUDA kernel; a CPU kernel ignores it. Device tensors
 * (kDLCUDA) must be on the device of the process's one CUDA context: the
 * primary context of $MLK_CUDA_DEVICE (default 0), which PyTorch and the
 * CUDA runtime share. With every tensor on the device the call only queues
 * the work: synchronise the stream before reading the result. The CUDA
 * driver is loaded on first use; without it the call returns
 * MLK_RT_ERR_UNSUPPORTED and says so. */
int mlk_kernel_run_on_stream(const mlk_kernel_t* k, const DLTensor* const* args, int32_t nargs, DLTensor* out,
                             void* cuda_stream);

/* 1 when the kernel is a CUDA artifact (it takes kDLCUDA tensors), else 0. */
int mlk_kernel_on_cuda(const mlk_kernel_t* k);

/* Fns with several results (`-> (T, U, ..)`, or one value_and_grad or vjp
 * fn). mlk_kernel_output_shape and mlk_kernel_run refuse such a fn
 * (MLK_RT_ERR_INVALID); these take any fn. */

/* How many results the kernel's fn has (1 for most; 0 for a NULL kernel). */
int32_t mlk_kernel_num_results(const mlk_kernel_t* k);

/* The rank and shape of result `index` (0-based) for these arguments. */
int mlk_kernel_result_shape(const mlk_kernel_t* k, const DLTensor* const* args, int32_t nargs, int32_t index,
                            int64_t* shape, int32_t max_rank, int32_t* rank);

/* Runs once into `outs`, one caller-allocated tensor per result, in order
 * (nouts = mlk_kernel_num_results), each checked as mlk_kernel_run checks its
 * output and none sharing memory with an argument or another output. CPU
 * kernels only. */
int mlk_kernel_run_all(const mlk_kernel_t* k, const DLTensor* const* args, int32_t nargs, DLTensor* const* outs,
                       int32_t nouts);

#ifdef __cplusplus
}
#endif

#endif /* MLK_RUNTIME_H */
