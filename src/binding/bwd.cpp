// Backward entry points: bwd (padded batch) and varlen_bwd (packed batch).
// Contracts are documented in ops.h and docs/operators.md.
#include "ops.h"

#include <initializer_list>
#include <vector>

#include "checks.h"
#include "dispatch.h"
#include "params.h"
#include "tensor_api.h"

namespace flash_attn_wheels::binding {

namespace {

// fp32 scratch in which the kernels accumulate dq before converting it to q's dtype.
//   rows_shape: the leading dims of one copy, e.g. {B, Sq_r} or {Tq + 128 * B}.
// Non-deterministic: one copy, updated with atomic adds from every key block.
// Deterministic: one zeroed copy per key-block "slot" of the launch grid, reduced in a fixed
// order afterwards; the slot count is ceil(num_SMs / (B * H)), as the launcher computes it.
struct DqAccumulator {
  Tensor buffer;
  int64_t split_stride = 0;  // elements between the per-slot copies (0 = single copy)
};

DqAccumulator make_dq_accumulator(std::vector<int64_t> rows_shape, int h, int d_rounded, int b,
                                  bool deterministic, const Device& device) {
  rows_shape.push_back(h);
  rows_shape.push_back(d_rounded);
  DqAccumulator acc;
  if (!deterministic) {
    acc.buffer = alloc(rows_shape, kFloat, device);
    return acc;
  }
  const int64_t bh = int64_t(b) * h;
  const int64_t slots = (sm_count(device.index()) + bh - 1) / bh;
  rows_shape.insert(rows_shape.begin(), slots);
  acc.buffer = alloc_zeros(rows_shape, kFloat, device);
  acc.split_stride = acc.buffer.stride(0);
  return acc;
}

// dk/dv are produced per query head; for MQA/GQA the caller's tensors have Hk heads, so the
// kernels write into H-head buffers that are summed over each group afterwards.
Tensor per_query_head_grad(const Tensor& grad, std::vector<int64_t> shape_with_h,
                               bool grouped) {
  if (!grouped) return grad;
  return alloc(shape_with_h, grad.scalar_type(), grad.device());
}

// Sums (..., Hk * G, D) into (..., Hk, D).  `head_dim_index` is the position of the head dim.
void reduce_groups(Tensor& into, const Tensor& expanded, int64_t head_dim_index,
                   int64_t h_k, int64_t groups) {
  std::vector<int64_t> shape;
  for (int64_t i = 0; i < expanded.dim(); ++i) shape.push_back(expanded.size(i));
  shape[head_dim_index] = h_k;
  shape.insert(shape.begin() + head_dim_index + 1, groups);
  sum_into(into, reshaped(expanded, shape), head_dim_index + 1);
}

// Zeroes every gradient the kernels would have written (zero_tensors, or nothing to attend to).
void zero_grads(std::initializer_list<Tensor> grads) {
  for (const Tensor& g : grads) zero_out(g);
}

// Runs the backward kernels, or zeroes the gradients when there are no queries or no keys, then
// sums the per-query-head dk/dv of MQA/GQA back to Hk heads (`head_dim_index`: 2 for (B, S, H, D),
// 1 for (T, H, D)).
void run_backward(BwdParams& params, bool empty, DeviceIndex device, Tensor& dq,
                  Tensor& dk, Tensor& dv, const Tensor& dk_h, const Tensor& dv_h,
                  const Tensor& softmax_d, int64_t head_dim_index, int64_t h, int64_t h_k) {
  if (empty) {
    zero_grads({dq, dk_h, dv_h, softmax_d});
  } else {
    run_bwd(params, current_stream(device));
  }
  if (h != h_k) {
    reduce_groups(dk, dk_h, head_dim_index, h_k, h / h_k);
    reduce_groups(dv, dv_h, head_dim_index, h_k, h / h_k);
  }
}

void set_common_bwd(BwdParams& params, const ArgChecker& chk, const Device& device,
                    const std::optional<Tensor>& alibi_slopes, double dropout_p,
                    double softmax_scale, double softcap, const Mask& mask,
                    const DqAccumulator& acc, bool deterministic, const Tensor& lse,
                    const Tensor& softmax_d) {
  params.softmax_lse_ptr = lse.data_ptr();
  params.dsoftmax_sum = softmax_d.data_ptr();
  params.dq_accum_ptr = acc.buffer.data_ptr();
  params.dq_accum_split_stride = acc.split_stride;
  params.deterministic = deterministic;
  set_softmax(params, softmax_scale, softcap);
  set_dropout(params, dropout_p);
  set_mask(params, mask);
  set_alibi(params, alibi_slopes, chk, params.b, params.h, device);
}

}  // namespace

// ---------------------------------------------------------------------------------------------

std::tuple<Tensor, Tensor, Tensor, Tensor> bwd(
    const Tensor& dout_arg, const Tensor& q, const Tensor& k, const Tensor& v,
    const Tensor& out, const Tensor& softmax_lse,
    const std::optional<Tensor>& alibi_slopes, double dropout_p, double softmax_scale,
    bool is_causal, int64_t window_size_left, int64_t window_size_right, double softcap,
    bool deterministic, const Tensor& rng_state) {
  const ArgChecker chk("flash_attn::bwd");
  const Tensor dout = with_unit_last_stride(dout_arg);  // autograd may hand a strided one

  // -- validate ---------------------------------------------------------------------------------
  chk.query(q);
  chk.like_query(k, "k", q);
  chk.like_query(v, "v", q);
  chk.like_query(out, "out", q);
  chk.like_query(dout, "dout", q);
  chk.rank(q, "q", 4, "(B, Sq, H, D)");
  chk.rank(k, "k", 4, "(B, Sk, Hk, D)");
  const int64_t B = q.size(0), Sq = q.size(1), H = q.size(2), D = q.size(3);
  const int64_t Sk = k.size(1), Hk = k.size(2);
  chk.batch(B);
  chk.head_dim(D, "q");
  chk.heads(H, Hk);
  chk.shape(k, "k", "(B, Sk, Hk, D)", {B, Sk, Hk, D});
  chk.shape(v, "v", "(B, Sk, Hk, D)", {B, Sk, Hk, D});
  chk.shape(out, "out", "(B, Sq, H, D)", {B, Sq, H, D});
  chk.shape(dout, "dout", "(B, Sq, H, D)", {B, Sq, H, D});
  const Device device = q.device();
  chk.same_device(softmax_lse, "softmax_lse", device);
  chk.dtype(softmax_lse, "softmax_lse", kFloat);
  chk.shape(softmax_lse, "softmax_lse", "(B, H, Sq)", {B, H, Sq});
  chk.fits_int(Sq, "Sq");
  chk.fits_int(Sk, "Sk");
  chk.window(window_size_left, window_size_right);
  chk.dropout(dropout_p, softcap);

  const DeviceGuard guard(device);
  require_ampere_or_newer(device.index(), chk);

  const Mask mask = make_mask(is_causal, window_size_left, window_size_right, int(Sq), int(Sk),
                              alibi_slopes.has_value(), /*single_query_shortcut=*/false);
  const Dims dims{int(B), int(Sq), int(Sk), int(H), int(Hk), int(D)};
  const bool grouped = H != Hk;

  // -- results and scratch ----------------------------------------------------------------------
  const int sq_rounded = round_up(dims.seqlen_q, kSeqPad);
  Tensor dq = alloc_like(q);
  Tensor dk = alloc_like(k);
  Tensor dv = alloc_like(v);
  // Zeroed: the preprocessing kernel writes whole row tiles, which need not reach Sq_r.
  Tensor softmax_d = alloc_zeros({B, H, sq_rounded}, kFloat, device);
  const DqAccumulator acc = make_dq_accumulator({B, sq_rounded}, dims.h, padded_head_dim(dims.d),
                                                dims.b, deterministic, device);
  Tensor dk_h = per_query_head_grad(dk, {B, Sk, H, D}, grouped);
  Tensor dv_h = per_query_head_grad(dv, {B, Sk, H, D}, grouped);
  const Tensor lse = as_contiguous(softmax_lse);

  // -- parameters -------------------------------------------------------------------------------
  BwdParams params{};
  start_params(params, dims, q.scalar_type() == kBFloat16);
  set_forward_operands(params, batched(q), batched(k), batched(v), batched(out));
  set_backward_operands(params, batched(dout), batched(dq), batched(dk_h), batched(dv_h));
  set_common_bwd(params, chk, device, alibi_slopes, dropout_p, softmax_scale, softcap, mask, acc,
                 deterministic, lse, softmax_d);
  // softmax_d: >= 128 fp32 per (batch, head), a valid pointer for the no-dropout case.
  const Tensor rng = set_backward_rng(params, dropout_p, rng_state, device, chk, softmax_d);

  // -- run --------------------------------------------------------------------------------------
  run_backward(params, Sq == 0 || Sk == 0, device.index(), dq, dk, dv, dk_h, dv_h, softmax_d,
               /*head_dim_index=*/2, H, Hk);
  return {dq, dk, dv, softmax_d};
}

// ---------------------------------------------------------------------------------------------

std::tuple<Tensor, Tensor, Tensor, Tensor> varlen_bwd(
    const Tensor& dout_arg, const Tensor& q, const Tensor& k, const Tensor& v,
    const Tensor& out, const Tensor& softmax_lse, const Tensor& cu_seqlens_q,
    const Tensor& cu_seqlens_k, const std::optional<Tensor>& alibi_slopes,
    int64_t max_seqlen_q, int64_t max_seqlen_k, double dropout_p, double softmax_scale,
    bool zero_tensors, bool is_causal, int64_t window_size_left, int64_t window_size_right,
    double softcap, bool deterministic, const Tensor& rng_state) {
  const ArgChecker chk("flash_attn::varlen_bwd");
  const Tensor dout = with_unit_last_stride(dout_arg);

  // -- validate ---------------------------------------------------------------------------------
  chk.query(q);
  chk.like_query(k, "k", q);
  chk.like_query(v, "v", q);
  chk.like_query(out, "out", q);
  chk.like_query(dout, "dout", q);
  chk.rank(q, "q", 3, "(Tq, H, D)");
  chk.rank(k, "k", 3, "(Tk, Hk, D)");
  const Device device = q.device();
  const int64_t B = chk.cu_seqlens(cu_seqlens_q, cu_seqlens_k, device);
  const int64_t Tq = q.size(0), H = q.size(1), D = q.size(2);
  const int64_t Tk = k.size(0), Hk = k.size(1);
  chk.head_dim(D, "q");
  chk.heads(H, Hk);
  chk.shape(k, "k", "(Tk, Hk, D)", {Tk, Hk, D});
  chk.shape(v, "v", "(Tk, Hk, D)", {Tk, Hk, D});
  chk.shape(out, "out", "(Tq, H, D)", {Tq, H, D});
  chk.shape(dout, "dout", "(Tq, H, D)", {Tq, H, D});
  chk.same_device(softmax_lse, "softmax_lse", device);
  chk.dtype(softmax_lse, "softmax_lse", kFloat);
  chk.shape(softmax_lse, "softmax_lse", "(H, Tq)", {H, Tq});
  chk.fits_int(Tq, "Tq");
  chk.fits_int(max_seqlen_q, "max_seqlen_q");
  chk.fits_int(max_seqlen_k, "max_seqlen_k");
  chk.window(window_size_left, window_size_right);
  chk.dropout(dropout_p, softcap);

  const DeviceGuard guard(device);
  require_ampere_or_newer(device.index(), chk);

  const Mask mask = make_mask(is_causal, window_size_left, window_size_right, int(max_seqlen_q),
                              int(max_seqlen_k), alibi_slopes.has_value(),
                              /*single_query_shortcut=*/false);
  const Dims dims{int(B), int(max_seqlen_q), int(max_seqlen_k), int(H), int(Hk), int(D)};
  const bool grouped = H != Hk;

  // -- results and scratch ----------------------------------------------------------------------
  // Packed per-token buffers get kSeqPad spare rows per sequence so that a 128-row tile that
  // runs past the end of one sequence never lands in the next one (no bounds checks needed).
  const int64_t padded_rows = Tq + int64_t(kSeqPad) * B;
  Tensor dq = alloc_like(q);
  Tensor dk = alloc_like(k);
  Tensor dv = alloc_like(v);
  // Zeroed: each sequence's spare rows past its last row tile are never written.
  Tensor softmax_d = alloc_zeros({H, padded_rows}, kFloat, device);
  const DqAccumulator acc = make_dq_accumulator({padded_rows}, dims.h, padded_head_dim(dims.d),
                                                dims.b, deterministic, device);
  Tensor dk_h = per_query_head_grad(dk, {Tk, H, D}, grouped);
  Tensor dv_h = per_query_head_grad(dv, {Tk, H, D}, grouped);
  const Tensor lse = as_contiguous(softmax_lse);
  if (zero_tensors) zero_grads({dq, dk_h, dv_h});

  // -- parameters -------------------------------------------------------------------------------
  BwdParams params{};
  start_params(params, dims, q.scalar_type() == kBFloat16);
  set_forward_operands(params, packed(q), packed(k), packed(v), packed(out));
  set_backward_operands(params, packed(dout), packed(dq), packed(dk_h), packed(dv_h));
  params.cu_seqlens_q = static_cast<int*>(cu_seqlens_q.data_ptr());
  params.cu_seqlens_k = static_cast<int*>(cu_seqlens_k.data_ptr());
  params.total_q = static_cast<int>(Tq);
  params.unpadded_lse = true;  // LSE is (H, Tq)
  set_common_bwd(params, chk, device, alibi_slopes, dropout_p, softmax_scale, softcap, mask, acc,
                 deterministic, lse, softmax_d);
  // softmax_d: >= 128 fp32 per (batch, head), a valid pointer for the no-dropout case.
  const Tensor rng = set_backward_rng(params, dropout_p, rng_state, device, chk, softmax_d);

  // -- run --------------------------------------------------------------------------------------
  run_backward(params, max_seqlen_q == 0 || max_seqlen_k == 0, device.index(), dq, dk, dv, dk_h,
               dv_h, softmax_d, /*head_dim_index=*/1, H, Hk);
  return {dq, dk, dv, softmax_d};
}

}  // namespace flash_attn_wheels::binding
