"""Public attention functions: the API of upstream FlashAttention-2 2.8.3, over this wheel's operators.

The kernels are upstream FlashAttention-2's, compiled into ``flash_attn/_C_<group>`` and called
as ``torch.ops.flash_attn.*``. Names, signatures, defaults and return values match upstream
2.8.3, so ``from flash_attn import flash_attn_func`` keeps working.

Conventions shared by every function here:

* Named dimensions: ``B`` batch, ``Sq``/``Sk`` query/key sequence length, ``H`` query heads,
  ``Hk`` key/value heads, ``D`` head dim, ``Tq``/``Tk`` total query/key tokens of a
  variable-length batch.
* q, k, v: ``torch.float16`` or ``torch.bfloat16`` (one dtype for all), on one CUDA device.
  ``D <= 256``; a ``D`` that is not a multiple of 8 is zero-padded internally and the result
  sliced back (exact, at the cost of a copy).
* MQA/GQA: ``H`` must be a multiple of ``Hk``; query head ``h`` uses key/value head
  ``h // (H // Hk)``.
* ``softmax_scale`` multiplies ``q @ k^T`` before the softmax (unitless); None means
  ``1 / sqrt(D)`` with the caller's ``D``.
* ``causal`` masks key ``j`` for query ``i`` when ``j > i + Sk - Sq``: the mask is aligned to the
  bottom-right corner of the ``Sq x Sk`` score matrix, so the last query sees every key. A query
  that sees no key gets an output of 0.
* ``window_size = (left, right)``, in tokens: query ``i`` attends key ``j`` only when
  ``i + Sk - Sq - left <= j <= i + Sk - Sq + right``; -1 leaves that side unbounded.
* ``softcap > 0`` replaces each scaled score ``s`` by ``softcap * tanh(s / softcap)``.
* ``alibi_slopes``: fp32 ``(H,)`` or ``(B, H)``; adds ``-slope * |i + Sk - Sq - j|`` to the score
  of query ``i`` and key ``j``.
* The LSE (``softmax_lse``) is fp32, the natural-log log-sum-exp of each row of scaled scores.

Errors (all subclass ``flash_attn.FlashAttnError``, a ``RuntimeError``), raised before any
kernel runs. The operators own the input checks (``src/binding/checks.h``); this module only
gives their messages the API's error classes (``flash_attn._checks.call``) and checks, once per
device, that the library is loaded and runs on that GPU:

* ``InputError`` (also a ``ValueError``): an argument has the wrong device (CPU/meta), dtype
  (fp32, mixed), shape, stride or value; the message names it and the expected shape. A value of
  the wrong Python type for a scalar option gets the dispatcher's message (argument, type, value).
* ``KernelNotBuiltError``: the build's kernel set lacks the head dim/dtype/causal unit the
  operator dispatches to (forward at the call, backward at ``.backward()``).
* ``LibraryNotBuiltError``: no native library (a source checkout): build with ``nox -s dev`` or
  ``pip install .``.
* ``TorchMismatchError``: the running torch (release, CUDA major, C++ ABI) is not the one the
  wheel was built against; the message names both.
* ``UnsupportedGPUError``: the GPU's compute capability is not covered by this wheel's arch
  group; the message names the GPU and the wheel to install (``.legacy`` or ``.blackwell``).
* ``LibraryLoadError``: the native library or its build info is broken or failed to load.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from . import _checks, _rng
from . import _extension as flash_attn_gpu
from ._autograd import FlashAttnFunc, FlashAttnVarlenFunc

# Upstream 2.8.3's private API (docs/operators.md#upstreams-private-api): the names consumers import
# from this module, and its extension module under the names upstream gives it here.
from ._upstream_api import (  # noqa: F401
    _flash_attn_backward,
    _flash_attn_forward,
    _flash_attn_varlen_backward,
    _flash_attn_varlen_forward,
    _get_block_size_n,
    _wrapped_flash_attn_backward,
    _wrapped_flash_attn_forward,
    _wrapped_flash_attn_varlen_backward,
    _wrapped_flash_attn_varlen_forward,
    maybe_contiguous,
    round_multiple,
)

flash_attn_cuda = flash_attn_gpu  # the name before upstream 2.7.x, which xformers still tries first

__all__ = [
    "flash_attn_func",
    "flash_attn_qkvpacked_func",
    "flash_attn_kvpacked_func",
    "flash_attn_varlen_func",
    "flash_attn_varlen_qkvpacked_func",
    "flash_attn_varlen_kvpacked_func",
    "flash_attn_with_kvcache",
]


def _distinct(*tensors):
    """Replace repeated tensor objects by views of them.

    ``torch.compile`` cannot trace an autograd.Function that receives one tensor twice (e.g.
    ``cu_seqlens`` as both ``cu_seqlens_q`` and ``cu_seqlens_k``, or ``q`` passed as ``k``); a view
    is a distinct tensor with the same data, and gradients still flow to the original.
    """
    result = []
    for t in tensors:
        if t is not None and any(t is seen for seen in result):
            t = t.view_as(t)
        result.append(t)
    return result


def _prepare(q, k, v, softmax_scale, window_size):
    """What every entry point does before its operator: admit q's device (once per device), read
    ``window_size``, default the scale to ``1 / sqrt(D)`` of the caller's D, and zero-pad q, k, v
    to a head dim that is a multiple of 8 (exact; a copy only when D is not). A head dim above
    256 is passed unchanged, so the operator's message names the caller's size. Strides are the
    operators' business (they copy a strided last dim themselves).

    Returns ``(ops, q, k, v, D, padded, softmax_scale, left, right)``: ``ops`` the operators to
    call (:func:`flash_attn._checks.require_device`); k and v may be None (KV cache).
    """
    ops = _checks.require_device(q)
    left, right = _checks.window(window_size)
    head_dim = q.shape[-1]
    if softmax_scale is None:
        softmax_scale = head_dim ** (-0.5)
    padded = head_dim % 8 != 0 and head_dim < 256
    if padded:
        pad = [0, 8 - head_dim % 8]
        q = F.pad(q, pad)
        k = None if k is None else F.pad(k, pad)
        v = None if v is None else F.pad(v, pad)
    return ops, q, k, v, head_dim, padded, softmax_scale, left, right


def flash_attn_qkvpacked_func(
    qkv,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),  # -1: unbounded on that side
    softcap=0.0,  # 0.0: no soft-capping
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
):
    """Self-attention over a padded batch whose q, k and v are stacked in one tensor (FlashAttention-2 kernels).

    Same as ``flash_attn_func(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], ...)``; the gradient
    arrives as one tensor shaped like ``qkv``. Self-attention means ``Sk == Sq`` and ``Hk == H``.

    Args:
        qkv: ``(B, S, 3, H, D)``, torch.float16 or torch.bfloat16, CUDA; ``D <= 256``.
        dropout_p: probability of dropping each attention weight, in [0, 1); use 0.0 for evaluation.
        softmax_scale: factor (unitless) multiplying ``q @ k^T`` before the softmax; None means ``1 / sqrt(D)``.
        causal: mask keys after the query's position (bottom-right aligned; here ``Sq == Sk``, so plain causal).
        window_size: ``(left, right)`` in tokens; query ``i`` attends keys ``i - left .. i + right``; -1 = unbounded.
        softcap: when > 0, each scaled score ``s`` becomes ``softcap * tanh(s / softcap)``; 0.0 disables it.
        alibi_slopes: fp32 ``(H,)`` or ``(B, H)``; adds ``-slope * |i - j|`` to the score of query ``i``, key ``j``.
        deterministic: use the deterministic backward (slower, more memory); the forward is always deterministic.
        return_attn_probs: also return the LSE and the attention probabilities (for testing).

    Returns:
        ``out`` ``(B, S, H, D)`` in qkv's dtype; with ``return_attn_probs=True`` the tuple
        ``(out, softmax_lse, S_dmask)``: ``softmax_lse`` fp32 ``(B, H, S)`` (natural log);
        ``S_dmask`` ``(B, H, round_up(S, 128), round_up(S, 128))`` holding the probabilities with
        dropped entries negated when ``dropout_p > 0``, else an empty ``(0,)`` tensor.

    Raises:
        InputError: qkv is not ``(B, S, 3, H, D)``, not fp16/bf16 (fp32 included), not on CUDA, ``D > 256``,
            or an option is out of range (see the module documentation).
        KernelNotBuiltError: this build's kernel set lacks the head dim/dtype/causal combination.
        LibraryNotBuiltError: no native library (source checkout): build with ``nox -s dev`` or ``pip install .``.
        TorchMismatchError: the running torch is not the one this wheel was built against.
        UnsupportedGPUError: this wheel's arch group cannot run on the GPU; the message names the wheel to install.
        LibraryLoadError: the native library or its build info is broken.
    """
    _checks.packed("qkv", qkv, 5, 3, "(B, S, 3, H, D)")
    q, k, v = qkv.unbind(dim=2)
    return flash_attn_func(
        q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic, return_attn_probs
    )


def flash_attn_kvpacked_func(
    q,
    kv,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),  # -1: unbounded on that side
    softcap=0.0,  # 0.0: no soft-capping
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
):
    """Attention over a padded batch whose k and v are stacked in one tensor (FlashAttention-2 kernels).

    Same as ``flash_attn_func(q, kv[:, :, 0], kv[:, :, 1], ...)``; the gradient of k and v
    arrives as one tensor shaped like ``kv``. Supports MQA/GQA (``Hk`` dividing ``H``).

    Args:
        q: ``(B, Sq, H, D)``, torch.float16 or torch.bfloat16, CUDA; ``D <= 256``.
        kv: ``(B, Sk, 2, Hk, D)``, q's dtype and device; ``H`` a multiple of ``Hk``.
        dropout_p: probability of dropping each attention weight, in [0, 1); use 0.0 for evaluation.
        softmax_scale: factor (unitless) multiplying ``q @ k^T`` before the softmax; None means ``1 / sqrt(D)``.
        causal: mask key ``j`` for query ``i`` when ``j > i + Sk - Sq`` (bottom-right aligned).
        window_size: ``(left, right)`` in tokens; query ``i`` attends keys
            ``i + Sk - Sq - left .. i + Sk - Sq + right``; -1 = unbounded.
        softcap: when > 0, each scaled score ``s`` becomes ``softcap * tanh(s / softcap)``; 0.0 disables it.
        alibi_slopes: fp32 ``(H,)`` or ``(B, H)``; adds ``-slope * |i + Sk - Sq - j|`` to the score.
        deterministic: use the deterministic backward (slower, more memory); the forward is always deterministic.
        return_attn_probs: also return the LSE and the attention probabilities (for testing).

    Returns:
        ``out`` ``(B, Sq, H, D)`` in q's dtype; with ``return_attn_probs=True`` the tuple
        ``(out, softmax_lse, S_dmask)``: ``softmax_lse`` fp32 ``(B, H, Sq)`` (natural log);
        ``S_dmask`` ``(B, H, round_up(Sq, 128), round_up(Sk, 128))`` with dropped entries negated
        when ``dropout_p > 0``, else an empty ``(0,)`` tensor.

    Raises:
        InputError: wrong device (CPU/meta), dtype (fp32, mixed), shape, ``D > 256``, ``H`` not a multiple
            of ``Hk``, or an option out of range.
        KernelNotBuiltError: this build's kernel set lacks the head dim/dtype/causal combination.
        LibraryNotBuiltError: no native library (source checkout): build with ``nox -s dev`` or ``pip install .``.
        TorchMismatchError: the running torch is not the one this wheel was built against.
        UnsupportedGPUError: this wheel's arch group cannot run on the GPU; the message names the wheel to install.
        LibraryLoadError: the native library or its build info is broken.
    """
    _checks.packed("kv", kv, 5, 2, "(B, Sk, 2, Hk, D)")
    k, v = kv.unbind(dim=2)
    return flash_attn_func(
        q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic, return_attn_probs
    )


def flash_attn_func(
    q,
    k,
    v,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),  # -1: unbounded on that side
    softcap=0.0,  # 0.0: no soft-capping
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
):
    """Scaled dot-product attention over a padded batch, computed by FlashAttention-2 kernels.

    ``out = softmax(softmax_scale * q @ k^T + bias, masked) @ v`` per batch element and head,
    without materializing the ``Sq x Sk`` matrix. Differentiable with respect to q, k and v
    (``torch.compile(fullgraph=True)`` traces it, backward included). Supports MQA/GQA.

    Args:
        q: ``(B, Sq, H, D)``, torch.float16 or torch.bfloat16, CUDA; ``D <= 256``.
        k: ``(B, Sk, Hk, D)``, q's dtype and device; ``H`` a multiple of ``Hk``.
        v: ``(B, Sk, Hk, D)``, like k.
        dropout_p: probability of dropping each attention weight, in [0, 1); use 0.0 for evaluation.
        softmax_scale: factor (unitless) multiplying ``q @ k^T`` before the softmax; None means ``1 / sqrt(D)``.
        causal: mask key ``j`` for query ``i`` when ``j > i + Sk - Sq`` (bottom-right aligned).
        window_size: ``(left, right)`` in tokens; query ``i`` attends keys
            ``i + Sk - Sq - left .. i + Sk - Sq + right``; -1 = unbounded; ``(-1, -1)`` is full attention.
        softcap: when > 0, each scaled score ``s`` becomes ``softcap * tanh(s / softcap)``; 0.0 disables it.
        alibi_slopes: fp32 ``(H,)`` or ``(B, H)``; adds ``-slope * |i + Sk - Sq - j|`` to the score.
        deterministic: use the deterministic backward (slower, more memory); the forward is always deterministic.
        return_attn_probs: also return the LSE and the attention probabilities (for testing).

    Returns:
        ``out`` ``(B, Sq, H, D)`` in q's dtype; with ``return_attn_probs=True`` the tuple
        ``(out, softmax_lse, S_dmask)``: ``softmax_lse`` fp32 ``(B, H, Sq)`` (natural log);
        ``S_dmask`` ``(B, H, round_up(Sq, 128), round_up(Sk, 128))`` with dropped entries negated
        when ``dropout_p > 0``, else an empty ``(0,)`` tensor (as upstream).

    Raises:
        InputError: wrong device (CPU/meta), dtype (fp32, mixed), shape, ``D > 256``, ``H`` not a multiple
            of ``Hk``, bad alibi_slopes, or an option out of range.
        KernelNotBuiltError: this build's kernel set lacks the head dim/dtype/causal combination (the backward
            one is checked at ``.backward()``).
        LibraryNotBuiltError: no native library (source checkout): build with ``nox -s dev`` or ``pip install .``.
        TorchMismatchError: the running torch is not the one this wheel was built against.
        UnsupportedGPUError: this wheel's arch group cannot run on the GPU; the message names the wheel to install.
        LibraryLoadError: the native library or its build info is broken.
    """
    ops, q, k, v, head_dim, padded, softmax_scale, left, right = _prepare(q, k, v, softmax_scale, window_size)
    return_softmax = bool(return_attn_probs) and dropout_p > 0
    # Stable-ABI build with dropout: the Philox state is reserved here (flash_attn/_rng.py); else None.
    rng = _rng.forward_rng_state(q, q.shape[0], q.shape[-2]) if _rng.RESERVE and dropout_p > 0 else None
    args = (q, k, v, alibi_slopes, dropout_p, softmax_scale, bool(causal), left, right, softcap, return_softmax, rng)
    # Autograd records the call only with grad mode on and q, k or v requiring grad.
    if (q.requires_grad or k.requires_grad or v.requires_grad) and torch.is_grad_enabled():
        out, softmax_lse, s_dmask = FlashAttnFunc.apply(bool(deterministic), *_distinct(q, k, v), *args[3:])
    else:
        try:  # inline rather than _checks.call: this is the per-call path of inference
            out, softmax_lse, s_dmask, _ = ops["fwd"](*args)
        except RuntimeError as error:
            raise _checks.translate(error) from None
    if padded:
        out = out[..., :head_dim]
    return (out, softmax_lse, s_dmask) if return_attn_probs else out


def flash_attn_varlen_qkvpacked_func(
    qkv,
    cu_seqlens,
    max_seqlen,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),  # -1: unbounded on that side
    softcap=0.0,  # 0.0: no soft-capping
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
):
    """Self-attention over sequences of different lengths packed in one stacked q/k/v tensor (FlashAttention-2).

    The ``B`` sequences are concatenated along the token axis (no padding); sequence ``b`` is
    tokens ``cu_seqlens[b]:cu_seqlens[b + 1]`` and attends only to itself. Same as
    ``flash_attn_varlen_func(qkv[:, 0], qkv[:, 1], qkv[:, 2], cu_seqlens, cu_seqlens, max_seqlen,
    max_seqlen, ...)`` with the gradient shaped like ``qkv``.

    Args:
        qkv: ``(T, 3, H, D)``, T the total number of tokens; torch.float16 or torch.bfloat16, CUDA; ``D <= 256``.
        cu_seqlens: int32 ``(B + 1,)``, cumulative sequence lengths starting at 0 (``cu_seqlens[-1] == T``).
        max_seqlen: int, the longest sequence length of the batch.
        dropout_p: probability of dropping each attention weight, in [0, 1); use 0.0 for evaluation.
        softmax_scale: factor (unitless) multiplying ``q @ k^T`` before the softmax; None means ``1 / sqrt(D)``.
        causal: mask keys after the query's position within each sequence.
        window_size: ``(left, right)`` in tokens; query ``i`` attends keys ``i - left .. i + right``; -1 = unbounded.
        softcap: when > 0, each scaled score ``s`` becomes ``softcap * tanh(s / softcap)``; 0.0 disables it.
        alibi_slopes: fp32 ``(H,)`` or ``(B, H)``; adds ``-slope * |i - j|`` to the score of query ``i``, key ``j``.
        deterministic: use the deterministic backward (slower, more memory); the forward is always deterministic.
        return_attn_probs: also return the LSE and the attention probabilities (for testing).

    Returns:
        ``out`` ``(T, H, D)``; with ``return_attn_probs=True`` the tuple ``(out, softmax_lse, S_dmask)``:
        ``softmax_lse`` fp32 ``(H, T)`` (natural log); ``S_dmask``
        ``(B, H, round_up(max_seqlen, 128), round_up(max_seqlen, 128))`` when ``dropout_p > 0``,
        else an empty ``(0,)`` tensor.

    Raises:
        InputError: qkv is not ``(T, 3, H, D)``, cu_seqlens is not int32 ``(B + 1,)`` contiguous, wrong device or
            dtype (fp32 included), ``D > 256``, or an option out of range.
        KernelNotBuiltError: this build's kernel set lacks the head dim/dtype/causal combination.
        LibraryNotBuiltError: no native library (source checkout): build with ``nox -s dev`` or ``pip install .``.
        TorchMismatchError: the running torch is not the one this wheel was built against.
        UnsupportedGPUError: this wheel's arch group cannot run on the GPU; the message names the wheel to install.
        LibraryLoadError: the native library or its build info is broken.
    """
    _checks.packed("qkv", qkv, 4, 3, "(T, 3, H, D)")
    q, k, v = qkv.unbind(dim=1)
    return flash_attn_varlen_func(
        q,
        k,
        v,
        cu_seqlens,
        cu_seqlens,
        max_seqlen,
        max_seqlen,
        dropout_p,
        softmax_scale,
        causal,
        window_size,
        softcap,
        alibi_slopes,
        deterministic,
        return_attn_probs,
        None,
    )


def flash_attn_varlen_kvpacked_func(
    q,
    kv,
    cu_seqlens_q,
    cu_seqlens_k,
    max_seqlen_q,
    max_seqlen_k,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),  # -1: unbounded on that side
    softcap=0.0,  # 0.0: no soft-capping
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
):
    """Attention over packed variable-length sequences with k and v stacked in one tensor (FlashAttention-2).

    Same as ``flash_attn_varlen_func(q, kv[:, 0], kv[:, 1], ...)`` with the gradient of k and v
    shaped like ``kv``. Supports MQA/GQA.

    Args:
        q: ``(Tq, H, D)``, Tq the total number of query tokens; torch.float16 or torch.bfloat16, CUDA; ``D <= 256``.
        kv: ``(Tk, 2, Hk, D)``, Tk the total number of key tokens; ``H`` a multiple of ``Hk``.
        cu_seqlens_q: int32 ``(B + 1,)``, cumulative query sequence lengths starting at 0.
        cu_seqlens_k: int32 ``(B + 1,)``, cumulative key sequence lengths starting at 0.
        max_seqlen_q: int, the longest query sequence of the batch.
        max_seqlen_k: int, the longest key sequence of the batch.
        dropout_p: probability of dropping each attention weight, in [0, 1); use 0.0 for evaluation.
        softmax_scale: factor (unitless) multiplying ``q @ k^T`` before the softmax; None means ``1 / sqrt(D)``.
        causal: mask key ``j`` for query ``i`` when ``j > i + Sk - Sq`` within each sequence (bottom-right aligned).
        window_size: ``(left, right)`` in tokens; query ``i`` attends keys
            ``i + Sk - Sq - left .. i + Sk - Sq + right``; -1 = unbounded.
        softcap: when > 0, each scaled score ``s`` becomes ``softcap * tanh(s / softcap)``; 0.0 disables it.
        alibi_slopes: fp32 ``(H,)`` or ``(B, H)``; adds ``-slope * |i + Sk - Sq - j|`` to the score.
        deterministic: use the deterministic backward (slower, more memory); the forward is always deterministic.
        return_attn_probs: also return the LSE and the attention probabilities (for testing).

    Returns:
        ``out`` ``(Tq, H, D)``; with ``return_attn_probs=True`` the tuple ``(out, softmax_lse, S_dmask)``:
        ``softmax_lse`` fp32 ``(H, Tq)`` (natural log); ``S_dmask``
        ``(B, H, round_up(max_seqlen_q, 128), round_up(max_seqlen_k, 128))`` when ``dropout_p > 0``,
        else an empty ``(0,)`` tensor.

    Raises:
        InputError: wrong shapes (q not ``(Tq, H, D)``, kv not ``(Tk, 2, Hk, D)``, cu_seqlens not int32
            ``(B + 1,)``), device, dtype (fp32 included), ``D > 256``, or an option out of range.
        KernelNotBuiltError: this build's kernel set lacks the head dim/dtype/causal combination.
        LibraryNotBuiltError: no native library (source checkout): build with ``nox -s dev`` or ``pip install .``.
        TorchMismatchError: the running torch is not the one this wheel was built against.
        UnsupportedGPUError: this wheel's arch group cannot run on the GPU; the message names the wheel to install.
        LibraryLoadError: the native library or its build info is broken.
    """
    _checks.packed("kv", kv, 4, 2, "(Tk, 2, Hk, D)")
    k, v = kv.unbind(dim=1)
    return flash_attn_varlen_func(
        q,
        k,
        v,
        cu_seqlens_q,
        cu_seqlens_k,
        max_seqlen_q,
        max_seqlen_k,
        dropout_p,
        softmax_scale,
        causal,
        window_size,
        softcap,
        alibi_slopes,
        deterministic,
        return_attn_probs,
        None,
    )


def flash_attn_varlen_func(
    q,
    k,
    v,
    cu_seqlens_q,
    cu_seqlens_k,
    max_seqlen_q,
    max_seqlen_k,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),  # -1: unbounded on that side
    softcap=0.0,  # 0.0: no soft-capping
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
    block_table=None,
):
    """Attention over sequences of different lengths packed without padding, computed by FlashAttention-2 kernels.

    The ``B`` query sequences are concatenated along the token axis of q and the key sequences
    along that of k and v; sequence ``b`` is tokens ``cu_seqlens_q[b]:cu_seqlens_q[b + 1]`` of q
    and ``cu_seqlens_k[b]:cu_seqlens_k[b + 1]`` of k/v, and attends only to its own keys.
    Differentiable with respect to q, k and v (not with a paged cache);
    ``torch.compile(fullgraph=True)`` traces it. Supports MQA/GQA.

    Args:
        q: ``(Tq, H, D)``, Tq the total number of query tokens; torch.float16 or torch.bfloat16, CUDA; ``D <= 256``.
        k: ``(Tk, Hk, D)``, Tk the total number of key tokens; or, with ``block_table``, a paged cache
            ``(num_blocks, page_block_size, Hk, D)`` with ``page_block_size`` a multiple of 256.
        v: shaped like k.
        cu_seqlens_q: int32 ``(B + 1,)``, cumulative query sequence lengths starting at 0.
        cu_seqlens_k: int32 ``(B + 1,)``, cumulative key sequence lengths starting at 0.
        max_seqlen_q: int, the longest query sequence of the batch.
        max_seqlen_k: int, the longest key sequence of the batch.
        dropout_p: probability of dropping each attention weight, in [0, 1); use 0.0 for evaluation.
        softmax_scale: factor (unitless) multiplying ``q @ k^T`` before the softmax; None means ``1 / sqrt(D)``.
        causal: mask key ``j`` for query ``i`` when ``j > i + Sk - Sq`` within each sequence (bottom-right aligned).
        window_size: ``(left, right)`` in tokens; query ``i`` attends keys
            ``i + Sk - Sq - left .. i + Sk - Sq + right``; -1 = unbounded.
        softcap: when > 0, each scaled score ``s`` becomes ``softcap * tanh(s / softcap)``; 0.0 disables it.
        alibi_slopes: fp32 ``(H,)`` or ``(B, H)``; adds ``-slope * |i + Sk - Sq - j|`` to the score.
        deterministic: use the deterministic backward (slower, more memory); the forward is always deterministic.
        return_attn_probs: also return the LSE and the attention probabilities (for testing).
        block_table: optional int32 ``(B, max_blocks)``: block ``block_table[b, n]`` of k/v holds keys
            ``n * page_block_size ..`` of sequence ``b`` (paged KV cache; forward only).

    Returns:
        ``out`` ``(Tq, H, D)``; with ``return_attn_probs=True`` the tuple ``(out, softmax_lse, S_dmask)``:
        ``softmax_lse`` fp32 ``(H, Tq)`` (natural log); ``S_dmask``
        ``(B, H, round_up(max_seqlen_q, 128), round_up(max_seqlen_k, 128))`` when ``dropout_p > 0``,
        else an empty ``(0,)`` tensor.

    Raises:
        InputError: wrong shapes (q not ``(Tq, H, D)``, cu_seqlens not int32 ``(B + 1,)`` contiguous,
            block_table not int32 ``(B, max_blocks)``), device, dtype (fp32 included), ``D > 256``, an option
            out of range, or ``.backward()`` through a paged cache.
        KernelNotBuiltError: this build's kernel set lacks the head dim/dtype/causal combination (the backward
            one is checked at ``.backward()``).
        LibraryNotBuiltError: no native library (source checkout): build with ``nox -s dev`` or ``pip install .``.
        TorchMismatchError: the running torch is not the one this wheel was built against.
        UnsupportedGPUError: this wheel's arch group cannot run on the GPU; the message names the wheel to install.
        LibraryLoadError: the native library or its build info is broken.
    """
    ops, q, k, v, head_dim, padded, softmax_scale, left, right = _prepare(q, k, v, softmax_scale, window_size)
    return_softmax = bool(return_attn_probs) and dropout_p > 0
    rng = None
    if _rng.RESERVE and dropout_p > 0:  # stable-ABI build: B = len(cu_seqlens_q) - 1, H = q.shape[1]
        rng = _rng.forward_rng_state(q, _rng.varlen_batch(cu_seqlens_q), q.shape[-2])
    args = (
        *(q, k, v, cu_seqlens_q, cu_seqlens_k, None, None, block_table, alibi_slopes, max_seqlen_q, max_seqlen_k),
        *(dropout_p, softmax_scale, False, bool(causal), left, right, softcap, return_softmax, rng),
    )
    if (q.requires_grad or k.requires_grad or v.requires_grad) and torch.is_grad_enabled():
        distinct = _distinct(q, k, v, cu_seqlens_q, cu_seqlens_k)
        out, softmax_lse, s_dmask = FlashAttnVarlenFunc.apply(bool(deterministic), *distinct, *args[5:])
    else:
        try:
            out, softmax_lse, s_dmask, _ = ops["varlen_fwd"](*args)
        except RuntimeError as error:
            raise _checks.translate(error) from None
    if padded:
        out = out[..., :head_dim]
    return (out, softmax_lse, s_dmask) if return_attn_probs else out


def flash_attn_with_kvcache(
    q,
    k_cache,
    v_cache,
    k=None,
    v=None,
    rotary_cos=None,
    rotary_sin=None,
    cache_seqlens: int | torch.Tensor | None = None,
    cache_batch_idx: torch.Tensor | None = None,
    cache_leftpad: torch.Tensor | None = None,
    block_table: torch.Tensor | None = None,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),  # -1: unbounded on that side
    softcap=0.0,  # 0.0: no soft-capping
    rotary_interleaved=True,
    alibi_slopes=None,
    num_splits=0,
    return_softmax_lse=False,
):
    """Attention of new queries against a KV cache, optionally appending new keys/values first (FlashAttention-2).

    For incremental decoding: when ``k`` and ``v`` are given they are written into ``k_cache`` and
    ``v_cache`` **in place** at positions ``cache_seqlens[b] ..`` of each sequence (rotated first
    when ``rotary_cos``/``rotary_sin`` are given), and q attends the first
    ``cache_seqlens[b] + Sk_new`` cached keys, all in one kernel. The caches must be large enough.
    No backward (inference only: the outputs do not require grad). Supports MQA/GQA.

    Args:
        q: ``(B, Sq, H, D)``, torch.float16 or torch.bfloat16, CUDA; ``D <= 256``.
        k_cache: ``(B_cache, Sk_cache, Hk, D)``, or ``(num_blocks, page_block_size, Hk, D)`` with ``block_table``
            (``page_block_size`` a multiple of 256); last dim contiguous (it is updated in place).
        v_cache: shaped like k_cache.
        k: optional ``(B, Sk_new, Hk, D)``, new keys to append at ``cache_seqlens``.
        v: optional ``(B, Sk_new, Hk, D)``, new values; given exactly when k is.
        rotary_cos: optional ``(S_rotary, rotary_dim / 2)`` in q's dtype, ``rotary_dim`` a multiple of 16 and
            ``<= D``; with rotary_sin, rotates k (and q) at positions ``cache_seqlens ..`` before attention.
            Requires k and v. With ``causal`` or a window, q token ``t`` is rotated at ``cache_seqlens + t``;
            otherwise every q token at ``cache_seqlens``.
        rotary_sin: optional, shaped like rotary_cos.
        cache_seqlens: int, or int32 ``(B,)``: number of tokens already in each cache row (tokens).
        cache_batch_idx: optional int32 ``(B,)``: cache row of each batch element (default ``0 .. B-1``).
        cache_leftpad: optional int32 ``(B,)``: first valid token of each cache row (default 0).
        block_table: optional int32 ``(B, max_blocks)`` for a paged cache.
        softmax_scale: factor (unitless) multiplying ``q @ k^T`` before the softmax; None means ``1 / sqrt(D)``.
        causal: mask key ``j`` for query ``i`` when ``j > i + Sk - Sq`` (bottom-right aligned, ``Sk`` the
            cached length after appending).
        window_size: ``(left, right)`` in tokens; query ``i`` attends keys
            ``i + Sk - Sq - left .. i + Sk - Sq + right``; -1 = unbounded.
        softcap: when > 0, each scaled score ``s`` becomes ``softcap * tanh(s / softcap)``; 0.0 disables it.
        rotary_interleaved: rotate dims (0, 1), (2, 3), ... (True, GPT-J style) or (i, i + rotary_dim / 2)
            (False, GPT-NeoX style).
        alibi_slopes: fp32 ``(H,)`` or ``(B, H)``; adds ``-slope * |i + Sk - Sq - j|`` to the score.
        num_splits: number of KV splits: 0 picks one by heuristic, 1 disables split-KV; at most 128.
        return_softmax_lse: also return the LSE.

    Returns:
        ``out`` ``(B, Sq, H, D)`` in q's dtype; with ``return_softmax_lse=True`` the tuple
        ``(out, softmax_lse)``, ``softmax_lse`` fp32 ``(B, H, Sq)`` (natural log).

    Raises:
        InputError: wrong shapes, device, dtype (fp32 included), a cache without a contiguous last dim,
            ``D > 256``, k without v, k without cache_seqlens, rotary without k, a paged cache with
            cache_batch_idx or cache_leftpad, or an option out of range.
        KernelNotBuiltError: this build's kernel set lacks the head dim/dtype/causal combination (the split-KV
            kernels are needed when appending, paging or splitting).
        LibraryNotBuiltError: no native library (source checkout): build with ``nox -s dev`` or ``pip install .``.
        TorchMismatchError: the running torch is not the one this wheel was built against.
        UnsupportedGPUError: this wheel's arch group cannot run on the GPU; the message names the wheel to install.
        LibraryLoadError: the native library or its build info is broken.
    """
    ops, q_op, k_op, v_op, head_dim, pad, softmax_scale, left, right = _prepare(q, k, v, softmax_scale, window_size)
    if isinstance(cache_seqlens, int):
        length = _checks.cache_seqlens_length(cache_seqlens)
        cache_seqlens = torch.full((q.shape[0],), length, dtype=torch.int32, device=q.device)
    if rotary_cos is not None:
        rotary_cos = rotary_cos.contiguous()
    if rotary_sin is not None:
        rotary_sin = rotary_sin.contiguous()
    # Padding copies the caches (the appended rows are copied back below); without padding they
    # go to the operator as they are, which rejects a last dim it could only fill in a copy.
    if pad:
        k_cache_op = F.pad(k_cache, [0, q_op.shape[-1] - head_dim])
        v_cache_op = F.pad(v_cache, [0, q_op.shape[-1] - head_dim])
    else:
        k_cache_op, v_cache_op = k_cache, v_cache
    args = (
        q_op,
        k_cache_op,
        v_cache_op,
        k_op,
        v_op,
        cache_seqlens,
        rotary_cos,
        rotary_sin,
        cache_batch_idx,
        cache_leftpad,
        block_table,
        alibi_slopes,
        softmax_scale,
        bool(causal),
        left,
        right,
        softcap,
        bool(rotary_interleaved),
        num_splits,
    )
    # No backward: keep autograd off the outputs and caches when any input would record one.
    if (q.requires_grad or k_cache.requires_grad or v_cache.requires_grad) and torch.is_grad_enabled():
        with torch.no_grad():
            out, softmax_lse = _checks.call(ops["fwd_kvcache"], *args)
    else:
        try:  # inline rather than _checks.call: decode calls this once per token
            out, softmax_lse = ops["fwd_kvcache"](*args)
        except RuntimeError as error:
            raise _checks.translate(error) from None
    if pad:
        out = out[..., :head_dim]
        if k is not None:
            with torch.no_grad():
                k_cache.copy_(k_cache_op[..., :head_dim])
                v_cache.copy_(v_cache_op[..., :head_dim])
    return (out, softmax_lse) if return_softmax_lse else out
