// Building the kernels' parameter blocks (Flash_fwd_params / Flash_bwd_params from upstream's
// flash.h) out of the operators' tensors (tensor_api.h: ATen or torch's stable ABI).
//
// The entry points in fwd.cpp, bwd.cpp and kvcache.cpp validate their tensors, allocate the
// results and then fill a parameter block concern by concern with the setters below: sizes,
// operand pointers/strides, softmax scaling and softcap, dropout, the attention mask
// (causal / sliding window), ALiBi, split-KV scratch space and the Philox state.  Each setter
// touches only its own fields, so the order between them does not matter except that
// `start_params` must come first (it resets the block).
//
// Strides are always in elements, never bytes.
#pragma once

#include <cstdint>
#include <optional>

#include <cuda_runtime_api.h>

#include "namespace_config.h"  // upstream, from the extracted tree
#include "flash.h"             // upstream, from the extracted tree

#include "checks.h"
#include "tensor_api.h"

namespace flash_attn_wheels::binding {

using FwdParams = FLASH_NAMESPACE::Flash_fwd_params;
using BwdParams = FLASH_NAMESPACE::Flash_bwd_params;

// Smallest multiple of m that is >= x (x >= 0, m > 0).
constexpr int round_up(int x, int m) { return (x + m - 1) / m * m; }

// Padded head dim the kernels use for their shared-memory tiles and fp32 accumulators:
// multiple of 32 up to 128, of 64 above.
constexpr int padded_head_dim(int d) { return round_up(d, d <= 128 ? 32 : 64); }

// Sequence lengths are padded to this many rows for P, softmax_d and dq_accum.
inline constexpr int kSeqPad = 128;

// -------------------------------------------------------------------------------------------
// Problem sizes

// Sizes of one attention problem as the kernels see it (after the decode head-folding of
// fwd/varlen_fwd/fwd_kvcache, if applied).  For varlen calls seqlen_q/seqlen_k are the maxima.
struct Dims {
  int b = 0;         // batch (number of sequences)
  int seqlen_q = 0;  // Sq, tokens
  int seqlen_k = 0;  // Sk, tokens
  int h = 0;         // query heads
  int h_k = 0;       // key/value heads, h % h_k == 0
  int d = 0;         // head dim, multiple of 8, <= 256
};

// Resets `p` and stores the sizes, their padded forms, and the element type (fp16 or bf16).
// Optional features start disabled: no dropout, mask, ALiBi, paging, rotary or split-KV.
void start_params(FwdParams& p, const Dims& dims, bool is_bf16);

// -------------------------------------------------------------------------------------------
// Operands

// Where one (batch, row, head, dim) operand lives: base pointer plus element strides.  The
// head dim itself must have unit stride (checked by the callers).
struct Operand {
  void* ptr = nullptr;
  int64_t batch_stride = 0;  // between sequences (or between pages of a paged KV cache)
  int64_t row_stride = 0;    // between tokens
  int64_t head_stride = 0;   // between heads
};

// Operand of a tensor shaped (..., rows, heads, D): row/head strides from dims -3/-2 and an
// explicit batch stride.  Varlen operands pass 0: the kernels find each sequence through the
// cumulative sequence lengths instead.
Operand operand(const Tensor& t, int64_t batch_stride);

// Operand of a batched tensor (B, rows, heads, D): batch stride is stride(0).
inline Operand batched(const Tensor& t) { return operand(t, t.stride(0)); }

// Operand of a packed varlen tensor (T, heads, D).
inline Operand packed(const Tensor& t) { return operand(t, 0); }

void set_forward_operands(FwdParams& p, const Operand& q, const Operand& k, const Operand& v,
                          const Operand& out);

// Backward operands: gradient of the output (dout) and the gradients written by the kernel.
// dk/dv have H heads here; for MQA/GQA the caller sums them down to Hk afterwards.
void set_backward_operands(BwdParams& p, const Operand& dout, const Operand& dq,
                           const Operand& dk, const Operand& dv);

// -------------------------------------------------------------------------------------------
// Softmax, dropout, mask, ALiBi

// softmax_scale multiplies q.k (unitless).  softcap > 0 applies softcap * tanh(s / softcap)
// to the scaled scores s; softcap <= 0 disables it.
void set_softmax(FwdParams& p, double softmax_scale, double softcap);

// dropout_p in [0, 1): probability of dropping an attention weight.  Without this call the
// block has no dropout.
void set_dropout(FwdParams& p, double dropout_p);

// The attention mask after normalisation, in the form the kernels take.
struct Mask {
  bool causal = false;  // bottom-right aligned causal mask, no left limit
  bool local = false;   // sliding window [i - left, i + right] (both >= 0 then)
  int left = -1;        // tokens; -1 = unbounded (only when !local)
  int right = -1;       // tokens; -1 = unbounded, 0 with causal

