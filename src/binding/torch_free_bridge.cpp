// The binding's side of the torch-free kernel objects (src/kernels/torch_free/torch_free.h).
//
// The kernels read the dropout RNG state as PhiloxState and report errors through raise_error /
// raise_cuda_error. This file, compiled against torch, converts torch's at::PhiloxCudaState into
// PhiloxState after proving at compile time that every member it reads exists in this torch with a
// type that fits ours (a torch that renamed or widened one fails here, in the binding's first
// minute, not at run time). The exact build only: the stable-ABI build has no torch Philox state
// (tensor_api_stable.h). The kernels' errors are kernel_errors.cpp's, in both builds.
#include "torch_free_bridge.h"

#include <cstdint>
#include <limits>
#include <type_traits>


namespace flash_attn_wheels {
namespace {

using TorchState = at::PhiloxCudaState;

static_assert(std::is_same_v<decltype(TorchState::Payload::val), uint64_t>, "torch's Philox seed/offset is not uint64_t");
static_assert(std::is_same_v<decltype(TorchState::Payload::ptr), int64_t*>,
              "torch's captured Philox seed/offset pointer is not int64_t*");
using TorchIntragraph = std::remove_cv_t<decltype(TorchState::offset_intragraph_)>;
static_assert(std::is_unsigned_v<TorchIntragraph> &&
                  std::numeric_limits<TorchIntragraph>::digits <= std::numeric_limits<uint64_t>::digits,
              "torch's offset_intragraph_ does not fit PhiloxState::offset_intragraph");
static_assert(std::is_same_v<decltype(TorchState::captured_), bool>, "torch's captured_ is not a bool");
static_assert(std::is_trivially_copyable_v<PhiloxState>, "PhiloxState travels in the kernel parameter block by value");

}  // namespace

PhiloxState kernel_philox_state(const at::PhiloxCudaState& state) {
  PhiloxState out{};
  out.captured = state.captured_;
  out.offset_intragraph = static_cast<uint64_t>(state.offset_intragraph_);
  if (state.captured_) {
    out.seed.pointer = state.seed_.ptr;
    out.offset.pointer = state.offset_.ptr;
  } else {
    out.seed.value = state.seed_.val;
    out.offset.value = state.offset_.val;
  }
  return out;
}

}  // namespace flash_attn_wheels
