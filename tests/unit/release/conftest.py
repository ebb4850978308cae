"""Fixtures of the release tooling tests: src/ (the release package) and this folder on sys.path."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[2] / "src"
for path in (SRC, HERE):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from release_fakes import make_wheel  # noqa: E402


@pytest.fixture
def fake_wheel(tmp_path):
    return make_wheel(tmp_path / "raw")
