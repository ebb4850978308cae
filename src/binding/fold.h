// Decode-time head folding for MQA/GQA (used by fwd, varlen_fwd and fwd_kvcache).
//
// With one query token per sequence and G = H / Hk query heads sharing each key/value head,
// the G heads of a group can be presented to the kernels as G query *rows* of a single head:
//   q (B, 1, H, D)  ->  (B, G, Hk, D)        [head h = hk * G + g  becomes  row g, head hk]
// One thread block then serves a whole group from a single pass over that head's K/V, instead
// of G blocks each re-reading it.  Rows of one head must not interact with their position for
// this to be exact, so it is only used without mask, ALiBi or dropout (see can_fold_heads).
//
// The fold is only a way of addressing: the kernels take a base pointer and row/head strides
// (Operand), so the folded view of q and out is described by strides over the caller's tensors
// (row stride = their head stride, head stride = G times it) and nothing is reshaped, copied
// or mapped back.  out and softmax_lse are allocated in the caller's shapes: the kernels' folded
// LSE, (B, Hk, G) for a padded batch and (Hk, G, B) for a packed one, is (B, H, 1) and (H, B)
// byte for byte.
#pragma once

#include <cstdint>

#include "params.h"

namespace flash_attn_wheels::binding {

// True when folding is exact and worth it: Sq == 1, H > Hk, no mask, no dropout, no ALiBi.
inline bool can_fold_heads(int seqlen_q, int h, int h_k, const Mask& mask, double dropout_p,
                           bool has_alibi) {
  return seqlen_q == 1 && h > h_k && mask.unbounded() && dropout_p == 0.0 && !has_alibi;
}

class HeadFold {
 public:
  // b: batch, seqlen_q: query tokens per sequence, h/h_k: query and key/value heads,
  // d: head dim; `active` from can_fold_heads (plus any caller-specific condition).
  HeadFold(int b, int seqlen_q, int h, int h_k, int d, bool active)
      : b_(b), seqlen_q_(seqlen_q), h_(h), h_k_(h_k), d_(d), active_(active) {}

  bool active() const { return active_; }
  int groups() const { return h_ / h_k_; }

  // Problem sizes as the kernels see them.
  Dims dims(int seqlen_k) const {
    Dims out;
    out.b = b_;
    out.seqlen_q = active_ ? groups() : seqlen_q_;
    out.seqlen_k = seqlen_k;
    out.h = active_ ? h_k_ : h_;
    out.h_k = h_k_;
    out.d = d_;
    return out;
  }

  // Operand of q or out as the kernels address it.  `t` is (B, Sq, H, D) (padded batch) or
  // (Tq, H, D) (packed; Tq == B when folded).  Folded, row g of head hk is query head
  // hk * G + g of the sequence's one token: the batch stride is t's stride(0), the row stride
  // t's head stride and the head stride G times that.  Not folded: batched(t) or packed(t).
  Operand operand_of(const Tensor& t, bool is_packed) const {
    if (!active_) return is_packed ? packed(t) : batched(t);
    Operand o;
    o.ptr = t.data_ptr();
    o.batch_stride = t.stride(0);
    o.row_stride = stride_from_end(t, 2);
    o.head_stride = stride_from_end(t, 2) * groups();
    return o;
  }

  // Query rows of the packed problem the kernels see (params.total_q): B * G folded, else Tq.
  int64_t kernel_total_q(int64_t total_q) const {
    return active_ ? int64_t(b_) * groups() : total_q;
  }

 private:
  int b_, seqlen_q_, h_, h_k_, d_;
  bool active_;
};

}  // namespace flash_attn_wheels::binding
