"""tools/release_paths.py on CPU against the emulated library: a head dim the kernel set left
out (256 here) is SKIP (not built) for every path, torch.compile ones included (their graph calls
the operator, whose "flash_attn was built without" RuntimeError is recognised as well)."""

from __future__ import annotations

import pytest
import torch


@pytest.mark.parametrize("case", ["base", "kvcache", "compile_func", "compile_varlen"])
def test_a_head_dim_left_out_is_skipped_not_failed(release_paths, emulated, case):
    ctx = release_paths.Context("cpu", torch.float16, 256, seed=1, compile_backend="aot_eager")
    rows = release_paths.run_case(case, ctx)
    assert [(row.status, row.note.startswith("not built: ")) for row in rows] == [("SKIP", True)], rows


def test_not_built_cause_follows_the_chain(release_paths):
    inner = release_paths.KernelNotBuiltError("no fwd fp16 head dim 256 kernel (kernel set 'dev')")
    try:
        try:
            raise inner
        except Exception as exc:
            raise RuntimeError("wrapped by torch.compile") from exc
    except RuntimeError as outer:
        assert release_paths.not_built_cause(outer) is inner
    assert release_paths.not_built_cause(ValueError("other")) is None
