"""Input validation, done in Python before any operator is called.

Each ``check_*`` function raises :class:`flash_attn.InputError` (a ``RuntimeError`` and a
``ValueError``) with a message naming the argument, what was expected (with named dimensions)
and what was given. They read tensor metadata only (device, dtype, shape, strides), never tensor
values, so they cost no GPU synchronization, work on meta tensors, and ``torch.compile`` traces
them without graph breaks.

:func:`fwd_kernel_keys` / :func:`bwd_kernel_keys` compute the instantiation units a call may
use, following upstream's dispatch (``flash_api.cpp``): the head dim rounded up to 32, 64, 96,
128, 192 or 256; the causal kernel when ``causal`` (after upstream turns causal off for a single
query without ALiBi) or a window of ``(-1, 0)``; the split-KV forward where upstream may choose
it. :func:`require_kernels` raises :class:`flash_attn.KernelNotBuiltError` when the kernel set
of the build lacks one of them.
"""

from __future__ import annotations

from typing import Any

import torch

from . import _build_info, _loader
from ._errors import InputError, KernelNotBuiltError
from ._tracing import constant_result

__all__ = [
    "MAX_HEAD_DIM",
    "require_tensor",
    "require_cuda",
    "check_options",
    "check_qkv",
    "check_packed",
    "check_alibi",
    "check_varlen",
    "check_kvcache",
    "padded_head_dim",
    "kernel_causal",
    "fwd_kernel_keys",
    "bwd_kernel_keys",
    "require_kernels",
    "default_scale",
]

MAX_HEAD_DIM = 256

Tensor = torch.Tensor

_HALF_DTYPES = (torch.float16, torch.bfloat16)


def _shape(t: Tensor) -> tuple[int, ...]:
    return tuple(t.shape)


def require_tensor(name: str, value: Any) -> None:
    """``value`` must be a tensor."""
    if not isinstance(value, torch.Tensor):
        raise InputError(f"{name} must be a torch.Tensor, got {type(value).__name__}")


def require_cuda(name: str, t: Tensor) -> None:
    """``t`` must live on a CUDA device (FlashAttention-2 has no CPU or meta implementation)."""
    if t.device.type != "cuda":
        raise InputError(
            f"{name} is on device '{t.device}'; FlashAttention-2 kernels run on CUDA devices only: "
            f"move the inputs with .cuda() or .to('cuda')"
        )


def _require_same_device(name: str, t: Tensor, ref: Tensor) -> None:
    if t.device != ref.device:
        raise InputError(f"{name} is on {t.device} but q is on {ref.device}; put all inputs on one CUDA device")


def _require_dtype(name: str, t: Tensor, q: Tensor) -> None:
    if t.dtype not in _HALF_DTYPES:
        raise InputError(
            f"{name} has dtype {t.dtype}; FlashAttention-2 kernels take torch.float16 or torch.bfloat16 "
            f"only (fp32 is not supported): cast with .to(torch.bfloat16) or .half(), or run under "
            f"torch.autocast"
        )
    if t.dtype != q.dtype:
        raise InputError(f"{name} has dtype {t.dtype} but q has {q.dtype}; q, k and v must share one dtype")


def _require_int32_index(name: str, t: Any, q: Tensor, shape: tuple[int, ...] | None, meaning: str) -> None:
    require_tensor(name, t)
    require_cuda(name, t)
    _require_same_device(name, t, q)
    if t.dtype != torch.int32:
        raise InputError(f"{name} must have dtype torch.int32, got {t.dtype}")
    if shape is not None and _shape(t) != shape:
        raise InputError(f"{name} must have shape {meaning} = {shape}, got {_shape(t)}")
    if not t.is_contiguous():
        raise InputError(f"{name} must be contiguous (strides {tuple(t.stride())}); pass {name}.contiguous()")


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, torch.SymInt)) and not isinstance(value, bool)


def _is_real(value: Any) -> bool:
    return isinstance(value, (int, float, torch.SymInt, torch.SymFloat)) and not isinstance(value, bool)


