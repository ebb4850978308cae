// The binding's side of the torch-free kernel objects (src/kernels/torch_free/torch_free.h).
#pragma once

#include <ATen/cuda/CUDAGeneratorImpl.h>  // torch's at::PhiloxCudaState

#include "torch_free/torch_free.h"

namespace flash_attn_wheels {

// torch's Philox state as the kernels read it (PhiloxState), member by member: the seed and
// offset (values, or device pointers under CUDA graph capture), the per-capture increment and the
// captured flag. torch's own layout differs between torch versions, ours does not.
PhiloxState kernel_philox_state(const at::PhiloxCudaState& state);

}  // namespace flash_attn_wheels
