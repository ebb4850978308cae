"""CPU stand-ins for the native operators: the Python layer tested without a GPU or a build.

``define()`` registers, once per process, operators with the exact schemas of docs/operators.md
in the namespace ``flash_attn_mock``, implemented for CPU tensors with a plain fp32 attention.
Dropout is accepted and ignored (no mask is drawn). Like the C++ operators they raise
RuntimeError texts:

- ``flash_attn::<op>: ...`` for a broken operator contract (head dim a multiple of 8 and
  <= 256, fp16/bf16), so a Python-side mistake (missing padding, wrong argument order) fails the
  tests; a strided last dim is accepted, as the C++ operators copy it;
- ``flash_attn was built without ...`` for a unit that the loaded kernel set
  (``flash_attn._loader.STATE.kernels``) lacks, as the dispatch stubs do (the causal flag is not
  emulated: a kind, dtype and head dim the set holds counts as built).

Every call is recorded in ``CALLS`` as (name, args) before any check.
"""

from __future__ import annotations

import torch

from flash_attn import _build_info, _loader
from flash_attn_wheel_names import native  # the message the generated dispatch writes

NAMESPACE = "flash_attn_mock"

SCHEMAS = {  # docs/operators.md (tests/unit/runtime/test_fakes.py compares them)
    "fwd": (
        "fwd(Tensor q, Tensor k, Tensor v, Tensor? alibi_slopes, float dropout_p, "
        "float softmax_scale, bool is_causal, int window_size_left, int window_size_right, "
        "float softcap, bool return_softmax, Tensor? rng_state) -> (Tensor out, "
        "Tensor softmax_lse, Tensor p, Tensor rng_state)"
    ),
    "varlen_fwd": (
        "varlen_fwd(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, "
        "Tensor? seqused_k, Tensor? leftpad_k, Tensor? block_table, Tensor? alibi_slopes, "
        "int max_seqlen_q, int max_seqlen_k, float dropout_p, float softmax_scale, "
        "bool zero_tensors, bool is_causal, int window_size_left, int window_size_right, "
        "float softcap, bool return_softmax, Tensor? rng_state) -> (Tensor out, "
        "Tensor softmax_lse, Tensor p, Tensor rng_state)"
    ),
    "bwd": (
        "bwd(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out, Tensor softmax_lse, "
        "Tensor? alibi_slopes, float dropout_p, float softmax_scale, bool is_causal, "
        "int window_size_left, int window_size_right, float softcap, bool deterministic, "
        "Tensor rng_state) -> (Tensor dq, Tensor dk, Tensor dv, Tensor softmax_d)"
    ),
    "varlen_bwd": (
        "varlen_bwd(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out, Tensor softmax_lse, "
        "Tensor cu_seqlens_q, Tensor cu_seqlens_k, Tensor? alibi_slopes, int max_seqlen_q, "
        "int max_seqlen_k, float dropout_p, float softmax_scale, bool zero_tensors, "
        "bool is_causal, int window_size_left, int window_size_right, float softcap, "
        "bool deterministic, Tensor rng_state) -> (Tensor dq, Tensor dk, Tensor dv, "
        "Tensor softmax_d)"
    ),
    "fwd_kvcache": (
        "fwd_kvcache(Tensor q, Tensor(a!) k_cache, Tensor(b!) v_cache, Tensor? k, Tensor? v, "
        "Tensor? cache_seqlens, Tensor? rotary_cos, Tensor? rotary_sin, Tensor? cache_batch_idx, "
        "Tensor? cache_leftpad, Tensor? block_table, Tensor? alibi_slopes, float softmax_scale, "
        "bool is_causal, int window_size_left, int window_size_right, float softcap, "
        "bool rotary_interleaved, int num_splits) -> (Tensor out, Tensor softmax_lse)"
    ),
    "build_info": "build_info() -> str",
}

CALLS: list[tuple[str, tuple]] = []
BUILD_INFO_JSON = {"value": "{}"}
_LIBRARY: list[torch.library.Library] = []


def _round(x: int, m: int = 128) -> int:
    return (x + m - 1) // m * m