def check_options(
    dropout_p: Any,
    softmax_scale: Any,
    window_size: Any,
    softcap: Any,
) -> tuple[int, int]:
    """Check the scalar options shared by every entry point; return ``(window_left, window_right)``.

    dropout_p must be in [0, 1); softmax_scale None or a number; window_size a pair of ints
    >= -1 (tokens, -1 = unbounded); softcap a number (> 0 enables it, not together with dropout).
    """
    if not _is_real(dropout_p) or not 0.0 <= dropout_p < 1.0:
        raise InputError(f"dropout_p must be a probability in [0, 1), got {dropout_p!r}")
    if softmax_scale is not None and not _is_real(softmax_scale):
        raise InputError(f"softmax_scale must be a float or None (None means 1/sqrt(head_dim)), got {softmax_scale!r}")
    if not isinstance(window_size, (tuple, list)) or len(window_size) != 2:
        raise InputError(
            f"window_size must be a pair (left, right) of token counts, -1 meaning unbounded; got {window_size!r}"
        )
    left, right = window_size
    if not _is_int(left) or not _is_int(right) or left < -1 or right < -1:
        raise InputError(f"window_size entries must be ints >= -1 (tokens; -1 = unbounded), got {window_size!r}")
    if not _is_real(softcap):
        raise InputError(f"softcap must be a float (0.0 disables it), got {softcap!r}")
    if softcap > 0.0 and dropout_p > 0.0:
        raise InputError("softcap > 0 cannot be combined with dropout_p > 0 (upstream FlashAttention-2 limitation)")
    return left, right


def _check_head_dim(head_dim: int) -> None:
    if head_dim < 1:
        raise InputError(f"head dim D must be >= 1, got {head_dim}")
    if head_dim > MAX_HEAD_DIM:
        raise InputError(
            f"head dim D={head_dim} is larger than {MAX_HEAD_DIM}, the largest head dim FlashAttention-2 kernels "
            "support; split the heads or use torch.nn.functional.scaled_dot_product_attention"
        )


def _check_heads(heads: int, heads_k: int) -> None:
    if heads_k < 1 or heads % heads_k != 0:
        raise InputError(
            f"the number of query heads H={heads} must be a multiple of the number of key/value heads "
            f"Hk={heads_k} (MQA/GQA: query head h attends key/value head h // (H // Hk))"
        )


def _check_tensors(names: tuple[str, ...], tensors: tuple[Any, ...]) -> None:
    for name, t in zip(names, tensors, strict=False):
        require_tensor(name, t)
    q = tensors[0]
    for name, t in zip(names, tensors, strict=False):
        require_cuda(name, t)
        _require_same_device(name, t, q)
    for name, t in zip(names, tensors, strict=False):
        _require_dtype(name, t, q)


def check_qkv(q: Any, k: Any, v: Any) -> None:
    """Check q (B, Sq, H, D) and k, v (B, Sk, Hk, D) of the padded-batch entry points."""
    _check_tensors(("q", "k", "v"), (q, k, v))
    if q.dim() != 4:
        raise InputError(f"q must be 4-D (B, Sq, H, D) = (batch, seqlen_q, heads, head_dim), got shape {_shape(q)}")
    for name, t in (("k", k), ("v", v)):
        if t.dim() != 4:
            raise InputError(
                f"{name} must be 4-D (B, Sk, Hk, D) = (batch, seqlen_k, kv_heads, head_dim), got shape {_shape(t)}"
            )
    batch, _, heads, head_dim = q.shape
    if _shape(k) != _shape(v):
        raise InputError(f"k and v must have the same shape (B, Sk, Hk, D), got {_shape(k)} and {_shape(v)}")
    if k.shape[0] != batch:
        raise InputError(f"k has batch size {k.shape[0]} but q has {batch}; B must match")
    if k.shape[3] != head_dim:
        raise InputError(f"k and v have head dim {k.shape[3]} but q has {head_dim}; D must match")
    if batch < 1:
        raise InputError("the batch size B must be >= 1")
    _check_heads(heads, k.shape[2])
    _check_head_dim(head_dim)


def check_packed(name: str, packed: Any, dims: int, count: int, layout: str) -> None:
    """Check a packed tensor: ``dims``-D with ``count`` at dim ``dims - 3`` (qkv: 3, kv: 2)."""
    require_tensor(name, packed)
    if packed.dim() != dims or packed.shape[dims - 3] != count:
        raise InputError(f"{name} must have shape {layout}, got {_shape(packed)}")


