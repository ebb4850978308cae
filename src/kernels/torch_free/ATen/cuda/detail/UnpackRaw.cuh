// Kernel-side stand-in for torch's <ATen/cuda/detail/UnpackRaw.cuh> (see torch_free.h): the
// forward kernel's (seed, offset) for dropout, read from the Philox state on the device.
#pragma once

#include <tuple>

#include "torch_free.h"

namespace at::cuda::philox {

// (seed, offset). A captured state points at device words that the CUDA graph updates per replay;
// its per-capture increment is added to the base offset.
__host__ __device__ inline std::tuple<uint64_t, uint64_t> unpack(const ::flash_attn_wheels::PhiloxState& state) {
  if (!state.captured) {
    return std::make_tuple(state.seed.value, state.offset.value);
  }
  const uint64_t seed = static_cast<uint64_t>(*state.seed.pointer);
  const uint64_t offset = static_cast<uint64_t>(*state.offset.pointer) + state.offset_intragraph;
  return std::make_tuple(seed, offset);
}

}  // namespace at::cuda::philox
