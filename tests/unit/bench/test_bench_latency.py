"""bench/latency.py on CPU: shapes, FLOP counting, timed-call counts, error classes, merging worker
results into ratios, and the Markdown report; the CLI without a GPU fails cleanly."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path

import bench_common as bc
import host_overhead as ho
import latency as bk
import pytest


def test_release_shapes():
    shapes = bk.release_shapes()
    assert len(shapes) == 2 * 2 * (3 * 2 + 1) == 28
    assert len({s.key for s in shapes}) == 28
    small = [s for s in shapes if (s.batch, s.heads) == (2, 8)]
    assert {s.seqlen for s in small} == {1024, 4096, 8192} and {s.head_dim for s in small} == {64, 128}
    big = [s for s in shapes if (s.batch, s.heads) == (4, 16)]
    assert {(s.seqlen, s.head_dim) for s in big} == {(8192, 128)}
    assert {(s.dtype, s.causal) for s in big} == {("fp16", False), ("fp16", True), ("bf16", False), ("bf16", True)}


def test_flop_counting():
    s = bk.Shape("fp16", False, 2, 8, 8192, 128)
    fwd = 4 * 2 * 8 * 8192**2 * 128
    assert bk.attention_flops(s, "fwd") == fwd == 549755813888
    assert bk.attention_flops(s, "fwd_bwd") == 2.5 * fwd  # the issue's convention
    assert bk.attention_flops(s, "fwd_bwd", fwd_bwd_factor=3.5) == 3.5 * fwd  # upstream's
    causal = bk.Shape("fp16", True, 2, 8, 8192, 128)
    assert bk.attention_flops(causal, "fwd") == fwd / 2
    assert bk.attention_flops(causal, "fwd_bwd") == 2.5 * fwd / 2
    with pytest.raises(ValueError):
        bk.attention_flops(s, "bwd")


def test_tflops_matches_the_design_measurement():
    # docs/design.md: SDPA flash backend, fp16 B=2 H=8 S=8192 D=128 causal, 1.02 ms = 269 TFLOP/s
    s = bk.Shape("fp16", True, 2, 8, 8192, 128)
    assert bk.tflops(bk.attention_flops(s, "fwd"), 1.02) == pytest.approx(269.5, abs=0.5)
    assert bk.tflops(1e12, 1000.0) == pytest.approx(1.0)
    assert bk.tflops(1e12, 0.0) is None and bk.tflops(1e12, None) is None


def test_choose_iters_never_below_fifty():
    assert bk.choose_iters(0.02, 50, 200, 0.2) == 200  # tiny kernels: capped
    assert bk.choose_iters(2.0, 50, 200, 0.2) == 100  # 0.2 s / 2 ms
    assert bk.choose_iters(30.0, 50, 200, 0.2) == 50  # long calls: the minimum
    assert bk.choose_iters(30.0, 10, 20, 0.2) == 50  # the minimum of 50 always holds
    assert bk.choose_iters(0.0, 50, 200, 0.2) == 200


def test_classify_error():
    class KernelNotBuiltError(RuntimeError):
        pass

    class Sub(KernelNotBuiltError):
        pass

    class OutOfMemoryError(RuntimeError):
        pass

    assert bk.classify_error(Sub("flash_attn was built without ...")) == "not built"
    assert bk.classify_error(OutOfMemoryError("CUDA out of memory")) == "oom"
    assert bk.classify_error(RuntimeError("No available kernel. Aborting execution.")) == "unsupported"
    assert bk.classify_error(RuntimeError("No viable backend for scaled_dot_product_attention was found.")) == (
        "unsupported"
    )
    assert bk.classify_error(RuntimeError("illegal memory access")) == "error"


def _case(impl, mode, ms, shape=None, status="ok"):
    shape = shape or bk.Shape("fp16", False, 2, 8, 1024, 64)
    c = {"shape": shape.__dict__.copy(), "mode": mode, "impl": impl, "status": status}
    if status == "ok":
        c["ms"] = {"median": ms}
        c["tflops"] = bk.tflops(bk.attention_flops(shape, mode), ms)
    else:
        c["message"] = "KernelNotBuiltError: flash_attn was built without the backward kernel"
    return c


def _workers():
    other = bk.Shape("bf16", True, 2, 8, 4096, 128)
    first = {
        "label": "a",
        "cases": [
            _case("flash_attn[a]", "fwd", 1.0),
            _case("sdpa_flash", "fwd", 1.2),
            _case("sdpa_cudnn", "fwd", 0.5),
            _case("sdpa_efficient", "fwd", 2.0),
            _case("flash_attn[a]", "fwd_bwd", 4.0),
            _case("sdpa_flash", "fwd_bwd", 4.0),
            _case("sdpa_cudnn", "fwd_bwd", 0, status="unsupported"),
            _case("sdpa_efficient", "fwd_bwd", 8.0),
            _case("flash_attn[a]", "fwd", 0, other, status="not built"),
            _case("sdpa_flash", "fwd", 3.0, other),
        ],
    }
    second = {"label": "b", "cases": [_case("flash_attn[b]", "fwd", 0.8), _case("flash_attn[b]", "fwd", 2.0, other)]}
    return [first, second]


def test_merge_and_ratios():
    merged = bk.merge(_workers())
    assert merged["ours"] == ["flash_attn[a]", "flash_attn[b]"]
    assert merged["baselines"] == ["sdpa_flash", "sdpa_cudnn", "sdpa_efficient"]
    rows = {(bk.Shape(**r["shape"]).key, r["mode"]): r for r in bk.rows_with_ratios(merged)}
    r = rows[("fp16_full_b2_h8_s1024_d64", "fwd")]["ratios"]
    assert r["flash_attn[a] vs sdpa_flash"] == pytest.approx(1.2)
    assert r["flash_attn[a] vs sdpa_cudnn"] == pytest.approx(0.5)
    assert r["flash_attn[b] vs sdpa_efficient"] == pytest.approx(2.5)
    fb = rows[("fp16_full_b2_h8_s1024_d64", "fwd_bwd")]["ratios"]
    assert fb["flash_attn[a] vs sdpa_cudnn"] is None  # baseline unsupported
    assert fb["flash_attn[b] vs sdpa_flash"] is None  # build b has no fwd_bwd result
    nb = rows[("bf16_causal_b2_h8_s4096_d128", "fwd")]
    assert nb["results"]["flash_attn[a]"]["status"] == "not built"
    assert nb["ratios"]["flash_attn[a] vs sdpa_flash"] is None
    assert nb["ratios"]["flash_attn[b] vs sdpa_flash"] == pytest.approx(1.5)
    assert bk.geomean([2.0, 0.5, None]) == pytest.approx(1.0) and bk.geomean([None]) is None


def test_render_markdown():
    merged = bk.merge(_workers())
    record = {
        "machine": {"gpu_name": "NVIDIA H200", "gpu_count": 1, "notes": []},
        "conventions": {"min_timed_calls": 50, "warmup_calls": 10, "fwd_bwd_flop_factor": 2.5},
        "implementations": {"flash_attn": merged["ours"], "baselines": merged["baselines"]},
        "builds": [
            {"label": "a", "source": "/b/a", "flash_attn": {"build_info": {"kernel_set": "dev"}}},
            {"label": "b", "source": "/b/b", "flash_attn": None},
        ],
        "results": bk.rows_with_ratios(merged),
        "geomean_ratios": {"flash_attn[a] vs sdpa_flash": {"fwd": 1.2, "fwd_bwd": 1.0}},
        "workers": [{"label": "a", "returncode": 0}, {"label": "b", "returncode": 1, "error": "boom"}],
        "wall_s": 151.0,
    }
    md = bk.render_markdown(record)
    assert "## forward (`fwd`)" in md and "## forward + backward (`fwd_bwd`)" in md
    header = (
        "| dtype | causal | B | H | S | D | flash_attn[a] | flash_attn[b] | sdpa_flash | sdpa_cudnn | "
        "sdpa_efficient | flash_attn[a] / sdpa_flash |"
    )
    assert header in md
    tf = bk.tflops(bk.attention_flops(bk.Shape("fp16", False, 2, 8, 1024, 64), "fwd"), 1.0)
    assert f"| fp16 | no | 2 | 8 | 1024 | 64 | 1.000 ({tf:.1f}) | 0.8000 (" in md  # < 1 ms: 4 decimals
    assert "| bf16 | yes | 2 | 8 | 4096 | 128 | not built | 2.000 (34) | 3.000 (23) |" in md  # >= 10: no decimals
    assert "| not built |" in md and "unsupported" in md
    assert "1.20x" in md and "multiply fwd_bwd TFLOP/s by 1.40" in md
    assert "**worker `b` failed** (exit 1): boom" in md
    assert "flash_attn was built without the backward kernel" in md


def test_cli_without_gpu_reports_the_worker_failure(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the CLI would run the real benchmark")
    proc = subprocess.run(
        [sys.executable, str(bk.__file__), "--out", str(tmp_path), "--baselines-only", "--shapes", "smoke"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stderr
    record = json.loads((tmp_path / "kernels.json").read_text())
    assert "needs a CUDA GPU" in record["workers"][0]["error"]
    assert record["machine"]["cpu_cores_logical"] >= 1
    assert "needs a CUDA GPU" in (tmp_path / "kernels.md").read_text()


def test_cli_rejects_fewer_than_fifty_timed_calls(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(bk.__file__), "--out", str(tmp_path), "--min-iters", "10"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "at least 50" in proc.stderr


FAKE_FLASH_ATTN = """
import torch

