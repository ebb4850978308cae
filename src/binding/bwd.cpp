// Backward entry points: bwd (padded batch) and varlen_bwd (packed batch).
// Contracts are documented in ops.h and docs/operators.md.
#include "ops.h"

#include <initializer_list>

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>

#include "checks.h"
#include "dispatch.h"
#include "params.h"

namespace flash_attn_wheels::binding {

namespace {

// fp32 scratch in which the kernels accumulate dq before converting it to q's dtype.
//   rows_shape: the leading dims of one copy, e.g. {B, Sq_r} or {Tq + 128 * B}.
// Non-deterministic: one copy, updated with atomic adds from every key block.
// Deterministic: one zeroed copy per key-block "slot" of the launch grid, reduced in a fixed
// order afterwards; the slot count is ceil(num_SMs / (B * H)), as the launcher computes it.
struct DqAccumulator {
  at::Tensor buffer;
  int64_t split_stride = 0;  // elements between the per-slot copies (0 = single copy)
};

DqAccumulator make_dq_accumulator(std::vector<int64_t> rows_shape, int h, int d_rounded, int b,
                                  bool deterministic, c10::DeviceIndex device,
                                  const at::TensorOptions& f32) {
  rows_shape.push_back(h);
  rows_shape.push_back(d_rounded);
  DqAccumulator acc;
  if (!deterministic) {
    acc.buffer = at::empty(rows_shape, f32);
    return acc;
  }
  const int64_t bh = int64_t(b) * h;
  const int64_t slots = (sm_count(device) + bh - 1) / bh;
  rows_shape.insert(rows_shape.begin(), slots);
  acc.buffer = at::zeros(rows_shape, f32);
  acc.split_stride = acc.buffer.stride(0);
  return acc;
}

// dk/dv are produced per query head; for MQA/GQA the caller's tensors have Hk heads, so the
// kernels write into H-head buffers that are summed over each group afterwards.
at::Tensor per_query_head_grad(const at::Tensor& grad, std::vector<int64_t> shape_with_h,
                               bool grouped) {
  if (!grouped) return grad;
  return at::empty(shape_with_h, grad.options());
}

// Sums (..., Hk * G, D) into (..., Hk, D).  `head_dim_index` is the position of the head dim.
void reduce_groups(at::Tensor& into, const at::Tensor& expanded, int64_t head_dim_index,
                   int64_t h_k, int64_t groups) {
  std::vector<int64_t> shape(expanded.sizes().begin(), expanded.sizes().end());
  shape[head_dim_index] = h_k;
  shape.insert(shape.begin() + head_dim_index + 1, groups);
  at::sum_out(into, expanded.reshape(shape), {head_dim_index + 1});
}

// Zeroes every gradient the kernels would have written (zero_tensors, or nothing to attend to).
void zero_grads(std::initializer_list<at::Tensor> grads) {
  for (at::Tensor g : grads) g.zero_();
}

// Runs the backward kernels, or zeroes the gradients when there are no queries or no keys, then
// sums the per-query-head dk/dv of MQA/GQA back to Hk heads (`head_dim_index`: 2 for (B, S, H, D),
// 1 for (T, H, D)).
void run_backward(BwdParams& params, bool empty, c10::DeviceIndex device, at::Tensor& dq,
                  at::Tensor& dk, at::Tensor& dv, const at::Tensor& dk_h, const at::Tensor& dv_h,
                  const at::Tensor& softmax_d, int64_t head_dim_index, int64_t h, int64_t h_k) {
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

void set_common_bwd(BwdParams& params, const ArgChecker& chk, const c10::Device& device,
                    const std::optional<at::Tensor>& alibi_slopes, double dropout_p,
                    double softmax_scale, double softcap, const Mask& mask,
                    const DqAccumulator& acc, bool deterministic, const at::Tensor& lse,
                    const at::Tensor& softmax_d) {
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

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> bwd(
    const at::Tensor& dout_arg, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& out, const at::Tensor& softmax_lse,
    const std::optional<at::Tensor>& alibi_slopes, double dropout_p, double softmax_scale,
    bool is_causal, int64_t window_size_left, int64_t window_size_right, double softcap,
    bool deterministic, const at::Tensor& rng_state) {
  const ArgChecker chk("flash_attn::bwd");
  const at::Tensor dout = with_unit_last_stride(dout_arg);  // autograd may hand a strided one

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
  const c10::Device device = q.device();
  chk.same_device(softmax_lse, "softmax_lse", device);
  chk.dtype(softmax_lse, "softmax_lse", at::kFloat);
  chk.shape(softmax_lse, "softmax_lse", "(B, H, Sq)", {B, H, Sq});
  chk.fits_int(Sq, "Sq");
  chk.fits_int(Sk, "Sk");
  chk.window(window_size_left, window_size_right);
  chk.dropout(dropout_p, softcap);

  const c10::cuda::CUDAGuard guard(device);
  require_ampere_or_newer(device.index(), chk);

  const Mask mask = make_mask(is_causal, window_size_left, window_size_right, int(Sq), int(Sk),
                              alibi_slopes.has_value(), /*single_query_shortcut=*/false);
  const Dims dims{int(B), int(Sq), int(Sk), int(H), int(Hk), int(D)};
  const bool grouped = H != Hk;

  // -- results and scratch ----------------------------------------------------------------------
  const auto opts = q.options();
  const auto f32 = opts.dtype(at::kFloat);
  const int sq_rounded = round_up(dims.seqlen_q, kSeqPad);
  at::Tensor dq = at::empty_like(q);
  at::Tensor dk = at::empty_like(k);
  at::Tensor dv = at::empty_like(v);
  // Zeroed: the preprocessing kernel writes whole row tiles, which need not reach Sq_r.
  at::Tensor softmax_d = at::zeros({B, H, sq_rounded}, f32);
  const DqAccumulator acc = make_dq_accumulator({B, sq_rounded}, dims.h, padded_head_dim(dims.d),
                                                dims.b, deterministic, device.index(), f32);
  at::Tensor dk_h = per_query_head_grad(dk, {B, Sk, H, D}, grouped);
  at::Tensor dv_h = per_query_head_grad(dv, {B, Sk, H, D}, grouped);
  const at::Tensor lse = softmax_lse.contiguous();

  // -- parameters -------------------------------------------------------------------------------
  BwdParams params{};
  start_params(params, dims, q.scalar_type() == at::kBFloat16);
  set_forward_operands(params, batched(q), batched(k), batched(v), batched(out));
  set_backward_operands(params, batched(dout), batched(dq), batched(dk_h), batched(dv_h));
  set_common_bwd(params, chk, device, alibi_slopes, dropout_p, softmax_scale, softcap, mask, acc,
                 deterministic, lse, softmax_d);
  // softmax_d: >= 128 fp32 per (batch, head), a valid pointer for the no-dropout case.
  const at::Tensor rng = set_backward_rng(params, dropout_p, rng_state, device, chk, softmax_d);

  // -- run --------------------------------------------------------------------------------------
  run_backward(params, Sq == 0 || Sk == 0, device.index(), dq, dk, dv, dk_h, dv_h, softmax_d,
               /*head_dim_index=*/2, H, Hk);
  return {dq, dk, dv, softmax_d};
}

// ---------------------------------------------------------------------------------------------

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> varlen_bwd(
    const at::Tensor& dout_arg, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& out, const at::Tensor& softmax_lse, const at::Tensor& cu_seqlens_q,
    const at::Tensor& cu_seqlens_k, const std::optional<at::Tensor>& alibi_slopes,
    int64_t max_seqlen_q, int64_t max_seqlen_k, double dropout_p, double softmax_scale,
    bool zero_tensors, bool is_causal, int64_t window_size_left, int64_t window_size_right,
    double softcap, bool deterministic, const at::Tensor& rng_state) {
  const ArgChecker chk("flash_attn::varlen_bwd");
  const at::Tensor dout = with_unit_last_stride(dout_arg);

  // -- validate ---------------------------------------------------------------------------------
  chk.query(q);
  chk.like_query(k, "k", q);
  chk.like_query(v, "v", q);
  chk.like_query(out, "out", q);
  chk.like_query(dout, "dout", q);
  chk.rank(q, "q", 3, "(Tq, H, D)");
  chk.rank(k, "k", 3, "(Tk, Hk, D)");
  const c10::Device device = q.device();
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
  chk.dtype(softmax_lse, "softmax_lse", at::kFloat);
  chk.shape(softmax_lse, "softmax_lse", "(H, Tq)", {H, Tq});
  chk.fits_int(Tq, "Tq");
  chk.fits_int(max_seqlen_q, "max_seqlen_q");
  chk.fits_int(max_seqlen_k, "max_seqlen_k");
  chk.window(window_size_left, window_size_right);
  chk.dropout(dropout_p, softcap);

  const c10::cuda::CUDAGuard guard(device);
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
  const auto opts = q.options();
  const auto f32 = opts.dtype(at::kFloat);
  at::Tensor dq = at::empty_like(q);
  at::Tensor dk = at::empty_like(k);
  at::Tensor dv = at::empty_like(v);
  // Zeroed: each sequence's spare rows past its last row tile are never written.
  at::Tensor softmax_d = at::zeros({H, padded_rows}, f32);
  const DqAccumulator acc = make_dq_accumulator({padded_rows}, dims.h, padded_head_dim(dims.d),
                                                dims.b, deterministic, device.index(), f32);
  at::Tensor dk_h = per_query_head_grad(dk, {Tk, H, D}, grouped);
  at::Tensor dv_h = per_query_head_grad(dv, {Tk, H, D}, grouped);
  const at::Tensor lse = softmax_lse.contiguous();
  if (zero_tensors) zero_grads({dq, dk_h, dv_h});

  // -- parameters -------------------------------------------------------------------------------
  BwdParams params{};
  start_params(params, dims, q.scalar_type() == at::kBFloat16);
  set_forward_operands(params, packed(q), packed(k), packed(v), packed(out));
  set_backward_operands(params, packed(dout), packed(dq), packed(dk_h), packed(dv_h));
  params.cu_seqlens_q = static_cast<int*>(cu_seqlens_q.data_ptr());
  params.cu_seqlens_k = static_cast<int*>(cu_seqlens_k.data_ptr());
  params.total_q = static_cast<int>(Tq);
  params.unpadded_lse = true;  // LSE is (H, Tq)
  set_common_bwd(params, chk, device, alibi_slopes, dropout_p, softmax_scale, softcap, mask, acc,
                 deterministic, lse, softmax_d);
  // softmax_d: >= 128 fp32 per (batch, head), a valid pointer for the no-dropout case.
  const at::Tensor rng = set_backward_rng(params, dropout_p, rng_state, device, chk, softmax_d);

  // -- run --------------------------------------------------------------------------------------
  run_backward(params, max_seqlen_q == 0 || max_seqlen_k == 0, device.index(), dq, dk, dv, dk_h,
               dv_h, softmax_d, /*head_dim_index=*/1, H, Hk);
  return {dq, dk, dv, softmax_d};
}

}  // namespace flash_attn_wheels::binding
