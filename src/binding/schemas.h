// The operator schemas of torch.ops.flash_attn.*, one definition for both registrations (ops.cpp
// on ATen's TORCH_LIBRARY, ops_stable.cpp on the stable ABI's STABLE_TORCH_LIBRARY).
// Each string must stay identical to docs/operators.md (tests/unit/test_binding_sources.py
// compares them).
#pragma once

namespace flash_attn_wheels::binding::schemas {

inline constexpr const char* kFwdSchema =
    "fwd(Tensor q, Tensor k, Tensor v, Tensor? alibi_slopes, float dropout_p, "
    "float softmax_scale, bool is_causal, int window_size_left, int window_size_right, "
    "float softcap, bool return_softmax, Tensor? rng_state) "
    "-> (Tensor out, Tensor softmax_lse, Tensor p, Tensor rng_state)";

inline constexpr const char* kVarlenFwdSchema =
    "varlen_fwd(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, "
    "Tensor? seqused_k, Tensor? leftpad_k, Tensor? block_table, Tensor? alibi_slopes, "
    "int max_seqlen_q, int max_seqlen_k, float dropout_p, float softmax_scale, "
    "bool zero_tensors, bool is_causal, int window_size_left, int window_size_right, "
    "float softcap, bool return_softmax, Tensor? rng_state) "
    "-> (Tensor out, Tensor softmax_lse, Tensor p, Tensor rng_state)";

inline constexpr const char* kBwdSchema =
    "bwd(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out, Tensor softmax_lse, "
    "Tensor? alibi_slopes, float dropout_p, float softmax_scale, bool is_causal, "
    "int window_size_left, int window_size_right, float softcap, bool deterministic, "
    "Tensor rng_state) "
    "-> (Tensor dq, Tensor dk, Tensor dv, Tensor softmax_d)";

inline constexpr const char* kVarlenBwdSchema =
    "varlen_bwd(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out, Tensor softmax_lse, "
    "Tensor cu_seqlens_q, Tensor cu_seqlens_k, Tensor? alibi_slopes, int max_seqlen_q, "
    "int max_seqlen_k, float dropout_p, float softmax_scale, bool zero_tensors, "
    "bool is_causal, int window_size_left, int window_size_right, float softcap, "
    "bool deterministic, Tensor rng_state) "
    "-> (Tensor dq, Tensor dk, Tensor dv, Tensor softmax_d)";

inline constexpr const char* kFwdKvcacheSchema =
    "fwd_kvcache(Tensor q, Tensor(a!) k_cache, Tensor(b!) v_cache, Tensor? k, Tensor? v, "
    "Tensor? cache_seqlens, Tensor? rotary_cos, Tensor? rotary_sin, Tensor? cache_batch_idx, "
    "Tensor? cache_leftpad, Tensor? block_table, Tensor? alibi_slopes, float softmax_scale, "
    "bool is_causal, int window_size_left, int window_size_right, float softcap, "
    "bool rotary_interleaved, int num_splits) "
    "-> (Tensor out, Tensor softmax_lse)";

inline constexpr const char* kBuildInfoSchema =
    "build_info() -> str";

// Defines every operator on a library object: TORCH_LIBRARY's torch::Library (ops.cpp) or
// STABLE_TORCH_LIBRARY's StableLibrary (ops_stable.cpp); both take a schema string in def().
template <typename Library>
void define_operators(Library& m) {
  m.def(kFwdSchema);
  m.def(kVarlenFwdSchema);
  m.def(kBwdSchema);
  m.def(kVarlenBwdSchema);
  m.def(kFwdKvcacheSchema);
  m.def(kBuildInfoSchema);
}

}  // namespace flash_attn_wheels::binding::schemas