__version__ = "0.0+fake"


class KernelNotBuiltError(RuntimeError):
    pass


def build_info():
    return {"kernel_set": "fake", "fatbin_compression": "none", "kernels": [1, 2, 3]}


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False):
    if q.shape[-1] == 128:
        raise KernelNotBuiltError("flash_attn was built without the forward kernel for head dim 128")
    out = torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                           is_causal=causal)
    return out.transpose(1, 2)


def flash_attn_varlen_func(q, k, v, cu_q, cu_k, max_q, max_k, causal=False):
    b = cu_q.numel() - 1
    out = flash_attn_func(*(x.view(b, max_q, *x.shape[1:]) for x in (q, k, v)), causal=causal)
    return out.reshape(q.shape)


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, cache_seqlens=None):
    groups = q.shape[2] // k_cache.shape[2]
    k_cache, v_cache = (x.repeat_interleave(groups, 2) for x in (k_cache, v_cache))
    return flash_attn_func(q, k_cache, v_cache)
"""


def test_worker_loop_on_cpu_with_a_fake_flash_attn(tmp_path):
    """The whole worker loop (inputs, fwd and fwd_bwd, SDPA backends, timing, statuses) on the CPU."""
    pytest.importorskip("torch")
    site = tmp_path / "site"
    (site / "flash_attn").mkdir(parents=True)
    (site / "flash_attn" / "__init__.py").write_text(FAKE_FLASH_ATTN)
    (site / "flash_attn" / "_loader.py").write_text("def require_library():\n    return None\n")
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            str(bk.__file__),
            "--out",
            str(out),
            "--build",
            f"fake={site}",
            "--shapes",
            "tiny",
            "--device",
            "cpu",
            "--warmup",
            "1",
            "--max-iters",
            "50",
            "--target-s",
            "0.001",
            "--host-overhead",
            "--host-calls",
            "3",
            "--host-repeats",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    record = json.loads((out / "kernels.json").read_text())
    assert record["implementations"]["flash_attn"] == ["flash_attn[fake]"]
    assert record["builds"][0]["flash_attn"]["build_info"] == {
        "kernel_set": "fake",
        "fatbin_compression": "none",
        "kernel_units": 3,
    }
    rows = {(bk.Shape(**r["shape"]).head_dim, r["mode"]): r for r in record["results"]}
    assert len(rows) == 4
    ours64 = rows[(64, "fwd")]["results"]["flash_attn[fake]"]
    assert (
        ours64["status"] == "ok"
        and ours64["rounds"] == 3
        and ours64["timed_calls"] == 50 * 3
        and ours64["ms"]["median"] > 0
    )
    assert rows[(64, "fwd_bwd")]["results"]["flash_attn[fake]"]["status"] == "ok"
    assert rows[(128, "fwd")]["results"]["flash_attn[fake]"]["status"] == "not built"
    for mode in bk.MODES:  # no cuDNN / memory-efficient kernels on the CPU
        assert rows[(64, mode)]["results"]["sdpa_cudnn"]["status"] == "unsupported"
        assert rows[(64, mode)]["results"]["sdpa_efficient"]["status"] == "unsupported"
    flash = rows[(64, "fwd")]["results"]["sdpa_flash"]
    if flash["status"] == "ok":  # torch's CPU flash kernel: the fake computes the same attention
        assert ours64["max_abs_diff_vs_sdpa"] < 0.05
        assert rows[(64, "fwd")]["ratios"]["flash_attn[fake] vs sdpa_flash"] > 0
    md = (out / "kernels.md").read_text()
    assert "| not built |" in md and "flash_attn[fake] / sdpa_flash" in md
    host = {(r["case"], r["function"]): r for r in record["host_overhead"]}
    assert {f for _, f in host} == {"flash_attn_func", "flash_attn_varlen_func", "flash_attn_with_kvcache"}
    assert len(host) == 4  # one dense case (two functions), decode without and with appending
    for row in host.values():
        assert row["api_us"] > 0 and row["raw_us"] is None  # the fake registers no torch.ops.flash_attn
    dense = host[("B1 H2 S64 D64", "flash_attn_func")]
    if dense["sdpa_us"]["sdpa_flash"] is not None:
        assert dense["api_vs_sdpa_flash"] > 0
    assert record["conventions"]["host_overhead"] == {"calls": 3, "repeats": 2}
    assert "## Host overhead per call" in md and "`flash_attn_with_kvcache`" in md


def test_host_overhead_cases_are_the_issues():
    dense, decode = ho.cases()
    assert [(c.batch, c.heads, c.seqlen, c.head_dim, c.causal) for c in dense] == [
        (1, 8, 256, 64, True),
        (2, 8, 1024, 64, False),
        (2, 8, 1024, 128, True),
        (8, 16, 512, 128, True),
    ]
    assert [(c.batch, c.cache, c.append) for c in decode] == [(4, 4096, False), (4, 4096, True)]


def test_sample_us_times_back_to_back_calls():
    count = []
    syncs = []
    value = ho.sample_us(lambda: count.append(1), calls=7, sync=lambda: syncs.append(1))
    assert len(count) == 7 and len(syncs) == 2 and value >= 0


def test_run_interleaves_the_implementations_of_a_case(monkeypatch):
    log = []

    def entry(case, impl, fail=False):
        def fn():
            if fail and log.count((case, impl)) >= 2:  # the warm-up and one sample pass, then it breaks
                raise RuntimeError("boom")
            log.append((case, impl))

        return (case, "flash_attn_func", impl, fn, contextlib.nullcontext)

    entries = [entry("A", "api"), entry("A", "raw"), entry("A", "sdpa_flash", fail=True), entry("B", "api")]
    monkeypatch.setattr(ho, "calls_for", lambda *args: entries)

    class FakeTorch:
        class Generator:
            def __init__(self, device):
                pass

            def manual_seed(self, seed):
                pass

    records = ho.run(FakeTorch, "cpu", "x", None, True, True, 1, 3, lambda: None, lambda exc: "failed")
    a_calls = [impl for case, impl in log if case == "A"]
    # warm-up in order, then round 0 from api, round 1 from raw, round 2 from sdpa_flash (failed by then)
    assert a_calls == ["api", "raw", "sdpa_flash", "api", "raw", "sdpa_flash", "raw", "api", "api", "raw"]
    by_impl = {(r["case"], r["impl"]): r for r in records}
    assert by_impl[("A", "api")]["status"] == "ok" and by_impl[("A", "api")]["us"]["n"] == 3
    assert by_impl[("A", "sdpa_flash")]["status"] == "failed" and "boom" in by_impl[("A", "sdpa_flash")]["message"]
    assert by_impl[("B", "api")]["us"]["n"] == 3


def _host(case, function, impl, us, status="ok"):
    record = {"case": case, "function": function, "impl": impl, "status": status}
    if status == "ok":
        record["us"] = {"median": us}
    return record


def test_host_overhead_rows_and_render():
    workers = [
        {
            "host_overhead": [
                _host("B1", "flash_attn_func", "api[a]", 16.0),
                _host("B1", "flash_attn_func", "raw[a]", 14.0),
                _host("B1", "sdpa", "sdpa_flash", 15.0),
                _host("B1", "sdpa", "sdpa_cudnn", 0, status="unsupported"),
                _host("dec", "flash_attn_with_kvcache", "api[a]", 21.0),
                _host("dec", "flash_attn_with_kvcache", "raw[a]", 14.0),
            ]
        },
        {"host_overhead": [_host("B1", "flash_attn_func", "api[b]", 40.0)]},
    ]
    rows = {(r["case"], r["build"]): r for r in ho.rows(workers)}
    a = rows[("B1", "a")]
    assert a["overhead_us"] == 2.0 and a["api_vs_sdpa_flash"] == pytest.approx(16 / 15, abs=1e-3)
    assert a["target_met"] is True and a["sdpa_us"] == {"sdpa_flash": 15.0, "sdpa_cudnn": None}
    assert rows[("B1", "b")]["target_met"] is False and rows[("B1", "b")]["raw_us"] is None
    assert rows[("dec", "a")]["overhead_us"] == 7.0 and rows[("dec", "a")]["target_met"] is False
    md = ho.render(ho.rows(workers), 300, 5)
    assert "| case | function | build | api us | raw op us | api - raw us | sdpa_flash us | sdpa_cudnn us |" in md
    assert "| B1 | `flash_attn_func` | a | 16.0 | 14.0 | 2.0 | 15.0 | - | 1.07x | met |" in md
    assert "missed" in md and "5 samples of 300 back-to-back calls" in md and "interleaved" in md
    assert ho.render([], 300, 5) == ""


def test_host_overhead_rows_compare_each_build_with_its_own_workers_sdpa():
    workers = [
        {"host_overhead": [_host("B1", "flash_attn_func", "api[a]", 16.0), _host("B1", "sdpa", "sdpa_flash", 20.0)]},
        {"host_overhead": [_host("B1", "flash_attn_func", "api[b]", 16.0), _host("B1", "sdpa", "sdpa_flash", 10.0)]},
        {"host_overhead": [_host("B1", "flash_attn_func", "api[c]", 16.0)]},  # an older record: no SDPA of its own
    ]
    rows = {r["build"]: r for r in ho.rows(workers)}
    assert rows["a"]["api_vs_sdpa_flash"] == 0.8 and rows["a"]["sdpa_from"] == "own worker"
    assert rows["b"]["api_vs_sdpa_flash"] == 1.6 and rows["b"]["target_met"] is False
    assert rows["c"]["api_vs_sdpa_flash"] == 0.8 and rows["c"]["sdpa_from"] == "worker 0"
    md = ho.render(ho.rows(workers), 300, 5)
    assert "| B1 | `flash_attn_func` | c (SDPA: worker 0) |" in md and "| B1 | `flash_attn_func` | b | 16.0 |" in md


def test_every_worker_times_the_host_sdpa_unless_baselines_are_off():
    args = bk._parse(["--out", "x", "--host-overhead"])
    target = bc.BuildTarget(label="b", kind="installed")
    assert "--host-baselines" in bk._worker_command(args, target, Path("r.json"), False, False)
    off = bk._parse(["--out", "x", "--host-overhead", "--no-baselines"])
    assert "--host-baselines" not in bk._worker_command(off, target, Path("r.json"), False, False)


def test_cli_rejects_zero_host_calls(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(bk.__file__), "--out", str(tmp_path), "--host-overhead", "--host-calls", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "--host-calls" in proc.stderr
