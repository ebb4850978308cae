"""Which skips a test run may report: a skipped test must need what this machine lacks on purpose.

A CPU run of the README's test command may skip only tests that need a CUDA device (or, on a GPU
machine, a kernel the installed wheel was not built with), a second torch version, or another
operating system. Any other reason means a missing install step or a machine-specific path, i.e. a
test that silently cannot fail where CI runs: the run then fails and names the tests.

tests/conftest.py registers the hooks below; tests/unit/test_skip_policy.py runs them on a small
suite to show that a foreign skip reason fails the run.
"""

from __future__ import annotations

import re

import pytest

# One pattern per allowed kind of skip reason; a reason must match at least one.
ALLOWED_REASONS = {
    "needs a GPU": re.compile(r"\bCUDA device\b|\bGPU\b"),
    "kernel not in this wheel (GPU runs)": re.compile(r"\bnot built\b"),
    "needs a second torch version": re.compile(r"\bsecond torch\b"),
    "runs on another OS": re.compile(r"\bon (Windows|Linux|macOS)\b|\bPOSIX\b"),
}

_found: list[tuple[str, str]] = []


def skip_reason(report: pytest.TestReport) -> str:
    """The text given to pytest.skip / skipif for a skipped report."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        text = str(longrepr[2])
    else:
        text = str(longrepr)
    return text.removeprefix("Skipped: ")


def is_allowed(reason: str) -> bool:
    return any(p.search(reason) for p in ALLOWED_REASONS.values())


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = skip_reason(report)
        if not is_allowed(reason):
            _found.append((report.nodeid, reason))


def pytest_terminal_summary(terminalreporter) -> None:
    if not _found:
        return
    terminalreporter.section("skip policy", sep="=", red=True, bold=True)
    terminalreporter.line(
        "These tests skipped for a reason other than "
        + ", ".join(ALLOWED_REASONS)
        + ". Install what they need (see the tests session in noxfile.py) or fix the test:"
    )
    for nodeid, reason in _found:
        terminalreporter.line(f"  {nodeid}: {reason}")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _found and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