def _contract(op: str, *tensors: torch.Tensor) -> None:
    for t in tensors:
        for ok, what in (
            (t.dtype in (torch.float16, torch.bfloat16), f"dtype {t.dtype}"),
            (t.shape[-1] % 8 == 0 and t.shape[-1] <= 256, f"head dim {t.shape[-1]}"),
        ):
            if not ok:
                raise RuntimeError(f"flash_attn::{op}: operator got {what}")


def _kernel(kind: str, q: torch.Tensor) -> None:
    """Raise like a dispatch stub unless the loaded kernel set holds (kind, dtype, head dim)."""
    dtype = _build_info.dtype_name(q.dtype)
    head_dim = _build_info.kernel_head_dim(q.shape[-1], _loader.STATE.head_dims)
    if not any((key.kind, key.dtype, key.head_dim) == (kind, dtype, head_dim) for key in _loader.STATE.kernels):
        raise RuntimeError(
            f"{native.NOT_BUILT_PREFIX} {kind} {dtype} head dim {head_dim} (kernel set "
            f"'{_loader.STATE.kernel_set_name}'); rebuild with FLASH_ATTN_KERNEL_SET=release"
        )


def _rng(dropout_p: float, given: torch.Tensor | None = None) -> torch.Tensor:
    """The state a forward returns: the given one (a copy) with dropout, as the C++ operators do."""
    if dropout_p > 0 and given is not None:
        return given.clone()
    return torch.zeros(2 if dropout_p > 0 else 0, dtype=torch.int64)


def _probs(q, k, scale, causal, window_left, window_right, softcap, slopes):
    """Probabilities (H, Sq, Sk) fp32 and tanh(scores / softcap) (or None) of one sequence."""
    seqlen_q, seqlen_k = q.shape[0], k.shape[0]
    scores = torch.einsum("qhd,khd->hqk", q, k) * scale
    capped = None
    if softcap > 0:
        capped = torch.tanh(scores / softcap)
        scores = softcap * capped
    i = torch.arange(seqlen_q).view(-1, 1)
    j = torch.arange(seqlen_k).view(1, -1)
    diag = i + seqlen_k - seqlen_q
    if slopes is not None:
        scores = scores - slopes.float().view(-1, 1, 1) * (diag - j).abs()
    if causal:
        window_right = 0
    keep = torch.ones(seqlen_q, seqlen_k, dtype=torch.bool)
    if window_left >= 0:
        keep &= j >= diag - window_left
    if window_right >= 0:
        keep &= j <= diag + window_right
    scores = scores.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    return torch.softmax(scores, dim=-1).nan_to_num(0.0), lse, capped


