"""Make the staged upstream tree's flash.h torch-free: Flash_fwd_params::philox_args of our type.

Run by cmake/FlashAttnKernels.cmake on a freshly staged tree (after src/kernels/upstream_shape.py
has read its declarations)::

    python torch_free_tree.py --tree <staged upstream root>

flash-attn 2.8.3.post2's flash.h includes ``<ATen/cuda/CUDAGeneratorImpl.h>`` only to declare
``at::PhiloxCudaState philox_args;``. torch's struct changed layout between torch versions
(``offset_intragraph_`` became 64-bit in torch 2.14), so kernel objects that serve every torch
cannot share it: this step rewrites the include to ``"torch_free/torch_free.h"`` (found through
src/kernels, which the binding and the kernels both have on their include path) and the member type to
``::flash_attn_wheels::PhiloxState`` (src/kernels/torch_free/torch_free.h), which the binding fills
from torch's state member by member. A tree whose flash.h already has no ATen include and another
philox_args form (upstream main's ``uint64_t philox_args[4]``) is left as it is. Idempotent: a
rewritten flash.h is recognised and kept.

Exit status 2, naming the file and what was found, when flash.h declares
``at::PhiloxCudaState philox_args;`` but not through the include this step knows.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ATEN_INCLUDE = re.compile(r"^#include\s*<ATen/cuda/CUDAGeneratorImpl\.h>.*$", re.MULTILINE)
OUR_INCLUDE = '#include "torch_free/torch_free.h"  // flash_attn wheels: PhiloxState, not torch\'s (torch_free_tree.py)'
ATEN_MEMBER = re.compile(r"\bat::PhiloxCudaState(\s+philox_args\s*;)")
OUR_MEMBER = r"::flash_attn_wheels::PhiloxState\1"


def rewrite(text: str) -> tuple[str, bool]:
    """(new flash.h text, whether it changed). Raises ValueError for a member without the include."""
    has_member = bool(ATEN_MEMBER.search(text))
    has_include = bool(ATEN_INCLUDE.search(text))
    if not has_member:
        return text, False  # nothing of torch's in the parameter block (rewritten, or upstream main)
    if not has_include:
        raise ValueError(
            "declares at::PhiloxCudaState philox_args; without #include <ATen/cuda/CUDAGeneratorImpl.h>; "
            "teach src/kernels/torch_free_tree.py where this tree gets the type from"
        )
    text = ATEN_INCLUDE.sub(OUR_INCLUDE, text, count=1)
    return ATEN_MEMBER.sub(OUR_MEMBER, text), True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", required=True, type=Path, help="staged upstream root (holds csrc/flash_attn)")
    args = parser.parse_args(argv)
    flash_h = args.tree / "csrc" / "flash_attn" / "src" / "flash.h"
    try:
        text = flash_h.read_text(encoding="utf-8")
        new, changed = rewrite(text)
    except (OSError, ValueError) as e:
        print(f"flash_attn: {flash_h}: {e}", file=sys.stderr)
        return 2
    if changed:
        flash_h.write_text(new, encoding="utf-8")
        print("flash_attn: flash.h: philox_args is ::flash_attn_wheels::PhiloxState (torch-free kernels)")
    else:
        print("flash_attn: flash.h: no torch type in Flash_fwd_params (nothing to rewrite)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
