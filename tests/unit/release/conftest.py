"""Fixtures of the release tooling tests (src/ is on pytest's pythonpath; tests/release_fakes.py is
importable because pytest puts the folder of tests/conftest.py on sys.path)."""

from __future__ import annotations

import pytest
from release_fakes import make_wheel


@pytest.fixture
def fake_wheel(tmp_path):
    return make_wheel(tmp_path / "raw")
