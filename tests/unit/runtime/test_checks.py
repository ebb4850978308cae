"""Input validation: every bad input gets a clear error in Python, before any operator is called."""

from __future__ import annotations

import mock_ops
import pytest
import torch

import flash_attn
from flash_attn import InputError, KernelNotBuiltError, _build_info, _checks, _loader

F16 = torch.float16


def qkv(b=2, sq=16, sk=16, h=4, hk=4, d=64, dtype=F16, device="cpu"):
    return (
        torch.randn(b, sq, h, d, device=device).to(dtype),
        torch.randn(b, sk, hk, d, device=device).to(dtype),
        torch.randn(b, sk, hk, d, device=device).to(dtype),
    )


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_tensors_off_cuda_are_refused(device):
    q, k, v = qkv(device=device)
    with pytest.raises(InputError, match="CUDA devices only") as info:
        flash_attn.flash_attn_func(q, k, v)
    assert f"'{device}" in str(info.value)
    cu = torch.tensor([0, 16, 32], dtype=torch.int32, device=device)
    with pytest.raises(InputError, match="CUDA"):
        flash_attn.flash_attn_varlen_func(q[0], k[0], v[0], cu, cu, 16, 16)
    with pytest.raises(InputError, match="CUDA"):
        flash_attn.flash_attn_with_kvcache(q, k, v)


def test_input_errors_are_runtime_and_value_errors():
    q, k, v = qkv()
    with pytest.raises(RuntimeError):
        flash_attn.flash_attn_func(q, k, v)
    with pytest.raises(ValueError):
        flash_attn.flash_attn_func(q, k, v)


# The remaining checks run with the emulated library (CPU tensors accepted), so each test also
# proves that nothing reached the operators.


def _refused(fn, *args, match, error=InputError, **kwargs):
    with pytest.raises(error, match=match) as info:
        fn(*args, **kwargs)
    assert mock_ops.CALLS == [], "the operator must not be called"
    return str(info.value)


def test_fp32_is_refused(emulated):
    message = _refused(flash_attn.flash_attn_func, *qkv(dtype=torch.float32), match="torch.float32")
    assert "torch.float16 or torch.bfloat16" in message


def test_mixed_dtypes_are_refused(emulated):
    q, k, v = qkv()
    _refused(flash_attn.flash_attn_func, q, k.bfloat16(), v, match="share one dtype")


def test_non_tensor_is_refused(emulated):
    q, k, v = qkv()
    _refused(flash_attn.flash_attn_func, q, k.numpy(), v, match="must be a torch.Tensor")


@pytest.mark.parametrize(
    ("shapes", "match"),
    [
        (((2, 16, 64), (2, 16, 4, 64), (2, 16, 4, 64)), r"q must be 4-D \(B, Sq, H, D\)"),
        (((2, 16, 4, 64), (2, 16, 4, 64), (2, 8, 4, 64)), "k and v must have the same shape"),
        (((2, 16, 4, 64), (3, 16, 4, 64), (3, 16, 4, 64)), "batch size 3 but q has 2"),
        (((2, 16, 4, 64), (2, 16, 4, 32), (2, 16, 4, 32)), "head dim 32 but q has 64"),
        (((2, 16, 6, 64), (2, 16, 4, 64), (2, 16, 4, 64)), "H=6 must be a multiple of .* Hk=4"),
        (((2, 16, 4, 320), (2, 16, 4, 320), (2, 16, 4, 320)), "D=320 is larger than 256"),
        (((0, 16, 4, 64), (0, 16, 4, 64), (0, 16, 4, 64)), "batch size B must be >= 1"),
    ],
)
def test_wrong_shapes_are_refused(emulated, shapes, match):
    q, k, v = (torch.randn(*s).half() for s in shapes)
    _refused(flash_attn.flash_attn_func, q, k, v, match=match)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"dropout_p": 1.0}, r"dropout_p must be a probability in \[0, 1\)"),
        ({"dropout_p": -0.1}, "dropout_p"),
        ({"window_size": (-2, 0)}, "window_size entries must be ints >= -1"),
        ({"window_size": 5}, r"window_size must be a pair \(left, right\)"),
        ({"window_size": (1.5, 2)}, "window_size entries"),
        ({"softcap": 30.0, "dropout_p": 0.1}, "softcap > 0 cannot be combined with dropout_p > 0"),
        ({"softcap": "30"}, "softcap must be a float"),
        ({"softmax_scale": "0.1"}, "softmax_scale must be a float or None"),
        ({"alibi_slopes": torch.ones(4, dtype=F16)}, "alibi_slopes must have dtype torch.float32"),
        ({"alibi_slopes": torch.ones(3)}, r"alibi_slopes must have shape \(H,\) = \(4,\) or \(B, H\) = \(2, 4\)"),
        ({"alibi_slopes": torch.ones(2, 3)}, "alibi_slopes must have shape"),
        ({"alibi_slopes": torch.ones(4, 2).t()}, "contiguous last dimension"),
        ({"alibi_slopes": torch.ones(2, 8)[:, ::2]}, "contiguous last dimension"),
    ],
)
def test_bad_options_are_refused(emulated, kwargs, match):
    _refused(flash_attn.flash_attn_func, *qkv(), match=match, **kwargs)


