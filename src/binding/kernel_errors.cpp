// The errors of the torch-free kernel objects (src/kernels/torch_free/torch_free.h declares
// raise_error and raise_cuda_error; the kernels' launchers call them), thrown through the binding's
// fail() (tensor_api.h), so they reach Python as RuntimeError in both torch ABIs.
#include <cuda_runtime_api.h>

#include "tensor_api.h"
#include "torch_free/torch_free.h"

namespace flash_attn_wheels {

void raise_error(const char* message) { binding::fail(message); }

void raise_cuda_error(cudaError_t error, const char* file, int line) {
  binding::fail("flash_attn: CUDA error ", cudaGetErrorName(error), " (", cudaGetErrorString(error), ") at ", file,
                ":", line,
                ". CUDA reports kernel errors asynchronously, so the failing call may be an earlier one; rerun with "
                "CUDA_LAUNCH_BLOCKING=1 to find it.");
}

}  // namespace flash_attn_wheels
