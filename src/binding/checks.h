// Argument validation shared by the operator implementations in src/binding.
//
// These checks are the only validation of the operators' inputs: the Python layer
// (flash_attn/_checks.py) does not repeat them, it only turns the error into
// flash_attn.InputError.  Every failed check throws through fail() (tensor_api.h: c10::Error in
// the exact build, std::runtime_error in the stable-ABI one, RuntimeError in Python either way) whose
// text starts with the operator name and says which argument was wrong, what was expected, what
// was given and, where there is one, what to do, e.g.
//   flash_attn::fwd: k must have shape (B, Sk, Hk, D) = [2, 512, 8, 64], got [2, 512, 8, 80]
// tests/unit/runtime/test_checks.py names the message of every rejected input.
//
// All helpers are header-only and have internal linkage semantics through the hidden
// visibility the library is built with; nothing here is exported.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <utility>

#include "tensor_api.h"

namespace flash_attn_wheels::binding {

// The kernels read the head dim with unit stride.  A q/k/v/dout whose last dim is strided is
// copied here (in C++ the stride test costs nothing, in Python it is a call per tensor per
// call); an undefined or 0-d tensor is returned as it is, for the checks to report.  Caches
// that are updated in place are never copied: fwd_kvcache rejects a strided one.
inline Tensor with_unit_last_stride(const Tensor& t) {
  return t.defined() && t.dim() >= 1 && stride_from_end(t, 1) != 1 ? as_contiguous(t) : t;
}

// Validates the arguments of one operator call; `op` prefixes every message.
class ArgChecker {
 public:
  explicit ArgChecker(const char* op) : op_(op) {}

  const char* op() const { return op_; }

  // Generic condition: throws "<op>: <parts...>" when `ok` is false.
  template <typename... Parts>
  void expect(bool ok, const Parts&... parts) const {
    if (!ok) fail(op_, ": ", parts...);
  }

  // The tensor that fixes the device of the call (q).  It must be a CUDA tensor; a CPU
  // tensor here is the usual mistake of calling the op before moving inputs to the GPU.
  void is_cuda(const Tensor& t, const char* name) const {
    expect(t.defined(), name, " is an undefined tensor");
    expect(t.is_cuda(), name, " is on device '", device_text(t.device()),
           "'; FlashAttention-2 kernels run on CUDA devices only: move the inputs with .cuda() "
           "or .to('cuda')");
  }

  // A tensor that must live on the same CUDA device as q.
  void same_device(const Tensor& t, const char* name, const Device& device) const {
    expect(t.defined(), name, " is an undefined tensor");
    expect(t.device() == device, name, " is on ", device_text(t.device()), " but q is on ", device_text(device),
           "; put all inputs on one CUDA device");
  }

  // q: fixes device and dtype for the call.  CUDA, fp16/bf16, contiguous last dimension.
  void query(const Tensor& q, const char* name = "q") const {
    is_cuda(q, name);
    attention_dtype(q, name);
    last_dim_contiguous(q, name);
  }

  // k/v/out/dout/caches: same device and dtype as q, contiguous last dimension.
  void like_query(const Tensor& t, const char* name, const Tensor& q) const {
    same_device(t, name, q.device());
    same_dtype(t, name, q.scalar_type());
    last_dim_contiguous(t, name);
  }

  // q/k/v/out/dout: half precision only.
  void attention_dtype(const Tensor& t, const char* name) const {
    const auto st = t.scalar_type();
    expect(st == kHalf || st == kBFloat16, name, " has dtype ", torch_dtype_name(st),
           "; FlashAttention-2 kernels take torch.float16 or torch.bfloat16 only (fp32 is not "
           "supported): cast with .to(torch.bfloat16) or .half(), or run under torch.autocast");
  }

  void dtype(const Tensor& t, const char* name, DType expected) const {
    expect(t.scalar_type() == expected, name, " must have dtype ", torch_dtype_name(expected),
           ", got ", torch_dtype_name(t.scalar_type()));
  }

  // Same dtype as q (all attention operands share one dtype).
  void same_dtype(const Tensor& t, const char* name, DType q_dtype) const {
    expect(t.scalar_type() == q_dtype, name, " has dtype ", torch_dtype_name(t.scalar_type()),
           " but q has ", torch_dtype_name(q_dtype), "; q, k and v must share one dtype");
  }

