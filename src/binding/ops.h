// C++ implementations of the operators that ops.cpp registers as torch.ops.flash_attn.*.
// docs/operators.md holds the schemas; the argument order and types here follow them exactly
// (schema `float` -> double, `int` -> int64_t, `Tensor?` -> std::optional<Tensor>), where Tensor
// is at::Tensor or torch::stable::Tensor (tensor_api.h) by the build's torch ABI.
//
// Named dimensions: B batch, Sq/Sk query/key tokens per sequence, H query heads, Hk key/value
// heads (H % Hk == 0), D head dim (multiple of 8, <= 256), Tq/Tk total tokens of a varlen
// batch, Sq_r/Sk_r = Sq/Sk rounded up to a multiple of 128, G = H / Hk.
//
// Common rules (violations throw a RuntimeError in Python naming the argument: tensor_api.h's fail):
//  - q/k/v (and out/dout/caches) are fp16 or bf16, all the same dtype, on one CUDA device of
//    compute capability >= 8.0; the kernels need a contiguous last dimension (other strides are
//    free): q/k/v/dout with a strided one are copied, out, softmax_lse and the KV caches (updated
//    in place) are rejected;
//  - softmax_scale multiplies q.k before the softmax (unitless);
//  - window_size_left/right are in tokens, -1 = unbounded; is_causal aligns the causal mask
//    to the bottom-right corner (query i of Sq sees keys up to i + Sk - Sq);
//  - softcap > 0 caps the scaled scores at softcap * tanh(s / softcap); 0 disables; it cannot
//    be combined with dropout;
//  - alibi_slopes: fp32 (H,) or (B, H) on the same device; adds -slope * |i - j| to scores;
//  - dropout_p in [0, 1); rng_state is int64 (2,) = (Philox seed, Philox offset);
//  - window sides >= -1;
//  - every returned tensor is deterministic (nothing left as allocated; torch.library.opcheck);
//  - LSE (softmax_lse) is the natural-log log-sum-exp of each query row's scaled scores, fp32.
//  - A kernel that the kernel set left out throws "flash_attn was built without ...".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>

#include "tensor_api.h"