def test_packed_layouts_are_checked(emulated):
    _refused(flash_attn.flash_attn_qkvpacked_func, torch.randn(2, 16, 2, 4, 64).half(), match=r"\(B, S, 3, H, D\)")
    q = torch.randn(2, 16, 4, 64).half()
    _refused(flash_attn.flash_attn_kvpacked_func, q, torch.randn(2, 16, 4, 64).half(), match=r"\(B, Sk, 2, Hk, D\)")
    cu = torch.tensor([0, 16], dtype=torch.int32)
    _refused(
        flash_attn.flash_attn_varlen_qkvpacked_func, torch.randn(16, 2, 4, 64).half(), cu, 16, match=r"\(T, 3, H, D\)"
    )
    _refused(
        flash_attn.flash_attn_varlen_kvpacked_func,
        q[0],
        torch.randn(16, 3, 4, 64).half(),
        cu,
        cu,
        16,
        16,
        match=r"\(Tk, 2, Hk, D\)",
    )


def _varlen_inputs(total=32, heads=4, d=64):
    q, k, v = (torch.randn(total, heads, d).half() for _ in range(3))
    cu = torch.tensor([0, 16, total], dtype=torch.int32)
    return q, k, v, cu


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda a: a.update(cu_q=a["cu_q"].long()), "cu_seqlens_q must have dtype torch.int32"),
        (lambda a: a.update(cu_k=torch.tensor([0, 0, 16, 0, 32], dtype=torch.int32)[::2]), "must be contiguous"),
        (lambda a: a.update(cu_k=torch.tensor([0, 32], dtype=torch.int32)), r"must both be \(B \+ 1,\)"),
        (
            lambda a: a.update(cu_q=torch.tensor([0], dtype=torch.int32), cu_k=torch.tensor([0], dtype=torch.int32)),
            "B >= 1",
        ),
        (lambda a: a.update(q=a["q"].unsqueeze(0)), r"q must be 3-D \(Tq, H, D\)"),
        (lambda a: a.update(k=a["k"][:, :3], v=a["v"][:, :3]), "H=4 must be a multiple"),
        (lambda a: a.update(max_q=16.0), "max_seqlen_q must be an int"),
        (lambda a: a.update(max_k=-1), "max_seqlen_k must be an int >= 0"),
        (lambda a: a.update(block_table=torch.zeros(2, 1, dtype=torch.int32)), r"4-D \(num_blocks, page_block_size"),
    ],
)
def test_varlen_inputs_are_checked(emulated, change, match):
    q, k, v, cu = _varlen_inputs()
    args = {"q": q, "k": k, "v": v, "cu_q": cu, "cu_k": cu, "max_q": 16, "max_k": 16, "block_table": None}
    change(args)
    _refused(
        flash_attn.flash_attn_varlen_func,
        args["q"],
        args["k"],
        args["v"],
        args["cu_q"],
        args["cu_k"],
        args["max_q"],
        args["max_k"],
        block_table=args["block_table"],
        match=match,
    )