  // Neither causal nor windowed: every query sees every key.
  bool unbounded() const { return !causal && !local; }
};

// Normalises the user's (is_causal, window_size_left, window_size_right):
//  - a window side >= seqlen_k covers everything and becomes unbounded (-1);
//  - with `single_query_shortcut`, seqlen_q == 1 and no ALiBi, causal is dropped: one
//    bottom-right aligned query row already sees all keys;
//  - causal means right = 0;
//  - a one-sided window gets seqlen_k on its other side, since the kernels take both sides
//    of a local window as bounds.
// `left`/`right` are tokens, any negative value meaning unbounded.
Mask make_mask(bool is_causal, int64_t left, int64_t right, int seqlen_q, int seqlen_k,
               bool has_alibi, bool single_query_shortcut);

void set_mask(FwdParams& p, const Mask& mask);

// ALiBi slopes: fp32, (H,) or (B, H), on the call's device, unit stride over heads.
// `h` is the query head count the kernels see.  Absent slopes disable ALiBi.
void set_alibi(FwdParams& p, const std::optional<Tensor>& slopes, const ArgChecker& chk,
               int b, int h, const Device& device);

// -------------------------------------------------------------------------------------------
// Split-KV

// Scratch buffers of the split-KV forward; must outlive the kernel launch (the caching
// allocator keeps them stream-ordered, so holding them until the call returns is enough).
struct SplitKvScratch {
  Tensor lse_accum;  // fp32 (num_splits, B, H, Sq)
  Tensor out_accum;  // fp32 (num_splits, B, H, Sq, padded D)
};

// Picks how many key/value chunks to process in parallel when B*H*query-blocks alone would
// leave SMs idle.  `work_blocks`: thread blocks without splitting; `sm_slots`: blocks that run
// concurrently; `kv_blocks`: key/value tiles per sequence; `max_splits` caps the answer.
// Returns the smallest count whose wave efficiency is within 85% of the best one.
int choose_num_splits(int work_blocks, int sm_slots, int kv_blocks, int max_splits);

// Sets p.num_splits and, when it is > 1, allocates the accumulators.  `requested` <= 0 asks
// for the heuristic (using `sm_count` SMs), 1 disables splitting, > 1 forces that many
// (at most 128).  Reads p.p_dropout (call after set_dropout): with dropout the split kernels
// are not used and p.num_splits = requested.
SplitKvScratch set_split_kv(FwdParams& p, int requested, int sm_count, const Device& device,
                            const ArgChecker& chk);

// -------------------------------------------------------------------------------------------
// Dropout RNG (Philox)

// Philox counter increment that one forward/backward consumes: each (batch, head) pair owns
// 32 consecutive offsets (one per lane of a warp).
inline int64_t philox_increment(const FwdParams& p) {
  return static_cast<int64_t>(p.b) * p.h * 32;
}

// Forward: chooses the Philox (seed, offset) and, when dropout_p > 0, returns the int64 CUDA
// tensor (2,) on `device` that the kernel writes the state it used into.
//  - `given` (int64, 2 elements, CPU or the call's CUDA device; validated even without dropout):
//    use that state.
//  - absent and dropout_p > 0: draw from the device's default CUDA generator and advance its
//    offset by philox_increment(p) (under the generator's lock; graph-capture safe).  The
//    stable-ABI build has no generator and throws: its Python layer always passes rng_state.
//  - dropout_p == 0: returns an undefined tensor and sets p.rng_state = nullptr: the kernels
//    read the Philox state and write rng_state only on their dropout path, so the call
//    allocates nothing and leaves the generator alone.
// `keep_alive` receives any temporary the kernel reads from; hold it until after the launch.
Tensor set_forward_rng(FwdParams& p, double dropout_p, const std::optional<Tensor>& given,
                       const Device& device, const ArgChecker& chk, Tensor& keep_alive);

// Backward: points p.rng_state at the (seed, offset) the forward used (rng_state, validated and
// moved to `device` when dropout_p > 0).  The backward kernel always reads the pointer but uses
// the values only with dropout, so without dropout it points at `unused_state_buffer`: any
// device tensor of this call holding at least 16 bytes that lives until after the launch (the
// callers pass softmax_d); rng_state is then not looked at.  Returns the tensor that backs the
// pointer (hold it until after the launch).
Tensor set_backward_rng(BwdParams& p, double dropout_p, const Tensor& rng_state,
                        const Device& device, const ArgChecker& chk,
                        const Tensor& unused_state_buffer);

// -------------------------------------------------------------------------------------------
// Device

// Number of streaming multiprocessors of a CUDA device (queried once per process).
int sm_count(DeviceIndex device);

// Throws unless the device is sm_80 or newer (the FlashAttention-2 kernels need Ampere+); the
// capability is queried once per process, so a call costs no driver query.
void require_ampere_or_newer(DeviceIndex device, const ArgChecker& chk);

}  // namespace flash_attn_wheels::binding
