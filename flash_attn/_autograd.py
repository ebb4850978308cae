"""Autograd for the attention operators.

Two ``torch.autograd.Function`` classes, one per layout, take ``deterministic`` followed by the
arguments of their forward operator in schema order (docs/operators.md), q/k/v already padded to
a head dim that is a multiple of 8 (the public functions pad, unpack packed tensors and slice the output, so
autograd carries those steps itself). ``torch.compile`` (Dynamo) traces these functions,
forward and backward, into one graph: the operators have fake implementations
(:mod:`flash_attn._ops`) and everything else here is plain tensor code.

The forward's last argument is its ``rng_state``: None, or in a stable-ABI build with dropout the
Philox state the public function reserved (:mod:`flash_attn._rng`); the backward takes the state
the forward operator returns, so it regenerates the forward's dropout mask in either build.

The LSE and probability outputs are marked non-differentiable; the backward ignores them.
The public functions take this path only when a gradient is wanted (grad mode on and q, k or v
requiring grad); otherwise they call the forward operator directly, which saves the
``autograd.Function`` bookkeeping on every inference call. Neither path re-derives a dispatch
decision: a kernel the set lacks is reported by the operator (through
:func:`flash_attn._checks.call`), the backward one at ``.backward()``.
"""

from __future__ import annotations

from typing import Any

import torch

from . import _checks, _ops
from ._errors import InputError

__all__ = ["FlashAttnFunc", "FlashAttnVarlenFunc"]


class FlashAttnFunc(torch.autograd.Function):
    """Attention over padded batches: ``apply(deterministic, *fwd_args)``, fwd_args as ``fwd`` takes them."""

    @staticmethod
    def forward(ctx: Any, deterministic: bool, *args: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        out, softmax_lse, p, rng_state = _checks.call(_ops.OPS["fwd"], *args)
        q, k, v, alibi_slopes = args[:4]
        ctx.save_for_backward(q, k, v, out, softmax_lse, rng_state, alibi_slopes)
        # dropout_p, softmax_scale, is_causal, window_size_left, window_size_right, softcap: the
        # same arguments, in the same order, in bwd's schema
        ctx.options = args[4:10]
        ctx.deterministic = deterministic
        ctx.mark_non_differentiable(softmax_lse, p)
        return out, softmax_lse, p

    @staticmethod
    def backward(ctx: Any, dout: torch.Tensor, *unused: Any) -> tuple[Any, ...]:
        q, k, v, out, softmax_lse, rng_state, alibi_slopes = ctx.saved_tensors
        dq, dk, dv, _ = _checks.call(
            _ops.OPS["bwd"],
            dout,
            q,
            k,
            v,
            out,
            softmax_lse,
            alibi_slopes,
            *ctx.options,
            ctx.deterministic,
            rng_state,
        )
        return (None, dq, dk, dv) + (None,) * 9


class FlashAttnVarlenFunc(torch.autograd.Function):
    """Packed variable-length batches: ``apply(deterministic, *varlen_fwd_args)`` (k/v may be paged: forward only)."""

    @staticmethod
    def forward(ctx: Any, deterministic: bool, *args: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        out, softmax_lse, p, rng_state = _checks.call(_ops.OPS["varlen_fwd"], *args)
        q, k, v, cu_seqlens_q, cu_seqlens_k, _, _, block_table, alibi_slopes = args[:9]
        ctx.save_for_backward(q, k, v, out, softmax_lse, cu_seqlens_q, cu_seqlens_k, rng_state, alibi_slopes)
        ctx.paged = block_table is not None
        # max_seqlen_q .. softcap: the same arguments, in the same order, in varlen_bwd's schema
        ctx.options = args[9:18]
        ctx.deterministic = deterministic
        ctx.mark_non_differentiable(softmax_lse, p)
        return out, softmax_lse, p

    @staticmethod
    def backward(ctx: Any, dout: torch.Tensor, *unused: Any) -> tuple[Any, ...]:
        if ctx.paged:
            raise InputError(
                "backward through a paged KV cache (block_table) is not supported: FlashAttention-2 has no paged "
                "backward kernel; call flash_attn_varlen_func without block_table to train"
            )
        q, k, v, out, softmax_lse, cu_seqlens_q, cu_seqlens_k, rng_state, alibi_slopes = ctx.saved_tensors
        dq, dk, dv, _ = _checks.call(
            _ops.OPS["varlen_bwd"],
            dout,
            q,
            k,
            v,
            out,
            softmax_lse,
            cu_seqlens_q,
            cu_seqlens_k,
            alibi_slopes,
            *ctx.options,
            ctx.deterministic,
            rng_state,
        )
        return (None, dq, dk, dv) + (None,) * 17