  // The kernels read the head dim with unit stride; other dims may be strided.
  void last_dim_contiguous(const Tensor& t, const char* name) const {
    expect(t.dim() >= 1 && stride_from_end(t, 1) == 1, name,
           " must be contiguous in its last dimension (stride(-1) == 1), got strides ",
           shape_text(t.strides()), "; call .contiguous() first");
  }

  void contiguous(const Tensor& t, const char* name) const {
    expect(t.is_contiguous(), name, " must be contiguous, got sizes ", shape_text(t.sizes()),
           " with strides ", shape_text(t.strides()), "; pass ", name, ".contiguous()");
  }

  // Number of dimensions, checked before any size is read.  `dims` names them, e.g.
  // "(B, Sq, H, D)".
  void rank(const Tensor& t, const char* name, int64_t expected, const char* dims) const {
    expect(t.dim() == expected, name, " must be a ", expected, "-D tensor ", dims, ", got ",
           t.dim(), "-D tensor of shape ", shape_text(t.sizes()));
  }

  // Exact shape; `dims` names the dimensions for the message.
  void shape(const Tensor& t, const char* name, const char* dims,
             std::initializer_list<int64_t> expected) const {
    const IntList want(expected);
    expect(has_sizes(t, want), name, " must have shape ", dims, " = ", shape_text(want), ", got ",
           shape_text(t.sizes()));
  }

  // D: what the kernels are instantiated for (the Python layer pads other sizes up to 256).
  void head_dim(int64_t d, const char* name) const {
    expect(d <= 256, "head dim D=", d, " of ", name, " is larger than 256, the largest head dim "
           "FlashAttention-2 kernels support; split the heads or use "
           "torch.nn.functional.scaled_dot_product_attention");
    expect(d > 0 && d % 8 == 0, "head dim D of ", name, " must be a multiple of 8 in [8, 256], got ",
           d, " (the flash_attn functions pad other head dims; call them rather than the operator)");
  }

  // MQA/GQA: every key/value head serves H / Hk query heads.
  void heads(int64_t h, int64_t h_k) const {
    expect(h_k > 0 && h > 0 && h % h_k == 0, "the number of query heads H=", h,
           " must be a multiple of the number of key/value heads Hk=", h_k,
           " (MQA/GQA: query head h attends key/value head h // (H // Hk))");
  }

  void batch(int64_t b) const { expect(b > 0, "the batch size B must be >= 1, got ", b); }

  // Sliding window sides in tokens; -1 means unbounded.
  void window(int64_t left, int64_t right) const {
    expect(left >= -1 && right >= -1, "window_size entries must be ints >= -1 (tokens; -1 = "
           "unbounded), got (", left, ", ", right, ")");
  }

  // A scalar that the kernels keep in 32-bit.
  void fits_int(int64_t value, const char* name) const {
    expect(value >= 0 && value <= std::numeric_limits<int>::max(), name,
           " must be an int in [0, 2^31 - 1], got ", value);
  }

  // Optional 1-D int32 per-sequence tensor (seqused_k, leftpad, cache_seqlens, ...).
  void int32_per_batch(const Tensor& t, const char* name, int64_t batch,
                       const Device& device) const {
    same_device(t, name, device);
    dtype(t, name, kInt);
    contiguous(t, name);
    shape(t, name, "(B,)", {batch});
  }

  // The cumulative sequence offsets of a varlen batch: int32 (B+1,) on `device`, contiguous,
  // the same length for q and k.  Returns B.
  int64_t cu_seqlens(const Tensor& cu_q, const Tensor& cu_k, const Device& device) const {
    for (const auto& [t, name] : {std::pair{&cu_q, "cu_seqlens_q"}, std::pair{&cu_k, "cu_seqlens_k"}}) {
      same_device(*t, name, device);
      dtype(*t, name, kInt);
      contiguous(*t, name);
      rank(*t, name, 1, "(B+1,)");
    }
    const int64_t b = cu_q.numel() - 1;
    batch(b);
    shape(cu_k, "cu_seqlens_k", "(B+1,)", {b + 1});
    return b;
  }

  // Dropout probability, and the combinations the kernels do not implement.
  void dropout(double p, double softcap) const {
    expect(p >= 0.0 && p < 1.0, "dropout_p must be a probability in [0, 1), got ", p);
    expect(!(softcap > 0.0 && p > 0.0),
           "softcap > 0 cannot be combined with dropout_p > 0 (not implemented by the "
           "kernels), got softcap=", softcap, ", dropout_p=", p);
  }

 private:
  const char* op_;
};

}  // namespace flash_attn_wheels::binding
