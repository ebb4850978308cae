"""``torch.library.opcheck`` on every operator of the built library (needs CUDA and a build).

opcheck runs an operator eagerly, under FakeTensor (against the fakes of flash_attn/_ops.py) and
through AOTDispatcher, and compares schema, metadata and outputs; an output the kernels leave
unwritten fails its eager-vs-traced comparison. The argument sets cover dropout (with and
without the attention probabilities), returned LSE, GQA decode (the head-folding path), sliding
windows, ALiBi, the deterministic backward, paged KV, appending to a KV cache, and q/k/v layouts
(dense permuted, packed, one-token) whose outputs must have ``torch.empty_like``'s strides. They use head
dims 64 and 128 in fp16 and bf16, which the ``dev`` kernel set holds; a set whose kernels the
build lacks (the operator raises ``flash_attn was built without ...``) is skipped, not failed.

Run: ``python3 -m pytest tests/gpu/test_opcheck.py -v`` (with the wheel installed, or a built
checkout), or without pytest (the device image may lack it) ``python3 tests/gpu/test_opcheck.py``,
which runs the same cases and prints one PASS / SKIP / FAIL line each (exit status 1 on a FAIL).
The CPU counterpart on the emulated operators is tests/unit/runtime/test_fakes.py.
"""

from __future__ import annotations

import sys
import traceback

import torch

try:
    import pytest
except ImportError:  # python3 tests/gpu/test_opcheck.py runs without it
    pytest = None

F16, BF16 = torch.float16, torch.bfloat16


class NotBuilt(Exception):
    """The build lacks what a case needs (a kernel unit, or the library itself)."""


def load_ops():
    """``torch.ops.flash_attn`` once the library is loaded and runs on this GPU."""
    import flash_attn

    try:
        flash_attn._loader.require_ready(torch.cuda.current_device())
    except flash_attn.LibraryNotBuiltError as exc:
        raise NotBuilt(f"flash_attn not built: {exc}") from None
    return torch.ops.flash_attn


def _randn(*shape, dtype=F16):
    return torch.randn(*shape, device="cuda", dtype=dtype)


def _cu(lengths):
    return torch.tensor([0, *lengths], dtype=torch.int32, device="cuda").cumsum(0, dtype=torch.int32)


def _run_or_skip(op, args):
    """The eager outputs; a kernel the build lacks skips the case."""
    try:
        return op(*args)
    except RuntimeError as exc:
        if "was built without" in str(exc):
            raise NotBuilt(str(exc).split(";")[0]) from None
        raise


# The non-deterministic backward accumulates dq with fp32 atomics in whatever order the blocks
# run, so two runs may differ in dq's last bits: compared with this tolerance instead of
# assert_close's fp16/bf16 defaults (1e-3 / 1.6e-2 relative, about one unit in the last place).
ATOMIC_DQ_TOLERANCE = 2e-2


def _opcheck(op, args, tolerance=None):
    _run_or_skip(op, args)
    if tolerance is None:
        torch.library.opcheck(op, args)
    else:
        torch.library.opcheck(op, args, atol=tolerance, rtol=tolerance)


# (id, dtype, B, Sq, Sk, H, Hk, D, dropout_p, causal, window, alibi, return_softmax)
FWD_CASES = [
    ("issue-14", F16, 1, 128, 128, 2, 2, 64, 0.0, True, (-1, 0), False, False),
    ("plain", F16, 2, 100, 130, 4, 4, 64, 0.0, False, (-1, -1), False, False),
    ("dropout", BF16, 2, 100, 130, 4, 2, 128, 0.1, True, (-1, -1), False, False),
    ("dropout-probs", F16, 2, 100, 130, 4, 4, 64, 0.1, True, (-1, -1), False, True),
    ("window-alibi", BF16, 2, 64, 200, 4, 4, 64, 0.0, False, (16, 8), True, False),
    ("gqa-decode", F16, 3, 1, 300, 8, 2, 128, 0.0, False, (-1, -1), False, False),
]


def _rng_state(q, batch, heads, dropout_p):
    """The forward's rng_state argument: None (the operator draws), except with dropout in a stable-ABI
    build, whose operators cannot reach torch's generator: there the state flash_attn reserves."""
    from flash_attn import _rng

    if dropout_p > 0 and _rng.RESERVE:
        return _rng.rng_state(_rng.generator_for(q.device), batch, heads)
    return None


def _fwd_args(dtype, b, sq, sk, h, hk, d, dropout_p, causal, window, alibi, return_softmax):
    slopes = torch.rand(h, device="cuda", dtype=torch.float32) if alibi else None
    q, k, v = _randn(b, sq, h, d, dtype=dtype), _randn(b, sk, hk, d, dtype=dtype), _randn(b, sk, hk, d, dtype=dtype)
    rng = _rng_state(q, b, h, dropout_p)
    return (q, k, v, slopes, dropout_p, d**-0.5, causal, window[0], window[1], 0.0, return_softmax, rng)


