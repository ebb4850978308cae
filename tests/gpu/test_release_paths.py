"""pytest entry for tests/gpu/release_paths.py: every release-note path, fp16 and bf16 (needs CUDA)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

if importlib.util.find_spec("flash_attn") is None:
    # not installed: test the source checkout (its loader says whether a library was built)
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def _load_script():
    path = Path(__file__).with_name("release_paths.py")
    spec = importlib.util.spec_from_file_location("release_paths", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["release_paths"] = module  # dataclasses resolve annotations through it
    spec.loader.exec_module(module)
    return module


release_paths = _load_script()


@pytest.fixture(scope="module")
def seed() -> int:
    value = int.from_bytes(os.urandom(4), "little") % (2**31)
    print(f"release_paths seed {value}")
    return value


@pytest.fixture(scope="module")
def ready():
    import flash_attn

    try:
        flash_attn._loader.require_ready(torch.cuda.current_device())
    except flash_attn.LibraryNotBuiltError as exc:
        pytest.skip(f"flash_attn not built: {exc}")


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("case", list(release_paths.CASES))
def test_release_path(case: str, dtype: str, seed: int, ready) -> None:
    ctx = release_paths.Context("cuda", release_paths.DTYPES[dtype], 64, seed)
    rows = release_paths.run_case(case, ctx)
    table = release_paths.format_table(rows, f"{case} {dtype} seed {seed}")
    print(table)
    if rows and all(row.status == "SKIP" for row in rows):
        pytest.skip(rows[0].note)
    assert not [row for row in rows if row.status == "FAIL"], table
