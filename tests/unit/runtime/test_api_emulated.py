"""The public API end to end on CPU, over the emulated operators: values, gradients, padding,
MQA/GQA, packing, varlen, KV cache, returned LSE/probabilities, and torch.compile(fullgraph=True).

The emulated operators compute exact attention (tests/unit/mock_ops.py); the references here are
independent (torch SDPA in fp32), so a wrong argument order, a missing pad or a wrong default
scale in the Python layer fails these tests.
"""

from __future__ import annotations

import math

import mock_ops
import pytest
import torch
import torch.nn.functional as F

import flash_attn
from flash_attn import InputError


def sdpa_reference(q, k, v, *, causal=False, window=(-1, -1), scale=None, alibi=None, softcap=0.0):
    """fp32 attention. q (B, Sq, H, D), k/v (B, Sk, Hk, D) -> (B, Sq, H, D)."""
    q, k, v = q.float(), k.float(), v.float()
    groups = q.shape[2] // k.shape[2]
    k, v = k.repeat_interleave(groups, 2), v.repeat_interleave(groups, 2)
    sq, sk = q.shape[1], k.shape[1]
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    i = torch.arange(sq).view(-1, 1) + sk - sq
    j = torch.arange(sk).view(1, -1)
    left, right = window
    right = 0 if causal else right
    keep = torch.ones(sq, sk, dtype=torch.bool)
    if left >= 0:
        keep &= j >= i - left
    if right >= 0:
        keep &= j <= i + right
    bias = torch.zeros(q.shape[0], q.shape[2], sq, sk)
    if alibi is not None:
        bias = bias - alibi.view(-1 if alibi.dim() == 2 else 1, q.shape[2], 1, 1) * (i - j).abs()
    if softcap == 0.0:
        mask = bias.masked_fill(~keep, float("-inf"))
        out = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask, scale=scale
        )
        return out.transpose(1, 2)
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) * scale
    scores = softcap * torch.tanh(scores / softcap) + bias
    scores = scores.masked_fill(~keep, float("-inf"))
    return torch.einsum("bhqk,bkhd->bqhd", torch.softmax(scores, -1), v)


def rand(*shape, dtype=torch.float16, grad=True):
    t = torch.randn(*shape).to(dtype)
    return t.requires_grad_() if grad else t


def grads_of(fn, inputs, dout):
    for x in inputs:
        x.grad = None
    out = fn(*inputs)
    out.backward(dout)
    return out, [x.grad.clone() for x in inputs]


def ref_grads(fn, inputs, dout):
    leaves = [x.detach().float().requires_grad_() for x in inputs]
    out = fn(*leaves)
    out.backward(dout.float())
    return out, [x.grad for x in leaves]


def assert_close(got, want, tol=2e-2):
    got, want = got.double(), want.double()
    rel = (got - want).abs().max() / want.abs().max()
    assert rel <= tol, f"rel_Linf {rel:.3e}"


CONFIGS = [
    dict(),
    dict(causal=True),
    dict(window=(5, 2)),  # asymmetric: swapped left/right would fail
    dict(causal=True, window=(7, -1)),
    dict(softcap=5.0),
    dict(alibi=True),
    dict(scale=0.3),
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: ",".join(c) or "base")
@pytest.mark.parametrize(("heads_k", "seqlen_k"), [(4, 24), (2, 24), (1, 13)])
def test_flash_attn_func_matches_reference(emulated, config, heads_k, seqlen_k):
    b, sq, h, d = 2, 16, 4, 32
    q, k, v = rand(b, sq, h, d), rand(b, seqlen_k, heads_k, d), rand(b, seqlen_k, heads_k, d)
    alibi = torch.rand(b, h) if config.get("alibi") else None
    options = dict(
        causal=config.get("causal", False),
        window=config.get("window", (-1, -1)),
        scale=config.get("scale"),
        softcap=config.get("softcap", 0.0),
        alibi=alibi,
    )

    def ours(q_, k_, v_):
        return flash_attn.flash_attn_func(
            q_,
            k_,
            v_,
            softmax_scale=options["scale"],
            causal=options["causal"],
            window_size=options["window"],
            softcap=options["softcap"],
            alibi_slopes=alibi,
        )

    dout = torch.randn(b, sq, h, d).half()
    out, grads = grads_of(ours, (q, k, v), dout)
    ref, ref_g = ref_grads(lambda *x: sdpa_reference(*x, **options), (q, k, v), dout)
    assert out.dtype == torch.float16 and out.shape == (b, sq, h, d)
    assert_close(out, ref)
    for got, want in zip(grads, ref_g, strict=False):
        assert_close(got, want)


