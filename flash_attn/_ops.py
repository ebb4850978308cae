"""The operators ``torch.ops.flash_attn.*`` and their fake implementations.

The native library registers the operators in C++ (``TORCH_LIBRARY(flash_attn, m)``; schemas
in ``docs/operators.md``). This module holds:

* the fake (meta) implementations ``torch.compile`` needs to trace through the operators. They
  are plain Python functions of tensor metadata, so the unit tests call them directly;
* :func:`bind`, which the loader calls right after ``torch.ops.load_library``: it checks that
  every operator exists, registers the fakes with ``torch.library.register_fake`` (the operator
  must exist first, hence not at import) and remembers the operator handles;
* :data:`OPS`, the operator handles (``torch.ops.<namespace>.<name>.default``, the overload
  itself, so a call skips the packet's overload resolution) that the autograd layer and, while
  ``torch.compile`` traces, the public functions call, every argument positional in schema order;
* :data:`EAGER`, the C++ callable behind each of those handles (what ``OpOverload.__call__``
  forwards to): the public functions call it outside tracing, which spares the Python frame of
  ``OpOverload.__call__`` on every inference call (Dynamo only knows the handle).

Fakes allocate like the C++ operators: ``out``/``dq``/``dk``/``dv`` with ``torch.empty_like`` of
q/k/v (same strides as upstream's ``empty_like``; ``out`` of q as the operator sees it, which
copies a q whose last dim is strided), everything else contiguous. Output shapes
depend on arguments only, never on a dispatch decision of the C++ side: ``p`` is ``(0,)``
unless ``return_softmax``, and ``rng_state`` is ``(2,)`` with dropout and ``(0,)`` without (the
kernels write no Philox state then). ``tests/gpu/test_opcheck.py`` runs
``torch.library.opcheck`` on every operator to hold the fakes to the real outputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ._errors import LibraryLoadError

__all__ = [
    "OPERATORS",
    "FAKES",
    "Binding",
    "bind",
    "is_bound",
    "round_up",
    "fwd_fake",
    "varlen_fwd_fake",
    "bwd_fake",
    "varlen_bwd_fake",
    "fwd_kvcache_fake",
    "OPS",
    "EAGER",
    "build_info_json",
]

Tensor = torch.Tensor

# Operators the library must define (docs/operators.md).
OPERATORS: tuple[str, ...] = ("fwd", "varlen_fwd", "bwd", "varlen_bwd", "fwd_kvcache", "build_info")


def round_up(x: Any, multiple: int) -> Any:
    """Smallest multiple of ``multiple`` >= ``x`` (works on ints and SymInts)."""
    return (x + multiple - 1) // multiple * multiple


def _unit_last_stride(t: Tensor) -> Tensor:
    """``t`` as the operators use it: copied when its last dim is strided (with_unit_last_stride in checks.h)."""
    return t if t.stride(-1) == 1 else t.contiguous()


def _rng_state_like(q: Tensor, dropout_p: float) -> Tensor:
    """The Philox (seed, offset) a forward returns: (2,) int64 with dropout, (0,) without."""
    return torch.empty((2,) if dropout_p > 0 else (0,), dtype=torch.int64, device=q.device)


def _probabilities_like(q: Tensor, wanted: bool, batch: int, heads: int, seqlen_q: int, seqlen_k: int) -> Tensor:
    """The P a forward returns: (B, H, round_up(Sq, 128), round_up(Sk, 128)) in q's dtype, or (0,)."""
    shape = (batch, heads, round_up(seqlen_q, 128), round_up(seqlen_k, 128)) if wanted else (0,)
    return torch.empty(shape, dtype=q.dtype, device=q.device)


