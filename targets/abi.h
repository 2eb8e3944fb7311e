/* mlk_abi.h: the stable C ABI of mlk kernel artifacts (version 1).
 *
 * Each public .tl function NAME is exported as
 *   int mlk_NAME(const mlk_tensor_t* args, int32_t nargs, mlk_tensor_t* out,
 *                const int64_t* dims, int32_t ndims);
 * args are the parameters in order; out must be allocated by the caller with
 * the result's shape; dims holds the values of the dimensions no parameter
 * binds, in the order manifest.json lists them ("unbound_dims"). Shapes and
 * strides count elements, outermost axis first (row-major order); strides may
 * be NULL for a contiguous row-major tensor. The entry checks counts, dtypes,
 * ranks, int32 extents, every extent of every argument and of the output
 * against the signature's symbolic shapes, and the refinements, before it
 * touches any data.
 * Returns MLK_OK (0), a negative MLK_ERR_* code, or a non-zero Halide error
 * code (for example when the output buffer is smaller than the result);
 * MLK_ERR_CPU when the kernel runs in AMX tiles and Linux refused the
 * process their state (the library asks at its first call);
 * mlk_last_error() describes the last failure of this thread. Through
 * mlk_NAME, CUDA artifacts take and return host memory: inputs are uploaded,
 * the result copied back and device copies released within the call.
 *
 * A fn with several results (manifest.json lists them under "results") is
 * exported instead as
 *   int mlk_NAME_results(const mlk_tensor_t* args, int32_t nargs, mlk_tensor_t* outs,
 *                        int32_t nouts, const int64_t* dims, int32_t ndims);
 * outs: nouts tensors, one per result in order (MLK_ERR_NARGS unless nouts is
 * their count), each checked like out; one call computes them all. The
 * manifest's entry_symbol names the entry an artifact exports.
 *
 * CUDA artifacts also export
 *   int mlk_NAME_cuda(const mlk_tensor_t* args, int32_t nargs, mlk_tensor_t* out,
 *                     const int64_t* dims, int32_t ndims, const mlk_cuda_call_t* call);
 * the same entry, where call->on_device[i] (args, then the output at index
 * nargs) says that tensor i's data is a CUDA device pointer (CUdeviceptr) on
 * call->device_id: it is wrapped as the kernel's device buffer, never copied,
 * and the output is left on the device. Host tensors in the same call are
 * copied as through mlk_NAME. The kernels run on call->stream (NULL: the
 * legacy default stream), asynchronously when every tensor is on the device:
 * the caller synchronises the stream before reading the result. They run in
 * call->context (NULL: the primary context of call->device_id, the one the
 * CUDA runtime and PyTorch use; mlk_NAME uses the primary context of
 * $MLK_CUDA_DEVICE, default 0). The CUDA driver is loaded on the first call
 * (libcuda.so.1); without it the call returns MLK_ERR_CUDA and says why.
 */
#ifndef MLK_ABI_H
#define MLK_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MLK_ABI_VERSION 1

typedef enum mlk_dtype {
  MLK_F16 = 0, MLK_BF16 = 1, MLK_F32 = 2, MLK_F64 = 3, MLK_I8 = 4,
  MLK_I16 = 5, MLK_I32 = 6, MLK_I64 = 7, MLK_U8 = 8, MLK_BOOL = 9
} mlk_dtype_t;

typedef struct mlk_tensor {
  void* data;
  int32_t dtype;          /* mlk_dtype_t */
  int32_t rank;
  const int64_t* shape;   /* rank extents */
  const int64_t* strides; /* rank strides in elements, or NULL */
} mlk_tensor_t;

enum {
  MLK_OK = 0,
  MLK_ERR_NARGS = -1,
  MLK_ERR_DTYPE = -2,
  MLK_ERR_RANK = -3,
  MLK_ERR_EXTENT = -4,
  MLK_ERR_NULL = -5,
  MLK_ERR_SHAPE = -6,      /* an extent disagrees with the signature */
  MLK_ERR_REFINEMENT = -7, /* the dimensions break a refinement */
  MLK_ERR_CUDA = -8,       /* no CUDA driver, device or context for a CUDA artifact */
  MLK_ERR_CPU = -9,        /* the OS refused the process a CPU state the kernel uses (AMX tiles) */
  MLK_ERR_ALLOC = -10      /* no memory for a weight's packed copy */
};

typedef struct mlk_cuda_call {
  int32_t device_id;        /* the CUDA device of the tensors on the device */
  int32_t reserved;         /* 0 */
  void* context;            /* CUcontext, or NULL: the primary context of device_id */
  void* stream;             /* CUstream, or NULL: the legacy default stream */
  const uint8_t* on_device; /* nargs + 1 flags (args, then out); NULL: all on the host */
} mlk_cuda_call_t;

int mlk_abi_version(void);
const char* mlk_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* MLK_ABI_H */