@pytest.mark.parametrize("head_dim", [20, 60, 100, 250])
def test_head_dims_not_multiple_of_8_are_padded(emulated, head_dim):
    q, k, v = (rand(2, 8, 2, head_dim) for _ in range(3))
    dout = torch.randn(2, 8, 2, head_dim).half()
    if head_dim == 250:  # needs the head-dim-256 kernels, which the test kernel set lacks
        with pytest.raises(flash_attn.KernelNotBuiltError):
            flash_attn.flash_attn_func(q, k, v)
        return
    out, grads = grads_of(lambda *x: flash_attn.flash_attn_func(*x, causal=True), (q, k, v), dout)
    name, args = mock_ops.CALLS[0]
    padded = head_dim + (-head_dim) % 8
    assert name == "fwd" and args[0].shape[-1] == padded
    assert args[5] == pytest.approx(head_dim**-0.5), "default scale must use the caller's head dim"
    assert out.shape[-1] == head_dim and [g.shape for g in grads] == [x.shape for x in (q, k, v)]
    ref, ref_g = ref_grads(lambda *x: sdpa_reference(*x, causal=True), (q, k, v), dout)
    assert_close(out, ref)
    for got, want in zip(grads, ref_g, strict=False):
        assert_close(got, want)


def test_options_reach_the_operators(emulated):
    q, k, v = (rand(1, 8, 2, 64) for _ in range(3))
    alibi = torch.rand(2)
    out = flash_attn.flash_attn_func(
        q,
        k,
        v,
        softmax_scale=0.25,
        causal=True,
        window_size=(3, 1),
        softcap=2.0,
        alibi_slopes=alibi,
        deterministic=True,
    )
    out.sum().backward()
    (fwd_name, fwd), (bwd_name, bwd) = mock_ops.CALLS
    assert fwd_name == "fwd" and bwd_name == "bwd"
    assert fwd[3] is alibi and fwd[4:11] == (0.0, 0.25, True, 3, 1, 2.0, False)
    assert bwd[6] is alibi and bwd[7:14] == (0.0, 0.25, True, 3, 1, 2.0, True)


def test_non_contiguous_last_dim_is_copied(emulated):
    q = torch.randn(1, 8, 64, 2).half().transpose(-1, -2)  # (B, S, H, D) with stride(-1) == 2
    assert q.stride(-1) != 1
    out = flash_attn.flash_attn_func(q, q, q)
    assert_close(out, sdpa_reference(q, q, q))


def test_return_attn_probs(emulated):
    q, k, v = rand(2, 100, 4, 64), rand(2, 130, 4, 64), rand(2, 130, 4, 64)
    out, lse, probs = flash_attn.flash_attn_func(q, k, v, return_attn_probs=True)
    assert out.shape == q.shape and lse.shape == (2, 4, 100) and lse.dtype == torch.float32
    scores = torch.einsum("bqhd,bkhd->bhqk", q.float(), k.float()) / 8
    torch.testing.assert_close(lse, torch.logsumexp(scores, -1), atol=1e-3, rtol=1e-3)
    assert probs.shape == (0,), "without dropout upstream returns no probabilities"
    assert not lse.requires_grad and not probs.requires_grad and out.requires_grad
    out, lse, probs = flash_attn.flash_attn_func(q, k, v, dropout_p=0.1, return_attn_probs=True)
    assert probs.shape == (2, 4, 128, 256) and mock_ops.CALLS[-1][1][10] is True
    single = flash_attn.flash_attn_func(q, k, v)
    assert isinstance(single, torch.Tensor)


def test_qkvpacked_equals_unpacked(emulated):
    qkv = rand(2, 16, 3, 4, 40)
    dout = torch.randn(2, 16, 4, 40).half()
    out, (dqkv,) = grads_of(lambda x: flash_attn.flash_attn_qkvpacked_func(x, causal=True), (qkv,), dout)
    ref, (ref_dqkv,) = ref_grads(lambda x: sdpa_reference(*x.unbind(2), causal=True), (qkv,), dout)
    assert dqkv.shape == qkv.shape
    assert_close(out, ref)
    assert_close(dqkv, ref_dqkv)


