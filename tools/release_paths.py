#!/usr/bin/env python3
"""Release-note paths of flash_attn, checked on a GPU against attention computed in fp32.

    python tools/release_paths.py [--dtype fp16|bf16|all] [--head-dim 64] [--seed N] [--case NAME ...]

Paths (fp16, B=2 S=512 H=8 D=64 unless --dtype/--head-dim say otherwise): base, causal, varlen,
KV cache, GQA decode (one query token, H=8/Hk=2: the head-folding path of every forward operator,
out and LSE), window (32, 32), ALiBi, softcap 30, plus the packed variants (qkvpacked, kvpacked with
GQA, varlen qkvpacked, varlen kvpacked with GQA) and torch.compile(fullgraph=True) of
flash_attn_func and flash_attn_varlen_func (zero graph breaks by torch._dynamo.explain).

Every output and every gradient (dq, dk, dv or the packed gradient) is compared with attention
computed in fp32 from the same inputs: torch SDPA (math backend) with a boolean mask, or an
eager implementation for ALiBi and softcap. Gates: rel_Linf = max|a - b| / max|b| <= 2e-2 for
fp16 and <= 1e-2 for bf16, and cosine similarity >= 0.9995. Inputs are fresh random normals for
every case (never zeros; the seed is printed). Cases whose head dim or dtype the build's kernel
set lacks are reported as SKIP (not built).

Prints a table (case, tensor, max abs err, rel_Linf, cosine, PASS/FAIL/SKIP). Exit code: 0 all
passed (or skipped as not built), 1 a check failed, 2 nothing could run (no CUDA device, no
built library, or a GPU this wheel does not support).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

try:
    import flash_attn
    from flash_attn import (
        KernelNotBuiltError,
        flash_attn_func,
        flash_attn_kvpacked_func,
        flash_attn_qkvpacked_func,
        flash_attn_varlen_func,
        flash_attn_varlen_kvpacked_func,
        flash_attn_varlen_qkvpacked_func,
        flash_attn_with_kvcache,
    )
except ImportError as _exc:  # reported by main(); the module stays importable for its helpers
    flash_attn = None
    _IMPORT_ERROR = _exc

REL_LINF_GATE = {torch.float16: 2e-2, torch.bfloat16: 1e-2}
MIN_COSINE = 0.9995
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}

BATCH, SEQLEN, HEADS, KV_HEADS = 2, 512, 8, 2


@dataclass
class Row:
    """One line of the result table."""

    case: str
    tensor: str
    max_abs: float = math.nan
    rel_linf: float = math.nan
    cosine: float = math.nan
    status: str = "PASS"  # PASS | FAIL | SKIP
    note: str = ""


@dataclass
class Context:
    """What every case needs: where to run, in which dtype, with which head dim and compile backend."""

    device: str
    dtype: torch.dtype
    head_dim: int
    seed: int
    compile_backend: str = "inductor"

    def randn(self, *shape: int, scale: float = 1.0) -> torch.Tensor:
        return (torch.randn(*shape, device=self.device, dtype=torch.float32) * scale).to(self.dtype)


def compare(case: str, name: str, got: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype) -> Row:
    """Compare ``got`` with the fp32 reference ``ref`` against the gates of ``dtype``."""
    got64 = got.detach().double()
    ref64 = ref.detach().double()
    if got64.shape != ref64.shape:
        return Row(case, name, status="FAIL", note=f"shape {tuple(got64.shape)} != reference {tuple(ref64.shape)}")
    if not torch.isfinite(got64).all():
        return Row(case, name, status="FAIL", note="non-finite values")
    ref_max = ref64.abs().max().item()
    if ref_max == 0.0:
        return Row(case, name, status="FAIL", note="reference is all zeros: the check would prove nothing")
    max_abs = (got64 - ref64).abs().max().item()
    rel = max_abs / ref_max
    cosine = F.cosine_similarity(got64.flatten(), ref64.flatten(), dim=0).item()
    ok = rel <= REL_LINF_GATE[dtype] and cosine >= MIN_COSINE
    return Row(case, name, max_abs, rel, cosine, "PASS" if ok else "FAIL")


def _keep_mask(seqlen_q: int, seqlen_k: int, causal: bool, window: tuple[int, int], device) -> torch.Tensor | None:
    """Boolean (Sq, Sk) mask, True = attend; bottom-right aligned like FlashAttention-2. None = no mask."""
    left, right = window
    if causal:
        right = 0
    if left < 0 and right < 0:
        return None
    i = torch.arange(seqlen_q, device=device).view(-1, 1)
    j = torch.arange(seqlen_k, device=device).view(1, -1)
    diag = i + seqlen_k - seqlen_q
    keep = torch.ones(seqlen_q, seqlen_k, dtype=torch.bool, device=device)
    if left >= 0:
        keep &= j >= diag - left
    if right >= 0:
        keep &= j <= diag + right
    return keep


def reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    window: tuple[int, int] = (-1, -1),
    alibi: torch.Tensor | None = None,
    softcap: float = 0.0,
) -> torch.Tensor:
    """Attention in fp32. q (B, Sq, H, D), k/v (B, Sk, Hk, D) -> (B, Sq, H, D) fp32 (differentiable)."""
    q, k, v = q.float(), k.float(), v.float()
    heads, heads_k = q.shape[2], k.shape[2]
    if heads != heads_k:
        k = k.repeat_interleave(heads // heads_k, dim=2)
        v = v.repeat_interleave(heads // heads_k, dim=2)
    seqlen_q, seqlen_k = q.shape[1], k.shape[1]
    scale = q.shape[-1] ** -0.5
    keep = _keep_mask(seqlen_q, seqlen_k, causal, window, q.device)
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    if alibi is None and softcap == 0.0:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(SDPBackend.MATH):
            out = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=keep, scale=scale)
        return out.transpose(1, 2)
    scores = torch.matmul(qt, kt.transpose(-1, -2)) * scale
    if softcap > 0.0:
        scores = softcap * torch.tanh(scores / softcap)
    if alibi is not None:
        i = torch.arange(seqlen_q, device=q.device).view(-1, 1)
        j = torch.arange(seqlen_k, device=q.device).view(1, -1)
        distance = (i + seqlen_k - seqlen_q - j).abs().float()
        scores = scores - alibi.float().view(1, -1, 1, 1) * distance
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), vt).transpose(1, 2)


def _leaves(*tensors: torch.Tensor) -> list[torch.Tensor]:
    return [t.detach().clone().requires_grad_() for t in tensors]


def _fp32_leaves(*tensors: torch.Tensor) -> list[torch.Tensor]:
    return [t.detach().float().requires_grad_() for t in tensors]


def _check_grads(case, names, got_leaves, ref_leaves, dtype) -> list[Row]:
    rows = []
    for name, got, ref in zip(names, got_leaves, ref_leaves, strict=False):
        if got.grad is None or ref.grad is None:
            rows.append(Row(case, name, status="FAIL", note="no gradient"))
        else:
            rows.append(compare(case, name, got.grad, ref.grad, dtype))
    return rows


def _dense_case(ctx: Context, case: str, heads_k: int = HEADS, scale: float = 1.0, **options) -> list[Row]:
    shape_q = (BATCH, SEQLEN, HEADS, ctx.head_dim)
    shape_k = (BATCH, SEQLEN, heads_k, ctx.head_dim)
    q, k, v = _leaves(ctx.randn(*shape_q, scale=scale), ctx.randn(*shape_k, scale=scale), ctx.randn(*shape_k))
    alibi = options.get("alibi")
    out = flash_attn_func(
        q,
        k,
        v,
        causal=options.get("causal", False),
        window_size=options.get("window", (-1, -1)),
        softcap=options.get("softcap", 0.0),
        alibi_slopes=alibi,
    )
    dout = ctx.randn(*out.shape)
    out.backward(dout)
    q32, k32, v32 = _fp32_leaves(q, k, v)
    ref = reference(q32, k32, v32, **options)
    ref.backward(dout.float())
    return [compare(case, "out", out, ref, ctx.dtype)] + _check_grads(
        case, ("dq", "dk", "dv"), (q, k, v), (q32, k32, v32), ctx.dtype
    )


def alibi_slopes(heads: int, device) -> torch.Tensor:
    """The geometric ALiBi slopes 2^(-8 (h + 1) / H), fp32 (H,)."""
    return torch.tensor([2.0 ** (-8.0 * (h + 1) / heads) for h in range(heads)], dtype=torch.float32, device=device)


def case_base(ctx: Context) -> list[Row]:
    return _dense_case(ctx, "base")


def case_causal(ctx: Context) -> list[Row]:
    return _dense_case(ctx, "causal", causal=True)


def case_window(ctx: Context) -> list[Row]:
    return _dense_case(ctx, "window (32,32)", window=(32, 32))


def case_alibi(ctx: Context) -> list[Row]:
    return _dense_case(ctx, "alibi", alibi=alibi_slopes(HEADS, ctx.device))


def case_softcap(ctx: Context) -> list[Row]:
    # q and k scaled by 2: scores reach ~12, where softcap 30 bends them by ~5% (tanh matters)
    return _dense_case(ctx, "softcap 30", scale=2.0, softcap=30.0)


def case_qkvpacked(ctx: Context) -> list[Row]:
    case = "qkvpacked causal"
    (qkv,) = _leaves(ctx.randn(BATCH, SEQLEN, 3, HEADS, ctx.head_dim))
    out = flash_attn_qkvpacked_func(qkv, causal=True)
    dout = ctx.randn(*out.shape)
    out.backward(dout)
    (qkv32,) = _fp32_leaves(qkv)
    ref = reference(*qkv32.unbind(2), causal=True)
    ref.backward(dout.float())
    return [compare(case, "out", out, ref, ctx.dtype)] + _check_grads(case, ("dqkv",), (qkv,), (qkv32,), ctx.dtype)


def case_kvpacked(ctx: Context) -> list[Row]:
    case = f"kvpacked GQA {HEADS}/{KV_HEADS}"
    q, kv = _leaves(ctx.randn(BATCH, SEQLEN, HEADS, ctx.head_dim), ctx.randn(BATCH, SEQLEN, 2, KV_HEADS, ctx.head_dim))
    out = flash_attn_kvpacked_func(q, kv)
    dout = ctx.randn(*out.shape)
    out.backward(dout)
    q32, kv32 = _fp32_leaves(q, kv)
    ref = reference(q32, *kv32.unbind(2))
    ref.backward(dout.float())
    return [compare(case, "out", out, ref, ctx.dtype)] + _check_grads(
        case, ("dq", "dkv"), (q, kv), (q32, kv32), ctx.dtype
    )


def _seqlens(ctx: Context, extra_k: bool) -> tuple[list[int], list[int]]:
    """Per-sequence query and key lengths: the first sequence is SEQLEN long, the others random."""
    generator = torch.Generator().manual_seed(ctx.seed)
    lens_q = [SEQLEN] + torch.randint(SEQLEN // 4, SEQLEN, (BATCH - 1,), generator=generator).tolist()
    if not extra_k:
        return lens_q, list(lens_q)
    lens_k = [
        n + int(e) for n, e in zip(lens_q, torch.randint(0, 64, (BATCH,), generator=generator).tolist(), strict=False)
    ]
    return lens_q, lens_k


def _cu(lens: list[int], device) -> torch.Tensor:
    return torch.tensor([0] + lens, device=device, dtype=torch.int32).cumsum(0, dtype=torch.int32)


def _varlen_reference(q, k, v, lens_q, lens_k, **options) -> torch.Tensor:
    """Packed fp32 reference: each sequence attends itself. q (Tq, H, D), k/v (Tk, Hk, D)."""
    outs, start_q, start_k = [], 0, 0
    for n_q, n_k in zip(lens_q, lens_k, strict=False):
        qb = q[start_q : start_q + n_q].unsqueeze(0)
        kb = k[start_k : start_k + n_k].unsqueeze(0)
        vb = v[start_k : start_k + n_k].unsqueeze(0)
        outs.append(reference(qb, kb, vb, **options)[0])
        start_q += n_q
        start_k += n_k
    return torch.cat(outs)


def case_varlen(ctx: Context) -> list[Row]:
    case = "varlen"
    lens, _ = _seqlens(ctx, extra_k=False)
    total = sum(lens)
    q, k, v = _leaves(*(ctx.randn(total, HEADS, ctx.head_dim) for _ in range(3)))
    cu = _cu(lens, ctx.device)
    out = flash_attn_varlen_func(q, k, v, cu, cu, max(lens), max(lens))
    dout = ctx.randn(*out.shape)
    out.backward(dout)
    q32, k32, v32 = _fp32_leaves(q, k, v)
    ref = _varlen_reference(q32, k32, v32, lens, lens)
    ref.backward(dout.float())
    return [compare(case, "out", out, ref, ctx.dtype)] + _check_grads(
        case, ("dq", "dk", "dv"), (q, k, v), (q32, k32, v32), ctx.dtype
    )


def case_varlen_qkvpacked(ctx: Context) -> list[Row]:
    case = "varlen qkvpacked causal"
    lens, _ = _seqlens(ctx, extra_k=False)
    (qkv,) = _leaves(ctx.randn(sum(lens), 3, HEADS, ctx.head_dim))
    cu = _cu(lens, ctx.device)
    out = flash_attn_varlen_qkvpacked_func(qkv, cu, max(lens), causal=True)
    dout = ctx.randn(*out.shape)
    out.backward(dout)
    (qkv32,) = _fp32_leaves(qkv)
    ref = _varlen_reference(*qkv32.unbind(1), lens, lens, causal=True)
    ref.backward(dout.float())
    return [compare(case, "out", out, ref, ctx.dtype)] + _check_grads(case, ("dqkv",), (qkv,), (qkv32,), ctx.dtype)


def case_varlen_kvpacked(ctx: Context) -> list[Row]:
    case = f"varlen kvpacked causal GQA {HEADS}/{KV_HEADS}"
    lens_q, lens_k = _seqlens(ctx, extra_k=True)
    q, kv = _leaves(ctx.randn(sum(lens_q), HEADS, ctx.head_dim), ctx.randn(sum(lens_k), 2, KV_HEADS, ctx.head_dim))
    cu_q, cu_k = _cu(lens_q, ctx.device), _cu(lens_k, ctx.device)
    out = flash_attn_varlen_kvpacked_func(q, kv, cu_q, cu_k, max(lens_q), max(lens_k), causal=True)
    dout = ctx.randn(*out.shape)
    out.backward(dout)
    q32, kv32 = _fp32_leaves(q, kv)
    ref = _varlen_reference(q32, *kv32.unbind(1), lens_q, lens_k, causal=True)
    ref.backward(dout.float())
    return [compare(case, "out", out, ref, ctx.dtype)] + _check_grads(
        case, ("dq", "dkv"), (q, kv), (q32, kv32), ctx.dtype
    )


def case_kvcache(ctx: Context) -> list[Row]:
    case = "kvcache append causal"
    new = 16
    generator = torch.Generator().manual_seed(ctx.seed + 1)
    cache_lens = torch.randint(SEQLEN // 4, SEQLEN - new, (BATCH,), generator=generator).tolist()
    k_cache = ctx.randn(BATCH, SEQLEN, HEADS, ctx.head_dim)
    v_cache = ctx.randn(BATCH, SEQLEN, HEADS, ctx.head_dim)
    k_before, v_before = k_cache.clone(), v_cache.clone()
    q = ctx.randn(BATCH, new, HEADS, ctx.head_dim)
    k_new = ctx.randn(BATCH, new, HEADS, ctx.head_dim)
    v_new = ctx.randn(BATCH, new, HEADS, ctx.head_dim)
    seqlens = torch.tensor(cache_lens, dtype=torch.int32, device=ctx.device)
    out = flash_attn_with_kvcache(q, k_cache, v_cache, k_new, v_new, cache_seqlens=seqlens, causal=True)
    rows = []
    expected_k, expected_v, refs = k_before.clone(), v_before.clone(), []
    for b, n in enumerate(cache_lens):
        expected_k[b, n : n + new] = k_new[b]
        expected_v[b, n : n + new] = v_new[b]
        keys = expected_k[b : b + 1, : n + new]
        values = expected_v[b : b + 1, : n + new]
        refs.append(reference(q[b : b + 1], keys, values, causal=True))
    rows.append(compare(case, "out", out, torch.cat(refs), ctx.dtype))
    for name, got, want in (("k_cache", k_cache, expected_k), ("v_cache", v_cache, expected_v)):
        exact = torch.equal(got, want)
        rows.append(
            Row(
                case,
                name,
                max_abs=(got.double() - want.double()).abs().max().item(),
                status="PASS" if exact else "FAIL",
                note="appended in place" if exact else "cache not updated exactly",
            )
        )
    return rows


# The folded LSE must land on the caller's heads: exact up to fp32 rounding (the kernels and the
# reference see the same half-precision inputs), while heads differ by ~0.05 at S=512.
LSE_MAX_ABS = 1e-2


def _reference_lse(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """fp32 natural-log LSE of unmasked scores: q (B, Sq, H, D), k (B, Sk, Hk, D) -> (B, H, Sq)."""
    heads, heads_k = q.shape[2], k.shape[2]
    kf = k.float().repeat_interleave(heads // heads_k, dim=2)
    scores = torch.einsum("bqhd,bkhd->bhqk", q.float(), kf) * q.shape[-1] ** -0.5
    return torch.logsumexp(scores, dim=-1)


def _lse_row(case: str, name: str, got: torch.Tensor, want: torch.Tensor) -> Row:
    if got.shape != want.shape:
        return Row(case, name, status="FAIL", note=f"shape {tuple(got.shape)} != reference {tuple(want.shape)}")
    max_abs = (got.double() - want.double()).abs().max().item()
    ok = max_abs <= LSE_MAX_ABS
    return Row(case, name, max_abs, status="PASS" if ok else "FAIL", note=f"gate max_abs <= {LSE_MAX_ABS:g}")


def case_decode_gqa(ctx: Context) -> list[Row]:
    """One query token per sequence, GQA, no mask: the operators fold each group's query heads into
    rows of one head (src/binding/fold.h). flash_attn_func (q a strided slice), flash_attn_varlen_func
    (one token per sequence) and flash_attn_with_kvcache (with and without appending): out and LSE."""
    case = f"decode GQA {HEADS}/{KV_HEADS}"
    d = ctx.head_dim
    q = ctx.randn(BATCH, 1, 2 * HEADS, d)[:, :, :HEADS]  # not contiguous: the fold reads q's strides
    k, v = ctx.randn(BATCH, SEQLEN, KV_HEADS, d), ctx.randn(BATCH, SEQLEN, KV_HEADS, d)
    ref, ref_lse = reference(q, k, v), _reference_lse(q, k)
    out, lse, _ = flash_attn_func(q, k, v, return_attn_probs=True)
    rows = [compare(case, "func out", out, ref, ctx.dtype), _lse_row(case, "func lse", lse, ref_lse)]

    cu_q = torch.arange(BATCH + 1, device=ctx.device, dtype=torch.int32)
    cu_k = cu_q * SEQLEN
    packed_k, packed_v = k.reshape(-1, KV_HEADS, d), v.reshape(-1, KV_HEADS, d)
    out, lse, _ = flash_attn_varlen_func(q[:, 0], packed_k, packed_v, cu_q, cu_k, 1, SEQLEN, return_attn_probs=True)
    rows += [compare(case, "varlen out", out, ref[:, 0], ctx.dtype)]
    rows += [_lse_row(case, "varlen lse", lse, ref_lse[..., 0].T)]  # (H, Tq), Tq = B

    k_cache, v_cache = k.clone(), v.clone()
    out, lse = flash_attn_with_kvcache(q, k_cache, v_cache, return_softmax_lse=True)
    rows += [compare(case, "kvcache out", out, ref, ctx.dtype), _lse_row(case, "kvcache lse", lse, ref_lse)]

    k_new, v_new = k[:, -1:].clone(), v[:, -1:].clone()  # append the last token to a cache that lacks it
    k_cache, v_cache = torch.zeros_like(k), torch.zeros_like(v)
    k_cache[:, :-1], v_cache[:, :-1] = k[:, :-1], v[:, :-1]
    seqlens = torch.full((BATCH,), SEQLEN - 1, device=ctx.device, dtype=torch.int32)
    out, lse = flash_attn_with_kvcache(
        q, k_cache, v_cache, k_new, v_new, cache_seqlens=seqlens, return_softmax_lse=True
    )
    rows += [compare(case, "kvcache append out", out, ref, ctx.dtype)]
    rows += [_lse_row(case, "kvcache append lse", lse, ref_lse)]
    return rows


def _graph_break_row(case: str, fn: Callable, *args) -> Row:
    torch._dynamo.reset()
    explanation = torch._dynamo.explain(fn)(*args)
    breaks = explanation.graph_break_count
    reasons = "; ".join(str(r.reason) for r in explanation.break_reasons)[:200]
    return Row(
        case,
        "graph breaks",
        max_abs=float(breaks),
        status="PASS" if breaks == 0 else "FAIL",
        note=f"{explanation.graph_count} graph(s), {breaks} break(s)" + (f": {reasons}" if reasons else ""),
    )


def case_compile_func(ctx: Context) -> list[Row]:
    case = "compile flash_attn_func"

    def attention(q, k, v):
        return flash_attn_func(q, k, v, causal=True)

    shape = (BATCH, SEQLEN, HEADS, ctx.head_dim)
    q, k, v = _leaves(*(ctx.randn(*shape) for _ in range(3)))
    rows = [_graph_break_row(case, attention, q.detach(), k.detach(), v.detach())]
    torch._dynamo.reset()
    compiled = torch.compile(attention, fullgraph=True, backend=ctx.compile_backend)
    out = compiled(q, k, v)
    dout = ctx.randn(*out.shape)
    out.backward(dout)
    q32, k32, v32 = _fp32_leaves(q, k, v)
    ref = reference(q32, k32, v32, causal=True)
    ref.backward(dout.float())
    rows.append(compare(case, "out", out, ref, ctx.dtype))
    return rows + _check_grads(case, ("dq", "dk", "dv"), (q, k, v), (q32, k32, v32), ctx.dtype)


def case_compile_varlen(ctx: Context) -> list[Row]:
    case = "compile flash_attn_varlen_func"
    lens, _ = _seqlens(ctx, extra_k=False)
    cu = _cu(lens, ctx.device)
    max_len = max(lens)

    def attention(q, k, v, cu_seqlens):
        return flash_attn_varlen_func(q, k, v, cu_seqlens, cu_seqlens, max_len, max_len, causal=True)

    q, k, v = _leaves(*(ctx.randn(sum(lens), HEADS, ctx.head_dim) for _ in range(3)))
    rows = [_graph_break_row(case, attention, q.detach(), k.detach(), v.detach(), cu)]
    torch._dynamo.reset()
    compiled = torch.compile(attention, fullgraph=True, backend=ctx.compile_backend)
    out = compiled(q, k, v, cu)
    dout = ctx.randn(*out.shape)
    out.backward(dout)
    q32, k32, v32 = _fp32_leaves(q, k, v)
    ref = _varlen_reference(q32, k32, v32, lens, lens, causal=True)
    ref.backward(dout.float())
    rows.append(compare(case, "out", out, ref, ctx.dtype))
    return rows + _check_grads(case, ("dq", "dk", "dv"), (q, k, v), (q32, k32, v32), ctx.dtype)


CASES: dict[str, Callable[[Context], list[Row]]] = {
    "base": case_base,
    "causal": case_causal,
    "varlen": case_varlen,
    "kvcache": case_kvcache,
    "decode_gqa": case_decode_gqa,
    "window": case_window,
    "alibi": case_alibi,
    "softcap": case_softcap,
    "qkvpacked": case_qkvpacked,
    "kvpacked": case_kvpacked,
    "varlen_qkvpacked": case_varlen_qkvpacked,
    "varlen_kvpacked": case_varlen_kvpacked,
    "compile_func": case_compile_func,
    "compile_varlen": case_compile_varlen,
}


def not_built_cause(exc: BaseException | None) -> BaseException | None:
    """The KernelNotBuiltError behind ``exc``, or None. torch.compile raises it wrapped (e.g. in an
    InternalTorchDynamoError), with the original as ``__cause__``; a compiled graph calls the
    operator itself, whose RuntimeError carries the dispatch stub's message (flash_attn_wheel_names.native)."""
    from flash_attn_wheel_names import native  # shipped beside flash_attn, like the KernelNotBuiltError above

    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KernelNotBuiltError) or native.is_not_built_message(str(exc)):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def run_case(name: str, ctx: Context) -> list[Row]:
    """Run one case with fresh inputs; a kernel the build lacks gives a SKIP row, any other error a FAIL row."""
    torch.manual_seed(ctx.seed + list(CASES).index(name))
    try:
        return CASES[name](ctx)
    except Exception as exc:  # report and keep going: one broken path must not hide the others
        not_built = not_built_cause(exc)
        if not_built is not None:
            return [Row(name, "-", status="SKIP", note=f"not built: {str(not_built).split('(')[0].strip()}")]
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()
        return [Row(name, "-", status="FAIL", note=(detail[0] if detail else repr(exc))[:300])]