namespace flash_attn_wheels::binding {

// Forward attention over a padded batch.
//   q (B, Sq, H, D), k/v (B, Sk, Hk, D).
//   rng_state: None -> draw from the default CUDA generator of q's device when dropout_p > 0.
//   return_softmax needs dropout_p > 0 (the kernels record P only on the dropout path).
// Returns (out, softmax_lse, p, rng_state):
//   out (B, Sq, H, D) q.dtype; softmax_lse (B, H, Sq) fp32;
//   p (B, H, Sq_r, Sk_r) q.dtype if return_softmax (dropped entries negated) else (0,);
//   rng_state int64 on q's device: (2,), the Philox state used, when dropout_p > 0, else (0,).
// When Sk == 0: out is zeros and softmax_lse is +inf.
// Errors: the common rules; shape mismatches between q/k/v; return_softmax without dropout;
// a malformed rng_state (not int64, not 2 elements, other device).
std::tuple<Tensor, Tensor, Tensor, Tensor> fwd(
    const Tensor& q, const Tensor& k, const Tensor& v,
    const std::optional<Tensor>& alibi_slopes, double dropout_p, double softmax_scale,
    bool is_causal, int64_t window_size_left, int64_t window_size_right, double softcap,
    bool return_softmax, const std::optional<Tensor>& rng_state);

// Forward attention over a packed variable-length batch.
//   q (Tq, H, D); k/v (Tk, Hk, D), or paged (num_blocks, page_block_size, Hk, D) with
//   block_table int32 (B, max_blocks) (page_block_size a multiple of 256);
//   cu_seqlens_q/k int32 (B+1,) prefix sums of the sequence lengths;
//   seqused_k int32 (B,): keys actually used per sequence (optional);
//   leftpad_k int32 (B,): keys to skip at the start of each sequence (optional, not paged);
//   max_seqlen_q/k: longest sequence (tokens), used for tiling and window clamping.
//   zero_tensors: clear out/softmax_lse/p before the kernel (out = 0, lse = -inf).
// Returns (out (Tq, H, D), softmax_lse (H, Tq) fp32, p (B, H, Sq_r, Sk_r) or (0,),
//          rng_state int64 (2,)) with Sq_r/Sk_r from max_seqlen_q/k.
// Errors: as fwd; cu_seqlens/seqused_k/leftpad_k/block_table not int32 on q's device or of
// the wrong shape; page_block_size not a multiple of 256; leftpad_k together with block_table.
std::tuple<Tensor, Tensor, Tensor, Tensor> varlen_fwd(
    const Tensor& q, const Tensor& k, const Tensor& v,
    const Tensor& cu_seqlens_q, const Tensor& cu_seqlens_k,
    const std::optional<Tensor>& seqused_k, const std::optional<Tensor>& leftpad_k,
    const std::optional<Tensor>& block_table, const std::optional<Tensor>& alibi_slopes,
    int64_t max_seqlen_q, int64_t max_seqlen_k, double dropout_p, double softmax_scale,
    bool zero_tensors, bool is_causal, int64_t window_size_left, int64_t window_size_right,
    double softcap, bool return_softmax, const std::optional<Tensor>& rng_state);

// Backward of fwd.
//   dout/out (B, Sq, H, D), q (B, Sq, H, D), k/v (B, Sk, Hk, D), softmax_lse (B, H, Sq) fp32
//   as returned by fwd; rng_state the state fwd returned (read only when dropout_p > 0).
//   deterministic: accumulate dq without atomics races (fixed-order reduction, more memory).
// Returns (dq like q, dk like k, dv like v, softmax_d (B, H, Sq_r) fp32 = rowsum(dout * out)).
// Errors: the common rules; shapes of out/dout/softmax_lse; rng_state malformed with dropout.
std::tuple<Tensor, Tensor, Tensor, Tensor> bwd(
    const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
    const Tensor& out, const Tensor& softmax_lse,
    const std::optional<Tensor>& alibi_slopes, double dropout_p, double softmax_scale,
    bool is_causal, int64_t window_size_left, int64_t window_size_right, double softcap,
    bool deterministic, const Tensor& rng_state);

// Backward of varlen_fwd (not paged).
//   dout/out/q (Tq, H, D), k/v (Tk, Hk, D), softmax_lse (H, Tq) fp32, cu_seqlens_q/k int32
//   (B+1,).  zero_tensors: clear dq/dk/dv/softmax_d before the kernel.
// Returns (dq (Tq, H, D), dk (Tk, Hk, D), dv (Tk, Hk, D), softmax_d (H, Tq + 128*B) fp32).
// Errors: as bwd; cu_seqlens not int32 (B+1,) contiguous on q's device.
std::tuple<Tensor, Tensor, Tensor, Tensor> varlen_bwd(
    const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
    const Tensor& out, const Tensor& softmax_lse, const Tensor& cu_seqlens_q,
    const Tensor& cu_seqlens_k, const std::optional<Tensor>& alibi_slopes,
    int64_t max_seqlen_q, int64_t max_seqlen_k, double dropout_p, double softmax_scale,
    bool zero_tensors, bool is_causal, int64_t window_size_left, int64_t window_size_right,
    double softcap, bool deterministic, const Tensor& rng_state);

// Forward against a KV cache (decoding / chunked prefill), no dropout.
//   q (B, Sq, H, D); k_cache/v_cache (B_cache, Sk_cache, Hk, D), or paged
//   (num_blocks, page_block_size, Hk, D) with block_table int32 (B, max_blocks).
//   k/v (B, Sk_new, Hk, D): new keys/values written IN PLACE into the caches at positions
//   cache_seqlens[b] .. cache_seqlens[b] + Sk_new - 1 before attending (needs cache_seqlens).
//   cache_seqlens int32 (B,): current length of each cached sequence (else Sk_cache).
//   rotary_cos/sin (Sr, rotary_dim / 2) q.dtype, Sr >= Sk_cache, rotary_dim % 16 == 0:
//   rotate new keys (and q) at their positions; rotary_interleaved pairs dims (0,1),(2,3)..
//   instead of (i, i + rotary_dim/2).  Needs k/v.
//   cache_batch_idx int32 (B,): which cache row serves each batch entry (not paged).
//   cache_leftpad int32 (B,): cached tokens to skip at the start of each row (not paged).
//   num_splits: 0 = heuristic, 1 = no split-KV, n = n chunks (<= 128).
// Returns (out (B, Sq, H, D) q.dtype, softmax_lse (B, H, Sq) fp32).
// Errors: the common rules; k without v (or the reverse) or without cache_seqlens; Sk_new
// larger than the cache; rotary tables without k/v or malformed; cache_batch_idx or
// cache_leftpad with block_table; fewer cache rows than B; num_splits outside [0, 128].
std::tuple<Tensor, Tensor> fwd_kvcache(
    const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
    const std::optional<Tensor>& k, const std::optional<Tensor>& v,
    const std::optional<Tensor>& cache_seqlens, const std::optional<Tensor>& rotary_cos,
    const std::optional<Tensor>& rotary_sin, const std::optional<Tensor>& cache_batch_idx,
    const std::optional<Tensor>& cache_leftpad, const std::optional<Tensor>& block_table,
    const std::optional<Tensor>& alibi_slopes, double softmax_scale, bool is_causal,
    int64_t window_size_left, int64_t window_size_right, double softcap, bool rotary_interleaved,
    int64_t num_splits);

// The build info JSON compiled into this library (group, archs, CUDA, torch, kernel set, ...).
std::string build_info();

}  // namespace flash_attn_wheels::binding
