"""tests/gpu/release_paths.py run on CPU against the emulated library: its references, packing and gates."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "gpu" / "release_paths.py"


@pytest.fixture(scope="module")
def release_paths():
    spec = importlib.util.spec_from_file_location("release_paths_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def test_every_path_passes_on_emulated_kernels(release_paths, emulated):
    ctx = release_paths.Context("cpu", torch.float16, 64, seed=1234, compile_backend="aot_eager")
    rows = [row for name in release_paths.CASES for row in release_paths.run_case(name, ctx)]
    table = release_paths.format_table(rows, "emulated")
    assert [row for row in rows if row.status != "PASS"] == [], table
    cases = {row.case for row in rows}
    assert len(cases) == len(release_paths.CASES)
    # every differentiable path checked its gradients, every compile path its graph breaks
    assert sum(row.tensor in ("dq", "dqkv") for row in rows) == 12
    assert sum(row.tensor == "graph breaks" for row in rows) == 2
