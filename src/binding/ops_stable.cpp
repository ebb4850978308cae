// Operator registration for torch.ops.flash_attn.* on torch's stable ABI (FLASH_ATTN_TORCH_ABI=stable;
// ops.cpp is the exact build's). The same schemas (schemas.h) and the same C++ implementations
// (fwd.cpp, bwd.cpp, kvcache.cpp over tensor_api_stable.h), registered as boxed kernels
// (TORCH_BOX), with the same dispatch keys as the exact build: CUDA; CPU, whose first check
// rejects non-CUDA inputs with a clear message; build_info under CompositeExplicitAutograd.
// Loaded by Python with torch.ops.load_library like the exact build; fakes and autograd live in
// flash_attn/_ops.py and flash_attn/_autograd.py for both.
#include <string>

#include <torch/csrc/stable/library.h>

#include "flash_attn_build_info.h"  // generated: kFlashAttnBuildInfoJson
#include "ops.h"
#include "schemas.h"

namespace flash_attn_wheels::binding {

std::string build_info() { return std::string(kFlashAttnBuildInfoJson); }

}  // namespace flash_attn_wheels::binding

STABLE_TORCH_LIBRARY(flash_attn, m) {
  flash_attn_wheels::binding::schemas::define_operators(m);
}

namespace {

// The same kernels serve CUDA and CPU dispatch (see the file comment for why CPU).
void register_device_kernels(torch::stable::detail::StableLibrary& m) {
  namespace ops = flash_attn_wheels::binding;
  m.impl("fwd", TORCH_BOX(&ops::fwd));
  m.impl("varlen_fwd", TORCH_BOX(&ops::varlen_fwd));
  m.impl("bwd", TORCH_BOX(&ops::bwd));
  m.impl("varlen_bwd", TORCH_BOX(&ops::varlen_bwd));
  m.impl("fwd_kvcache", TORCH_BOX(&ops::fwd_kvcache));
}

}  // namespace

STABLE_TORCH_LIBRARY_IMPL(flash_attn, CUDA, m) { register_device_kernels(m); }

STABLE_TORCH_LIBRARY_IMPL(flash_attn, CPU, m) { register_device_kernels(m); }

STABLE_TORCH_LIBRARY_IMPL(flash_attn, CompositeExplicitAutograd, m) {
  m.impl("build_info", TORCH_BOX(&flash_attn_wheels::binding::build_info));
}