def test_paged_layout_is_checked(emulated):
    q = torch.randn(32, 4, 64).half()
    cache = torch.randn(3, 128, 4, 64).half()  # page_block_size 128: not a multiple of 256
    cu = torch.tensor([0, 16, 32], dtype=torch.int32)
    table = torch.zeros(2, 1, dtype=torch.int32)
    _refused(
        flash_attn.flash_attn_varlen_func, q, cache, cache, cu, cu, 16, 16, block_table=table, match="multiple of 256"
    )
    cache = torch.randn(3, 256, 4, 64).half()
    _refused(
        flash_attn.flash_attn_varlen_func,
        q,
        cache,
        cache,
        cu,
        cu,
        16,
        16,
        block_table=table.long(),
        match="block_table must have dtype torch.int32",
    )
    _refused(
        flash_attn.flash_attn_varlen_func,
        q,
        cache,
        cache,
        cu,
        cu,
        16,
        16,
        block_table=table[:1],
        match=r"block_table must have shape \(B, max_blocks\) with B=2",
    )


def _cache(b=2, s=64, hk=4, d=64):
    return torch.randn(b, s, hk, d).half(), torch.randn(b, s, hk, d).half()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"k": torch.randn(2, 1, 4, 64).half()}, "pass both k and v"),
        ({"k": torch.randn(2, 1, 4, 64).half(), "v": torch.randn(2, 1, 4, 64).half()}, "cache_seqlens is required"),
        (
            {"k": torch.randn(2, 1, 2, 64).half(), "v": torch.randn(2, 1, 2, 64).half(), "cache_seqlens": 3},
            r"k and v must have shape \(B, Sk_new, Hk, D\)",
        ),
        ({"rotary_cos": torch.randn(64, 16).half(), "rotary_sin": torch.randn(64, 16).half()}, "need k and v"),
        ({"rotary_cos": torch.randn(64, 16).half()}, "both rotary_cos and rotary_sin"),
        ({"cache_seqlens": torch.tensor([3, 4])}, "cache_seqlens must have dtype torch.int32"),
        ({"cache_seqlens": torch.tensor([3], dtype=torch.int32)}, r"cache_seqlens must have shape \(B,\)"),
        ({"cache_seqlens": -1}, "cache_seqlens must be an int >= 0"),
        ({"cache_batch_idx": torch.tensor([0, 1])}, "cache_batch_idx must have dtype torch.int32"),
        ({"num_splits": 200}, r"num_splits must be an int in \[0, 128\]"),
        ({"window_size": (0, -3)}, "window_size entries"),
    ],
)
def test_kvcache_inputs_are_checked(emulated, kwargs, match):
    q = torch.randn(2, 1, 4, 64).half()
    k_cache, v_cache = _cache()
    _refused(flash_attn.flash_attn_with_kvcache, q, k_cache, v_cache, match=match, **kwargs)


def test_kvcache_needs_a_contiguous_last_dim(emulated):
    q = torch.randn(2, 1, 4, 64).half()
    k_cache = torch.randn(2, 64, 64, 4).half().transpose(-1, -2)
    _refused(flash_attn.flash_attn_with_kvcache, q, k_cache, k_cache.clone(), match="updated in place")


def test_paged_kvcache_excludes_batch_index(emulated):
    q = torch.randn(2, 1, 4, 64).half()
    k_cache, v_cache = _cache(b=4, s=256)
    table = torch.zeros(2, 2, dtype=torch.int32)
    _refused(
        flash_attn.flash_attn_with_kvcache,
        q,
        k_cache,
        v_cache,
        block_table=table,
        cache_batch_idx=torch.tensor([0, 1], dtype=torch.int32),
        match="cache_batch_idx cannot be combined",
    )


# --- kernel set ---------------------------------------------------------------------------------


def test_head_dim_missing_from_the_kernel_set(emulated):
    q, k, v = qkv(d=200)  # runs the head-dim-256 kernels, left out of the test kernel set
    message = _refused(flash_attn.flash_attn_func, q, k, v, match="head dim 256", error=KernelNotBuiltError)
    assert "kernel set 'dev'" in message and "fwd fp16" in message and "32, 64, 96, 128, 192" in message