def _expand(k, heads):
    return k.float().repeat_interleave(heads // k.shape[1], dim=1)


def attention_one(q, k, v, scale, causal, window_left, window_right, softcap, slopes):
    """One sequence. q (Sq, H, D), k/v (Sk, Hk, D) -> out fp32 (Sq, H, D), lse fp32 (H, Sq)."""
    heads = q.shape[1]
    probs, lse, _ = _probs(q.float(), _expand(k, heads), scale, causal, window_left, window_right, softcap, slopes)
    return torch.einsum("hqk,khd->qhd", probs, _expand(v, heads)), lse


def attention_one_grad(dout, q, k, v, scale, causal, window_left, window_right, softcap, slopes):
    """Gradients (dq, dk, dv) fp32 of :func:`attention_one`, written out by hand."""
    heads, heads_k = q.shape[1], k.shape[1]
    qf, kf, vf, do = q.float(), _expand(k, heads), _expand(v, heads), dout.float()
    probs, _, capped = _probs(qf, kf, scale, causal, window_left, window_right, softcap, slopes)
    out = torch.einsum("hqk,khd->qhd", probs, vf)
    dv = torch.einsum("hqk,qhd->khd", probs, do)
    dprobs = torch.einsum("qhd,khd->hqk", do, vf)
    rowsum = (do * out).sum(-1).transpose(0, 1).unsqueeze(-1)  # (H, Sq, 1)
    dscores = probs * (dprobs - rowsum)
    if capped is not None:
        dscores = dscores * (1 - capped * capped)
    dq = torch.einsum("hqk,khd->qhd", dscores, kf) * scale
    dk = torch.einsum("hqk,qhd->khd", dscores, qf) * scale
    group = heads // heads_k
    fold = lambda t: t.reshape(t.shape[0], heads_k, group, t.shape[-1]).sum(2)  # noqa: E731
    return dq, fold(dk), fold(dv)


def _slopes(alibi, b):
    if alibi is None:
        return None
    return alibi if alibi.dim() == 1 else alibi[b]


def fwd(q, k, v, alibi, dropout_p, scale, causal, wl, wr, softcap, return_softmax, rng_state):
    CALLS.append(("fwd", (q, k, v, alibi, dropout_p, scale, causal, wl, wr, softcap, return_softmax, rng_state)))
    _contract("fwd", q, k, v)
    _kernel("fwd", q)
    outs, lses = [], []
    for b in range(q.shape[0]):
        o, lse = attention_one(q[b], k[b], v[b], scale, causal, wl, wr, softcap, _slopes(alibi, b))
        outs.append(o)
        lses.append(lse)
    batch, seqlen_q, heads, _ = q.shape
    p = (
        torch.zeros(batch, heads, _round(seqlen_q), _round(k.shape[1]), dtype=q.dtype)
        if return_softmax
        else torch.empty(0, dtype=q.dtype)
    )
    return torch.stack(outs).to(q.dtype), torch.stack(lses), p, _rng(dropout_p, rng_state)


def bwd(dout, q, k, v, out, lse, alibi, dropout_p, scale, causal, wl, wr, softcap, deterministic, rng_state):
    args = (dout, q, k, v, out, lse, alibi, dropout_p, scale, causal, wl, wr, softcap, deterministic, rng_state)
    CALLS.append(("bwd", args))
    _contract("bwd", dout, q, k, v, out)
    _kernel("bwd", q)
    dq, dk, dv = [], [], []
    for b in range(q.shape[0]):
        g = attention_one_grad(dout[b], q[b], k[b], v[b], scale, causal, wl, wr, softcap, _slopes(alibi, b))
        dq.append(g[0])
        dk.append(g[1])
        dv.append(g[2])
    batch, seqlen_q, heads, _ = q.shape
    softmax_d = torch.zeros(batch, heads, _round(seqlen_q), dtype=torch.float32)
    return (torch.stack(dq).to(q.dtype), torch.stack(dk).to(k.dtype), torch.stack(dv).to(v.dtype), softmax_d)


def _paged_keys(cache, block_table, b, length):
    blocks = [cache[int(i)] for i in block_table[b].tolist()]
    return torch.cat(blocks)[:length]


def varlen_fwd(
    q,
    k,
    v,
    cu_q,
    cu_k,
    seqused_k,
    leftpad_k,
    block_table,
    alibi,
    max_q,
    max_k,
    dropout_p,
    scale,
    zero_tensors,
    causal,
    wl,
    wr,
    softcap,
    return_softmax,
    rng_state,
):
    CALLS.append(
        (
            "varlen_fwd",
            (
                q,
                k,
                v,
                cu_q,
                cu_k,
                seqused_k,
                leftpad_k,
                block_table,
                alibi,
                max_q,
                max_k,
                dropout_p,
                scale,
                zero_tensors,
                causal,
                wl,
                wr,
                softcap,
                return_softmax,
                rng_state,
            ),
        )
    )
    _contract("varlen_fwd", q, k, v)
    _kernel("fwd_split" if block_table is not None else "fwd", q)
    cq, ck = cu_q.tolist(), cu_k.tolist()
    out = torch.zeros(q.shape, dtype=torch.float32)
    lse = torch.zeros(q.shape[1], q.shape[0], dtype=torch.float32)
    for b in range(len(cq) - 1):
        qb = q[cq[b] : cq[b + 1]]
        if block_table is None:
            kb, vb = k[ck[b] : ck[b + 1]], v[ck[b] : ck[b + 1]]
        else:
            length = ck[b + 1] - ck[b]
            kb, vb = _paged_keys(k, block_table, b, length), _paged_keys(v, block_table, b, length)
        o, l_ = attention_one(qb, kb, vb, scale, causal, wl, wr, softcap, _slopes(alibi, b))
        out[cq[b] : cq[b + 1]] = o
        lse[:, cq[b] : cq[b + 1]] = l_
    batch = len(cq) - 1
    p = (
        torch.zeros(batch, q.shape[1], _round(max_q), _round(max_k), dtype=q.dtype)
        if return_softmax
        else torch.empty(0, dtype=q.dtype)
    )
    return out.to(q.dtype), lse, p, _rng(dropout_p, rng_state)


def varlen_bwd(
    dout,
    q,
    k,
    v,
    out,
    lse,
    cu_q,
    cu_k,
    alibi,
    max_q,
    max_k,
    dropout_p,
    scale,
    zero_tensors,
    causal,
    wl,
    wr,
    softcap,
    deterministic,
    rng_state,
):
    CALLS.append(
        (
            "varlen_bwd",
            (
                dout,
                q,
                k,
                v,
                out,
                lse,
                cu_q,
                cu_k,
                alibi,
                max_q,
                max_k,
                dropout_p,
                scale,
                zero_tensors,
                causal,
                wl,
                wr,
                softcap,
                deterministic,
                rng_state,
            ),
        )
    )
    _contract("varlen_bwd", dout, q, k, v, out)
    _kernel("bwd", q)
    cq, ck = cu_q.tolist(), cu_k.tolist()
    dq = torch.zeros(q.shape, dtype=torch.float32)
    dk = torch.zeros(k.shape, dtype=torch.float32)
    dv = torch.zeros(v.shape, dtype=torch.float32)
    for b in range(len(cq) - 1):
        sq, sk = slice(cq[b], cq[b + 1]), slice(ck[b], ck[b + 1])
        g = attention_one_grad(dout[sq], q[sq], k[sk], v[sk], scale, causal, wl, wr, softcap, _slopes(alibi, b))
        dq[sq], dk[sk], dv[sk] = g
    batch = len(cq) - 1
    softmax_d = torch.zeros(q.shape[1], q.shape[0] + 128 * batch, dtype=torch.float32)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), softmax_d


