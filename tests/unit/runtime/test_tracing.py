"""The constant-result mark flash_attn sets without importing torch._dynamo is the one torch uses
(tests/unit/test_import.py checks that importing flash_attn leaves torch._dynamo unimported)."""

from __future__ import annotations

import torch

from flash_attn import _loader, _tracing


def test_mark_is_what_torch_sets():
    def probe():
        return True

    marked = torch.compiler.assume_constant_result(probe)
    assert vars(marked) == {_tracing.MARK: True}
    assert getattr(_loader.require_ready, _tracing.MARK) is True
