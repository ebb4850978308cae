// tensor_api.h over torch's stable ABI: the binding of every torch from TORCH_TARGET_VERSION on
// (FLASH_ATTN_TORCH_ABI=stable; docs/stable-abi.md says which torch and why).
//
// Only torch/csrc/stable, torch/headeronly and the C shims are used: no ATen, no c10 library
// symbol (tests/unit/test_binding_sources.py keeps ATen includes out; the build test reads the
// library's undefined symbols). Errors are std::runtime_error, which torch turns into a Python
// RuntimeError like c10::Error. Two things differ from the exact build, both for want of an API:
//   - draw_philox: the stable ABI has no CUDA generator before torch 2.13 and no Philox state in
//     any version, so the forward with dropout needs its (seed, offset) as rng_state; the Python
//     layer reserves it from torch.cuda's generator (flash_attn/_rng.py) before the call;
//   - clear_probability_padding reads the varlen lengths on the host (a device synchronisation;
//     the stable ABI has no arange/compare/masked_fill), only on the return_softmax debug path.
#pragma once

#ifndef USE_CUDA
#define USE_CUDA 1  // declares the CUDA part of the C shim (aoti_torch_get_current_cuda_stream)
#endif

#include <algorithm>
#include <cstdint>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/device.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/HeaderOnlyArrayRef.h>

#include "dtypes.h"  // DType and the dtype constants
#include "torch_free/torch_free.h"  // PhiloxState

namespace flash_attn_wheels::binding {

using Tensor = torch::stable::Tensor;
using Device = torch::stable::Device;
using DeviceIndex = torch::stable::DeviceIndex;
using IntList = torch::headeronly::IntHeaderOnlyArrayRef;

// Throws std::runtime_error whose message is the parts streamed one after another.
template <typename... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::ostringstream message;
  (message << ... << parts);
  throw std::runtime_error(message.str());
}

inline std::string device_name(const Device& d) {
  if (d.is_cuda()) return "cuda:" + std::to_string(static_cast<int>(d.index()));
  if (d.is_cpu()) return "cpu";
  if (d.type() == c10::DeviceType::Meta) return "meta";
  return "device type " + std::to_string(static_cast<int>(d.type()));
}

inline Tensor alloc(IntList sizes, DType dtype, const Device& device) {
  return torch::stable::empty(sizes, dtype, std::nullopt, device);
}
inline Tensor alloc_zeros(IntList sizes, DType dtype, const Device& device) {
  Tensor t = alloc(sizes, dtype, device);
  torch::stable::zero_(t);
  return t;
}
inline Tensor alloc_like(const Tensor& t) { return torch::stable::empty_like(t); }
inline Tensor as_contiguous(const Tensor& t) { return t.is_contiguous() ? t : torch::stable::contiguous(t); }
inline void zero_out(const Tensor& t) {
  Tensor handle = t;  // shares t's storage: zero_ takes a mutable reference
  torch::stable::zero_(handle);
}
inline void fill_with(const Tensor& t, double value) { torch::stable::fill_(t, value); }
inline Tensor narrowed(const Tensor& t, int64_t dim, int64_t start, int64_t length) {
  Tensor handle = t;  // a view of t: narrow takes a mutable reference
  return torch::stable::narrow(handle, dim, start, length);
}
inline Tensor reshaped(const Tensor& t, IntList sizes) { return torch::stable::reshape(t, sizes); }
inline Tensor to_device(const Tensor& t, const Device& device) {
  if (t.device() == device) return t;
  return torch::stable::to(t, device);
}
inline void sum_into(Tensor& into, const Tensor& in, int64_t dim) {
  const std::vector<int64_t> dims{dim};
  torch::stable::sum_out(into, in, IntList(dims));
}

// Makes a CUDA device current for the guard's scope.
class DeviceGuard {
 public:
  explicit DeviceGuard(const Device& device) : guard_(device.index()) {}

 private:
  torch::stable::accelerator::DeviceGuard guard_;
};

inline cudaStream_t current_stream(DeviceIndex device) {
  void* stream = nullptr;
  if (aoti_torch_get_current_cuda_stream(static_cast<int32_t>(device), &stream) != AOTI_TORCH_SUCCESS) {
    fail("flash_attn: could not get the current CUDA stream of cuda:", static_cast<int>(device));
  }
  return static_cast<cudaStream_t>(stream);
}

// No generator to draw from (see the file comment): the caller passes rng_state instead.
[[noreturn]] inline PhiloxState draw_philox(const char* op) {
  fail(op, ": dropout_p > 0 needs rng_state (int64 (2,) = Philox seed, offset) in the stable-ABI build of "
       "flash_attn, whose torch API has no CUDA generator; call flash_attn's functions (they reserve it from "
       "torch's CUDA generator) or pass rng_state yourself");
}

// As in the exact build (tensor_api_aten.h): zeroes P past each sequence's end; lengths read on the host.
inline void clear_probability_padding(Tensor& p, const Tensor& len_q, const Tensor& len_k) {
  const Device cpu(c10::DeviceType::CPU);
  const Tensor host_q = as_contiguous(to_device(len_q, cpu));
  const Tensor host_k = as_contiguous(to_device(len_k, cpu));
  const auto* q = static_cast<const int32_t*>(host_q.data_ptr());
  const auto* k = static_cast<const int32_t*>(host_k.data_ptr());
  const int64_t rows = p.size(2), cols = p.size(3);
  for (int64_t b = 0; b < p.size(0); ++b) {
    const Tensor one = narrowed(p, 0, b, 1);
    const int64_t lq = std::min<int64_t>(std::max<int64_t>(q[b], 0), rows);
    const int64_t lk = std::min<int64_t>(std::max<int64_t>(k[b], 0), cols);
    if (lq < rows) zero_out(narrowed(one, 2, lq, rows - lq));
    if (lk < cols) zero_out(narrowed(one, 3, lk, cols - lk));
  }
}

// Per-sequence lengths from int32 prefix sums (B+1,): (B,) int32 on the host (the only caller,
// clear_probability_padding, reads them there; the stable subtract passes its alpha as a double,
// which ATen refuses for integer tensors).
inline Tensor lengths_of(const Tensor& cu_seqlens) {
  const Device cpu(c10::DeviceType::CPU);
  const Tensor host = as_contiguous(to_device(cu_seqlens, cpu));
  const int64_t b = host.size(0) - 1;
  Tensor lengths = alloc({b}, kInt, cpu);
  const auto* cu = static_cast<const int32_t*>(host.data_ptr());
  auto* out = static_cast<int32_t*>(lengths.data_ptr());
  for (int64_t i = 0; i < b; ++i) out[i] = cu[i + 1] - cu[i];
  return lengths;
}

}  // namespace flash_attn_wheels::binding