def test_kvpacked_with_gqa(emulated):
    q, kv = rand(2, 16, 8, 64), rand(2, 20, 2, 2, 64)
    dout = torch.randn(2, 16, 8, 64).half()
    out, (dq, dkv) = grads_of(lambda a, b: flash_attn.flash_attn_kvpacked_func(a, b, causal=True), (q, kv), dout)
    ref, (rdq, rdkv) = ref_grads(lambda a, b: sdpa_reference(a, *b.unbind(2), causal=True), (q, kv), dout)
    assert dkv.shape == kv.shape
    for got, want in ((out, ref), (dq, rdq), (dkv, rdkv)):
        assert_close(got, want)


def _pack(lens, heads, d):
    return rand(sum(lens), heads, d)


def _cu(lens):
    return torch.tensor([0, *lens], dtype=torch.int32).cumsum(0, dtype=torch.int32)


def varlen_reference(q, k, v, lens_q, lens_k, **options):
    outs, sq, sk = [], 0, 0
    for nq, nk in zip(lens_q, lens_k, strict=False):
        outs.append(sdpa_reference(q[None, sq : sq + nq], k[None, sk : sk + nk], v[None, sk : sk + nk], **options)[0])
        sq, sk = sq + nq, sk + nk
    return torch.cat(outs)


@pytest.mark.parametrize("options", [dict(), dict(causal=True), dict(window=(4, 0))], ids=str)
def test_varlen_matches_reference(emulated, options):
    lens_q, lens_k = [5, 16, 9], [7, 16, 20]
    q, k, v = _pack(lens_q, 4, 24), _pack(lens_k, 2, 24), _pack(lens_k, 2, 24)
    dout = torch.randn_like(q)

    def ours(q_, k_, v_):
        return flash_attn.flash_attn_varlen_func(
            q_,
            k_,
            v_,
            _cu(lens_q),
            _cu(lens_k),
            16,
            20,
            causal=options.get("causal", False),
            window_size=options.get("window", (-1, -1)),
        )

    out, grads = grads_of(ours, (q, k, v), dout)
    ref, ref_g = ref_grads(lambda *x: varlen_reference(*x, lens_q, lens_k, **options), (q, k, v), dout)
    assert_close(out, ref)
    for got, want in zip(grads, ref_g, strict=False):
        assert_close(got, want)
    assert mock_ops.CALLS[0][1][9:11] == (16, 20)


def test_varlen_packed_variants_and_lse(emulated):
    lens = [3, 12]
    qkv = rand(15, 3, 4, 64)
    out, lse, probs = flash_attn.flash_attn_varlen_qkvpacked_func(
        qkv, _cu(lens), 12, causal=True, return_attn_probs=True
    )
    assert lse.shape == (4, 15) and probs.shape == (0,)
    assert_close(out, varlen_reference(*qkv.unbind(1), lens, lens, causal=True))
    out.sum().backward()
    assert qkv.grad.shape == qkv.shape
    q, kv = rand(15, 4, 64), rand(15, 2, 2, 64)
    out = flash_attn.flash_attn_varlen_kvpacked_func(q, kv, _cu(lens), _cu(lens), 12, 12)
    assert_close(out, varlen_reference(q, *kv.unbind(1), lens, lens))
    out.sum().backward()
    assert kv.grad.shape == kv.shape


def test_varlen_paged_forward_and_no_backward(emulated):
    lens = [300, 100]
    q = rand(sum(lens), 4, 64)
    k_seq, v_seq = _pack(lens, 4, 64).detach(), _pack(lens, 4, 64).detach()
    k_cache = torch.zeros(4, 256, 4, 64).half()
    v_cache = torch.zeros(4, 256, 4, 64).half()
    table = torch.tensor([[2, 0], [3, 1]], dtype=torch.int32)
    for (start, n), blocks in zip(((0, 300), (300, 100)), table.tolist(), strict=False):
        for i, block in enumerate(blocks):
            chunk = slice(start + 256 * i, start + min(n, 256 * (i + 1)))
            rows = chunk.stop - chunk.start
            if rows > 0:
                k_cache[block, :rows] = k_seq[chunk]
                v_cache[block, :rows] = v_seq[chunk]
    out = flash_attn.flash_attn_varlen_func(
        q, k_cache, v_cache, _cu(lens), _cu(lens), 300, 300, causal=True, block_table=table
    )
    assert_close(out, varlen_reference(q, k_seq, v_seq, lens, lens, causal=True))
    with pytest.raises(InputError, match="paged"):
        out.sum().backward()


