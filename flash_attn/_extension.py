"""Upstream's compiled extension ``flash_attn_2_cuda``, as Python functions over this wheel's operators.

Upstream FlashAttention-2 2.8.3 builds a pybind11 module ``flash_attn_2_cuda`` whose five functions
``fwd``, ``varlen_fwd``, ``bwd``, ``varlen_bwd`` and ``fwd_kvcache`` (``PYBIND11_MODULE`` in
csrc/flash_attn/flash_api.cpp) some packages call directly: xformers through
``flash_attn.flash_attn_interface.flash_attn_cuda`` / ``flash_attn_gpu``, others as the top-level
module. This wheel has no such module: its kernels are torch operators (docs/operators.md). This
module gives the five functions with upstream's positional parameters, in flash_api.cpp's order
and under its names (without the C++ trailing underscore), and upstream's return lists; the
top-level ``flash_attn_2_cuda`` module and ``flash_attn_interface.flash_attn_gpu`` re-export them.
Like pybind11 functions without argument names they take positional arguments only.

Differences from the compiled extension, all from this wheel's operator schemas:

* Given output tensors (``out``, ``dq``/``dk``/``dv``) are filled with the operator's result by a
  copy, and returned in its place, so a caller that passes views of a larger buffer sees them
  written, as upstream writes them. The copy costs one extra pass over that tensor on the device
  (e.g. ``dq``, ``dk``, ``dv``: 2 bytes per element each in fp16/bf16, read and written once);
  ``None`` costs nothing.
* ``gen``, a CUDA ``torch.Generator``: with ``p_dropout > 0`` the Philox (seed, offset) is reserved
  on it in Python, as the exact build's C++ reserves it on the default generator (offset advanced
  by ``B * H * 32``, :mod:`flash_attn._rng`); ``None`` draws from the default generator of q's
  device, as the public functions do. The backward functions given ``rng_state=None`` with
  ``p_dropout > 0`` reserve a fresh state the same way, as upstream's C++ does (a mask other than
  the forward's; pass the forward's ``rng_state``). Either reservation inside CUDA-graph capture
  raises :class:`~flash_attn.FlashAttnError` (every replay would reuse one mask).
* Errors are this package's (:class:`~flash_attn.InputError` and the others of
  :mod:`flash_attn.flash_attn_interface`), raised by the operators' own checks.

The operator arguments are taken by name from the operators' schemas (the parameter names of the
fake implementations in :mod:`flash_attn._ops`, which ``tests/unit/runtime/test_fakes.py`` holds to
docs/operators.md), so no argument list is written twice; :func:`call` is the one place that
assembles them, for this module and for :mod:`flash_attn._upstream_api`.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from . import _checks, _ops, _rng
from ._errors import FlashAttnError

__all__ = ["fwd", "varlen_fwd", "bwd", "varlen_bwd", "fwd_kvcache", "call", "PARAMETERS"]

Tensor = torch.Tensor

# Each operator's parameter names in schema order (docs/operators.md), read off its fake.
PARAMETERS: dict[str, tuple[str, ...]] = {
    name: tuple(inspect.signature(fake).parameters) for name, fake in _ops.FAKES.items()
}

# flash_api.cpp's parameter names where the operator schema names the same argument otherwise.
_SCHEMA_NAMES = {"p_dropout": "dropout_p", "kcache": "k_cache", "vcache": "v_cache", "seqlens_k": "cache_seqlens"}
_KVCACHE_NAMES = {**_SCHEMA_NAMES, "leftpad_k": "cache_leftpad", "is_rotary_interleaved": "rotary_interleaved"}

_CAPTURE_MESSAGE = (
    "flash_attn_2_cuda: dropout inside CUDA-graph capture with an explicit generator (gen), or in a backward "
    "without the forward's rng_state, is not supported: the Philox state is then reserved in Python, so every "
    "replay of the graph would reuse one dropout mask; pass gen=None and the forward's rng_state, or dropout 0 "
    "inside the graph"
)


def _reserved(q: Tensor, batch: int, generator: Any) -> Tensor:
    """Reserve one call's Philox range on ``generator`` (None: q's default CUDA generator) now."""
    if _rng.capturing():
        raise FlashAttnError(_CAPTURE_MESSAGE)
    generator = _rng.generator_for(q.device) if generator is None else generator
    return _rng.rng_state(generator, batch, q.shape[-2])


def _rng_state(op: str, values: Mapping[str, Any], generator: Any) -> Tensor | None:
    """The ``rng_state`` argument of ``op``: None or reserved for a forward (as the public functions do,
    or on ``generator``); the given state, else an empty one or (dropout) a fresh one for a backward."""
    q, dropout = values["q"], values.get("dropout_p", 0.0) > 0
    batch = _rng.varlen_batch(values["cu_seqlens_q"]) if op.startswith("varlen") else q.shape[0]
    if op.endswith("fwd"):
        if not dropout:
            return None
        if generator is None:
            return _rng.forward_rng_state(q, batch, q.shape[-2]) if _rng.RESERVE else None
        return _reserved(q, batch, generator)
    if values.get("rng_state") is not None:
        return values["rng_state"]
    return _reserved(q, batch, generator) if dropout else torch.empty((0,), dtype=torch.int64)


def call(
    op: str,
    values: Mapping[str, Any],
    into: Sequence[Tensor | None] = (),
    generator: Any = None,
    fake: bool = False,
) -> list[Tensor]:
    """Run operator ``op`` (a name of :data:`flash_attn._ops.OPERATORS`) on arguments given by name.

    Args:
        op: ``"fwd"``, ``"varlen_fwd"``, ``"bwd"``, ``"varlen_bwd"`` or ``"fwd_kvcache"``.
        values: arguments by the operator's schema names (docs/operators.md); a missing name is None.
            ``rng_state`` is decided here (:func:`_rng_state`), from ``values``' own for a backward.
        into: tensors (or None) that receive the first results in place: ``out`` of a forward,
            ``dq, dk, dv`` of a backward. Each given one is returned in place of its result.
        generator: the ``torch.Generator`` dropout reserves on (None: the default one).
        fake: run the fake implementation (:data:`flash_attn._ops.FAKES`) instead: no device check, no
            reservation, no copy (what a custom op's fake needs: shapes only).

    Returns:
        The operator's results as a list (forward: out, softmax_lse, p, rng_state; backward: dq, dk,
        dv, softmax_d; fwd_kvcache: out, softmax_lse).

    Raises:
        InputError, KernelNotBuiltError, and the loading errors of :func:`flash_attn._checks.require_device`.
    """
    if fake:
        ops, rng = _ops.FAKES, None
    else:
        ops = _checks.require_device(values["q"])
        rng = _rng_state(op, values, generator) if "rng_state" in PARAMETERS[op] else None
    arguments = [rng if name == "rng_state" else values.get(name) for name in PARAMETERS[op]]
    result = list(_checks.call(ops[op], *arguments))
    if not fake:
        for index, target in enumerate(into):
            if target is not None and target is not result[index]:
                with torch.no_grad():
                    target.copy_(result[index])
                result[index] = target
    return result


def _by_schema_name(given: Mapping[str, Any], names: Mapping[str, str] = _SCHEMA_NAMES) -> dict[str, Any]:
    return {names.get(name, name): value for name, value in given.items()}


# The five functions below keep flash_api.cpp's parameters (a few to a line: they mirror its prototypes);
# each passes its own arguments on by name (locals() at entry: exactly the parameters).


def fwd(q, k, v, out, alibi_slopes, p_dropout, softmax_scale,
        is_causal, window_size_left, window_size_right, softcap, return_softmax, gen, /):  # fmt: skip
    """Upstream ``flash_attn_2_cuda.fwd``: attention over a padded batch.

    Args: q ``(B, Sq, H, D)``, k/v ``(B, Sk, Hk, D)`` fp16/bf16 CUDA with ``D`` a multiple of 8 and
    <= 256; out: None or a tensor shaped like q that receives the output; alibi_slopes: None or fp32
    ``(H,)``/``(B, H)``; p_dropout in [0, 1); softmax_scale (unitless); is_causal; window sizes in
    tokens (-1: unbounded); softcap (0: off); return_softmax (needs p_dropout > 0); gen: None or a
    CUDA torch.Generator.

    Returns:
        ``[out, softmax_lse, p, rng_state]``: out ``(B, Sq, H, D)`` (the given ``out``), softmax_lse fp32
        ``(B, H, Sq)``, p the probabilities ``(B, H, round_up(Sq, 128), round_up(Sk, 128))`` or ``(0,)``,
        rng_state int64 ``(2,)`` with dropout, else ``(0,)``.

    Raises:
        InputError, KernelNotBuiltError, LibraryNotBuiltError, TorchMismatchError, UnsupportedGPUError,
        LibraryLoadError: as :func:`flash_attn.flash_attn_func`; FlashAttnError: gen under graph capture.
    """
    given = locals()
    return call("fwd", _by_schema_name(given), into=(out,), generator=gen)


def varlen_fwd(q, k, v, out, cu_seqlens_q, cu_seqlens_k, seqused_k, leftpad_k, block_table, alibi_slopes,
               max_seqlen_q, max_seqlen_k, p_dropout, softmax_scale, zero_tensors,
               is_causal, window_size_left, window_size_right, softcap, return_softmax, gen, /):  # fmt: skip
    """Upstream ``flash_attn_2_cuda.varlen_fwd``: attention over packed variable-length sequences.

    Args as :func:`fwd`, with q ``(Tq, H, D)``, k/v ``(Tk, Hk, D)`` (or a paged cache with
    block_table int32 ``(B, max_blocks)``), cu_seqlens_q/k int32 ``(B + 1,)``, seqused_k/leftpad_k
    None or int32 ``(B,)``, max_seqlen_q/k ints (tokens), zero_tensors (zero the outputs first).

    Returns:
        ``[out, softmax_lse, p, rng_state]``: out ``(Tq, H, D)``, softmax_lse fp32 ``(H, Tq)``, p
        ``(B, H, round_up(max_seqlen_q, 128), round_up(max_seqlen_k, 128))`` or ``(0,)``, rng_state.

    Raises:
        As :func:`fwd`.
    """
    given = locals()
    return call("varlen_fwd", _by_schema_name(given), into=(out,), generator=gen)


def bwd(dout, q, k, v, out, softmax_lse, dq, dk, dv, alibi_slopes, p_dropout, softmax_scale,
        is_causal, window_size_left, window_size_right, softcap, deterministic, gen, rng_state, /):  # fmt: skip
    """Upstream ``flash_attn_2_cuda.bwd``: gradients of :func:`fwd`.

    Args: dout, out shaped like q; softmax_lse fp32 ``(B, H, Sq)`` of the forward; dq/dk/dv: None or
    tensors shaped like q/k/v (views of one buffer are fine) that receive the gradients; the options
    as the forward's; deterministic (the deterministic backward); gen; rng_state: the forward's.

    Returns:
        ``[dq, dk, dv, softmax_d]``: the gradients (the given tensors where given), softmax_d fp32
        ``(B, H, round_up(Sq, 128))``.

    Raises:
        As :func:`fwd`.
    """
    given = locals()
    return call("bwd", _by_schema_name(given), into=(dq, dk, dv), generator=gen)


def varlen_bwd(dout, q, k, v, out, softmax_lse, dq, dk, dv,
               cu_seqlens_q, cu_seqlens_k, alibi_slopes, max_seqlen_q, max_seqlen_k, p_dropout, softmax_scale,
               zero_tensors, is_causal, window_size_left, window_size_right, softcap, deterministic,
               gen, rng_state, /):  # fmt: skip
    """Upstream ``flash_attn_2_cuda.varlen_bwd``: gradients of :func:`varlen_fwd`.

    Args as :func:`bwd` and :func:`varlen_fwd`; softmax_lse fp32 ``(H, Tq)``.

    Returns:
        ``[dq, dk, dv, softmax_d]``, softmax_d fp32 ``(H, Tq + 128 * B)``.

    Raises:
        As :func:`fwd`.
    """
    given = locals()
    return call("varlen_bwd", _by_schema_name(given), into=(dq, dk, dv), generator=gen)


def fwd_kvcache(q, kcache, vcache, k, v, seqlens_k, rotary_cos, rotary_sin, cache_batch_idx, leftpad_k,
                block_table, alibi_slopes, out,
                softmax_scale, is_causal, window_size_left, window_size_right, softcap, is_rotary_interleaved,
                num_splits, /):  # fmt: skip
    """Upstream ``flash_attn_2_cuda.fwd_kvcache``: attention against a KV cache, appending k/v in place.

    Args as :func:`flash_attn.flash_attn_with_kvcache` (q ``(B, Sq, H, D)``, D a multiple of 8),
    under flash_api.cpp's names: kcache/vcache the caches, seqlens_k int32 ``(B,)`` (tokens in
    each cache row), leftpad_k the cache_leftpad, is_rotary_interleaved; out: None or a tensor
    shaped like q that receives the output.

    Returns:
        ``[out, softmax_lse]``: out ``(B, Sq, H, D)``, softmax_lse fp32 ``(B, H, Sq)``.

    Raises:
        As :func:`fwd`.
    """
    given = locals()
    return call("fwd_kvcache", _by_schema_name(given, _KVCACHE_NAMES), into=(out,))
