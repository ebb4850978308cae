"""The GPU validation suite's logic (tools/validate.py), run on the CPU with stand-in kernels.

The stand-ins compute attention with the fp32 reference and round to the input dtype (a correct
kernel), or add an error (a broken one), so the gates, the "not built" reporting and the report
are tested without a GPU. The real kernels are measured by `nox -s validate -- WHEEL` on a GPU.
"""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")
import validate as v  # noqa: E402  (tools/validate.py; tools/ is on pytest's pythonpath)

SMALL_CASES = [
    {"dtype": dt, "causal": c, "b": 1, "sq": 64, "sk": 64, "h": 2, "hk": 2, "d": d}
    for dt in ("fp16", "bf16")
    for c in (False, True)
    for d in (64, 128)
]
SMALL_SHAPES = [
    {"b": 1, "sq": 37, "sk": 91, "h": 4, "hk": 2, "d": 80, "causal": True},
    {"b": 2, "sq": 1, "sk": 64, "h": 2, "hk": 1, "d": 32, "causal": False},
]


class GoodKernel:
    api = "stand-in"

    def forward(self, q, k, v_, causal=False, window=(-1, -1), softcap=0.0):
        out, lse = v.reference(q, k, v_, causal, window, softcap)
        return out.to(q.dtype), lse

    def grads(self, q, k, v_, dout, causal=False):
        qf, kf, vf = (t.detach().float().requires_grad_(True) for t in (q, k, v_))
        out = v._reference_differentiable(qf, kf, vf, causal)
        return tuple(g.to(q.dtype) for g in torch.autograd.grad(out, (qf, kf, vf), dout.float()))


class BrokenKernel(GoodKernel):
    """Skips the rescale of the running sum: a few percent off."""

    def forward(self, q, k, v_, causal=False, window=(-1, -1), softcap=0.0):
        out, lse = super().forward(q, k, v_, causal, window, softcap)
        return (out.float() * 1.05).to(q.dtype), lse

    def grads(self, q, k, v_, dout, causal=False):
        dq, dk, dv = super().grads(q, k, v_, dout, causal)
        return dq, dk, torch.full_like(dv, float("nan"))


class NotBuiltKernel(GoodKernel):
    def forward(self, *a, **k):
        raise v.NotBuilt("flash_attn was built without the forward kernel")

    grads = forward


@pytest.fixture(autouse=True, scope="module")
def small():
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(v, "ACCURACY_CASES", SMALL_CASES)
        mp.setattr(v, "SHAPES", SMALL_SHAPES)
        mp.setattr(v, "EDGE_BASE", {"b": 1, "sq": 64, "sk": 64, "h": 2, "hk": 2, "d": 64})
        mp.setattr(v, "WINDOW_SEQ", 320)
        yield


@pytest.fixture(scope="module")
def good_report(small):
    return v.run_suite(suite(GoodKernel()), latency=False)


def suite(kernel, built=None):
    return v.Suite(kernel, built, device="cpu", seed=1, head_dims=(32, 64, 96, 128, 192, 256))


def test_mask_semantics_bottom_right():
    m = v.attention_mask(2, 4, True, (-1, -1), "cpu")
    assert m.tolist() == [[True, True, True, False], [True, True, True, True]]
    w = v.attention_mask(4, 4, False, (1, 0), "cpu")
    assert w.tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]]
    assert v.attention_mask(3, 3, False, (-1, -1), "cpu") is None


def test_reference_matches_explicit_math_and_window_zero_is_v():
    g = torch.Generator().manual_seed(0)
    q, k, val = v.make_qkv({"b": 1, "sq": 16, "sk": 16, "h": 2, "hk": 1, "d": 8}, "fp16", "cpu", generator=g)
    out, lse = v.reference(q, k, val, causal=True)
    s = torch.einsum("bqhd,bkhd->bhqk", q.float(), k.float().expand(-1, -1, 2, -1)) / math.sqrt(8)
    s = s.masked_fill(~torch.ones(16, 16, dtype=torch.bool).tril(), float("-inf"))
    ref = torch.einsum("bhqk,bkhd->bqhd", s.softmax(-1), val.float().expand(-1, -1, 2, -1))
    assert torch.allclose(out, ref, atol=1e-5) and torch.allclose(lse, s.logsumexp(-1), atol=1e-5)
    out0, _ = v.reference(q, k, val, window=(0, 0))
    assert torch.allclose(out0, val.float().expand(-1, -1, 2, -1), atol=1e-6)


def test_softcap_reference_differs_and_is_bounded():
    g = torch.Generator().manual_seed(0)
    q, k, val = v.make_qkv({"b": 1, "sq": 8, "sk": 8, "h": 1, "hk": 1, "d": 16}, "bf16", "cpu", generator=g)
    plain, _ = v.reference(q * 8, k, val)
    capped, lse = v.reference(q * 8, k, val, softcap=0.5)
    assert not torch.allclose(plain, capped, atol=1e-3)
    assert float(lse.max()) <= 0.5 + math.log(8) + 1e-5  # every score <= cap


