// Forward entry points: fwd (padded batch) and varlen_fwd (packed batch, optionally paged KV).
// Contracts are documented in ops.h and docs/operators.md.
#include "ops.h"

#include <limits>

#include "checks.h"
#include "dispatch.h"
#include "fold.h"
#include "params.h"
#include "tensor_api.h"

namespace flash_attn_wheels::binding {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Empty (0,) placeholder or zeroed (B, H, Sq_r, Sk_r) buffer for the attention probabilities
// (zeroed: the kernels skip the tiles a causal or local mask removes, which would otherwise hold
// whatever the allocator handed out).
Tensor probabilities_buffer(bool wanted, const Dims& dims, DType dtype, const Device& device) {
  if (!wanted) return alloc({0}, dtype, device);
  return alloc_zeros({dims.b, dims.h, round_up(dims.seqlen_q, kSeqPad), round_up(dims.seqlen_k, kSeqPad)},
               dtype, device);
}

void check_return_softmax(bool return_softmax, double dropout_p, const ArgChecker& chk) {
  chk.expect(!return_softmax || dropout_p > 0.0,
             "return_softmax=True needs dropout_p > 0 (the kernels record the attention "
             "probabilities only on their dropout path), got dropout_p=", dropout_p);
}

// The Philox state a forward returns.  The kernels write it only on their dropout path, so
// without dropout the (0,) tensor stands for "no state" (set_forward_rng allocated none); with
// dropout and no launch (no keys or no queries) it is zeroed.  Every output is then
// deterministic, which torch.library.opcheck and torch.compile's eager-vs-traced
// comparison need (the fakes in flash_attn/_ops.py return the same shapes).
Tensor returned_rng_state(const Tensor& used, double dropout_p, bool launched,
                              const Device& device) {
  if (dropout_p <= 0.0) return alloc({0}, kLong, device);
  if (!launched) zero_out(used);
  return used;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

std::tuple<Tensor, Tensor, Tensor, Tensor> fwd(
    const Tensor& q_arg, const Tensor& k_arg, const Tensor& v_arg,
    const std::optional<Tensor>& alibi_slopes, double dropout_p, double softmax_scale,
    bool is_causal, int64_t window_size_left, int64_t window_size_right, double softcap,
    bool return_softmax, const std::optional<Tensor>& rng_state) {
  const ArgChecker chk("flash_attn::fwd");
  const Tensor q = with_unit_last_stride(q_arg);
  const Tensor k = with_unit_last_stride(k_arg);
  const Tensor v = with_unit_last_stride(v_arg);

  // -- validate ---------------------------------------------------------------------------------
  chk.query(q);
  chk.like_query(k, "k", q);
  chk.like_query(v, "v", q);
  chk.rank(q, "q", 4, "(B, Sq, H, D)");
  chk.rank(k, "k", 4, "(B, Sk, Hk, D)");
  chk.rank(v, "v", 4, "(B, Sk, Hk, D)");
  const int64_t B = q.size(0), Sq = q.size(1), H = q.size(2), D = q.size(3);
  const int64_t Sk = k.size(1), Hk = k.size(2);
  chk.batch(B);
  chk.head_dim(D, "q");
  chk.heads(H, Hk);
  chk.shape(k, "k", "(B, Sk, Hk, D)", {B, Sk, Hk, D});
  chk.shape(v, "v", "(B, Sk, Hk, D)", {B, Sk, Hk, D});
  chk.fits_int(Sq, "Sq");
  chk.fits_int(Sk, "Sk");
  chk.window(window_size_left, window_size_right);
  chk.dropout(dropout_p, softcap);
  check_return_softmax(return_softmax, dropout_p, chk);

  const Device device = q.device();
  const DeviceGuard guard(device);
  require_ampere_or_newer(device.index(), chk);

  // -- kernel view of the problem ----------------------------------------------------------------
  const bool has_alibi = alibi_slopes.has_value();
  const Mask mask = make_mask(is_causal, window_size_left, window_size_right, int(Sq), int(Sk),
                              has_alibi, /*single_query_shortcut=*/true);
  const HeadFold fold(int(B), int(Sq), int(H), int(Hk), int(D),
                      can_fold_heads(int(Sq), int(H), int(Hk), mask, dropout_p, has_alibi));
  const Dims dims = fold.dims(int(Sk));

  // -- results (in the caller's shapes, folded or not: fold.h) ------------------------------------
  Tensor out = alloc_like(q);
  Tensor lse = alloc({B, H, Sq}, kFloat, device);
  Tensor p = probabilities_buffer(return_softmax, dims, q.scalar_type(), device);

  // -- parameters -------------------------------------------------------------------------------
  FwdParams params{};
  start_params(params, dims, q.scalar_type() == kBFloat16);
  set_forward_operands(params, fold.operand_of(q, /*is_packed=*/false), batched(k), batched(v),
                       fold.operand_of(out, /*is_packed=*/false));
  params.softmax_lse_ptr = lse.data_ptr();
  params.p_ptr = return_softmax ? p.data_ptr() : nullptr;
  set_softmax(params, softmax_scale, softcap);
  set_dropout(params, dropout_p);
  set_mask(params, mask);
  set_alibi(params, alibi_slopes, chk, dims.b, dims.h, device);
  const SplitKvScratch scratch =
      set_split_kv(params, /*requested=*/0, sm_count(device.index()), device, chk);
  Tensor rng_keep_alive;
  Tensor rng_used =
      set_forward_rng(params, dropout_p, rng_state, device, chk, rng_keep_alive);

  // -- run --------------------------------------------------------------------------------------
  const bool launch = Sk > 0 && dims.seqlen_q > 0;
  if (Sk == 0) {
    // No keys: zero output; LSE +inf makes every recomputed probability exp(s - lse) zero.
    zero_out(out);
    fill_with(lse, kInf);
  } else if (launch) {
    run_fwd(params, current_stream(device.index()), /*split_kv=*/params.num_splits > 1);
  }
  if (return_softmax && launch) {  // every sequence has the same lengths: two slices
    zero_out(narrowed(p, 2, dims.seqlen_q, p.size(2) - dims.seqlen_q));
    zero_out(narrowed(p, 3, dims.seqlen_k, p.size(3) - dims.seqlen_k));
  }

  return {out, lse, p, returned_rng_state(rng_used, dropout_p, launch, device)};
}

// ---------------------------------------------------------------------------------------------

std::tuple<Tensor, Tensor, Tensor, Tensor> varlen_fwd(
    const Tensor& q_arg, const Tensor& k_arg, const Tensor& v_arg,
    const Tensor& cu_seqlens_q, const Tensor& cu_seqlens_k,
    const std::optional<Tensor>& seqused_k, const std::optional<Tensor>& leftpad_k,
    const std::optional<Tensor>& block_table, const std::optional<Tensor>& alibi_slopes,
    int64_t max_seqlen_q, int64_t max_seqlen_k, double dropout_p, double softmax_scale,
    bool zero_tensors, bool is_causal, int64_t window_size_left, int64_t window_size_right,
    double softcap, bool return_softmax, const std::optional<Tensor>& rng_state) {
  const ArgChecker chk("flash_attn::varlen_fwd");
  const Tensor q = with_unit_last_stride(q_arg);
  const Tensor k = with_unit_last_stride(k_arg);
  const Tensor v = with_unit_last_stride(v_arg);
  const bool paged = block_table.has_value();

  // -- validate ---------------------------------------------------------------------------------
  chk.query(q);
  chk.like_query(k, "k", q);
  chk.like_query(v, "v", q);
  chk.rank(q, "q", 3, "(Tq, H, D)");
  const char* kv_dims = paged ? "(num_blocks, page_block_size, Hk, D)" : "(Tk, Hk, D)";
  chk.rank(k, "k", paged ? 4 : 3, kv_dims);
  chk.rank(v, "v", paged ? 4 : 3, kv_dims);
  const Device device = q.device();
  const int64_t B = chk.cu_seqlens(cu_seqlens_q, cu_seqlens_k, device);
  const int64_t Tq = q.size(0), H = q.size(1), D = q.size(2);
  const int64_t Hk = paged ? k.size(2) : k.size(1);
  chk.head_dim(D, "q");
  chk.heads(H, Hk);

  int64_t page_block_size = 1;
  if (paged) {
    const Tensor& bt = *block_table;
    chk.same_device(bt, "block_table", device);
    chk.dtype(bt, "block_table", kInt);
    chk.rank(bt, "block_table", 2, "(B, max_blocks)");
    chk.last_dim_contiguous(bt, "block_table");
    chk.shape(bt, "block_table", "(B, max_blocks)", {B, bt.size(1)});
    const int64_t num_blocks = k.size(0);
    page_block_size = k.size(1);
    chk.expect(page_block_size > 0 && page_block_size % 256 == 0,
               "page_block_size (dim 1 of the paged k/v) must be a positive multiple of 256, got ",
               page_block_size);
    chk.shape(k, "k", "(num_blocks, page_block_size, Hk, D)", {num_blocks, page_block_size, Hk, D});
    chk.shape(v, "v", "(num_blocks, page_block_size, Hk, D)", {num_blocks, page_block_size, Hk, D});
  } else {
    const int64_t Tk = k.size(0);
    chk.shape(k, "k", "(Tk, Hk, D)", {Tk, Hk, D});
    chk.shape(v, "v", "(Tk, Hk, D)", {Tk, Hk, D});
  }
  if (seqused_k.has_value()) chk.int32_per_batch(*seqused_k, "seqused_k", B, device);
  if (leftpad_k.has_value()) {
    chk.expect(!paged, "leftpad_k cannot be combined with block_table (paged KV)");
    chk.int32_per_batch(*leftpad_k, "leftpad_k", B, device);
  }
  chk.fits_int(Tq, "Tq");
  chk.fits_int(max_seqlen_q, "max_seqlen_q");
  chk.fits_int(max_seqlen_k, "max_seqlen_k");
  chk.window(window_size_left, window_size_right);
  chk.dropout(dropout_p, softcap);
  check_return_softmax(return_softmax, dropout_p, chk);

  const DeviceGuard guard(device);
  require_ampere_or_newer(device.index(), chk);

  // -- kernel view of the problem ----------------------------------------------------------------
  const bool has_alibi = alibi_slopes.has_value();
  const Mask mask = make_mask(is_causal, window_size_left, window_size_right, int(max_seqlen_q),
                              int(max_seqlen_k), has_alibi, /*single_query_shortcut=*/true);
  // Folding needs exactly one query token per sequence.
  const bool fold_ok = Tq == B && can_fold_heads(int(max_seqlen_q), int(H), int(Hk), mask,
                                                 dropout_p, has_alibi);
  const HeadFold fold(int(B), int(max_seqlen_q), int(H), int(Hk), int(D), fold_ok);
  const Dims dims = fold.dims(int(max_seqlen_k));
  const int64_t total_q = fold.kernel_total_q(Tq);

  // -- results (in the caller's shapes, folded or not: fold.h) ------------------------------------
  Tensor out = alloc_like(q);
  Tensor lse = alloc({H, Tq}, kFloat, device);
  Tensor p = probabilities_buffer(return_softmax, dims, q.scalar_type(), device);
  if (zero_tensors) {
    zero_out(out);
    fill_with(lse, -kInf);
  }

  // -- parameters -------------------------------------------------------------------------------
  FwdParams params{};
  start_params(params, dims, q.scalar_type() == kBFloat16);
  // Folded q is a padded batch of G rows per sequence; otherwise cu_seqlens_q locates rows.
  const Operand q_op = fold.operand_of(q, /*is_packed=*/true);
  const Operand out_op = fold.operand_of(out, /*is_packed=*/true);
  // A paged cache is addressed per page: its "batch" stride is the page stride.
  const Operand k_op = paged ? batched(k) : packed(k);
  const Operand v_op = paged ? batched(v) : packed(v);
  set_forward_operands(params, q_op, k_op, v_op, out_op);
  params.cu_seqlens_q = fold.active() ? nullptr : static_cast<int*>(cu_seqlens_q.data_ptr());
  params.cu_seqlens_k = static_cast<int*>(cu_seqlens_k.data_ptr());
  params.seqused_k = seqused_k.has_value() ? static_cast<int*>(seqused_k->data_ptr()) : nullptr;
  params.leftpad_k = leftpad_k.has_value() ? static_cast<int*>(leftpad_k->data_ptr()) : nullptr;
  params.total_q = static_cast<int>(total_q);
  params.unpadded_lse = true;  // LSE is (H, Tq)
  params.seqlenq_ngroups_swapped = fold.active();
  params.softmax_lse_ptr = lse.data_ptr();
  params.p_ptr = return_softmax ? p.data_ptr() : nullptr;
  if (paged) {
    params.block_table = static_cast<int*>(block_table->data_ptr());
    params.block_table_batch_stride = block_table->stride(0);
    params.page_block_size = static_cast<int>(page_block_size);
  }
  set_softmax(params, softmax_scale, softcap);
  set_dropout(params, dropout_p);
  set_mask(params, mask);
  set_alibi(params, alibi_slopes, chk, dims.b, dims.h, device);
  // Split-KV only pays off for decoding, i.e. the folded case.
  const SplitKvScratch scratch =
      fold.active() ? set_split_kv(params, /*requested=*/0, sm_count(device.index()), device, chk)
                    : SplitKvScratch{};
  Tensor rng_keep_alive;
  Tensor rng_used =
      set_forward_rng(params, dropout_p, rng_state, device, chk, rng_keep_alive);

  // -- run --------------------------------------------------------------------------------------
  const bool launch = max_seqlen_k > 0 && dims.seqlen_q > 0 && total_q > 0;
  if (max_seqlen_k == 0) {
    zero_out(out);
    fill_with(lse, kInf);
  } else if (launch) {
    // Only the split-KV kernels read paged caches.
    run_fwd(params, current_stream(device.index()),
            /*split_kv=*/paged || params.num_splits > 1);
  }
  if (return_softmax && launch) {
    const Tensor len_q = lengths_of(cu_seqlens_q);
    const Tensor len_k = seqused_k.has_value() ? *seqused_k : lengths_of(cu_seqlens_k);
    clear_probability_padding(p, len_q, len_k);
  }

  return {out, lse, p, returned_rng_state(rng_used, dropout_p, launch, device)};
}

}  // namespace flash_attn_wheels::binding