def test_dtype_missing_from_the_kernel_set(emulated, monkeypatch):
    fp16_only = frozenset(key for key in _loader.STATE.kernels if key.dtype == "fp16")
    monkeypatch.setattr(_loader.STATE, "kernels", fp16_only)
    flash_attn.flash_attn_func(*qkv())
    mock_ops.CALLS.clear()
    message = _refused(flash_attn.flash_attn_func, *qkv(dtype=torch.bfloat16), match="bf16", error=KernelNotBuiltError)
    assert "holds head dims [32, 64, 96, 128, 192] for fp16" in message


def test_missing_backward_kernel_is_raised_at_backward(emulated, monkeypatch):
    no_bwd = frozenset(key for key in _loader.STATE.kernels if key.kind != "bwd")
    monkeypatch.setattr(_loader.STATE, "kernels", no_bwd)
    q, k, v = (x.requires_grad_() for x in qkv())
    out = flash_attn.flash_attn_func(q, k, v, causal=True)  # the forward runs
    mock_ops.CALLS.clear()
    with pytest.raises(KernelNotBuiltError, match="bwd fp16 head dim 64 causal"):
        out.sum().backward()
    assert mock_ops.CALLS == []


def test_split_kernels_only_required_where_split_kv_is_forced(emulated, monkeypatch):
    no_split = frozenset(key for key in _loader.STATE.kernels if key.kind != "fwd_split")
    monkeypatch.setattr(_loader.STATE, "kernels", no_split)
    flash_attn.flash_attn_func(*qkv())  # the heuristic falls back to the plain kernel (set_split_kv)
    flash_attn.flash_attn_func(*qkv(), dropout_p=0.1)  # dropout never splits KV
    q, k, v, cu = _varlen_inputs()
    flash_attn.flash_attn_varlen_func(q, k, v, cu, cu, 16, 16)  # varlen splits only to decode
    mock_ops.CALLS.clear()
    k_cache, v_cache = _cache()
    new = torch.randn(2, 1, 4, 64).half()
    _refused(
        flash_attn.flash_attn_with_kvcache,
        new,
        k_cache,
        v_cache,
        new,
        new.clone(),
        cache_seqlens=3,
        match="fwd_split",
        error=KernelNotBuiltError,
    )
    flash_attn.flash_attn_with_kvcache(new, k_cache, v_cache, num_splits=1)


@pytest.mark.parametrize(
    ("args", "backward", "expected"),
    [
        ((False, -1, -1, 16, 16, False), False, False),
        ((True, -1, -1, 16, 16, False), False, True),
        ((False, -1, 0, 16, 16, False), False, True),  # a (-1, 0) window is the causal kernel
        ((True, 8, -1, 16, 16, False), False, False),  # causal with a left window is local
        ((True, 16, -1, 16, 16, False), False, True),  # ... unless the window covers every key
        ((True, -1, -1, 1, 16, False), False, False),  # one query: upstream drops causal
        ((True, -1, -1, 1, 16, True), False, True),  # ... except with ALiBi
        ((True, -1, -1, 1, 16, False), True, True),  # the backward keeps it
        ((False, -1, 32, 16, 16, False), False, False),
    ],
)
def test_kernel_causal_follows_upstream_dispatch(args, backward, expected):
    assert _checks.kernel_causal(*args, backward=backward) is expected


def test_kernel_keys(emulated):  # head dims from the loaded build info
    assert _checks.fwd_kernel_keys(torch.bfloat16, 72, True, "maybe") == (("fwd", "bf16", 96, True),)
    assert _checks.fwd_kernel_keys(F16, 64, False, "never") == (("fwd", "fp16", 64, False),)
    assert _checks.fwd_kernel_keys(F16, 64, False, "always") == (("fwd_split", "fp16", 64, False),)
    assert _checks.bwd_kernel_keys(F16, 256, False) == (("bwd", "fp16", 256, False),)
    assert [_checks.padded_head_dim(d) for d in (8, 60, 64, 250, 1)] == [8, 64, 64, 256, 8]


def test_require_kernels_reads_the_loaded_set(emulated):
    assert _checks.require_kernels((("fwd", "fp16", 64, False),)) is True
    with pytest.raises(KernelNotBuiltError, match="fwd_split bf16 head dim 256 causal"):
        _checks.require_kernels((("fwd_split", "bf16", 256, True),))
    assert len(_build_info.kernel_set(emulated)) == len(_loader.STATE.kernels)
