"""Fixtures of the workflow tests (src/ is on pytest's pythonpath; _workflows sits beside this file,
whose folder pytest puts on sys.path)."""

from __future__ import annotations

import pytest
from _workflows import load_workflow


@pytest.fixture(scope="session")
def release() -> dict:
    return load_workflow("release.yml")


@pytest.fixture(scope="session")
def ci() -> dict:
    return load_workflow("ci.yml")


@pytest.fixture(scope="session")
def index() -> dict:
    return load_workflow("index.yml")
