"""nox -s upstream_tests: which upstream cases run against a wheel, and how they are counted (CPU).

The plugin (release.ship.upstream_tests_plugin) is run by a real pytest over a small test file shaped
like upstream's (a ``d`` parameter per case); the GPU run itself is in lab/evidence.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from release.errors import ReleaseError
from release.ship import upstream_tests
from release.ship.upstream_tests_plugin import kernel_head_dim, spread_sample

KERNEL_DIMS = [32, 64, 96, 128, 192, 256]


@pytest.mark.parametrize(
    "d, kernel",
    [(16, 32), (32, 32), (40, 64), (59, 64), (64, 64), (80, 96), (111, 128), (160, 192), (224, 256), (257, None)],
)
def test_head_dims_dispatch_to_the_next_kernel_head_dim(d, kernel):
    assert kernel_head_dim(d, KERNEL_DIMS) == kernel


class _Item:
    def __init__(self, nodeid):
        self.nodeid = nodeid


def test_a_sample_reaches_every_function_and_is_reproducible():
    items = [_Item(f"t.py::test_{f}[{i}]") for f in "abc" for i in range(50 if f == "a" else 3)]
    first = spread_sample(items, 9, seed=7)
    assert len(first) == 9
    assert {i.nodeid.split("[")[0] for i in first} == {"t.py::test_a", "t.py::test_b", "t.py::test_c"}
    assert [i.nodeid for i in spread_sample(items, 9, seed=7)] == [i.nodeid for i in first]
    assert [i.nodeid for i in spread_sample(items, 9, seed=8)] != [i.nodeid for i in first]
    assert spread_sample(items, 0, seed=1) == items


def test_complete_head_dims_need_every_unit_of_the_head_dim():
    from kernels import kernel_set

    units = kernel_set.all_units()
    full64 = [
        {"kind": u.kind, "dtype": u.dtype, "head_dim": u.head_dim, "causal": u.causal}
        for u in units
        if u.head_dim == 64
    ]
    assert upstream_tests.complete_head_dims({"kernels": full64}) == [64]
    assert upstream_tests.complete_head_dims({"kernels": full64[1:]}) == []  # one unit missing
    one = {"kind": "fwd", "dtype": "fp16", "head_dim": 64, "causal": False}
    assert upstream_tests.complete_head_dims({"kernels": [one]}) == []


def test_a_wheel_without_a_complete_head_dim_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(upstream_tests.tagging, "read_build_info", lambda wheel: {"kernel_set": "ci", "kernels": []})
    with pytest.raises(ReleaseError, match="no head dim with all its units.*--kernel-set dev"):
        upstream_tests.run(upstream_tests.parser().parse_args(["--wheel", str(tmp_path / "w.whl")]))


def test_plugin_deselects_other_head_dims_samples_and_counts(tmp_path):
    tests = tmp_path / "test_shape.py"
    tests.write_text(
        textwrap.dedent(
            """
            import pytest

            @pytest.mark.parametrize("d", [32, 40, 64, 111, 128, 256])
            @pytest.mark.parametrize("i", range(4))
            def test_attention(d, i):
                assert d != 111 or i != 0  # one failure among the kept cases

            @pytest.mark.parametrize("d", [59, 64])
            def test_skips(d):
                pytest.skip("upstream's own skip")

            def test_rotary_without_d():
                pass
            """
        )
    )
    summary = tmp_path / "summary.json"
    cmd = [sys.executable, "-m", "pytest", "-p", "release.ship.upstream_tests_plugin", str(tests), "-q"]
    cmd += ["-p", "no:cacheprovider"]
    cmd += ["--fa-head-dims=64,128", f"--fa-summary={summary}"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = json.loads(summary.read_text())
    # kept: d 40, 64 (kernel 64), 111, 128 (kernel 128) x 4, 2 skips, 1 without d
    assert record["selected"] == 19
    assert record["functions"]["test_shape.py::test_attention"] == {
        "passed": 15,
        "failed": 1,
        "skipped": 0,
        "xfailed": 0,
        "xpassed": 0,
        "error": 0,
    }
    assert record["functions"]["test_shape.py::test_skips"]["skipped"] == 2
    # the same counts per kernel head dim: d 40 and 64 ran the 64 kernel (plus the two skips), d 111
    # and 128 the 128 kernel (with the failure), the rotary-like case has no head dim
    dims = record["kernel_head_dims"]
    assert sorted(dims) == ["128", "64", "none"]
    assert (dims["64"]["passed"], dims["64"]["skipped"]) == (8, 2)
    assert (dims["128"]["passed"], dims["128"]["failed"]) == (7, 1) and dims["none"]["passed"] == 1
    assert "kernel head dim 128" in proc.stdout
    assert record["total"]["passed"] == 16 and "upstream tests per function" in proc.stdout
    assert "8 deselected" in proc.stdout

    sampled = subprocess.run(cmd + ["--fa-sample=3", "--fa-seed=1"], cwd=tmp_path, capture_output=True, text=True)
    record = json.loads(summary.read_text())
    assert record["selected"] == 3 and len(record["functions"]) == 3, sampled.stdout


class _Item:
    def __init__(self, nodeid, **params):
        self.nodeid, self.markers = nodeid, []
        self.callspec = type("CallSpec", (), {"params": params})()

    def add_marker(self, marker):
        self.markers.append(marker)


def test_known_failures_mark_only_matching_cases_where_the_fact_holds():
    from release.ship.upstream_tests_plugin import KnownFailure, mark_known_failures

    known = (
        KnownFailure(
            "test_rotary.py::test_qkv", AssertionError, lambda: "torch X asserts", {"compiled": True}, strict=False
        ),
        KnownFailure("test_rotary.py::test_count", AttributeError, lambda: None),  # fact does not hold here
    )
    items = [
        _Item("tests/test_rotary.py::test_qkv[True]", compiled=True),
        _Item("tests/test_rotary.py::test_qkv[False]", compiled=False),
        _Item("tests/test_rotary.py::test_count"),
        _Item("tests/test_flash_attn.py::test_qkv[True]", compiled=True),  # another file's function
    ]
    assert mark_known_failures(items, known) == 1
    (mark,) = items[0].markers
    assert mark.kwargs == {"reason": "torch X asserts", "raises": AssertionError, "strict": False}
    assert not any(item.markers for item in items[1:])


def test_known_failures_count_as_xfailed_and_a_pass_counts_as_failed(tmp_path):
    """End to end through pytest: the Triton fact is read from this machine's Triton."""
    from release.ship.upstream_tests_plugin import _triton_without_cache_hook

    (tmp_path / "test_rotary.py").write_text("def test_compilation_count():\n    raise AttributeError('cache_hook')\n")
    summary = tmp_path / "summary.json"
    cmd = [sys.executable, "-m", "pytest", "-p", "release.ship.upstream_tests_plugin", "-q", "-p", "no:cacheprovider"]
    cmd += [str(tmp_path / "test_rotary.py"), f"--fa-summary={summary}"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True)
    row = json.loads(summary.read_text())["functions"]["test_rotary.py::test_compilation_count"]
    if _triton_without_cache_hook():
        assert proc.returncode == 0 and row["xfailed"] == 1, proc.stdout
        # strict: the same case passing means the entry is stale, and counts as a failure
        (tmp_path / "test_rotary.py").write_text("def test_compilation_count():\n    pass\n")
        proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True)
        row = json.loads(summary.read_text())["functions"]["test_rotary.py::test_compilation_count"]
        assert proc.returncode == 1 and row["failed"] == 1, proc.stdout
    else:
        assert proc.returncode == 1 and row["failed"] == 1, proc.stdout