def fwd_fake(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    alibi_slopes: Tensor | None,
    dropout_p: float,
    softmax_scale: float,
    is_causal: bool,
    window_size_left: int,
    window_size_right: int,
    softcap: float,
    return_softmax: bool,
    rng_state: Tensor | None,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Fake of ``fwd``: out (B, Sq, H, D), lse fp32 (B, H, Sq), p (B, H, Sq_r, Sk_r) or (0,); rng (2,) or (0,)."""
    batch, seqlen_q, heads, _ = q.shape
    seqlen_k = k.shape[1]
    out = torch.empty_like(_unit_last_stride(q))
    lse = torch.empty((batch, heads, seqlen_q), dtype=torch.float32, device=q.device)
    p = _probabilities_like(q, return_softmax, batch, heads, seqlen_q, seqlen_k)
    return out, lse, p, _rng_state_like(q, dropout_p)


def varlen_fwd_fake(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    cu_seqlens_q: Tensor,
    cu_seqlens_k: Tensor,
    seqused_k: Tensor | None,
    leftpad_k: Tensor | None,
    block_table: Tensor | None,
    alibi_slopes: Tensor | None,
    max_seqlen_q: int,
    max_seqlen_k: int,
    dropout_p: float,
    softmax_scale: float,
    zero_tensors: bool,
    is_causal: bool,
    window_size_left: int,
    window_size_right: int,
    softcap: float,
    return_softmax: bool,
    rng_state: Tensor | None,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Fake of ``varlen_fwd``: out (Tq, H, D), lse fp32 (H, Tq), p (B, H, Sq_r, Sk_r) or (0,); rng (2,) or (0,)."""
    total_q, heads, _ = q.shape
    batch = cu_seqlens_q.shape[0] - 1
    out = torch.empty_like(_unit_last_stride(q))
    lse = torch.empty((heads, total_q), dtype=torch.float32, device=q.device)
    p = _probabilities_like(q, return_softmax, batch, heads, max_seqlen_q, max_seqlen_k)
    return out, lse, p, _rng_state_like(q, dropout_p)


def bwd_fake(
    dout: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    out: Tensor,
    softmax_lse: Tensor,
    alibi_slopes: Tensor | None,
    dropout_p: float,
    softmax_scale: float,
    is_causal: bool,
    window_size_left: int,
    window_size_right: int,
    softcap: float,
    deterministic: bool,
    rng_state: Tensor,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Fake of ``bwd``: dq, dk, dv shaped like q, k, v; softmax_d fp32 (B, H, Sq_r)."""
    batch, seqlen_q, heads, _ = q.shape
    softmax_d = torch.empty((batch, heads, round_up(seqlen_q, 128)), dtype=torch.float32, device=q.device)
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v), softmax_d


def varlen_bwd_fake(
    dout: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    out: Tensor,
    softmax_lse: Tensor,
    cu_seqlens_q: Tensor,
    cu_seqlens_k: Tensor,
    alibi_slopes: Tensor | None,
    max_seqlen_q: int,
    max_seqlen_k: int,
    dropout_p: float,
    softmax_scale: float,
    zero_tensors: bool,
    is_causal: bool,
    window_size_left: int,
    window_size_right: int,
    softcap: float,
    deterministic: bool,
    rng_state: Tensor,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Fake of ``varlen_bwd``: dq, dk, dv shaped like q, k, v; softmax_d fp32 (H, Tq + 128 * B)."""
    total_q, heads, _ = q.shape
    batch = cu_seqlens_q.shape[0] - 1
    softmax_d = torch.empty((heads, total_q + 128 * batch), dtype=torch.float32, device=q.device)
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v), softmax_d


def fwd_kvcache_fake(
    q: Tensor,
    k_cache: Tensor,
    v_cache: Tensor,
    k: Tensor | None,
    v: Tensor | None,
    cache_seqlens: Tensor | None,
    rotary_cos: Tensor | None,
    rotary_sin: Tensor | None,
    cache_batch_idx: Tensor | None,
    cache_leftpad: Tensor | None,
    block_table: Tensor | None,
    alibi_slopes: Tensor | None,
    softmax_scale: float,
    is_causal: bool,
    window_size_left: int,
    window_size_right: int,
    softcap: float,
    rotary_interleaved: bool,
    num_splits: int,
) -> tuple[Tensor, Tensor]:
    """Fake of ``fwd_kvcache``: out (B, Sq, H, D), softmax_lse fp32 (B, H, Sq). The caches are mutated in place."""
    batch, seqlen_q, heads, _ = q.shape
    out = torch.empty_like(_unit_last_stride(q))
    lse = torch.empty((batch, heads, seqlen_q), dtype=torch.float32, device=q.device)
    return out, lse


FAKES: dict[str, Callable[..., Any]] = {
    "fwd": fwd_fake,
    "varlen_fwd": varlen_fwd_fake,
    "bwd": bwd_fake,
    "varlen_bwd": varlen_bwd_fake,
    "fwd_kvcache": fwd_kvcache_fake,
}

# Operator handles (OpOverload ``.default``), filled by bind().
OPS: dict[str, Any] = {}

# The same operators as the C++ callables the handles forward to (``OpOverload._op``; the handle
# itself where a torch lacks that attribute), filled by bind(). For eager calls only.
EAGER: dict[str, Any] = {}


class Binding:
    """The result of :func:`bind`: the namespace and the registrations; :meth:`close` undoes them."""

    def __init__(self, namespace: str, library: torch.library.Library) -> None:
        self.namespace = namespace
        self._library: torch.library.Library | None = library

    def close(self) -> None:
        """Remove the fake registrations and forget the operator handles (used by tests)."""
        OPS.clear()
        EAGER.clear()
        if self._library is not None:
            self._library._destroy()
            self._library = None


def is_bound() -> bool:
    """True once :func:`bind` succeeded."""
    return bool(OPS)


def bind(namespace: str = "flash_attn") -> Binding:
    """Check that ``torch.ops.<namespace>`` defines every operator, register the fakes, keep the handles.

    Must run after the library defining the operators was loaded. Raises LibraryLoadError naming
    the missing operators when the library is incomplete.
    """
    ops_namespace = getattr(torch.ops, namespace)
    handles = {}
    missing = []
    for name in OPERATORS:
        try:
            handles[name] = getattr(ops_namespace, name).default
        except (AttributeError, RuntimeError):
            missing.append(f"{namespace}::{name}")
    if missing:
        raise LibraryLoadError(
            f"the native library does not define {', '.join(missing)} (docs/operators.md); it is from another "
            "build of flash_attn: rebuild (`nox -s dev` or `pip install .`) or reinstall the wheel"
        )
    library = torch.library.Library(namespace, "FRAGMENT")
    try:
        for name, fake in FAKES.items():
            torch.library.register_fake(f"{namespace}::{name}", fake, lib=library)
    except Exception:
        library._destroy()
        raise
    OPS.clear()
    OPS.update(handles)
    EAGER.clear()
    EAGER.update({name: getattr(handle, "_op", handle) for name, handle in handles.items()})
    return Binding(namespace, library)


def build_info_json() -> str:
    """The build info JSON compiled into the loaded library (operator ``build_info``)."""
    return OPS["build_info"]()
