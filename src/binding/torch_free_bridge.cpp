// The binding's side of the torch-free kernel objects (src/kernels/torch_free/torch_free.h).
//
// The kernels read torch's Philox state through their own PhiloxState and report errors through
// raise_error / raise_cuda_error. This file, compiled against torch, proves at compile time that
// PhiloxState is laid out exactly like torch's at::PhiloxCudaState (the binding copies torch's
// state into Flash_fwd_params::philox_args as is), and turns the kernels' errors into c10::Error,
// which Python sees as RuntimeError.
#include <cstddef>
#include <type_traits>

#include <ATen/cuda/CUDAGeneratorImpl.h>  // torch's at::PhiloxCudaState
#include <c10/util/Exception.h>
#include <cuda_runtime_api.h>

#include "torch_free/torch_free.h"

namespace flash_attn_wheels {
namespace {

using TorchState = at::PhiloxCudaState;

static_assert(sizeof(TorchState) == sizeof(PhiloxState), "PhiloxState must have the size of at::PhiloxCudaState");
static_assert(alignof(TorchState) == alignof(PhiloxState),
              "PhiloxState must have the alignment of at::PhiloxCudaState");
static_assert(offsetof(TorchState, seed_) == offsetof(PhiloxState, seed), "seed moved in at::PhiloxCudaState");
static_assert(offsetof(TorchState, offset_) == offsetof(PhiloxState, offset), "offset moved in at::PhiloxCudaState");
static_assert(offsetof(TorchState, offset_intragraph_) == offsetof(PhiloxState, offset_intragraph),
              "offset_intragraph moved in at::PhiloxCudaState");
static_assert(offsetof(TorchState, captured_) == offsetof(PhiloxState, captured),
              "captured moved in at::PhiloxCudaState");
static_assert(sizeof(TorchState::Payload) == sizeof(PhiloxState::Word), "Payload is no longer one 64-bit word");
static_assert(std::is_same_v<decltype(TorchState::offset_intragraph_), uint32_t>, "offset_intragraph_ changed type");
static_assert(std::is_same_v<decltype(TorchState::captured_), bool>, "captured_ changed type");

}  // namespace

void raise_error(const char* message) { TORCH_CHECK(false, message); }

void raise_cuda_error(cudaError_t error, const char* file, int line) {
  TORCH_CHECK(false, "flash_attn: CUDA error ", cudaGetErrorName(error), " (", cudaGetErrorString(error), ") at ",
              file, ":", line,
              ". CUDA reports kernel errors asynchronously, so the failing call may be an earlier one; rerun with "
              "CUDA_LAUNCH_BLOCKING=1 to find it.");
}

}  // namespace flash_attn_wheels