def check_fwd(ops, case):
    _opcheck(ops.fwd.default, _fwd_args(*case[1:]))


def check_bwd(ops, case, deterministic):
    args = _fwd_args(*case[1:-1], False)
    q, k, v, slopes, dropout_p, scale, causal, left, right, softcap, _, _ = args
    out, lse, _, rng = _run_or_skip(ops.fwd.default, args)
    dout = torch.randn_like(out)
    bwd_args = (dout, q, k, v, out, lse, slopes, dropout_p, scale, causal, left, right, softcap, deterministic, rng)
    _opcheck(ops.bwd.default, bwd_args, None if deterministic else ATOMIC_DQ_TOLERANCE)


# q/k/v layouts whose outputs (out, dq, dk, dv) must have torch.empty_like's strides, which the fakes
# give (the binding allocates them without empty_like where it can: src/binding/tensor_api_*.h):
# a dense permutation (kept), a packed qkv slice (not dense: contiguous) and a one-token query.
def _layout(name, b, s, h, d):
    if name == "bhsd-transposed":  # dense, not contiguous: (B, H, S, D) storage seen as (B, S, H, D)
        return [_randn(b, h, s, d).transpose(1, 2) for _ in range(3)]
    if name == "qkv-packed":  # q, k, v interleaved in one (B, S, 3, H, D) tensor: not dense
        return list(_randn(b, s, 3, h, d).unbind(2))
    if name == "sq1-strided":  # Sq = 1 taken from a longer sequence; k, v packed
        q = _randn(b, 8, h, d)[:, 3:4]
        return [q, *_randn(b, 300, 2, h, d).unbind(2)]
    raise ValueError(name)


LAYOUTS = ["bhsd-transposed", "qkv-packed", "sq1-strided"]


def check_layout(ops, name):
    q, k, v = _layout(name, 2, 130, 4, 64)
    args = (q, k, v, None, 0.0, 0.125, False, -1, -1, 0.0, False, None)
    out, lse, _, rng = _run_or_skip(ops.fwd.default, args)
    assert out.stride() == torch.empty_like(q).stride(), (name, out.stride(), torch.empty_like(q).stride())
    dout = torch.randn_like(out)
    bwd_args = (dout, q, k, v, out, lse, None, 0.0, 0.125, False, -1, -1, 0.0, False, rng)
    grads = _run_or_skip(ops.bwd.default, bwd_args)[:3]
    for grad, x in zip(grads, (q, k, v), strict=True):
        assert grad.stride() == torch.empty_like(x).stride(), (name, grad.stride(), torch.empty_like(x).stride())
    _opcheck(ops.fwd.default, args)
    _opcheck(ops.bwd.default, bwd_args, ATOMIC_DQ_TOLERANCE)


# (id, dtype, lengths_q, lengths_k, H, Hk, D, dropout_p, causal, paged)
VARLEN_CASES = [
    ("plain", F16, [5, 100, 37], [7, 130, 37], 4, 4, 64, 0.0, False, False),
    ("causal-gqa", BF16, [5, 100, 37], [7, 130, 37], 8, 2, 128, 0.0, True, False),
    ("dropout", F16, [50, 100], [60, 130], 4, 4, 64, 0.1, True, False),
    ("paged", F16, [40, 100], [300, 100], 4, 4, 64, 0.0, True, True),
]