def test_metrics_and_gates():
    ref = torch.randn(1000)
    assert v.passes(v.metrics(ref.half(), ref), "fp16")
    assert not v.passes(v.metrics(ref * 1.03, ref), "fp16")  # rel_Linf 3e-2 > 2e-2
    assert not v.passes(v.metrics(ref * 1.015, ref), "bf16")  # 1.5e-2 > 1e-2 for bf16
    bad = ref.clone()
    bad[3] = float("inf")
    m = v.metrics(bad, ref)
    assert not m["finite"] and not v.passes(m, "fp16")


def test_correct_kernel_passes_everything(good_report):
    report = good_report
    c = v.count(report)
    assert c["FAILED"] == 0 and c["not built"] == 0
    assert c["passed"] == len(SMALL_CASES) * 2 + len(SMALL_SHAPES) * 2 + 9
    names = [r["name"] for r in report["edges"]]
    assert names == ["LSE shape and finiteness", "determinism of two calls", "S=1", "S=2", "H=1", "D=256 bf16",
                     "softcap with causal", "window (0,0) equals V", "window (128,128)"]  # fmt: skip
    assert report["edges"][0]["lse"]["shape"] == [1, 2, 64]


def test_broken_kernel_fails():
    report = v.run_suite(suite(BrokenKernel()), latency=False)
    assert all(r["status"] == "FAILED" for r in report["accuracy"])
    assert all(r["status"] == "FAILED" and not r["finite"] for r in report["backward"])
    assert v.count(report)["FAILED"] > 0


def test_units_left_out_are_not_built_never_passed():
    info = {"kernels": [{"kind": "fwd", "dtype": "fp16", "head_dim": 64, "causal": False}]}
    built = v.built_units(info)
    report = v.run_suite(suite(GoodKernel(), built), latency=False)
    acc = {r["name"]: r["status"] for r in report["accuracy"]}
    assert acc["fp16 non-causal D=64"] == "passed"
    assert acc["bf16 causal D=128"] == "not built"
    assert all(r["status"] == "not built" for r in report["backward"])
    s1 = next(r for r in report["edges"] if r["name"] == "S=1")
    assert s1["status"] == "passed"  # fp16 D=64 non-causal is built
    d256 = next(r for r in report["edges"] if r["name"] == "D=256 bf16")
    assert d256["status"] == "not built" and "fwd_hdim256_bf16_causal" in d256["detail"]
    lat = suite(GoodKernel(), built).latency()
    assert all(r["status"] == "not built" for r in lat)


def test_not_built_error_from_the_library_is_reported_as_such():
    report = v.run_suite(suite(NotBuiltKernel()), latency=False)
    c = v.count(report)
    assert c["passed"] == 0 and c["FAILED"] == 0 and c["not built"] > 0


def test_round_head_dim_and_needed_unit():
    dims = (32, 64, 96, 128, 192, 256)
    assert [v.round_head_dim(d, dims) for d in (8, 32, 33, 80, 128, 200, 256)] == [32, 32, 64, 96, 128, 256, 256]
    assert v.needed_unit("fwd", "fp16", 80, True, dims, sq=1) == ("fwd", "fp16", 96, False)
    with pytest.raises(ValueError):
        v.round_head_dim(320, dims)


def test_report_files(tmp_path, good_report):
    report = dict(good_report)
    timing = {"fwd_ms": 0.12, "fwd_tflops": 100.0, "fwd_bwd_ms": 0.5, "fwd_bwd_tflops": 90.0, "sdpa_flash_fwd_ms": 0.13}
    report["latency"] = [{"name": "fp16 B=2 H=8 S=1024 D=128", "status": "measured", **timing}]
    report["context"] = {"flash_attn": "2.8.3.post2+cu130torch2.14.1cxx11abitrue.legacy.rev1", "gpu": "NVIDIA H200",
                         "sm": 90, "build": {"group": "legacy", "archs": [80, 89, 90]}}  # fmt: skip
    report["api"] = "stand-in"
    report["counts"] = v.count(report)
    jpath, mpath = v.write_report(report, tmp_path)
    assert jpath.name == "validation-2.8.3.post2+cu130torch2.14.1cxx11abitrue.legacy.rev1-sm90.json"
    assert json.loads(jpath.read_text())["counts"]["FAILED"] == 0
    md = mpath.read_text()
    assert md.startswith("# flash_attn 2.8.3.post2+cu130torch2.14.1cxx11abitrue.legacy.rev1 validation on NVIDIA H200")
    assert "**PASSED**" in md and "| build: archs | [80, 89, 90] |" in md
    assert "## Latency (50 warm-up + 50 timed, CUDA events, median)" in md and "| 0.120 |" in md
    assert "fp16 rel_Linf <= 0.02, bf16 <= 0.01, cosine >= 0.9995" in md


def test_main_without_gpu_is_a_setup_error(tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert v.main(["--out", str(tmp_path)]) == 2
    assert "no CUDA device" in capsys.readouterr().err
