"""Fixtures shared by every test folder, and the skip policy of the test command.

`upstream_sdist` and `upstream_tree` give tests the pinned upstream FlashAttention-2 source the
way the build obtains it (release.compile.upstream: $FLASH_ATTN_SDIST, else the download cache, else a pip
download; always hash-checked), extracted once per run into a temporary folder. No test looks
for the upstream tree at a path of its own.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from skip_policy import pytest_runtest_logreport, pytest_sessionfinish, pytest_terminal_summary  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]


def pytest_configure(config: pytest.Config) -> None:
    """Child processes the tests start (``python bench/<script>.py``, ``python -m release.<module>``)
    find the release package and this checkout as ``nox -s tests`` sets them up: src/ and the root
    on PYTHONPATH, before whatever it held (pytest's ``pythonpath`` only reaches this process)."""
    wanted = [str(ROOT / "src"), str(ROOT)]
    old = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in wanted]
    os.environ["PYTHONPATH"] = os.pathsep.join(wanted + old)


@pytest.fixture(scope="session")
def upstream_sdist() -> Path:
    """Path of the verified pinned sdist (flash_attn-2.8.3.post2.tar.gz); downloaded if absent."""
    from release.compile import upstream
    from release.errors import ReleaseError

    try:
        return upstream.pinned_sdist()
    except ReleaseError as e:
        pytest.fail(f"the pinned upstream sdist is needed and could not be obtained: {e}", pytrace=False)


@pytest.fixture(scope="session")
def upstream_tree(upstream_sdist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Root of the extracted pinned sdist (holds setup.py, flash_attn/, csrc/). Treat it as read-only:
    tests that patch files copy what they patch into their own tmp_path."""
    from release.compile import upstream

    return upstream.extract_sdist(upstream_sdist, tmp_path_factory.mktemp("upstream"))
