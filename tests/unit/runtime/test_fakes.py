"""Fake implementations: shapes per docs/operators.md, registration, and the documented schemas."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import mock_ops
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import flash_attn
from flash_attn import LibraryLoadError, _ops

DOCS = Path(__file__).resolve().parents[3] / "docs" / "operators.md"


def meta(*shape, dtype=torch.float16):
    return torch.empty(*shape, dtype=dtype, device="meta")


def documented_schemas() -> dict[str, str]:
    schemas = {}
    for line in DOCS.read_text(encoding="utf-8").splitlines():
        match = re.match(r"\| `(\w+)` \| `([^`]+)`", line.strip())
        if match:
            schemas[match.group(1)] = match.group(2)
    return schemas


def schema_arguments(schema: str) -> list[str]:
    inner = schema[schema.index("(") + 1 : schema.index(") ->")]
    return [part.strip().split()[-1] for part in inner.split(",") if part.strip()]


def test_every_documented_operator_is_bound_and_the_mock_matches_the_docs():
    schemas = documented_schemas()
    assert set(schemas) == set(_ops.OPERATORS)
    assert mock_ops.SCHEMAS == schemas


@pytest.mark.parametrize("name", ["fwd", "varlen_fwd", "bwd", "varlen_bwd", "fwd_kvcache"])
def test_fakes_take_the_schema_arguments_in_order(name):
    expected = schema_arguments(documented_schemas()[name])
    assert list(inspect.signature(_ops.FAKES[name]).parameters) == expected


def test_bind_keeps_the_default_overloads(emulated):
    for name in _ops.OPERATORS:
        assert isinstance(_ops.OPS[name], torch._ops.OpOverload)
        assert _ops.OPS[name] is getattr(torch.ops.flash_attn_mock, name).default


def test_bind_keeps_the_callables_behind_the_overloads_for_eager_calls(emulated, monkeypatch):
    assert set(_ops.EAGER) == set(_ops.OPERATORS)
    for name in _ops.OPERATORS:
        assert not isinstance(_ops.EAGER[name], torch._ops.OpOverload), "the eager path skips OpOverload.__call__"
    assert _ops.EAGER["build_info"]() == _ops.OPS["build_info"]()
    # inference calls go through EAGER, so the handle's __call__ is not what runs
    calls = []
    real = _ops.EAGER["fwd"]
    monkeypatch.setitem(_ops.EAGER, "fwd", lambda *args: calls.append(args) or real(*args))
    q = torch.randn(1, 8, 2, 64).half()
    out = flash_attn.flash_attn_func(q, q, q)
    assert out.shape == q.shape and len(calls) == 1 and len(calls[0]) == 12


def test_fwd_fake_shapes():
    q, k = meta(2, 100, 8, 64), meta(2, 300, 2, 64)
    out, lse, p, rng = _ops.fwd_fake(q, k, k, None, 0.0, 0.125, False, -1, -1, 0.0, False, None)
    assert out.shape == (2, 100, 8, 64) and out.dtype == torch.float16
    assert lse.shape == (2, 8, 100) and lse.dtype == torch.float32
    assert p.shape == (0,) and p.dtype == torch.float16
    assert rng.shape == (0,) and rng.dtype == torch.int64, "without dropout there is no Philox state"
    _, _, p, rng = _ops.fwd_fake(q, k, k, None, 0.1, 0.125, False, -1, -1, 0.0, True, None)
    assert p.shape == (2, 8, 128, 384) and p.dtype == torch.float16
    assert rng.shape == (2,) and rng.dtype == torch.int64


def test_varlen_fwd_fake_shapes():
    q, k = meta(70, 8, 128, dtype=torch.bfloat16), meta(90, 4, 128, dtype=torch.bfloat16)
    cu = meta(4, dtype=torch.int32)
    args = (q, k, k, cu, cu, None, None, None, None, 40, 129, 0.1, 0.1, False, True, -1, 0, 0.0)
    out, lse, p, rng = _ops.varlen_fwd_fake(*args, False, None)
    assert out.shape == (70, 8, 128) and out.dtype == torch.bfloat16
    assert lse.shape == (8, 70) and lse.dtype == torch.float32
    assert p.shape == (0,) and rng.shape == (2,), "dropout_p 0.1: the state is returned"
    _, _, p, _ = _ops.varlen_fwd_fake(*args, True, None)
    assert p.shape == (3, 8, 128, 256)


def test_bwd_fake_shapes():
    q, k = meta(2, 130, 8, 64), meta(2, 300, 2, 64)
    lse = meta(2, 8, 130, dtype=torch.float32)
    rng = meta(2, dtype=torch.int64)
    dq, dk, dv, softmax_d = _ops.bwd_fake(q, q, k, k, q, lse, None, 0.0, 0.1, True, -1, 0, 0.0, False, rng)
    assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == k.shape
    assert softmax_d.shape == (2, 8, 256) and softmax_d.dtype == torch.float32


def test_varlen_bwd_fake_shapes():
    q, k = meta(70, 8, 64), meta(90, 2, 64)
    cu = meta(4, dtype=torch.int32)
    rng = meta(2, dtype=torch.int64)
    lse = meta(8, 70, dtype=torch.float32)
    dq, dk, dv, softmax_d = _ops.varlen_bwd_fake(
        q, q, k, k, q, lse, cu, cu, None, 40, 60, 0.0, 0.1, False, False, -1, -1, 0.0, True, rng
    )
    assert (dq.shape, dk.shape, dv.shape) == (q.shape, k.shape, k.shape)
    assert softmax_d.shape == (8, 70 + 128 * 3)


def test_fwd_kvcache_fake_shapes():
    q, cache = meta(4, 1, 16, 128), meta(4, 1024, 2, 128)
    out, lse = _ops.fwd_kvcache_fake(
        q, cache, cache, None, None, None, None, None, None, None, None, None, 0.1, True, -1, -1, 0.0, True, 0
    )
    assert out.shape == (4, 1, 16, 128) and lse.shape == (4, 16, 1) and lse.dtype == torch.float32


def test_fakes_keep_the_strides_of_empty_like():
    base = meta(2, 8, 100, 64)  # (B, H, S, D) viewed as (B, S, H, D): dense but permuted
    q = base.transpose(1, 2)
    out, *_ = _ops.fwd_fake(q, q, q, None, 0.0, 0.1, False, -1, -1, 0.0, False, None)
    assert out.stride() == torch.empty_like(q).stride() == q.stride()


def test_fakes_are_registered_on_bind(emulated):
    with FakeTensorMode():
        q = torch.empty(2, 100, 8, 64, dtype=torch.float16)
        k = torch.empty(2, 300, 2, 64, dtype=torch.float16)
        out, lse, p, rng = torch.ops.flash_attn_mock.fwd(q, k, k, None, 0.1, 0.125, True, -1, -1, 0.0, True, None)
    assert out.shape == q.shape and lse.shape == (2, 8, 100) and p.shape == (2, 8, 128, 384)


# The CPU counterpart of tests/gpu/test_opcheck.py: torch.library.opcheck runs every operator of
# the emulated library (docs/operators.md schemas, these fakes) in eager mode, under FakeTensor
# and through AOTDispatcher, and compares metadata and outputs.
OPCHECK_UTILS = ("test_schema", "test_faketensor", "test_aot_dispatch_dynamic")


def _opcheck(name, args):
    torch.library.opcheck(getattr(torch.ops.flash_attn_mock, name).default, args, test_utils=OPCHECK_UTILS)


@pytest.mark.parametrize(("dropout_p", "return_softmax"), [(0.0, False), (0.1, False), (0.1, True)])
def test_fwd_and_bwd_fakes_agree_with_the_emulated_kernels(emulated, dropout_p, return_softmax):
    q = torch.randn(2, 100, 8, 64).half()
    k = torch.randn(2, 130, 2, 64).half()
    _opcheck("fwd", (q, k, k.clone(), None, dropout_p, 0.125, True, -1, -1, 0.0, return_softmax, None))
    out, lse, _, rng = torch.ops.flash_attn_mock.fwd(q, k, k, None, dropout_p, 0.125, True, -1, -1, 0.0, False, None)
    dout = torch.randn_like(out)
    _opcheck("bwd", (dout, q, k, k.clone(), out, lse, None, dropout_p, 0.125, True, -1, 0, 0.0, False, rng))


def test_varlen_fakes_agree_with_the_emulated_kernels(emulated):
    lens = [5, 16, 9]
    cu = torch.tensor([0, *lens], dtype=torch.int32).cumsum(0, dtype=torch.int32)
    q, k = torch.randn(30, 4, 64).half(), torch.randn(30, 2, 64).half()
    scalars = (16, 16, 0.0, 0.125, False, True, -1, -1, 0.0)
    _opcheck("varlen_fwd", (q, k, k.clone(), cu, cu.clone(), None, None, None, None, *scalars, False, None))
    out, lse, _, rng = torch.ops.flash_attn_mock.varlen_fwd(
        q, k, k, cu, cu, None, None, None, None, *scalars, False, None
    )
    _opcheck(
        "varlen_bwd", (torch.randn_like(out), q, k, k.clone(), out, lse, cu, cu.clone(), None, *scalars, False, rng)
    )


@pytest.mark.parametrize("append", [False, True])
def test_kvcache_fake_agrees_with_the_emulated_kernel(emulated, append):
    q = torch.randn(2, 1, 8, 64).half()
    k_cache, v_cache = torch.randn(2, 32, 2, 64).half(), torch.randn(2, 32, 2, 64).half()
    new = (torch.randn(2, 1, 2, 64).half(), torch.randn(2, 1, 2, 64).half()) if append else (None, None)
    seqlens = torch.tensor([4, 10], dtype=torch.int32)
    args = (q, k_cache, v_cache, *new, seqlens, None, None, None, None, None, None, 0.125, True, -1, -1, 0.0, True, 0)
    _opcheck("fwd_kvcache", args)


def test_bind_refuses_an_incomplete_library():
    lib = torch.library.Library("flash_attn_partial", "DEF")
    try:
        lib.define(mock_ops.SCHEMAS["fwd"])
        with pytest.raises(LibraryLoadError) as info:
            _ops.bind("flash_attn_partial")
        message = str(info.value)
        assert "flash_attn_partial::bwd" in message and "flash_attn_partial::fwd_kvcache" in message
        assert "flash_attn_partial::fwd," not in message
        assert not _ops.is_bound()
    finally:
        lib._destroy()


def test_binding_close_unregisters(emulated):
    assert _ops.is_bound()
    assert torch._C._dispatch_has_kernel_for_dispatch_key("flash_attn_mock::fwd", "Meta")


def test_binding_close_forgets_the_handles_and_the_eager_callables():
    binding = _ops.bind(mock_ops.define())
    assert _ops.is_bound() and set(_ops.EAGER) == set(_ops.OPS)
    binding.close()
    assert _ops.OPS == {} and _ops.EAGER == {}
