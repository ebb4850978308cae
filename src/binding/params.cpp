// Parameter-block setters declared in params.h.
#include "params.h"

#include "dispatch.h"  // has_kernel: the split-KV heuristic falls back when the set lacks split units
#include "tensor_api.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <vector>

#include <cuda_runtime_api.h>

namespace flash_attn_wheels::binding {

namespace {

// log2(e): the kernels evaluate exp(x) as exp2(x * log2(e)).
constexpr double kLog2e = 1.4426950408889634074;

}  // namespace

// ---------------------------------------------------------------------------------------------
// Sizes and operands

void start_params(FwdParams& p, const Dims& dims, bool is_bf16) {
  p = FwdParams{};
  p.is_bf16 = is_bf16;
  p.b = dims.b;
  p.seqlen_q = dims.seqlen_q;
  p.seqlen_k = dims.seqlen_k;
  p.seqlen_q_rounded = round_up(dims.seqlen_q, kSeqPad);
  p.seqlen_k_rounded = round_up(dims.seqlen_k, kSeqPad);
  p.h = dims.h;
  p.h_k = dims.h_k;
  p.h_h_k_ratio = dims.h / dims.h_k;
  p.d = dims.d;
  p.d_rounded = padded_head_dim(dims.d);
  // Defaults of the optional features; the specific setters override them.
  p.is_seqlens_k_cumulative = true;  // cu_seqlens_k (if any) holds prefix sums
  p.page_block_size = 1;             // no paging
  p.rotary_dim = 0;                  // no rotary embedding
  p.num_splits = 0;                  // no split-KV
  p.p_dropout = 1.0f;                // keep everything
  p.p_dropout_in_uint8_t = 255;
  p.rp_dropout = 1.0f;
  p.window_size_left = -1;           // no mask (0 would mean a zero-width window)
  p.window_size_right = -1;
}

Operand operand(const Tensor& t, int64_t batch_stride) {
  Operand o;
  o.ptr = t.data_ptr();
  o.batch_stride = batch_stride;
  o.row_stride = stride_from_end(t, 3);
  o.head_stride = stride_from_end(t, 2);
  return o;
}

void set_forward_operands(FwdParams& p, const Operand& q, const Operand& k, const Operand& v,
                          const Operand& out) {
  p.q_ptr = q.ptr;
  p.q_batch_stride = q.batch_stride;
  p.q_row_stride = q.row_stride;
  p.q_head_stride = q.head_stride;

  p.k_ptr = k.ptr;
  p.k_batch_stride = k.batch_stride;
  p.k_row_stride = k.row_stride;
  p.k_head_stride = k.head_stride;

  p.v_ptr = v.ptr;
  p.v_batch_stride = v.batch_stride;
  p.v_row_stride = v.row_stride;
  p.v_head_stride = v.head_stride;

  p.o_ptr = out.ptr;
  p.o_batch_stride = out.batch_stride;
  p.o_row_stride = out.row_stride;
  p.o_head_stride = out.head_stride;
}

void set_backward_operands(BwdParams& p, const Operand& dout, const Operand& dq,
                           const Operand& dk, const Operand& dv) {
  p.do_ptr = dout.ptr;
  p.do_batch_stride = dout.batch_stride;
  p.do_row_stride = dout.row_stride;
  p.do_head_stride = dout.head_stride;

  p.dq_ptr = dq.ptr;
  p.dq_batch_stride = dq.batch_stride;
  p.dq_row_stride = dq.row_stride;
  p.dq_head_stride = dq.head_stride;

  p.dk_ptr = dk.ptr;
  p.dk_batch_stride = dk.batch_stride;
  p.dk_row_stride = dk.row_stride;
  p.dk_head_stride = dk.head_stride;

  p.dv_ptr = dv.ptr;
  p.dv_batch_stride = dv.batch_stride;
  p.dv_row_stride = dv.row_stride;
  p.dv_head_stride = dv.head_stride;
}

// ---------------------------------------------------------------------------------------------
// Softmax, dropout, mask, ALiBi

void set_softmax(FwdParams& p, double softmax_scale, double softcap) {
  if (softcap > 0.0) {
    // With a cap the kernels compute cap * tanh(q.k * (scale / cap)); the softmax then runs on
    // the capped scores, so its own scale is the cap.
    p.softcap = static_cast<float>(softmax_scale / softcap);
    p.scale_softmax = static_cast<float>(softcap);
  } else {
    p.softcap = 0.0f;
    p.scale_softmax = static_cast<float>(softmax_scale);
  }
  p.scale_softmax_log2 = static_cast<float>(static_cast<double>(p.scale_softmax) * kLog2e);
  // Combined scale; set_dropout recomputes it too, so either setter may run last.
  p.scale_softmax_rp_dropout = p.rp_dropout * p.scale_softmax;
}

void set_dropout(FwdParams& p, double dropout_p) {
  // The kernels work with the probability of keeping an element, compared as an 8-bit
  // threshold against Philox output (rounded down, the comparison is <=).
  const float keep = 1.0f - static_cast<float>(dropout_p);
  p.p_dropout = keep;
  p.p_dropout_in_uint8_t = static_cast<uint8_t>(std::floor(keep * 255.0));
  p.rp_dropout = 1.0f / keep;
  p.scale_softmax_rp_dropout = p.rp_dropout * p.scale_softmax;
}

Mask make_mask(bool is_causal, int64_t left, int64_t right, int seqlen_q, int seqlen_k,
               bool has_alibi, bool single_query_shortcut) {
  // Any negative value means "unbounded"; a side that reaches past every key is too.
  if (left < 0 || left >= seqlen_k) left = -1;
  if (right < 0 || right >= seqlen_k) right = -1;
  if (single_query_shortcut && seqlen_q == 1 && !has_alibi) is_causal = false;
  if (is_causal) right = 0;

  Mask m;
  m.causal = left < 0 && right == 0;
  // A one-sided window: bound the open side by seqlen_k so the kernels see two bounds.
  if (left < 0 && right >= 0) left = seqlen_k;
  if (left >= 0 && right < 0) right = seqlen_k;
  m.local = !m.causal && left >= 0;
  m.left = static_cast<int>(left);
  m.right = static_cast<int>(right);
  return m;
}

void set_mask(FwdParams& p, const Mask& mask) {
  p.is_causal = mask.causal;
  p.window_size_left = mask.left;
  p.window_size_right = mask.right;
}

void set_alibi(FwdParams& p, const std::optional<Tensor>& slopes, const ArgChecker& chk,
               int b, int h, const Device& device) {
  p.alibi_slopes_ptr = nullptr;
  p.alibi_slopes_batch_stride = 0;
  if (!slopes.has_value()) return;
  const Tensor& s = *slopes;
  chk.same_device(s, "alibi_slopes", device);
  chk.dtype(s, "alibi_slopes", kFloat);
  chk.expect(s.dim() == 1 || s.dim() == 2, "alibi_slopes must have shape (H,) or (B, H), got ",
             shape_text(s.sizes()));
  if (s.dim() == 1) {
    chk.shape(s, "alibi_slopes", "(H,)", {h});
  } else {
    chk.shape(s, "alibi_slopes", "(B, H)", {b, h});
  }
  chk.last_dim_contiguous(s, "alibi_slopes");
  p.alibi_slopes_ptr = s.data_ptr();
  p.alibi_slopes_batch_stride = s.dim() == 2 ? s.stride(0) : 0;
}

// ---------------------------------------------------------------------------------------------
// Split-KV

int choose_num_splits(int work_blocks, int sm_slots, int kv_blocks, int max_splits) {
  // Enough independent blocks to nearly fill the GPU already: splitting only adds traffic.
  if (work_blocks >= 0.8f * sm_slots) return 1;
  const int limit = std::min({max_splits, sm_slots, kv_blocks});
  if (limit <= 1) return 1;

  const auto tiles_per_split = [kv_blocks](int n) { return (kv_blocks + n - 1) / n; };
  // n splits only differ from n-1 splits if the chunk size changes.
  const auto distinct = [&](int n) {
    return n == 1 || tiles_per_split(n) != tiles_per_split(n - 1);
  };
  // Fraction of the last wave that is busy.
  const auto wave_efficiency = [&](int n) {
    const float waves = static_cast<float>(work_blocks) * n / sm_slots;
    return waves / std::ceil(waves);
  };

  float best = 0.0f;
  for (int n = 1; n <= limit; ++n) {
    if (distinct(n)) best = std::max(best, wave_efficiency(n));
  }
  for (int n = 1; n <= limit; ++n) {
    if (distinct(n) && wave_efficiency(n) >= 0.85f * best) return n;
  }
  return 1;
}

SplitKvScratch set_split_kv(FwdParams& p, int requested, int sm_count,
                            const Device& device, const ArgChecker& chk) {
  SplitKvScratch scratch;
  p.num_splits = requested;
  if (p.p_dropout < 1.0f) {
    // The split kernels have no dropout path; the caller launches the regular kernel.
    return scratch;
  }
  if (requested < 1) {
    // Key tile width and query tile height of the split-KV kernels, by head dim.
    const int kv_tile = p.d <= 64 ? 256 : (p.d <= 128 ? 128 : 64);
    const int q_tile = 64;
    const int kv_blocks = (p.seqlen_k + kv_tile - 1) / kv_tile;
    const int q_blocks = (p.seqlen_q + q_tile - 1) / q_tile;
    // Two 128-thread blocks fit on one SM.
    p.num_splits = choose_num_splits(p.b * p.h * q_blocks, sm_count * 2, kv_blocks, 128);
    // The heuristic only picks split-KV for speed: a kernel set without the split units
    // (e.g. 'ci' or a forward-only list) runs the plain kernel instead of failing.  Asked only
    // when the heuristic wants a split (has_kernel walks the set's list; most calls need none).
    if (p.num_splits > 1 && !has_kernel("fwd_split", p.is_bf16, p.d, p.is_causal)) {
      p.num_splits = 1;
    }
  }
  chk.expect(p.num_splits <= 128, "num_splits must be at most 128, got ", p.num_splits);
  if (p.num_splits > 1) {
    scratch.lse_accum = alloc({p.num_splits, p.b, p.h, p.seqlen_q}, kFloat, device);
    scratch.out_accum = alloc({p.num_splits, p.b, p.h, p.seqlen_q, p.d_rounded}, kFloat, device);
    p.softmax_lseaccum_ptr = scratch.lse_accum.data_ptr();
    p.oaccum_ptr = scratch.out_accum.data_ptr();
  }
  return scratch;
}

// ---------------------------------------------------------------------------------------------
// Dropout RNG

namespace {

// Validates a user-supplied (seed, offset) tensor.
void check_rng_state(const Tensor& s, const ArgChecker& chk, const Device& device) {
  chk.expect(s.defined(), "rng_state is an undefined tensor");
  chk.dtype(s, "rng_state", kLong);
  chk.expect(s.numel() == 2, "rng_state must hold 2 elements (Philox seed, offset), got shape ",
             shape_text(s.sizes()));
  chk.expect(s.is_cpu() || s.device() == device,
             "rng_state must be on the CPU or on the same CUDA device as q (", device_text(device),
             "), got a tensor on ", device_text(s.device()));
}

// Flash_fwd_params::philox_args has had two shapes upstream; cmake/FlashAttnUpstream.cmake reads
// the tree's flash.h (src/kernels/upstream_shape.py) and passes FLASH_ATTN_PHILOX_ARGS_WORDS:
//   0  a Philox state member (flash-attn 2.8.3.post2 and earlier), which the staged tree declares
//      with the kernels' own type, flash_attn_wheels::PhiloxState (src/kernels/torch_free_tree.py);
//   4  uint64_t[4], an opaque buffer that the forward kernel reinterprets as its Philox state
//      (upstream main since PR #2669); the torch-free kernels read it as a PhiloxState: words 0
//      seed (or a pointer to it), 1 offset (or a pointer to it), 2 the in-graph offset, 3 the
//      "captured" flag in its low byte.
// Either way the binding fills it with a PhiloxState (src/kernels/torch_free/torch_free.h), the
// kernels' own fixed layout; the exact build converts torch's at::PhiloxCudaState into it
// (torch_free_bridge.cpp), whose layout changes between torch versions, so one set of kernel objects
// serves every torch.
#ifndef FLASH_ATTN_PHILOX_ARGS_WORDS
#error "FLASH_ATTN_PHILOX_ARGS_WORDS is set by cmake/FlashAttnUpstream.cmake from the tree's flash.h"
#elif FLASH_ATTN_PHILOX_ARGS_WORDS == 0
static_assert(std::is_same_v<decltype(FwdParams::philox_args), flash_attn_wheels::PhiloxState>,
              "FLASH_ATTN_PHILOX_ARGS_WORDS=0 but the staged flash.h does not declare "
              "::flash_attn_wheels::PhiloxState philox_args (src/kernels/torch_free_tree.py)");
void store_philox(FwdParams& p, const flash_attn_wheels::PhiloxState& state) { p.philox_args = state; }
#elif FLASH_ATTN_PHILOX_ARGS_WORDS == 4
static_assert(std::is_same_v<decltype(FwdParams::philox_args), uint64_t[4]>,
              "FLASH_ATTN_PHILOX_ARGS_WORDS=4 but flash.h does not declare uint64_t philox_args[4]");
// The kernel reads the buffer as a PhiloxState: it must fit and be aligned enough (the whole
// parameter block is copied to the device by value).
static_assert(sizeof(flash_attn_wheels::PhiloxState) <= sizeof(FwdParams::philox_args),
              "PhiloxState does not fit in Flash_fwd_params::philox_args");
static_assert(alignof(flash_attn_wheels::PhiloxState) <= alignof(uint64_t),
              "PhiloxState needs more alignment than Flash_fwd_params::philox_args has");
void store_philox(FwdParams& p, const flash_attn_wheels::PhiloxState& state) {
  std::memset(p.philox_args, 0, sizeof(p.philox_args));  // defined bytes in the unused tail too
  std::memcpy(p.philox_args, &state, sizeof(state));
}
#else
#error "unknown FLASH_ATTN_PHILOX_ARGS_WORDS (0 or 4, see src/kernels/upstream_shape.py)"
#endif

// (seed, offset) known on the host: the kernels take the values.
flash_attn_wheels::PhiloxState philox_values(uint64_t seed, uint64_t offset) {
  flash_attn_wheels::PhiloxState s{};
  s.seed.value = seed;
  s.offset.value = offset;
  return s;
}

// (seed, offset) in device memory: the "captured" form, whose pointers the kernel dereferences at
// run time (no host synchronisation), with no in-graph increment.
flash_attn_wheels::PhiloxState philox_pointers(int64_t* seed_and_offset) {
  flash_attn_wheels::PhiloxState s{};
  s.seed.pointer = seed_and_offset;
  s.offset.pointer = seed_and_offset + 1;
  s.captured = true;
  return s;
}

}  // namespace

Tensor set_forward_rng(FwdParams& p, double dropout_p, const std::optional<Tensor>& given,
                       const Device& device, const ArgChecker& chk, Tensor& keep_alive) {
  store_philox(p, flash_attn_wheels::PhiloxState{});
  p.rng_state = nullptr;
  if (given.has_value()) check_rng_state(*given, chk, device);  // validated with or without dropout
  // Without dropout the kernels neither read the Philox state nor write rng_state (both only on
  // their dropout path), so nothing is allocated and the generator is left alone: the call then
  // costs no allocation, no generator lock and no offset advance.
  if (dropout_p <= 0.0) return Tensor();

  Tensor used = alloc({2}, kLong, device);
  p.rng_state = static_cast<uint64_t*>(used.data_ptr());
  if (!given.has_value()) {
#if defined(FLASH_ATTN_STABLE_ABI)
    draw_philox(chk.op());  // throws: the stable ABI has no generator (tensor_api_stable.h)
#else
    store_philox(p, draw_philox(device, static_cast<uint64_t>(philox_increment(p))));
#endif
  } else if (given->is_cpu()) {
    const Tensor host = as_contiguous(*given);
    const auto* v = static_cast<const int64_t*>(host.data_ptr());
    store_philox(p, philox_values(static_cast<uint64_t>(v[0]), static_cast<uint64_t>(v[1])));
  } else {
    keep_alive = as_contiguous(*given);
    store_philox(p, philox_pointers(static_cast<int64_t*>(keep_alive.data_ptr())));
  }
  return used;
}

Tensor set_backward_rng(BwdParams& p, double dropout_p, const Tensor& rng_state,
                        const Device& device, const ArgChecker& chk,
                        const Tensor& unused_state_buffer) {
  if (dropout_p <= 0.0) {
    // The kernel dereferences p.rng_state unconditionally but uses the values only on its
    // dropout path: any 16 bytes of device memory of this call will do, so nothing is allocated
    // or filled per call (the forward returns a (0,) rng_state without dropout).
    p.rng_state = static_cast<uint64_t*>(unused_state_buffer.data_ptr());
    return unused_state_buffer;
  }
  check_rng_state(rng_state, chk, device);
  Tensor on_device = as_contiguous(to_device(rng_state, device));
  p.rng_state = static_cast<uint64_t*>(on_device.data_ptr());
  return on_device;
}

// ---------------------------------------------------------------------------------------------
// Device

namespace {

// What the operators read of a device: its compute capability and SM count.
struct DeviceAttributes {
  int major = 0;
  int minor = 0;
  int sm_count = 0;
};

// Throws naming the CUDA runtime call that failed.
void check_cuda(cudaError_t status, const char* call) {
  if (status != cudaSuccess) {
    fail("flash_attn: ", call, " failed: ", cudaGetErrorName(status), " (", cudaGetErrorString(status), ")");
  }
}

// The attributes of every visible device, queried once per process (thread-safe static
// initialisation), so an operator call makes no driver query.  Straight from the CUDA runtime, the
// same in both torch APIs (tensor_api.h).
const DeviceAttributes& device_attributes(DeviceIndex device) {
  static const std::vector<DeviceAttributes> all = [] {
    int count = 0;
    check_cuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
    std::vector<DeviceAttributes> out(static_cast<size_t>(count));
    for (size_t i = 0; i < out.size(); ++i) {
      const int index = static_cast<int>(i);
      check_cuda(cudaDeviceGetAttribute(&out[i].major, cudaDevAttrComputeCapabilityMajor, index),
                 "cudaDeviceGetAttribute");
      check_cuda(cudaDeviceGetAttribute(&out[i].minor, cudaDevAttrComputeCapabilityMinor, index),
                 "cudaDeviceGetAttribute");
      check_cuda(cudaDeviceGetAttribute(&out[i].sm_count, cudaDevAttrMultiProcessorCount, index),
                 "cudaDeviceGetAttribute");
    }
    return out;
  }();
  if (device < 0 || static_cast<size_t>(device) >= all.size()) {
    fail("flash_attn: CUDA device ", static_cast<int>(device), " is not one of the ", all.size(),
         " visible devices");
  }
  return all[static_cast<size_t>(device)];
}

}  // namespace

int sm_count(DeviceIndex device) { return device_attributes(device).sm_count; }

void require_ampere_or_newer(DeviceIndex device, const ArgChecker& chk) {
  const DeviceAttributes& a = device_attributes(device);
  chk.expect(a.major >= 8, "FlashAttention-2 needs a GPU of compute capability 8.0 (Ampere) or "
             "newer; cuda:", static_cast<int>(device), " is sm_", a.major, a.minor);
}


}  // namespace flash_attn_wheels::binding
