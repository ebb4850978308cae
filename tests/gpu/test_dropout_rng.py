"""pytest entry for tools/dropout_rng.py: the Philox state reaches the kernel intact (needs CUDA).

tools/ is on pytest's pythonpath (pyproject.toml); the flash_attn under test is the first on
sys.path (the checkout's with `nox -s tests`, an installed wheel when run from another folder).
"""

from __future__ import annotations

import os

import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_dropout_rng(dtype: str) -> None:
    import dropout_rng

    import flash_attn

    try:
        flash_attn._loader.require_ready(torch.cuda.current_device())
    except flash_attn.LibraryNotBuiltError as exc:
        pytest.skip(f"flash_attn not built: {exc}")
    seed = int.from_bytes(os.urandom(4), "little") % (2**30)
    rows = dropout_rng.run(dropout_rng.rp.DTYPES[dtype], seed)
    table = dropout_rng.rp.format_table(rows, f"dropout {dtype} seed {seed}")
    print(table)
    if rows and all(row.status == "SKIP" for row in rows):
        pytest.skip(rows[0].note)
    assert not [row for row in rows if row.status == "FAIL"], table