def check_alibi(alibi_slopes: Any, q: Tensor, batch: int, heads: int) -> None:
    """alibi_slopes: None or fp32 (H,) or (B, H) on q's device, last dim contiguous."""
    if alibi_slopes is None:
        return
    require_tensor("alibi_slopes", alibi_slopes)
    require_cuda("alibi_slopes", alibi_slopes)
    _require_same_device("alibi_slopes", alibi_slopes, q)
    if alibi_slopes.dtype != torch.float32:
        raise InputError(f"alibi_slopes must have dtype torch.float32, got {alibi_slopes.dtype}")
    if _shape(alibi_slopes) not in ((heads,), (batch, heads)):
        raise InputError(
            f"alibi_slopes must have shape (H,) = ({heads},) or (B, H) = ({batch}, {heads}), got {_shape(alibi_slopes)}"
        )
    if alibi_slopes.stride(-1) != 1:
        raise InputError(
            "alibi_slopes must have a contiguous last dimension (stride 1); pass alibi_slopes.contiguous()"
        )


def check_varlen(
    q: Any,
    k: Any,
    v: Any,
    cu_seqlens_q: Any,
    cu_seqlens_k: Any,
    max_seqlen_q: Any,
    max_seqlen_k: Any,
    block_table: Any,
) -> int:
    """Check the variable-length entry point's inputs; return the batch size B.

    q (Tq, H, D); k, v (Tk, Hk, D), or paged (num_blocks, page_block_size, Hk, D) with
    block_table int32 (B, max_blocks) and page_block_size a multiple of 256; cu_seqlens_q and
    cu_seqlens_k int32 (B + 1,) contiguous; max_seqlen_q / max_seqlen_k ints >= 0.
    """
    _check_tensors(("q", "k", "v"), (q, k, v))
    if q.dim() != 3:
        raise InputError(f"q must be 3-D (Tq, H, D) = (total_q, heads, head_dim), got shape {_shape(q)}")
    paged = block_table is not None
    kv_layout = "(num_blocks, page_block_size, Hk, D)" if paged else "(Tk, Hk, D) = (total_k, kv_heads, head_dim)"
    kv_dims = 4 if paged else 3
    for name, t in (("k", k), ("v", v)):
        if t.dim() != kv_dims:
            raise InputError(f"{name} must be {kv_dims}-D {kv_layout}, got shape {_shape(t)}")
    if _shape(k) != _shape(v):
        raise InputError(f"k and v must have the same shape {kv_layout}, got {_shape(k)} and {_shape(v)}")
    for name, cu in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        _require_int32_index(name, cu, q, None, "(B + 1,)")
        if cu.dim() != 1 or cu.shape[0] < 2:
            raise InputError(f"{name} must be 1-D (B + 1,) with B >= 1 (cumulative sequence lengths), got {_shape(cu)}")
    if _shape(cu_seqlens_q) != _shape(cu_seqlens_k):
        raise InputError(
            f"cu_seqlens_q and cu_seqlens_k must both be (B + 1,), got {_shape(cu_seqlens_q)} and "
            f"{_shape(cu_seqlens_k)}"
        )
    batch = cu_seqlens_q.shape[0] - 1
    for name, value in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        if not _is_int(value) or value < 0:
            raise InputError(f"{name} must be an int >= 0 (the longest sequence of the batch), got {value!r}")
    if paged:
        _require_int32_index("block_table", block_table, q, None, "(B, max_blocks)")
        if block_table.dim() != 2 or block_table.shape[0] != batch:
            raise InputError(f"block_table must have shape (B, max_blocks) with B={batch}, got {_shape(block_table)}")
        if k.shape[1] % 256 != 0:
            raise InputError(f"page_block_size (k.shape[1]) must be a multiple of 256, got {k.shape[1]}")
    head_dim = q.shape[2]
    if k.shape[-1] != head_dim:
        raise InputError(f"k and v have head dim {k.shape[-1]} but q has {head_dim}; D must match")
    _check_heads(q.shape[1], k.shape[-2])
    _check_head_dim(head_dim)
    return batch


