"""Helpers for ``torch.compile``: mark checks whose result is constant for a traced graph."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TypeVar

__all__ = ["constant_result", "MARK"]

F = TypeVar("F", bound=Callable)

# The attribute torch.compiler.assume_constant_result sets (torch 2.x; tests/unit/test_tracing.py
# checks it still does). Setting it directly spares importing torch._dynamo (seconds) at import.
MARK = "_dynamo_marked_constant"


def constant_result(fn: F) -> F:
    """Like ``torch.compiler.assume_constant_result``: Dynamo calls ``fn`` once while tracing and
    bakes the result into the graph (a raised error surfaces as a compile error)."""
    if "torch._dynamo" in sys.modules:
        import torch

        return torch.compiler.assume_constant_result(fn)
    setattr(fn, MARK, True)
    return fn
