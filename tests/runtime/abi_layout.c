/* Prints the layouts and constants of the runtime's and the artifacts' C ABIs,
 * one per line, for the ABI snapshot test (abi_snapshot.sh). */
#include <stddef.h>
#include <stdio.h>

#include "runtime/mlk_runtime.h"
#include "targets/abi.h"

#define FIELD(T, f) printf("offsetof(%s, %s) = %zu\n", #T, #f, offsetof(T, f))
#define SIZE(T) printf("sizeof(%s) = %zu\n", #T, sizeof(T))
#define CONST(c) printf("%s = %d\n", #c, (int)(c))

int main(void) {
  SIZE(DLDevice);
  SIZE(DLDataType);
  SIZE(DLTensor);
  FIELD(DLTensor, data);
  FIELD(DLTensor, device);
  FIELD(DLTensor, ndim);
  FIELD(DLTensor, dtype);
  FIELD(DLTensor, shape);
  FIELD(DLTensor, strides);
  FIELD(DLTensor, byte_offset);
  SIZE(DLManagedTensor);
  CONST(MLK_RUNTIME_ABI_VERSION);
  CONST(MLK_RT_OK);
  CONST(MLK_RT_ERR_INVALID);
  CONST(MLK_RT_ERR_NOT_FOUND);
  CONST(MLK_RT_ERR_CORRUPT);
  CONST(MLK_RT_ERR_IO);
  CONST(MLK_RT_ERR_UNSUPPORTED);
  CONST(MLK_RT_ERR_INTERNAL);
  SIZE(mlk_tensor_t);
  FIELD(mlk_tensor_t, data);
  FIELD(mlk_tensor_t, dtype);
  FIELD(mlk_tensor_t, rank);
  FIELD(mlk_tensor_t, shape);
  FIELD(mlk_tensor_t, strides);
  CONST(MLK_ABI_VERSION);
  CONST(MLK_F16);
  CONST(MLK_BF16);
  CONST(MLK_F32);
  CONST(MLK_F64);
  CONST(MLK_I8);
  CONST(MLK_I16);
  CONST(MLK_I32);
  CONST(MLK_I64);
  CONST(MLK_U8);
  CONST(MLK_BOOL);
  SIZE(mlk_cuda_call_t);
  FIELD(mlk_cuda_call_t, device_id);
  FIELD(mlk_cuda_call_t, context);
  FIELD(mlk_cuda_call_t, stream);
  FIELD(mlk_cuda_call_t, on_device);
  CONST(MLK_ERR_CUDA);
  CONST(MLK_ERR_NARGS);
  CONST(MLK_ERR_DTYPE);
  CONST(MLK_ERR_RANK);
  CONST(MLK_ERR_EXTENT);
  CONST(MLK_ERR_NULL);
  CONST(MLK_ERR_SHAPE);
  CONST(MLK_ERR_REFINEMENT);
  CONST(MLK_ERR_CPU);
  CONST(MLK_ERR_ALLOC);
  return 0;
}
