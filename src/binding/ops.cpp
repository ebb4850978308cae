// Operator registration for torch.ops.flash_attn.* (schemas: docs/operators.md).
//
// Registration is static (TORCH_LIBRARY runs when the shared object is loaded), so the library
// needs no exported symbols and no Python C API: Python loads it with torch.ops.load_library.
// The fake (meta) implementations for torch.compile and the autograd wiring live in
// flash_attn/_ops.py; here only the device kernels are registered:
//   CUDA  -> the implementations in fwd.cpp, bwd.cpp, kvcache.cpp;
//   CPU   -> the same functions, whose first check rejects non-CUDA inputs with a clear
//            message (instead of the dispatcher's generic "could not run ... CPU backend");
//   build_info -> CompositeExplicitAutograd (no tensor arguments, works without a GPU).
//
// Each schema string below must stay identical to docs/operators.md
// (tests/unit/test_binding_sources.py compares them).
#include <string>

#include <torch/library.h>

#include "flash_attn_build_info.h"  // generated: kFlashAttnBuildInfoJson
#include "ops.h"

namespace flash_attn_wheels::binding {

std::string build_info() { return std::string(kFlashAttnBuildInfoJson); }

}  // namespace flash_attn_wheels::binding

TORCH_LIBRARY(flash_attn, m) {
  m.def(
      "fwd(Tensor q, Tensor k, Tensor v, Tensor? alibi_slopes, float dropout_p, "
      "float softmax_scale, bool is_causal, int window_size_left, int window_size_right, "
      "float softcap, bool return_softmax, Tensor? rng_state) "
      "-> (Tensor out, Tensor softmax_lse, Tensor p, Tensor rng_state)");
  m.def(
      "varlen_fwd(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, "
      "Tensor? seqused_k, Tensor? leftpad_k, Tensor? block_table, Tensor? alibi_slopes, "
      "int max_seqlen_q, int max_seqlen_k, float dropout_p, float softmax_scale, "
      "bool zero_tensors, bool is_causal, int window_size_left, int window_size_right, "
      "float softcap, bool return_softmax, Tensor? rng_state) "
      "-> (Tensor out, Tensor softmax_lse, Tensor p, Tensor rng_state)");
  m.def(
      "bwd(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out, Tensor softmax_lse, "
      "Tensor? alibi_slopes, float dropout_p, float softmax_scale, bool is_causal, "
      "int window_size_left, int window_size_right, float softcap, bool deterministic, "
      "Tensor rng_state) "
      "-> (Tensor dq, Tensor dk, Tensor dv, Tensor softmax_d)");
  m.def(
      "varlen_bwd(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out, Tensor softmax_lse, "
      "Tensor cu_seqlens_q, Tensor cu_seqlens_k, Tensor? alibi_slopes, int max_seqlen_q, "
      "int max_seqlen_k, float dropout_p, float softmax_scale, bool zero_tensors, "
      "bool is_causal, int window_size_left, int window_size_right, float softcap, "
      "bool deterministic, Tensor rng_state) "
      "-> (Tensor dq, Tensor dk, Tensor dv, Tensor softmax_d)");
  m.def(
      "fwd_kvcache(Tensor q, Tensor(a!) k_cache, Tensor(b!) v_cache, Tensor? k, Tensor? v, "
      "Tensor? cache_seqlens, Tensor? rotary_cos, Tensor? rotary_sin, Tensor? cache_batch_idx, "
      "Tensor? cache_leftpad, Tensor? block_table, Tensor? alibi_slopes, float softmax_scale, "
      "bool is_causal, int window_size_left, int window_size_right, float softcap, "
      "bool rotary_interleaved, int num_splits) "
      "-> (Tensor out, Tensor softmax_lse)");
  m.def("build_info() -> str");
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
