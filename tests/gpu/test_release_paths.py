"""pytest entry for tools/release_paths.py: every release-note path, fp16 and bf16 (needs CUDA).

tools/ is on pytest's pythonpath (pyproject.toml), so the script imports under the name it has
when run. The flash_attn under test is the first on sys.path: the checkout's with `nox -s tests`
(its loader says whether a library was built), an installed wheel when run from another folder.
"""

from __future__ import annotations

import os

import pytest
import release_paths
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


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
