// Kernel-side stand-in for torch's <ATen/cuda/CUDAGeneratorImpl.h> (see torch_free.h): upstream's
// flash.h includes it only for the type of Flash_fwd_params::philox_args.
#pragma once

#include "torch_free.h"

namespace at {
using PhiloxCudaState = ::flash_attn_wheels::PhiloxState;
}  // namespace at
