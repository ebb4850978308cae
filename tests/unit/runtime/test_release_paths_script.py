"""tools/release_paths.py run on CPU against the emulated library: its references, packing and gates."""

from __future__ import annotations

import torch


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
