// Operator registration for torch.ops.flash_attn.* on ATen (the exact build; ops_stable.cpp is
// the stable-ABI one). Schemas: schemas.h, identical to docs/operators.md.
//
// Registration is static (TORCH_LIBRARY runs when the shared object is loaded), so the library
// needs no exported symbols and no Python C API: Python loads it with torch.ops.load_library.
// The fake (meta) implementations for torch.compile and the autograd wiring live in
// flash_attn/_ops.py; here only the device kernels are registered:
//   CUDA  -> the implementations in fwd.cpp, bwd.cpp, kvcache.cpp;
//   CPU   -> the same functions, whose first check rejects non-CUDA inputs with a clear
//            message (instead of the dispatcher's generic "could not run ... CPU backend");
//   build_info -> CompositeExplicitAutograd (no tensor arguments, works without a GPU).
#include <string>

#include <torch/library.h>

#include "flash_attn_build_info.h"  // generated: kFlashAttnBuildInfoJson
#include "ops.h"
#include "schemas.h"

namespace flash_attn_wheels::binding {

std::string build_info() { return std::string(kFlashAttnBuildInfoJson); }

}  // namespace flash_attn_wheels::binding

TORCH_LIBRARY(flash_attn, m) {
  flash_attn_wheels::binding::schemas::define_operators(m);
}

namespace {

// The same kernels serve CUDA and CPU dispatch (see the file comment for why CPU).
void register_device_kernels(torch::Library& m) {
  namespace ops = flash_attn_wheels::binding;
  m.impl("fwd", TORCH_FN(ops::fwd));
  m.impl("varlen_fwd", TORCH_FN(ops::varlen_fwd));
  m.impl("bwd", TORCH_FN(ops::bwd));
  m.impl("varlen_bwd", TORCH_FN(ops::varlen_bwd));
  m.impl("fwd_kvcache", TORCH_FN(ops::fwd_kvcache));
}

}  // namespace

TORCH_LIBRARY_IMPL(flash_attn, CUDA, m) { register_device_kernels(m); }

TORCH_LIBRARY_IMPL(flash_attn, CPU, m) { register_device_kernels(m); }

TORCH_LIBRARY_IMPL(flash_attn, CompositeExplicitAutograd, m) {
  m.impl("build_info", TORCH_FN(flash_attn_wheels::binding::build_info));
}
