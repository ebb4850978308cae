// tensor_api.h over ATen/c10: the binding of one exact torch version (FLASH_ATTN_TORCH_ABI=exact).
// Errors are c10::Error (RuntimeError in Python); the dropout generator is torch's default CUDA
// generator, graph-capture safe (its Philox state then points into the graph).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include <ATen/ATen.h>
#include <ATen/cuda/EmptyTensor.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/Exception.h>
#include <cuda_runtime_api.h>

#include "dtypes.h"  // DType and the dtype constants
#include "torch_free_bridge.h"  // kernel_philox_state: at::PhiloxCudaState -> PhiloxState

namespace flash_attn_wheels::binding {

using Tensor = at::Tensor;
using Device = c10::Device;
using DeviceIndex = c10::DeviceIndex;
using IntList = c10::IntArrayRef;

// Throws c10::Error whose message is the parts streamed one after another.
template <typename... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  TORCH_CHECK(false, parts...);
  std::abort();  // not reached: TORCH_CHECK(false, ...) throws
}

inline std::string device_name(const Device& d) { return d.str(); }

}  // namespace flash_attn_wheels::binding

#include "message_parts.h"  // shape_text, device_text (need IntList, Device, device_name)

namespace flash_attn_wheels::binding {

// CUDA tensors come straight from ATen's CUDA allocation functions (at::detail::empty_cuda and
// empty_strided_cuda, what the CUDA kernels of empty and empty_strided call): at::empty and
// at::empty_like would reach them through two or three dispatcher calls (an allocation: 2.0 against
// 1.4 us on an H200, bench/binding_cost.py api; a forward makes four). Under
// torch.use_deterministic_algorithms with torch.utils.deterministic.fill_uninitialized_memory (its
// default), the dispatcher's path is kept: it fills new tensors with NaN, which shows any element
// an operator leaves unwritten (the varlen out/LSE rows past cu_seqlens_q[-1], for one).
inline bool fills_new_tensors() {
  return at::globalContext().deterministicAlgorithms() && at::globalContext().deterministicFillUninitializedMemory();
}
inline Tensor alloc(IntList sizes, DType dtype, const Device& device) {
  if (device.is_cuda() && !fills_new_tensors()) return at::detail::empty_cuda(sizes, dtype, device, std::nullopt);
  return at::empty(sizes, at::TensorOptions().dtype(dtype).device(device));
}
inline Tensor alloc_zeros(IntList sizes, DType dtype, const Device& device) {
  Tensor t = alloc(sizes, dtype, device);
  t.zero_();
  return t;
}
// torch.empty_like(t): t's strides when t is non-overlapping and dense (what empty_like keeps),
// else empty_like itself (which may pick another memory format).
inline Tensor alloc_like(const Tensor& t) {
  if (t.is_cuda() && t.is_non_overlapping_and_dense() && !fills_new_tensors()) {
    return at::detail::empty_strided_cuda(t.sizes(), t.strides(), t.scalar_type(), t.device());
  }
  return at::empty_like(t);
}
inline Tensor as_contiguous(const Tensor& t) { return t.contiguous(); }
inline void zero_out(const Tensor& t) { t.zero_(); }
inline void fill_with(const Tensor& t, double value) { t.fill_(value); }
inline Tensor narrowed(const Tensor& t, int64_t dim, int64_t start, int64_t length) {
  return t.narrow(dim, start, length);
}
inline Tensor reshaped(const Tensor& t, IntList sizes) { return t.reshape(sizes); }
inline Tensor to_device(const Tensor& t, const Device& device) {
  return t.to(device, /*non_blocking=*/false, /*copy=*/false);
}
// into = in summed over dimension `dim` (into has in's sizes without that dimension).
inline void sum_into(Tensor& into, const Tensor& in, int64_t dim) { at::sum_out(into, in, {dim}); }

using DeviceGuard = c10::cuda::CUDAGuard;

inline cudaStream_t current_stream(DeviceIndex device) {
  return c10::cuda::getCurrentCUDAStream(device).stream();
}

// The forward's Philox state from the default CUDA generator of `device`, whose offset advances by
// `increment` (under the generator's lock; under CUDA graph capture the state points into the graph,
// so each replay draws anew).
inline PhiloxState draw_philox(const Device& device, uint64_t increment) {
  const at::Generator& handle = at::cuda::detail::getDefaultCUDAGenerator(device.index());
  auto* gen = at::check_generator<at::CUDAGeneratorImpl>(handle);
  std::lock_guard<std::mutex> lock(gen->mutex_);  // the generator is shared by every thread
  return kernel_philox_state(gen->philox_cuda_state(increment));
}

// Zeroes the entries of P past each sequence's end.  The kernels store whole 128-row tiles, so
// rows (and columns) between a sequence's length and the padded size hold values computed from
// memory past the inputs, different from call to call (seen on an H200 with opcheck).  p is
// (B, H, Sq_r, Sk_r); len_q / len_k are int32 (B,) lengths on p's device.  Stays on the device.
inline void clear_probability_padding(Tensor& p, const Tensor& len_q, const Tensor& len_k) {
  const auto idx = len_q.options();
  const Tensor rows = at::arange(p.size(2), idx).view({1, -1, 1});
  const Tensor cols = at::arange(p.size(3), idx).view({1, 1, -1});
  const Tensor keep = (rows < len_q.view({-1, 1, 1})).logical_and(cols < len_k.view({-1, 1, 1}));
  p.masked_fill_(keep.logical_not().unsqueeze(1), 0);
}

// Per-sequence lengths from int32 prefix sums (B+1,): (B,) on the same device.
inline Tensor lengths_of(const Tensor& cu_seqlens) {
  return cu_seqlens.slice(0, 1) - cu_seqlens.slice(0, 0, -1);
}

}  // namespace flash_attn_wheels::binding