def fwd_kvcache(
    q,
    k_cache,
    v_cache,
    k,
    v,
    cache_seqlens,
    rotary_cos,
    rotary_sin,
    cache_batch_idx,
    cache_leftpad,
    block_table,
    alibi,
    scale,
    causal,
    wl,
    wr,
    softcap,
    rotary_interleaved,
    num_splits,
):
    CALLS.append(
        (
            "fwd_kvcache",
            (
                q,
                k_cache,
                v_cache,
                k,
                v,
                cache_seqlens,
                rotary_cos,
                rotary_sin,
                cache_batch_idx,
                cache_leftpad,
                block_table,
                alibi,
                scale,
                causal,
                wl,
                wr,
                softcap,
                rotary_interleaved,
                num_splits,
            ),
        )
    )
    _contract("fwd_kvcache", q, k_cache, v_cache)
    _kernel("fwd_split" if k is not None or cache_batch_idx is not None or num_splits > 1 else "fwd", q)
    assert rotary_cos is None and block_table is None and cache_leftpad is None, "not emulated"
    batch, seqlen_q = q.shape[:2]
    lengths = cache_seqlens.tolist() if cache_seqlens is not None else [k_cache.shape[1]] * batch
    rows = cache_batch_idx.tolist() if cache_batch_idx is not None else list(range(batch))
    outs, lses = [], []
    for b in range(batch):
        row, length = rows[b], lengths[b]
        if k is not None:
            _contract("fwd_kvcache", k, v)
            k_cache[row, length : length + k.shape[1]] = k[b]
            v_cache[row, length : length + k.shape[1]] = v[b]
            length += k.shape[1]
        o, lse = attention_one(
            q[b], k_cache[row, :length], v_cache[row, :length], scale, causal, wl, wr, softcap, _slopes(alibi, b)
        )
        outs.append(o)
        lses.append(lse)
    return torch.stack(outs).to(q.dtype), torch.stack(lses)


def build_info():
    return BUILD_INFO_JSON["value"]


def define() -> str:
    """Define the mock operators once per process; return their namespace."""
    if not _LIBRARY:
        lib = torch.library.Library(NAMESPACE, "DEF")
        for schema in SCHEMAS.values():
            lib.define(schema)
        for op_name, fn in (
            ("fwd", fwd),
            ("bwd", bwd),
            ("varlen_fwd", varlen_fwd),
            ("varlen_bwd", varlen_bwd),
            ("fwd_kvcache", fwd_kvcache),
        ):
            lib.impl(op_name, fn, "CPU")
        lib.impl("build_info", build_info, "CompositeExplicitAutograd")
        _LIBRARY.append(lib)
    return NAMESPACE
