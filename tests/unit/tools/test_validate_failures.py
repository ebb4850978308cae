"""tools/validate.py on the CPU: a case that raises is a FAILED row (never a lost report), the JSON
report is strict JSON (no NaN/Infinity, no tensors or dtypes), and a suite that cannot run still
writes a report and exits 2."""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")
import validate as v  # noqa: E402  (tools/validate.py; tools/ is on pytest's pythonpath)

SMALL = {
    "ACCURACY_CASES": [
        {"dtype": "fp16", "causal": c, "b": 1, "sq": 32, "sk": 32, "h": 2, "hk": 2, "d": 64} for c in (0, 1)
    ],
    "SHAPES": [{"b": 1, "sq": 17, "sk": 33, "h": 2, "hk": 1, "d": 64, "causal": True}],
    "EDGE_BASE": {"b": 1, "sq": 32, "sk": 32, "h": 2, "hk": 2, "d": 64},
    "WINDOW_SEQ": 160,
    "LATENCY_SHAPES": [{"b": 1, "h": 2, "s": 32, "d": 64, "dtype": "fp16", "causal": False}],
}


@pytest.fixture(autouse=True)
def small(monkeypatch):
    for name, value in SMALL.items():
        monkeypatch.setattr(v, name, value)
    monkeypatch.setattr(v, "time_cuda", lambda fn, warmup, timed: (fn(), 1.0)[1])


class CrashingKernel:
    """A kernel that fails the way a broken build does on a GPU (an error, not wrong numbers)."""

    api = "stand-in"

    def forward(self, *a, **k):
        raise RuntimeError("CUDA error: an illegal memory access was encountered\nmore lines")

    grads = forward


def _strict_loads(text: str):
    def no_constant(name):
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=no_constant)


def test_a_case_that_raises_is_failed_and_the_suite_goes_on():
    suite = v.Suite(CrashingKernel(), None, device="cpu", seed=1)
    report = v.run_suite(suite, latency=True, warmup=0, timed=1)
    for section in v.SECTIONS:
        assert report[section], section
        assert all(r["status"] == "FAILED" for r in report[section]), (section, report[section])
    row = report["accuracy"][0]
    assert row["detail"] == "error: RuntimeError: CUDA error: an illegal memory access was encountered"
    assert v.count(report)["FAILED"] == sum(len(report[s]) for s in v.SECTIONS)


def test_a_section_that_raises_is_reported_and_the_next_one_runs(monkeypatch):
    suite = v.Suite(CrashingKernel(), None, device="cpu", seed=1)
    monkeypatch.setattr(suite, "shapes", lambda: 1 / 0)
    report = v.run_suite(suite, latency=False)
    assert report["shapes"] == [
        {"name": "shapes (section aborted)", "status": "FAILED", "detail": "error: ZeroDivisionError: division by zero"}
    ]
    assert report["backward"] and report["edges"] and report["latency"] == []


def test_strict_json_writes_what_strict_json_reads():
    value = {
        "inf": float("inf"),
        "minus_inf": -math.inf,
        "nested": [{"nan": float("nan")}, (1.5, None)],
        "ok": 0.5,
        "flags": (True, None, 3),
        "dtype": torch.float16,
        "shape": torch.Size([2, 3]),
        "path": v.Path("reports") / "x.json",
    }
    assert _strict_loads(v.strict_json(value)) == {
        "inf": None,
        "minus_inf": None,
        "nested": [{"nan": None}, [1.5, None]],
        "ok": 0.5,
        "flags": [True, None, 3],
        "dtype": "torch.float16",
        "shape": [2, 3],
        "path": "reports/x.json",
    }


def test_report_is_strict_json(tmp_path):
    report = {section: [] for section in v.SECTIONS}
    report["accuracy"] = [{"name": "x", "status": "FAILED", "rel_linf": math.inf, "cosine": math.nan, "finite": False}]
    report["context"] = {"flash_attn": "2.9.2", "sm": 90, "dtype": torch.bfloat16}
    report["counts"] = v.count(report)
    jpath, mpath = v.write_report(report, tmp_path / "new" / "folder")
    data = _strict_loads(jpath.read_text())
    assert data["accuracy"][0]["rel_linf"] is None and data["context"]["dtype"] == "torch.bfloat16"
    assert "| x |" in mpath.read_text() and "inf" in mpath.read_text()


def test_setup_error_writes_a_report(tmp_path, capsys):
    out = tmp_path / "not" / "yet"
    assert v.setup_error(out, {"torch": "2.11.0+cu130"}, "no CUDA device visible to torch") == 2
    (jpath,) = out.glob("validation-*.json")
    assert jpath.name == "validation-unknown-smunknown.json"
    data = _strict_loads(jpath.read_text())
    assert data["error"] == "no CUDA device visible to torch" and data["counts"]["passed"] == 0
    md = jpath.with_suffix(".md").read_text()
    assert "**FAILED**" in md and "The suite could not run" in md
    assert "no CUDA device" in capsys.readouterr().err


def test_main_without_gpu_writes_a_report(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert v.main(["--out", str(tmp_path)]) == 2
    assert len(list(tmp_path.glob("validation-*.json"))) == 1
