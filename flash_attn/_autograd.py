"""Autograd for the attention operators.

Two ``torch.autograd.Function`` classes, one per layout, take q/k/v already padded to a head dim
that is a multiple of 8 (the public functions pad, unpack packed tensors and slice the output, so
autograd carries those steps itself). ``torch.compile`` (Dynamo) traces these functions,
forward and backward, into one graph: the operators have fake implementations
(:mod:`flash_attn._ops`) and everything else here is plain tensor code.

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


def _last_dim_contiguous(t: torch.Tensor) -> torch.Tensor:
    return t if t.stride(-1) == 1 else t.contiguous()


class FlashAttnFunc(torch.autograd.Function):
    """Attention over padded batches: q (B, Sq, H, D), k/v (B, Sk, Hk, D), D a multiple of 8."""

    @staticmethod
    def forward(
        ctx: Any,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        alibi_slopes: torch.Tensor | None,
        dropout_p: float,
        softmax_scale: float,
        causal: bool,
        window_left: int,
        window_right: int,
        softcap: float,
        deterministic: bool,
        return_softmax: bool,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        out, softmax_lse, p, rng_state = _checks.call(
            _ops.OPS["fwd"],
            q,
            k,
            v,
            alibi_slopes,
            dropout_p,
            softmax_scale,
            causal,
            window_left,
            window_right,
            softcap,
            return_softmax,
            None,
        )
        ctx.save_for_backward(q, k, v, out, softmax_lse, rng_state, alibi_slopes)
        ctx.dropout_p = dropout_p
        ctx.softmax_scale = softmax_scale
        ctx.causal = causal
        ctx.window_left = window_left
        ctx.window_right = window_right
        ctx.softcap = softcap
        ctx.deterministic = deterministic
        ctx.mark_non_differentiable(softmax_lse, p)
        return out, softmax_lse, p

    @staticmethod
    def backward(ctx: Any, dout: torch.Tensor, *unused: Any) -> tuple[Any, ...]:
        q, k, v, out, softmax_lse, rng_state, alibi_slopes = ctx.saved_tensors
        dq, dk, dv, _ = _checks.call(
            _ops.OPS["bwd"],
            _last_dim_contiguous(dout),
            q,
            k,
            v,
            out,
            softmax_lse,
            alibi_slopes,
            ctx.dropout_p,
            ctx.softmax_scale,
            ctx.causal,
            ctx.window_left,
            ctx.window_right,
            ctx.softcap,
            ctx.deterministic,
            rng_state,
        )
        return dq, dk, dv, None, None, None, None, None, None, None, None, None


class FlashAttnVarlenFunc(torch.autograd.Function):
    """Attention over packed variable-length batches: q (Tq, H, D), k/v (Tk, Hk, D) or paged."""

    @staticmethod
    def forward(
        ctx: Any,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        cu_seqlens_q: torch.Tensor,
        cu_seqlens_k: torch.Tensor,
        block_table: torch.Tensor | None,
        alibi_slopes: torch.Tensor | None,
        max_seqlen_q: int,
        max_seqlen_k: int,
        dropout_p: float,
        softmax_scale: float,
        causal: bool,
        window_left: int,
        window_right: int,
        softcap: float,
        deterministic: bool,
        return_softmax: bool,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        out, softmax_lse, p, rng_state = _checks.call(
            _ops.OPS["varlen_fwd"],
            q,
            k,
            v,
            cu_seqlens_q,
            cu_seqlens_k,
            None,
            None,
            block_table,
            alibi_slopes,
            max_seqlen_q,
            max_seqlen_k,
            dropout_p,
            softmax_scale,
            False,
            causal,
            window_left,
            window_right,
            softcap,
            return_softmax,
            None,
        )
        ctx.save_for_backward(q, k, v, out, softmax_lse, cu_seqlens_q, cu_seqlens_k, rng_state, alibi_slopes)
        ctx.paged = block_table is not None
        ctx.max_seqlen_q = max_seqlen_q
        ctx.max_seqlen_k = max_seqlen_k
        ctx.dropout_p = dropout_p
        ctx.softmax_scale = softmax_scale
        ctx.causal = causal
        ctx.window_left = window_left
        ctx.window_right = window_right
        ctx.softcap = softcap
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
            _last_dim_contiguous(dout),
            q,
            k,
            v,
            out,
            softmax_lse,
            cu_seqlens_q,
            cu_seqlens_k,
            alibi_slopes,
            ctx.max_seqlen_q,
            ctx.max_seqlen_k,
            ctx.dropout_p,
            ctx.softmax_scale,
            False,
            ctx.causal,
            ctx.window_left,
            ctx.window_right,
            ctx.softcap,
            ctx.deterministic,
            rng_state,
        )
        return (dq, dk, dv) + (None,) * 14
