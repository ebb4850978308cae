// KV-cache forward (fwd_kvcache): attention of new queries against a (possibly paged) cache,
// optionally appending new keys/values to the cache in place and applying rotary embeddings.
// Contract documented in ops.h and docs/operators.md.
#include "ops.h"

#include <limits>

#include "checks.h"
#include "dispatch.h"
#include "fold.h"
#include "params.h"
#include "tensor_api.h"

namespace flash_attn_wheels::binding {

namespace {

// Rotary tables: cos and sin (Sr, rotary_dim / 2), q's dtype and device, contiguous.
int check_rotary(const Tensor& cos, const Tensor& sin, const Tensor& q,
                 int64_t head_dim, int64_t cache_len, const ArgChecker& chk) {
  for (const auto& [t, name] : {std::pair{&cos, "rotary_cos"}, std::pair{&sin, "rotary_sin"}}) {
    chk.same_device(*t, name, q.device());
    chk.same_dtype(*t, name, q.scalar_type());
    chk.contiguous(*t, name);
    chk.rank(*t, name, 2, "(Sr, rotary_dim / 2)");
  }
  const int64_t rows = cos.size(0);
  const int64_t rotary_dim = cos.size(1) * 2;
  chk.shape(sin, "rotary_sin", "(Sr, rotary_dim / 2) like rotary_cos", {rows, rotary_dim / 2});
  chk.expect(rotary_dim > 0 && rotary_dim % 16 == 0 && rotary_dim <= head_dim,
             "rotary_dim = 2 * rotary_cos.size(1) must be a positive multiple of 16 and at most "
             "the head dim ", head_dim, ", got ", rotary_dim);
  chk.expect(rows >= cache_len, "rotary_cos/rotary_sin must have at least as many rows (Sr = ",
             rows, ") as the cache has positions (", cache_len, ")");
  return static_cast<int>(rotary_dim);
}

}  // namespace

std::tuple<Tensor, Tensor> fwd_kvcache(
    const Tensor& q_arg, const Tensor& k_cache, const Tensor& v_cache,
    const std::optional<Tensor>& k_arg, const std::optional<Tensor>& v_arg,
    const std::optional<Tensor>& cache_seqlens, const std::optional<Tensor>& rotary_cos,
    const std::optional<Tensor>& rotary_sin, const std::optional<Tensor>& cache_batch_idx,
    const std::optional<Tensor>& cache_leftpad, const std::optional<Tensor>& block_table,
    const std::optional<Tensor>& alibi_slopes, double softmax_scale, bool is_causal,
    int64_t window_size_left, int64_t window_size_right, double softcap, bool rotary_interleaved,
    int64_t num_splits) {
  const ArgChecker chk("flash_attn::fwd_kvcache");
  const Tensor q = with_unit_last_stride(q_arg);
  const std::optional<Tensor> k =
      k_arg.has_value() ? std::optional<Tensor>(with_unit_last_stride(*k_arg)) : std::nullopt;
  const std::optional<Tensor> v =
      v_arg.has_value() ? std::optional<Tensor>(with_unit_last_stride(*v_arg)) : std::nullopt;
  const bool paged = block_table.has_value();
  const bool appending = k.has_value() || v.has_value();

  // -- validate ---------------------------------------------------------------------------------
  chk.query(q);
  for (const auto& [t, name] : {std::pair{&k_cache, "k_cache"}, std::pair{&v_cache, "v_cache"}}) {
    chk.same_device(*t, name, q.device());
    chk.same_dtype(*t, name, q.scalar_type());
    // A copy would lose the in-place append, so no ".contiguous()" advice here.
    chk.expect(t->dim() >= 1 && stride_from_end(*t, 1) == 1, name,
               " must have a contiguous last dimension (stride 1, got strides ", shape_text(t->strides()),
               "): it is updated in place, so it cannot be copied; allocate the cache with the "
               "head dim last and contiguous");
  }
  chk.rank(q, "q", 4, "(B, Sq, H, D)");
  const char* cache_dims =
      paged ? "(num_blocks, page_block_size, Hk, D)" : "(B_cache, Sk_cache, Hk, D)";
  chk.rank(k_cache, "k_cache", 4, cache_dims);
  chk.rank(v_cache, "v_cache", 4, cache_dims);
  const int64_t B = q.size(0), Sq = q.size(1), H = q.size(2), D = q.size(3);
  const int64_t Hk = k_cache.size(2);
  chk.batch(B);
  chk.head_dim(D, "q");
  chk.heads(H, Hk);
  const Device device = q.device();

  int64_t cache_len = 0;  // Sk: key positions addressable per sequence
  int64_t page_block_size = 1;
  if (paged) {
    chk.expect(!cache_batch_idx.has_value(),
               "cache_batch_idx cannot be combined with block_table (paged KV cache)");
    const Tensor& bt = *block_table;
    chk.same_device(bt, "block_table", device);
    chk.dtype(bt, "block_table", kInt);
    chk.rank(bt, "block_table", 2, "(B, max_blocks)");
    chk.last_dim_contiguous(bt, "block_table");
    chk.shape(bt, "block_table", "(B, max_blocks)", {B, bt.size(1)});
    const int64_t num_blocks = k_cache.size(0);
    page_block_size = k_cache.size(1);
    chk.expect(page_block_size > 0 && page_block_size % 256 == 0,
               "page_block_size (dim 1 of the paged caches) must be a positive multiple of 256, "
               "got ", page_block_size);
    chk.shape(k_cache, "k_cache", cache_dims, {num_blocks, page_block_size, Hk, D});
    chk.shape(v_cache, "v_cache", cache_dims, {num_blocks, page_block_size, Hk, D});
    cache_len = bt.size(1) * page_block_size;
  } else {
    const int64_t b_cache = k_cache.size(0);
    cache_len = k_cache.size(1);
    chk.shape(k_cache, "k_cache", cache_dims, {b_cache, cache_len, Hk, D});
    chk.shape(v_cache, "v_cache", cache_dims, {b_cache, cache_len, Hk, D});
    if (cache_batch_idx.has_value()) {
      chk.int32_per_batch(*cache_batch_idx, "cache_batch_idx", B, device);
    } else {
      chk.expect(b_cache >= B, "k_cache/v_cache must hold at least B = ", B,
                 " sequences (dim 0) when cache_batch_idx is not given, got ", b_cache);
    }
  }

  int64_t new_len = 0;  // Sk_new
  if (appending) {
    chk.expect(k.has_value() && v.has_value(),
               "pass both k and v (new keys and values to append to the cache) or neither");
    chk.expect(cache_seqlens.has_value(),
               "cache_seqlens is required when k and v are given: it says where to append them");
    chk.like_query(*k, "k", q);
    chk.like_query(*v, "v", q);
    chk.rank(*k, "k", 4, "(B, Sk_new, Hk, D)");
    new_len = k->size(1);
    chk.shape(*k, "k", "(B, Sk_new, Hk, D)", {B, new_len, Hk, D});
    chk.shape(*v, "v", "(B, Sk_new, Hk, D)", {B, new_len, Hk, D});
    chk.expect(new_len <= cache_len, "k/v append Sk_new = ", new_len,
               " tokens, more than the cache holds (", cache_len, ")");
  }
  if (cache_seqlens.has_value()) chk.int32_per_batch(*cache_seqlens, "cache_seqlens", B, device);
  if (cache_leftpad.has_value()) {
    chk.expect(!paged, "cache_leftpad cannot be combined with block_table (paged KV cache)");
    chk.int32_per_batch(*cache_leftpad, "cache_leftpad", B, device);
  }
  int rotary_dim = 0;
  if (rotary_cos.has_value() || rotary_sin.has_value()) {
    chk.expect(rotary_cos.has_value() && rotary_sin.has_value(),
               "pass both rotary_cos and rotary_sin or neither");
    chk.expect(appending, "rotary_cos/rotary_sin need k and v: the rotary embedding is applied "
               "to the new keys");
    rotary_dim = check_rotary(*rotary_cos, *rotary_sin, q, D, cache_len, chk);
  }
  chk.fits_int(Sq, "Sq");
  chk.fits_int(cache_len, "Sk_cache");
  chk.window(window_size_left, window_size_right);
  chk.expect(num_splits >= 0 && num_splits <= 128,
             "num_splits must be an int in [0, 128] (0 = heuristic, 1 = no split-KV), got ",
             num_splits);

  const DeviceGuard guard(device);
  require_ampere_or_newer(device.index(), chk);

  // -- kernel view of the problem ----------------------------------------------------------------
  const bool has_alibi = alibi_slopes.has_value();
  const Mask mask = make_mask(is_causal, window_size_left, window_size_right, int(Sq),
                              int(cache_len), has_alibi, /*single_query_shortcut=*/true);
  const HeadFold fold(int(B), int(Sq), int(H), int(Hk), int(D),
                      can_fold_heads(int(Sq), int(H), int(Hk), mask, 0.0, has_alibi));
  const Dims dims = fold.dims(int(cache_len));

  // -- results (in the caller's shapes, folded or not: fold.h) ------------------------------------
  Tensor out = alloc_like(q);
  Tensor lse = alloc({B, H, Sq}, kFloat, device);

  // -- parameters -------------------------------------------------------------------------------
  FwdParams params{};
  start_params(params, dims, q.scalar_type() == kBFloat16);
  // A paged cache is addressed per page: batched() takes the page stride as "batch" stride.
  set_forward_operands(params, fold.operand_of(q, /*is_packed=*/false), batched(k_cache),
                       batched(v_cache), fold.operand_of(out, /*is_packed=*/false));
  params.softmax_lse_ptr = lse.data_ptr();
  if (appending) {
    const Operand kn = batched(*k);
    const Operand vn = batched(*v);
    params.seqlen_knew = static_cast<int>(new_len);
    params.knew_ptr = kn.ptr;
    params.knew_batch_stride = kn.batch_stride;
    params.knew_row_stride = kn.row_stride;
    params.knew_head_stride = kn.head_stride;
    params.vnew_ptr = vn.ptr;
    params.vnew_batch_stride = vn.batch_stride;
    params.vnew_row_stride = vn.row_stride;
    params.vnew_head_stride = vn.head_stride;
  }
  if (cache_seqlens.has_value()) {
    // Per-sequence lengths rather than prefix sums.
    params.cu_seqlens_k = static_cast<int*>(cache_seqlens->data_ptr());
    params.is_seqlens_k_cumulative = false;
  }
  if (cache_leftpad.has_value()) params.leftpad_k = static_cast<int*>(cache_leftpad->data_ptr());
  if (rotary_dim > 0) {
    params.rotary_dim = rotary_dim;
    params.rotary_cos_ptr = rotary_cos->data_ptr();
    params.rotary_sin_ptr = rotary_sin->data_ptr();
    params.is_rotary_interleaved = rotary_interleaved;
  }
  if (cache_batch_idx.has_value()) {
    params.cache_batch_idx = static_cast<int*>(cache_batch_idx->data_ptr());
  }
  if (paged) {
    params.block_table = static_cast<int*>(block_table->data_ptr());
    params.block_table_batch_stride = block_table->stride(0);
    params.page_block_size = static_cast<int>(page_block_size);
  }
  set_softmax(params, softmax_scale, softcap);
  set_mask(params, mask);
  set_alibi(params, alibi_slopes, chk, dims.b, dims.h, device);
  const SplitKvScratch scratch =
      set_split_kv(params, int(num_splits), sm_count(device.index()), device, chk);

  // -- run --------------------------------------------------------------------------------------
  if (cache_len == 0) {
    zero_out(out);
    fill_with(lse, std::numeric_limits<float>::infinity());
  } else if (dims.seqlen_q > 0) {
    // Appending, cache_batch_idx and paging are implemented by the split-KV kernels only.
    const bool split_kv = appending || cache_batch_idx.has_value() || paged ||
                          params.num_splits > 1;
    run_fwd(params, current_stream(device.index()), split_kv);
  }

  return {out, lse};
}

}  // namespace flash_attn_wheels::binding
