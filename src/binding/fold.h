// Decode-time head folding for MQA/GQA (used by fwd, varlen_fwd and fwd_kvcache).
//
// With one query token per sequence and G = H / Hk query heads sharing each key/value head,
// the G heads of a group can be presented to the kernels as G query *rows* of a single head:
//   q (B, 1, H, D)  ->  (B, G, Hk, D)        [head h = hk * G + g  becomes  row g, head hk]
// One thread block then serves a whole group from a single pass over that head's K/V, instead
// of G blocks each re-reading it.  Rows of one head must not interact with their position for
// this to be exact, so it is only used without mask, ALiBi or dropout (see can_fold_heads).
// Results are mapped back so callers always see (B, 1, H, D) / (B, H, 1) (or the packed forms).
#pragma once

#include <ATen/ATen.h>

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

  // (B, 1, H, D) -> (B, G, Hk, D); a view when q's strides allow it.
  at::Tensor fold_batched(const at::Tensor& q) const {
    if (!active_) return q;
    return q.reshape({b_, h_k_, groups(), q.size(-1)}).transpose(1, 2);
  }

  // (B, H, D) (one token per sequence) -> (B * G, Hk, D), contiguous.
  at::Tensor fold_packed(const at::Tensor& q) const {
    if (!active_) return q;
    return q.reshape({b_, h_k_, groups(), q.size(-1)})
        .transpose(1, 2)
        .reshape({int64_t(b_) * groups(), h_k_, q.size(-1)});
  }

  // (B, G, Hk, D) -> (B, 1, H, D).  The last dim is taken from `out` (it may be padded).
  at::Tensor unfold_out_batched(const at::Tensor& out) const {
    if (!active_) return out;
    return out.transpose(1, 2).reshape({b_, 1, h_, out.size(-1)});
  }

  // (B, Hk, G) -> (B, H, 1).
  at::Tensor unfold_lse_batched(const at::Tensor& lse) const {
    if (!active_) return lse;
    return lse.reshape({b_, h_, 1});
  }

  // (B * G, Hk, D) -> (B, H, D).
  at::Tensor unfold_out_packed(const at::Tensor& out) const {
    if (!active_) return out;
    return out.reshape({b_, groups(), h_k_, out.size(-1)})
        .transpose(1, 2)
        .reshape({b_, h_, out.size(-1)});
  }

  // The kernels write a folded varlen LSE as (Hk, G, B); that is (H, Tq) with Tq == B.
  at::Tensor unfold_lse_packed(const at::Tensor& lse) const {
    if (!active_) return lse;
    return lse.reshape({h_, b_});
  }

 private:
  int b_, seqlen_q_, h_, h_k_, d_;
  bool active_;
};

}  // namespace flash_attn_wheels::binding
