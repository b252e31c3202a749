// Status checks for every CUDA, cuDNN and cuBLAS call: a failure throws ge::Error naming the
// call, the file and the line, so a bad launch is never silently ignored.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "ganengine/error.h"

#define CUDA_CHECK(call)                                                                                              \
  do {                                                                                                                \
    cudaError_t ge_err_ = (call);                                                                                     \
    if (ge_err_ != cudaSuccess)                                                                                       \
      ::ge::fail("CUDA error ", cudaGetErrorName(ge_err_), " (", cudaGetErrorString(ge_err_), ") in ", #call, " at ", \
                 __FILE__, ":", __LINE__);                                                                            \
  } while (0)

#define CUDNN_CHECK(call)                                                                                      \
  do {                                                                                                         \
    cudnnStatus_t ge_st_ = (call);                                                                             \
    if (ge_st_ != CUDNN_STATUS_SUCCESS)                                                                        \
      ::ge::fail("cuDNN error ", cudnnGetErrorString(ge_st_), " in ", #call, " at ", __FILE__, ":", __LINE__); \
  } while (0)

#define CUBLAS_CHECK(call)                                                                                        \
  do {                                                                                                            \
    cublasStatus_t ge_st_ = (call);                                                                               \
    if (ge_st_ != CUBLAS_STATUS_SUCCESS)                                                                          \
      ::ge::fail("cuBLAS error ", cublasGetStatusString(ge_st_), " in ", #call, " at ", __FILE__, ":", __LINE__); \
  } while (0)

// After a kernel launch: catches bad launch configurations at the launch site.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
