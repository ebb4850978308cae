"""Fixtures of the workflow tests: src/ (the release package) and this folder on sys.path."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[2] / "src"
for _path in (SRC, HERE):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from _workflows import load_workflow  # noqa: E402


@pytest.fixture(scope="session")
def release() -> dict:
    return load_workflow("release.yml")


@pytest.fixture(scope="session")
def ci() -> dict:
    return load_workflow("ci.yml")
