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


def test_dropout_in_cuda_graph_capture_never_reuses_one_mask() -> None:
    """Stable-ABI wheel: dropout under capture raises (no graph-safe Philox state in the stable ABI).
    Exact wheel: it is captured, and each replay draws a new mask (torch's graph-safe Philox offsets)."""
    import flash_attn
    from flash_attn import _rng

    try:
        flash_attn._loader.require_ready(torch.cuda.current_device())
    except flash_attn.LibraryNotBuiltError as exc:
        pytest.skip(f"flash_attn not built: {exc}")
    q, k, v = (torch.randn(2, 256, 4, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside capture, as torch.cuda.graph requires
        flash_attn.flash_attn_func(q, k, v, dropout_p=0.25)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    if _rng.RESERVE:
        with pytest.raises(flash_attn.FlashAttnError, match="CUDA-graph capture"):
            with torch.cuda.graph(graph):
                flash_attn.flash_attn_func(q, k, v, dropout_p=0.25)
        return
    with torch.cuda.graph(graph):
        out = flash_attn.flash_attn_func(q, k, v, dropout_p=0.25)
    graph.replay()
    first = out.clone()
    graph.replay()
    assert not torch.equal(first, out), "two replays of a captured dropout call drew the same mask"
