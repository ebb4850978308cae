"""Fixtures of the release tooling tests (src/ is on pytest's pythonpath; tests/release_fakes.py is
importable because pytest puts the folder of tests/conftest.py on sys.path)."""

from __future__ import annotations

from pathlib import Path

import pytest
from release_fakes import make_wheel


@pytest.fixture
def fake_wheel(tmp_path):
    return make_wheel(tmp_path / "raw")


@pytest.fixture(autouse=True)
def no_kernels_build(monkeypatch):
    """The wheel flow's first step (release.archive.archives.build: a real CMake build of the kernel objects)
    is replaced by one that returns an archive path and an empty summary, so the flow tests reach
    the binding build (builder.run_build, which they replace themselves). Returns the calls."""
    from release.archive import archives
    from release.compile import progress

    calls = []

    def fake_build(opts, tc, shard="", out=None, prediction=None):
        calls.append((opts, shard))
        return Path("/nonexistent/kernels-fake/archive"), progress.summary([], 0.0)

    monkeypatch.setattr(archives, "build", fake_build)
    return calls


@pytest.fixture(autouse=True)
def steady_machine(monkeypatch):
    """Predictions see an idle machine exactly as fast as the reference of the calibration
    (release.compile.machine): no benchmark second per test, and the same numbers on every machine.
    Tests of the calibration and the registry themselves put the real ones back."""
    import contextlib

    from release.compile import estimate, machine

    fixed = machine.Calibration(machine.REFERENCE_CPU_SECONDS, 1.0, 0.0)
    monkeypatch.setattr(estimate, "calibration", lambda: fixed)
    # the tests' builds do not register in the user's cache (release.compile.machine.running)
    monkeypatch.setattr(machine, "running", lambda cache, what: contextlib.nullcontext())
    return fixed


def pytest_terminal_summary(terminalreporter):
    """The fault-injection summary (fault_probes.COUNTS, filled by test_faults*.py): probes run, inputs
    lost, corrupt outputs, paths outside the output, tracebacks, internal errors."""
    import sys

    probes = sys.modules.get("fault_probes")
    if probes is not None and probes.COUNTS["probes run"]:
        terminalreporter.write_line("fault injection: " + ", ".join(f"{k}: {v}" for k, v in probes.COUNTS.items()))