def _varlen_args(dtype, lengths_q, lengths_k, h, hk, d, dropout_p, causal, paged):
    q = _randn(sum(lengths_q), h, d, dtype=dtype)
    block_table = None
    if paged:
        page, pages_per_seq = 256, -(-max(lengths_k) // 256)
        k = _randn(len(lengths_k) * pages_per_seq, page, hk, d, dtype=dtype)
        v = _randn(*k.shape, dtype=dtype)
        block_table = torch.randperm(k.shape[0], device="cuda").to(torch.int32).view(len(lengths_k), pages_per_seq)
    else:
        k, v = _randn(sum(lengths_k), hk, d, dtype=dtype), _randn(sum(lengths_k), hk, d, dtype=dtype)
    return (
        q,
        k,
        v,
        _cu(lengths_q),
        _cu(lengths_k),
        None,
        None,
        block_table,
        None,
        max(lengths_q),
        max(lengths_k),
        dropout_p,
        d**-0.5,
        False,
        causal,
        -1,
        -1,
        0.0,
        False,
        _rng_state(q, len(lengths_q), h, dropout_p),
    )


def check_varlen_fwd(ops, case):
    _opcheck(ops.varlen_fwd.default, _varlen_args(*case[1:]))


def check_varlen_bwd(ops, case):
    args = _varlen_args(*case[1:])
    q, k, v, cu_q, cu_k = args[:5]
    max_q, max_k, dropout_p, scale, zero, causal, left, right, softcap = args[9:18]
    out, lse, _, rng = _run_or_skip(ops.varlen_fwd.default, args)
    dout = torch.randn_like(out)
    scalars = (max_q, max_k, dropout_p, scale, zero, causal, left, right, softcap, False, rng)
    _opcheck(ops.varlen_bwd.default, (dout, q, k, v, out, lse, cu_q, cu_k, None, *scalars), ATOMIC_DQ_TOLERANCE)


# (id, dtype, B, Sq, cache length, H, Hk, D, append, paged, num_splits, causal)
KVCACHE_CASES = [
    ("decode", F16, 4, 1, 4096, 8, 8, 64, False, False, 0, False),
    ("decode-append", F16, 4, 1, 4096, 8, 2, 128, True, False, 0, True),
    ("prefill-append", BF16, 2, 16, 1024, 4, 4, 64, True, False, 1, True),
    ("paged-append", F16, 2, 1, 1024, 4, 4, 64, True, True, 0, False),
    ("forced-splits", BF16, 2, 1, 2048, 4, 4, 128, False, False, 4, False),
]


def check_fwd_kvcache(ops, case):
    _, dtype, b, sq, cache_len, h, hk, d, append, paged, num_splits, causal = case
    q = _randn(b, sq, h, d, dtype=dtype)
    block_table = None
    if paged:
        pages = cache_len // 256
        k_cache = _randn(b * pages, 256, hk, d, dtype=dtype)
        block_table = torch.randperm(b * pages, device="cuda").to(torch.int32).view(b, pages)
    else:
        k_cache = _randn(b, cache_len, hk, d, dtype=dtype)
    v_cache = torch.randn_like(k_cache)
    new = (_randn(b, sq, hk, d, dtype=dtype), _randn(b, sq, hk, d, dtype=dtype)) if append else (None, None)
    seqlens = torch.randint(0, cache_len - sq, (b,), device="cuda", dtype=torch.int32)
    args = (q, k_cache, v_cache, *new, seqlens, None, None, None, None, block_table, None)
    args += (d**-0.5, causal, -1, -1, 0.0, True, num_splits)
    _opcheck(ops.fwd_kvcache.default, args)


def all_checks() -> list[tuple[str, object, tuple]]:
    """``(id, check, extra arguments)`` of every case, in the order they run."""
    checks = [(f"fwd[{c[0]}]", check_fwd, (c,)) for c in FWD_CASES]
    checks += [
        (f"bwd[{c[0]}{'-deterministic' if d else ''}]", check_bwd, (c, d)) for c in FWD_CASES[:4] for d in (False, True)
    ]
    checks += [(f"layout[{name}]", check_layout, (name,)) for name in LAYOUTS]
    checks += [(f"varlen_fwd[{c[0]}]", check_varlen_fwd, (c,)) for c in VARLEN_CASES]
    checks += [(f"varlen_bwd[{c[0]}]", check_varlen_bwd, (c,)) for c in VARLEN_CASES[:3]]
    checks += [(f"fwd_kvcache[{c[0]}]", check_fwd_kvcache, (c,)) for c in KVCACHE_CASES]
    return checks


if pytest is not None:
    pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

    @pytest.fixture(scope="module")
    def ops():
        try:
            return load_ops()
        except NotBuilt as exc:
            pytest.skip(str(exc))

    @pytest.mark.parametrize(("name", "check", "extra"), all_checks(), ids=[c[0] for c in all_checks()])
    def test_opcheck(ops, name, check, extra):
        try:
            check(ops, *extra)
        except NotBuilt as exc:
            pytest.skip(str(exc))


def main() -> int:
    if not torch.cuda.is_available():
        print("SKIP: needs a CUDA device")
        return 0
    try:
        ops = load_ops()
    except NotBuilt as exc:
        print(f"SKIP: {exc}")
        return 0
    failed = 0
    for name, check, extra in all_checks():
        try:
            check(ops, *extra)
            print(f"PASS {name}", flush=True)
        except NotBuilt as exc:
            print(f"SKIP {name}: {exc}", flush=True)
        except Exception as exc:
            failed += 1
            print(f"FAIL {name}: {type(exc).__name__}: {str(exc)[:2000]}", flush=True)
            traceback.print_exc()
    print(f"opcheck: {len(all_checks())} cases, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
