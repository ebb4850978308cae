"""Strict-JSON conversion shared by the validation report and the bench/ result files (stdlib only).

The GPU validation suite (tools/validate.py) and bench/ import it; the release package itself holds
no GPU test code.
"""

from __future__ import annotations

import math
import sys


def json_safe(value):
    """``value`` as strict JSON holds it (``json.dumps(..., allow_nan=False)`` accepts the result).

    NaN and +/-inf become None; dict keys become str; tuples, sets and lists (``torch.Size`` too)
    become lists; a torch tensor of at most 64 elements becomes its nested list of numbers, a larger
    one a short ``tensor[shape] dtype`` string; anything else (dtypes, paths) becomes ``str(value)``.
    torch is never imported here: tensors are recognised only when the caller has imported torch.
    Raises nothing.
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (str, int)):
        return value
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_safe(v) for v in value]
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        if value.numel() <= 64:
            return json_safe(value.detach().cpu().tolist())
        return f"tensor{list(value.shape)} {value.dtype}"
    return str(value)
