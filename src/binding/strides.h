// Stride rules of torch's allocation functions, over plain arrays (no torch header), for the stable
// binding's allocations (tensor_api_stable.h): the stable ABI has no empty_like below the
// dispatcher, so the binding computes the strides that torch.empty_like would give and allocates
// with them. tests/unit/test_strides_h.py compiles this header alone and compares it with torch's
// own rule (torch._prims_common.is_non_overlapping_and_dense) on many layouts.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace flash_attn_wheels::binding {

// The largest rank these functions take (the binding's tensors have at most 5 dimensions).
inline constexpr size_t kMaxStridedRank = 8;

// Row-major (contiguous) strides of `sizes` into `out`, in elements; a size of 0 counts as 1, as in
// torch. `rank` <= kMaxStridedRank.
inline void contiguous_strides(const int64_t* sizes, size_t rank, int64_t* out) {
  int64_t stride = 1;
  for (size_t i = rank; i-- > 0;) {
    out[i] = stride;
    stride *= std::max<int64_t>(sizes[i], 1);
  }
}

// ATen's TensorImpl::is_non_overlapping_and_dense: a tensor of fewer than two elements is; else,
// with the dimensions sorted by stride (those of size 1 last), every stride is the product of the
// sizes before it. torch.empty_like keeps the strides of such a
// tensor (memory_format=preserve) and picks a memory format for any other. False for a rank above
// kMaxStridedRank (the caller then lets torch decide).
inline bool non_overlapping_and_dense(const int64_t* sizes, const int64_t* strides, size_t rank) {
  if (rank > kMaxStridedRank) return false;
  int64_t elements = 1;
  for (size_t i = 0; i < rank; ++i) elements *= sizes[i];
  if (elements < 2) return true;  // no or one element: dense with any strides
  if (rank == 1) return strides[0] == 1;
  size_t order[kMaxStridedRank];
  for (size_t i = 0; i < rank; ++i) order[i] = i;
  std::sort(order, order + rank, [&](size_t a, size_t b) {
    if (sizes[a] < 2) return false;
    if (sizes[b] < 2) return true;
    return strides[a] < strides[b];
  });
  int64_t required = 1;
  for (size_t i = 0; i < rank; ++i) {
    const int64_t size = sizes[order[i]];
    if (size < 2) return true;
    if (strides[order[i]] != required) return false;
    required *= size;
  }
  return true;
}

}  // namespace flash_attn_wheels::binding
