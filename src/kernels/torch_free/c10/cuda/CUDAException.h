// Kernel-side stand-in for torch's <c10/cuda/CUDAException.h> (see torch_free.h): upstream's
// launchers check cudaFuncSetAttribute and each launch with these two macros.
#pragma once

#include <cuda_runtime_api.h>

#include "torch_free.h"

#define C10_CUDA_CHECK(expression)                                                             \
  do {                                                                                         \
    const cudaError_t flash_attn_status_ = (expression);                                       \
    if (flash_attn_status_ != cudaSuccess) {                                                   \
      ::flash_attn_wheels::raise_cuda_error(flash_attn_status_, FLASH_ATTN_SOURCE_NAME, __LINE__); \
    }                                                                                          \
  } while (false)

#define C10_CUDA_KERNEL_LAUNCH_CHECK() C10_CUDA_CHECK(cudaGetLastError())