def check_kvcache(
    q: Any,
    k_cache: Any,
    v_cache: Any,
    k: Any,
    v: Any,
    rotary_cos: Any,
    rotary_sin: Any,
    cache_seqlens: Any,
    cache_batch_idx: Any,
    cache_leftpad: Any,
    block_table: Any,
    num_splits: Any,
) -> None:
    """Check the KV-cache entry point's inputs (shapes in :func:`flash_attn.flash_attn_with_kvcache`)."""
    _check_tensors(("q", "k_cache", "v_cache"), (q, k_cache, v_cache))
    if q.dim() != 4:
        raise InputError(f"q must be 4-D (B, Sq, H, D) = (batch, seqlen_q, heads, head_dim), got shape {_shape(q)}")
    paged = block_table is not None
    layout = "(num_blocks, page_block_size, Hk, D)" if paged else "(B_cache, Sk_cache, Hk, D)"
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        if t.dim() != 4:
            raise InputError(f"{name} must be 4-D {layout}, got shape {_shape(t)}")
        if t.stride(-1) != 1:
            raise InputError(
                f"{name} must have a contiguous last dimension (stride 1, got strides {tuple(t.stride())}): it is "
                "updated in place, so it cannot be copied"
            )
    if _shape(k_cache) != _shape(v_cache):
        raise InputError(
            f"k_cache and v_cache must have the same shape {layout}, got {_shape(k_cache)} and {_shape(v_cache)}"
        )
    batch, seqlen_q, heads, head_dim = q.shape
    if batch < 1:
        raise InputError("the batch size B must be >= 1")
    heads_k = k_cache.shape[2]
    if k_cache.shape[3] != head_dim:
        raise InputError(f"k_cache and v_cache have head dim {k_cache.shape[3]} but q has {head_dim}; D must match")
    _check_heads(heads, heads_k)
    _check_head_dim(head_dim)
    if (k is None) != (v is None):
        raise InputError("pass both k and v (new keys and values to append to the cache) or neither")
    if k is not None:
        _check_tensors(("q", "k", "v"), (q, k, v))
        if k.dim() != 4 or _shape(k) != _shape(v) or k.shape[0] != batch or k.shape[2:] != k_cache.shape[2:]:
            raise InputError(
                f"k and v must have shape (B, Sk_new, Hk, D) = ({batch}, Sk_new, {heads_k}, {head_dim}), "
                f"got {_shape(k)} and {_shape(v)}"
            )
        if cache_seqlens is None:
            raise InputError("cache_seqlens is required when k and v are given: it says where to append them")
    if paged:
        _require_int32_index("block_table", block_table, q, None, "(B, max_blocks)")
        if block_table.dim() != 2 or block_table.shape[0] != batch:
            raise InputError(f"block_table must have shape (B, max_blocks) with B={batch}, got {_shape(block_table)}")
        if k_cache.shape[1] % 256 != 0:
            raise InputError(f"page_block_size (k_cache.shape[1]) must be a multiple of 256, got {k_cache.shape[1]}")
        if cache_batch_idx is not None:
            raise InputError("cache_batch_idx cannot be combined with a paged cache (block_table)")
        if cache_leftpad is not None:
            raise InputError("cache_leftpad cannot be combined with a paged cache (block_table)")
    if isinstance(cache_seqlens, torch.Tensor):
        _require_int32_index("cache_seqlens", cache_seqlens, q, (batch,), "(B,)")
    elif cache_seqlens is not None and (not _is_int(cache_seqlens) or cache_seqlens < 0):
        raise InputError(f"cache_seqlens must be an int >= 0, an int32 tensor (B,) or None, got {cache_seqlens!r}")
    if cache_batch_idx is not None:
        _require_int32_index("cache_batch_idx", cache_batch_idx, q, (batch,), "(B,)")
    if cache_leftpad is not None:
        _require_int32_index("cache_leftpad", cache_leftpad, q, (batch,), "(B,)")
    if (rotary_cos is None) != (rotary_sin is None):
        raise InputError("pass both rotary_cos and rotary_sin or neither")
    if rotary_cos is not None:
        if k is None:
            raise InputError("rotary_cos/rotary_sin need k and v: the rotary embedding is applied to the new keys")
        for name, t in (("rotary_cos", rotary_cos), ("rotary_sin", rotary_sin)):
            require_tensor(name, t)
            require_cuda(name, t)
            _require_same_device(name, t, q)
            if t.dtype != q.dtype:
                raise InputError(f"{name} must have q's dtype {q.dtype}, got {t.dtype}")
            if t.dim() != 2 or _shape(t) != _shape(rotary_cos):
                raise InputError(
                    f"{name} must be 2-D (S_rotary, rotary_dim / 2), the same for cos and sin, got {_shape(t)}"
                )
        rotary_dim = rotary_cos.shape[1] * 2
        if rotary_dim % 16 != 0 or rotary_dim > head_dim:
            raise InputError(
                f"rotary_dim (2 * rotary_cos.shape[1] = {rotary_dim}) must be a multiple of 16 and <= D={head_dim}"
            )
    if not _is_int(num_splits) or not 0 <= num_splits <= 128:
        raise InputError(f"num_splits must be an int in [0, 128] (0 = heuristic, 1 = no split-KV), got {num_splits!r}")


