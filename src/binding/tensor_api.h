// The tensor operations the binding uses, over one of two torch C++ APIs.
//
// The operator implementations (fwd.cpp, bwd.cpp, kvcache.cpp, params.cpp) are written once against
// the names declared here, in namespace flash_attn_wheels::binding:
//   Tensor, Device, DeviceIndex, DType (c10::ScalarType, header-only in both APIs), the dtype
//   constants kHalf/kBFloat16/kFloat/kInt/kLong, IntList (a borrowed list of int64 sizes);
//   alloc/alloc_zeros(IntList, DType, Device), alloc_like, as_contiguous, zero_out, fill_with,
//   narrowed, reshaped, to_device, sum_into (names of our own: torch's would be found by ADL too);
//   DeviceGuard (makes a CUDA device current for a scope), current_stream, device_name (the
//   spelling of a device in messages), fail (throws the operator error), draw_philox (the
//   forward's dropout seed and offset from torch's generator), clear_probability_padding and
//   lengths_of; for both, in message_parts.h (each backend includes it after device_name):
//   shape_text/device_text (message parts formatted only on failure); here, for both:
//   stride_from_end, has_sizes.
// Two implementations, chosen by the build (cmake option FLASH_ATTN_TORCH_ABI):
//   exact  (tensor_api_aten.h)   ATen and c10, for one exact torch version (TORCH_LIBRARY);
//   stable (tensor_api_stable.h) torch's stable ABI only (torch/csrc/stable, torch/headeronly), for
//          every torch from TORCH_TARGET_VERSION on (STABLE_TORCH_LIBRARY); CMake defines
//          FLASH_ATTN_STABLE_ABI for it (cmake/FlashAttnTorchAbi.cmake).
// Both throw from fail() with the same text, so a message does not depend on the wheel's ABI.
#pragma once

#if defined(FLASH_ATTN_STABLE_ABI)
#include "tensor_api_stable.h"
#else
#include "tensor_api_aten.h"
#endif

#include <cstdint>
#include <ostream>

namespace flash_attn_wheels::binding {

// Stride of the k-th dimension from the end (k = 1: the last one) of a tensor of rank >= k (the
// callers check the rank first; a lower rank is a bug of the binding, not of the input).
inline int64_t stride_from_end(const Tensor& t, int64_t k) {
  if (t.dim() < k) fail("flash_attn: internal error: stride_from_end(", k, ") of a ", t.dim(), "-D tensor");
  return t.stride(t.dim() - k);
}

// True when t has exactly the sizes `want`.
inline bool has_sizes(const Tensor& t, IntList want) {
  if (static_cast<size_t>(t.dim()) != want.size()) return false;
  for (size_t i = 0; i < want.size(); ++i) {
    if (t.size(static_cast<int64_t>(i)) != want[i]) return false;
  }
  return true;
}

}  // namespace flash_attn_wheels::binding
