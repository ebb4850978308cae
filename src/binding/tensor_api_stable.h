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
#include <ostream>
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
#include "strides.h"  // contiguous_strides, non_overlapping_and_dense
#include "torch_free/torch_free.h"  // PhiloxState

// A failed C shim call as an exception. torch's headers from 2.13 on define
// STABLE_TORCH_ERROR_CODE_CHECK, which reads torch's own message back from the shim (when the
// running torch keeps it, 2.13 and newer); older headers only have the failure code.
#if defined(STABLE_TORCH_ERROR_CODE_CHECK)
#define FLASH_ATTN_SHIM_CHECK(call) STABLE_TORCH_ERROR_CODE_CHECK(call)
#else
#define FLASH_ATTN_SHIM_CHECK(call) \
  if ((call) != AOTI_TORCH_SUCCESS) throw std::runtime_error(#call " failed; torch logged its message")
#endif

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

}  // namespace flash_attn_wheels::binding

#include "message_parts.h"  // shape_text, device_text (need IntList, Device, device_name)

namespace flash_attn_wheels::binding {

// Allocation and zeroing go through the C shims (aoti_torch_empty_strided, aoti_torch_zero_), which
// call ATen's functions: torch::stable::empty/empty_like/zero_ find the operator by name and run it
// boxed on every call (an allocation: 3.4 us against 2.1 us on an H200, bench/binding_cost.py api;
// a forward makes four).
namespace stable_shim {

// The shim's dtype code of the dtypes the binding allocates (the shim translates them itself:
// torch's ScalarType numbering is not part of the stable ABI). Throws for any other dtype (a bug of
// the binding).
inline int32_t dtype_code(DType dtype) {
  switch (dtype) {
    case kHalf: return aoti_torch_dtype_float16();
    case kBFloat16: return aoti_torch_dtype_bfloat16();
    case kFloat: return aoti_torch_dtype_float32();
    case kInt: return aoti_torch_dtype_int32();
    case kLong: return aoti_torch_dtype_int64();
    default: fail("flash_attn: internal error: the binding allocates no tensor of dtype ", static_cast<int>(dtype));
  }
}

// Throws for a device the binding never allocates on (a bug of the binding, not of the input).
inline int32_t device_type_code(const Device& device) {
  if (device.is_cuda()) return aoti_torch_device_type_cuda();
  if (device.is_cpu()) return aoti_torch_device_type_cpu();
  fail("flash_attn: internal error: the binding allocates on CUDA or the CPU only, not on ", device_name(device));
}

// A new uninitialised tensor of these sizes and strides (in elements). Throws, naming what was
// asked for, when torch fails (out of memory), with torch's own message where the running torch
// keeps it (FLASH_ATTN_SHIM_CHECK).
inline Tensor empty_strided(IntList sizes, const int64_t* strides, DType dtype, const Device& device) {
  AtenTensorHandle handle = nullptr;
  try {
    FLASH_ATTN_SHIM_CHECK(aoti_torch_empty_strided(
        static_cast<int64_t>(sizes.size()), sizes.data(), strides, dtype_code(dtype), device_type_code(device),
        static_cast<int32_t>(device.index()), &handle));
  } catch (const std::exception& error) {
    fail("flash_attn: could not allocate a ", torch_dtype_name(dtype), " tensor of shape ", shape_text(sizes), " on ",
         device_name(device), ": ", error.what());
  }
  return Tensor(handle);
}

}  // namespace stable_shim

inline Tensor alloc(IntList sizes, DType dtype, const Device& device) {
  if (sizes.size() > kMaxStridedRank) return torch::stable::empty(sizes, dtype, std::nullopt, device);
  int64_t strides[kMaxStridedRank];
  contiguous_strides(sizes.data(), sizes.size(), strides);
  return stable_shim::empty_strided(sizes, strides, dtype, device);
}
inline void zero_out(const Tensor& t) {
  try {
    FLASH_ATTN_SHIM_CHECK(aoti_torch_zero_(t.get()));
  } catch (const std::exception& error) {
    fail("flash_attn: zeroing a ", torch_dtype_name(t.scalar_type()), " tensor of ", t.numel(), " elements failed: ",
         error.what());
  }
}
inline Tensor alloc_zeros(IntList sizes, DType dtype, const Device& device) {
  Tensor t = alloc(sizes, dtype, device);
  zero_out(t);
  return t;
}
// torch.empty_like(t): t's strides when t is non-overlapping and dense (every q/k/v the operators
// take in practice), else torch's own empty_like (which may pick another memory format).
inline Tensor alloc_like(const Tensor& t) {
  const IntList sizes = t.sizes(), strides = t.strides();
  if (!non_overlapping_and_dense(sizes.data(), strides.data(), sizes.size())) {
    return torch::stable::empty_like(t);
  }
  return stable_shim::empty_strided(sizes, strides.data(), t.scalar_type(), t.device());
}
inline Tensor as_contiguous(const Tensor& t) { return t.is_contiguous() ? t : torch::stable::contiguous(t); }
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

// Makes a CUDA device current for the guard's scope. Always built, though it costs 0.3 us: whether
// the device must change is torch's notion of the current device, which can differ from the CUDA
// runtime's (torch defers setting a device that has no context yet).
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