def test_kvcache_appends_in_place(emulated):
    q = torch.randn(2, 3, 8, 64).half()
    k_cache, v_cache = torch.randn(2, 32, 2, 64).half(), torch.randn(2, 32, 2, 64).half()
    before = k_cache.clone()
    k_new, v_new = torch.randn(2, 3, 2, 64).half(), torch.randn(2, 3, 2, 64).half()
    seqlens = torch.tensor([4, 10], dtype=torch.int32)
    out, lse = flash_attn.flash_attn_with_kvcache(
        q, k_cache, v_cache, k_new, v_new, cache_seqlens=seqlens, causal=True, return_softmax_lse=True
    )
    assert out.shape == q.shape and lse.shape == (2, 8, 3)
    for b, n in enumerate((4, 10)):
        torch.testing.assert_close(k_cache[b, n : n + 3], k_new[b], atol=0, rtol=0)
        torch.testing.assert_close(k_cache[b, :n], before[b, :n], atol=0, rtol=0)
        ref = sdpa_reference(q[b : b + 1], k_cache[b : b + 1, : n + 3], v_cache[b : b + 1, : n + 3], causal=True)
        assert_close(out[b : b + 1], ref)
    assert mock_ops.CALLS[0][1][12] == pytest.approx(1 / 8)


def test_kvcache_pads_and_copies_back(emulated):
    q = torch.randn(1, 1, 2, 60).half()
    k_cache, v_cache = torch.zeros(1, 8, 2, 60).half(), torch.zeros(1, 8, 2, 60).half()
    k_new, v_new = torch.randn(1, 1, 2, 60).half(), torch.randn(1, 1, 2, 60).half()
    out = flash_attn.flash_attn_with_kvcache(q, k_cache, v_cache, k_new, v_new, cache_seqlens=2)
    assert out.shape == (1, 1, 2, 60) and mock_ops.CALLS[0][1][0].shape[-1] == 64
    torch.testing.assert_close(k_cache[0, 2], k_new[0, 0], atol=0, rtol=0)
    torch.testing.assert_close(v_cache[0, 2], v_new[0, 0], atol=0, rtol=0)
    assert mock_ops.CALLS[0][1][5].tolist() == [2]  # an int cache_seqlens becomes int32 (B,)


def test_kvcache_has_no_autograd(emulated):
    q = rand(1, 1, 2, 64)
    k_cache, v_cache = torch.randn(1, 8, 2, 64).half(), torch.randn(1, 8, 2, 64).half()
    out = flash_attn.flash_attn_with_kvcache(q, k_cache, v_cache)
    assert not out.requires_grad


def test_bf16(emulated):
    q, k, v = (rand(2, 16, 4, 128, dtype=torch.bfloat16) for _ in range(3))
    out = flash_attn.flash_attn_func(q, k, v, causal=True)
    assert out.dtype == torch.bfloat16
    assert_close(out, sdpa_reference(q, k, v, causal=True), tol=1e-2)


# --- torch.compile --------------------------------------------------------------------------------


def _compiled_matches_eager(fn, inputs, extra=(), dynamic=None):
    dout = None
    eager_out, compiled_out = None, None
    results = []
    for compile_it in (False, True):
        leaves = [x.detach().clone().requires_grad_() for x in inputs]
        f = torch.compile(fn, fullgraph=True, backend="aot_eager", dynamic=dynamic) if compile_it else fn
        out = f(*leaves, *extra)
        dout = torch.ones_like(out) if dout is None else dout
        out.backward(dout)
        results.append((out.detach(), [x.grad for x in leaves]))
    (eager_out, eager_g), (compiled_out, compiled_g) = results
    torch.testing.assert_close(compiled_out, eager_out)
    for a, b in zip(compiled_g, eager_g, strict=False):
        torch.testing.assert_close(a, b)
    explanation = torch._dynamo.explain(fn)(*[x.detach() for x in inputs], *extra)
    assert explanation.graph_break_count == 0 and explanation.graph_count == 1