def format_table(rows: list[Row], title: str) -> str:
    """The result table as text."""

    def number(value: float, digits: str) -> str:
        return "-" if math.isnan(value) else format(value, digits)

    header = ("case", "tensor", "max abs err", "rel_Linf", "cosine", "result")
    body = [
        (
            row.case,
            row.tensor,
            number(row.max_abs, ".3e"),
            number(row.rel_linf, ".3e"),
            number(row.cosine, ".6f"),
            row.status + (f"  {row.note}" if row.note else ""),
        )
        for row in rows
    ]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header) - 1)]
    lines = [title]
    for line in [header, *body]:
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=False)) + "  " + line[-1])
    return "\n".join(lines)


def readiness_error(device_index: int = 0) -> str | None:
    """Why flash_attn cannot run on the GPU (no library, torch mismatch, unsupported GPU), or None."""
    try:
        flash_attn._loader.require_ready(device_index)
    except flash_attn.FlashAttnError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtype", choices=[*DTYPES, "all"], default="fp16")
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--seed", type=int, default=None, help="default: a fresh random seed (printed)")
    parser.add_argument("--case", action="append", choices=list(CASES), help="run only these cases (repeatable)")
    parser.add_argument("--compile-backend", default="inductor")
    args = parser.parse_args(argv)

    if flash_attn is None:
        print(f"release_paths: cannot import flash_attn ({_IMPORT_ERROR}); install the wheel or run `nox -s dev`")
        return 2
    if not torch.cuda.is_available():
        print("release_paths: no CUDA device; nothing checked")
        return 2
    error = readiness_error(torch.cuda.current_device())
    if error is not None:
        print(f"release_paths: flash_attn cannot run here: {error}")
        return 2
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little") % (2**31)
    dtypes = list(DTYPES.values()) if args.dtype == "all" else [DTYPES[args.dtype]]
    names = args.case or list(CASES)
    gpu = torch.cuda.get_device_name()
    failed = False
    for dtype in dtypes:
        ctx = Context("cuda", dtype, args.head_dim, seed, args.compile_backend)
        rows = [row for name in names for row in run_case(name, ctx)]
        dtype_name = {torch.float16: "fp16", torch.bfloat16: "bf16"}[dtype]
        title = (
            f"flash_attn {flash_attn.__version__} on {gpu}: {dtype_name}, B={BATCH} S={SEQLEN} H={HEADS} "
            f"D={args.head_dim}, seed {seed}; gates rel_Linf <= {REL_LINF_GATE[dtype]:g}, cosine >= {MIN_COSINE}"
        )
        print(format_table(rows, title))
        print()
        failed |= any(row.status == "FAIL" for row in rows)
    print("FAILED" if failed else "PASSED")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