def padded_head_dim(head_dim: int) -> int:
    """Head dim the operators receive: ``head_dim`` rounded up to a multiple of 8 (zero padding)."""
    return head_dim if head_dim % 8 == 0 else head_dim + 8 - head_dim % 8


def kernel_causal(
    causal: bool,
    window_left: int,
    window_right: int,
    seqlen_q: int,
    seqlen_k: int,
    has_alibi: bool,
    *,
    backward: bool = False,
) -> bool:
    """Whether upstream dispatches the causal kernel (``Is_causal``) for these options.

    Forward: a single query without ALiBi drops causal; causal sets the right window to 0;
    windows >= seqlen_k become unbounded; the causal kernel runs when left < 0 and right == 0.
    Backward: the same without the single-query rule.
    """
    if not backward and seqlen_q == 1 and not has_alibi:
        causal = False
    if causal:
        window_right = 0
    if window_left >= seqlen_k:
        window_left = -1
    if window_right >= seqlen_k:
        window_right = -1
    return window_left < 0 and window_right == 0


def fwd_kernel_keys(dtype: torch.dtype, head_dim: int, causal_kernel: bool, split: str) -> tuple[tuple[Any, ...], ...]:
    """Forward units a call needs; ``split`` is ``"never"``, ``"maybe"`` (heuristic) or ``"always"``.

    With the heuristic the binding falls back to the plain kernel when the kernel set has no
    split-KV unit (src/binding/params.cpp, set_split_kv), so only ``"always"`` needs it.
    """
    name = _build_info.dtype_name(dtype)
    hd = _build_info.kernel_head_dim(head_dim, _loader.STATE.head_dims)
    keys = []
    if split != "always":
        keys.append(("fwd", name, hd, causal_kernel))
    if split == "always":
        keys.append(("fwd_split", name, hd, causal_kernel))
    return tuple(keys)


def bwd_kernel_keys(dtype: torch.dtype, head_dim: int, causal_kernel: bool) -> tuple[tuple[Any, ...], ...]:
    """Backward unit a call uses."""
    hd = _build_info.kernel_head_dim(head_dim, _loader.STATE.head_dims)
    return (("bwd", _build_info.dtype_name(dtype), hd, causal_kernel),)


def _describe_key(key: tuple[Any, ...]) -> str:
    kind, dtype, hd, causal = key
    return f"{kind} {dtype} head dim {hd} {'causal' if causal else 'non-causal'}"


@constant_result
def require_kernels(keys: tuple[tuple[Any, ...], ...]) -> bool:
    """Raise :class:`KernelNotBuiltError` unless the loaded kernel set holds every unit in ``keys``.

    Each key is ``(kind, dtype, kernel head dim, causal)``. ``torch.compile`` evaluates this once
    while tracing (it is marked constant).
    """
    state = _loader.require_library()
    missing = [key for key in keys if key not in state.kernels]
    if missing:
        head_dims = sorted({key.head_dim for key in state.kernels})
        dtypes = sorted({key.dtype for key in state.kernels})
        raise KernelNotBuiltError(
            f"this flash_attn build has no {', '.join(_describe_key(key) for key in missing)} kernel "
            f"(kernel set '{state.kernel_set_name}' holds head dims {head_dims or 'none'} for "
            f"{', '.join(dtypes) or 'no dtype'}: {_build_info.describe_kernels(state.kernels)}). Head dims "
            f"run the kernel of the next size up ({', '.join(map(str, state.head_dims))}). Use a head dim and "
            "dtype the set holds, install a release wheel, or rebuild with a kernel set that includes it."
        )
    return True


def default_scale(head_dim: int) -> float:
    """Upstream's default ``softmax_scale``: ``1 / sqrt(head_dim)`` of the unpadded head dim."""
    return head_dim ** (-0.5)