@pytest.mark.parametrize("head_dim", [64, 60])
def test_compile_flash_attn_func_fullgraph(emulated, head_dim):
    def attention(q, k, v):
        return flash_attn.flash_attn_func(q, k, v, causal=True, window_size=(6, 0), alibi_slopes=None)

    _compiled_matches_eager(attention, [torch.randn(2, 16, 4, head_dim).half() for _ in range(3)])


def test_compile_same_tensor_as_q_k_v(emulated):
    def self_attention(x):
        return flash_attn.flash_attn_func(x, x, x)

    _compiled_matches_eager(self_attention, [torch.randn(2, 16, 4, 64).half()])


def test_compile_flash_attn_varlen_func_fullgraph(emulated):
    cu = _cu([5, 11])

    def attention(q, k, v, cu_seqlens):
        return flash_attn.flash_attn_varlen_func(q, k, v, cu_seqlens, cu_seqlens, 11, 11, causal=True)

    _compiled_matches_eager(attention, [torch.randn(16, 4, 64).half() for _ in range(3)], extra=(cu,))


def test_compile_with_dynamic_shapes(emulated):
    def attention(q, k, v):
        return flash_attn.flash_attn_func(q, k, v, causal=True)

    compiled = torch.compile(attention, fullgraph=True, backend="aot_eager", dynamic=True)
    for seqlen in (16, 24, 40):
        q, k, v = (torch.randn(2, seqlen, 4, 64).half() for _ in range(3))
        torch.testing.assert_close(compiled(q, k, v), attention(q, k, v))


def test_compile_packed_functions(emulated):
    def packed(qkv):
        return flash_attn.flash_attn_qkvpacked_func(qkv, causal=True)

    _compiled_matches_eager(packed, [torch.randn(2, 16, 3, 4, 64).half()])


def test_compile_flash_attn_with_kvcache_appends_in_one_graph(emulated):
    """Decode under torch.compile: one graph, no break, the same output and cache update as eager."""
    q = torch.randn(2, 1, 8, 64).half()
    k_new, v_new = torch.randn(2, 1, 2, 64).half(), torch.randn(2, 1, 2, 64).half()
    seqlens = torch.tensor([4, 10], dtype=torch.int32)
    caches = torch.randn(2, 32, 2, 64).half(), torch.randn(2, 32, 2, 64).half()

    def decode(q, k_cache, v_cache, k, v, cache_seqlens):
        return flash_attn.flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=cache_seqlens)

    explanation = torch._dynamo.explain(decode)(q, *(c.clone() for c in caches), k_new, v_new, seqlens)
    assert explanation.graph_break_count == 0 and explanation.graph_count == 1
    torch._dynamo.reset()
    eager_caches, compiled_caches = [c.clone() for c in caches], [c.clone() for c in caches]
    want = decode(q, *eager_caches, k_new, v_new, seqlens)
    got = torch.compile(decode, fullgraph=True, backend="aot_eager")(q, *compiled_caches, k_new, v_new, seqlens)
    torch.testing.assert_close(got, want)
    for got_cache, want_cache, before in zip(compiled_caches, eager_caches, caches, strict=True):
        assert torch.equal(got_cache, want_cache) and not torch.equal(got_cache, before), "appended in place"


def test_compile_refuses_what_eager_refuses(emulated):
    """The operator owns the refusal: a compiled graph raises its message at run time, as eager does."""
    compiled = torch.compile(flash_attn.flash_attn_func, fullgraph=True, backend="aot_eager")
    q = torch.randn(2, 16, 4, 200).half()  # head-dim-256 kernels are not built
    with pytest.raises(RuntimeError, match="built without fwd fp16 head dim 256"):
        compiled(q, q, q)
    with pytest.raises(flash_attn.KernelNotBuiltError, match="built without fwd fp16 head dim 256"):
        flash_attn.flash_attn_func(q, q, q)
    assert [name for name, _ in mock_ops.CALLS] == ["fwd", "fwd"]


def test_scale_argument_is_not_confused_with_head_dim(emulated):
    q = torch.randn(1, 4, 1, 16).half()
    flash_attn.flash_attn_func(q, q, q)
    assert mock_ops.CALLS[-1][1][5] == pytest.approx(1 / math.sqrt(16))
