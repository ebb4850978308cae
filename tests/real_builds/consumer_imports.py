"""The import lines of packages that use flash_attn, as their current releases write them: a table,
and a runner that executes each row in an environment where a built wheel is installed.

Each row is (consumer, the import line verbatim, where it stands, an optional CPU check, whether
it needs Triton). ``where`` names the release and file the line was read from: the package's PyPI
wheel or sdist (``pip download --no-deps``, 2026-12-02), or a repository file read with the code
search; rows marked ``issue 24`` are the import the issue's table names and were not found in a
release here. The checks use only CPU tensors and no kernel: this runs on machines without a GPU.

Triton: upstream's ``flash_attn.ops.triton`` modules import ``triton`` at module level, and
``flash_attn.layers.rotary`` and ``flash_attn.losses.cross_entropy`` import those. torch's Linux
CUDA wheels depend on triton (torch 2.14.1+cu130 requires it), so these rows normally run; where
``triton`` is not importable they must fail with exactly that ModuleNotFoundError, and the runner
reports them as such (never as a pass). GPU: upstream's ``flash_attn/ops/triton/layer_norm.py`` reads
the current CUDA device's properties at import (its autotune configs), so that module imports only
where a CUDA device is present, with upstream's wheel as with this one; without one its rows must
fail with torch's CUDA initialization error.

Run as a script with the python of that environment, from a folder that holds no flash_attn: it
prints one JSON object per row (the row's fields, ``ok`` and ``error``) and a last line
``{"triton": <bool>, "cuda": <bool>}``: whether triton imports and a CUDA device is present.
``tests/real_builds/test_native_build.py`` runs it against the built wheel.
"""

from __future__ import annotations

import json
import traceback
from typing import NamedTuple


class Row(NamedTuple):
    consumer: str
    line: str
    where: str
    check: str = ""
    triton: bool = False
    gpu: bool = False


UNPAD_CHECK = (
    "import torch\n"
    "mask = torch.tensor([[1, 1, 0], [1, 1, 1]], dtype=torch.int32)\n"
    "hidden, indices, cu_seqlens, max_seqlen, used = unpad_input(torch.randn(2, 3, 4), mask)\n"
    "assert hidden.shape == (5, 4) and cu_seqlens.tolist() == [0, 2, 5] and max_seqlen == 3\n"
    "assert pad_input(hidden, indices, 2, 3).shape == (2, 3, 4)\n"
)
XFORMERS_CHECK = (  # xformers/ops/fmha/flash.py: which name it takes, and its version gate
    "from torch._vendor.packaging.version import parse as parse_version\n"
    "ext = getattr(flash_attn.flash_attn_interface, 'flash_attn_cuda', None) or "
    "flash_attn.flash_attn_interface.flash_attn_gpu\n"
    "assert all(callable(getattr(ext, name)) for name in ('fwd', 'varlen_fwd', 'bwd', 'varlen_bwd'))\n"
    "assert parse_version('2.7.1') <= parse_version(flash_attn.__version__) <= parse_version('2.8.4'), "
    "flash_attn.__version__\n"
)
# ring-flash-attn utils.get_default_args: getfullargspec of the custom op's _init_fn, then keyword calls
ARGSPEC_CHECK = (
    "import inspect\n"
    "for f in ({}):\n"
    "    args = inspect.getfullargspec(f._init_fn).args\n"
    "    assert {{'q', 'k', 'v', 'causal', 'softcap', 'dropout_p'}} <= set(args), args\n"
)

# The lines are built from these parts only to keep the table readable; each row reads as written.
# fmt: off
FA = "from flash_attn import "
IFACE = "from flash_attn.flash_attn_interface import "
PADDING = "from flash_attn.bert_padding import "
VARLEN_MULTILINE = IFACE + "(\n    _flash_attn_varlen_forward,\n    _flash_attn_varlen_backward,\n)"
PRIVATE_PAIR = "_flash_attn_forward, _flash_attn_backward"
VARLEN_PAIR = "_flash_attn_varlen_forward, _flash_attn_varlen_backward"
DIFFUSERS_GATE = "from packaging.version import Version\nassert Version(flash_attn.__version__) >= Version('2.6.3')\n"

ROWS = [
    Row("transformers 5.24.0", FA + "flash_attn_func, flash_attn_varlen_func, flash_attn_with_kvcache",
        "wheel: transformers/modeling_flash_attention_utils.py:200"),
    Row("transformers 5.24.0", PADDING + "pad_input, unpad_input",
        "wheel: transformers/modeling_flash_attention_utils.py:201", UNPAD_CHECK),
    Row("verl 0.9.1", PADDING + "index_first_axis, pad_input, rearrange, unpad_input",
        "wheel: verl/utils/attention_utils.py:71", UNPAD_CHECK),
    Row("verl 0.9.1", "from flash_attn.ops.triton.cross_entropy import cross_entropy_loss",
        "wheel: verl/utils/torch_functional.py:35", triton=True),
    Row("openrlhf 0.11.2", PADDING + "index_first_axis, pad_input, rearrange, unpad_input",
        "wheel: openrlhf/models/ring_attn_utils.py:3", UNPAD_CHECK),
    Row("openrlhf 0.11.2", "from flash_attn.utils.distributed import all_gather",
        "wheel: openrlhf/models/ring_attn_utils.py:4"),
    Row("openrlhf 0.11.2", "from flash_attn.ops.triton.cross_entropy import cross_entropy_loss",
        "wheel: openrlhf/models/utils.py:180", triton=True),
    Row("colossalai", PADDING + "index_first_axis, pad_input",
        "github hpcaitech/ColossalAI@df674760: extensions/pybind/flash_attention/flash_attention_dao_cuda.py"),
    Row("diffusers 0.42.1", FA + "flash_attn_func, flash_attn_varlen_func",
        "wheel: diffusers/models/attention_dispatch.py:84", DIFFUSERS_GATE),
    Row("diffusers 0.42.1", IFACE + "_wrapped_flash_attn_backward, _wrapped_flash_attn_forward",
        "wheel: diffusers/models/attention_dispatch.py:85"),
    Row("xformers 0.0.35", "import flash_attn.flash_attn_interface",
        "wheel: xformers/ops/fmha/flash.py:59", XFORMERS_CHECK),
    Row("ring-flash-attn 0.1.8", IFACE + PRIVATE_PAIR,
        "wheel: ring_flash_attn/ring_flash_attn.py:3", ARGSPEC_CHECK.format(PRIVATE_PAIR)),
    Row("ring-flash-attn 0.1.8", VARLEN_MULTILINE,
        "wheel: ring_flash_attn/ring_flash_attn_varlen.py:3-6", ARGSPEC_CHECK.format(VARLEN_PAIR)),
    Row("yunchang 0.6.4", IFACE + PRIVATE_PAIR,
        "wheel: yunchang/kernels/attention.py:26", "assert not flash_attn.__version__ < '2.6.3'  # a string compare\n"),
    Row("yunchang 0.6.4", VARLEN_MULTILINE,
        "wheel: yunchang/ring/ring_flash_attn_varlen.py:7-10"),
    Row("deepspeed 0.19.8", IFACE + PRIVATE_PAIR,
        "sdist: deepspeed/sequence/fpdt_layer.py:17"),
    Row("unsloth 2026.10.9", IFACE + "flash_attn_gpu",
        "wheel: unsloth/models/_utils.py:4360"),
    Row("unsloth 2026.10.9", "import torch, flash_attn_2_cuda",
        "wheel: studio/backend/utils/kernel_install.py:394", "assert callable(flash_attn_2_cuda.fwd_kvcache)\n"),
    Row("megatron-core 0.16.1", FA + "flash_attn_varlen_func, flash_attn_with_kvcache",
        "wheel: megatron/core/transformer/attention.py:94"),
    Row("megatron-core 0.16.1", "from flash_attn.layers.rotary import apply_rotary_emb as apply_rotary_emb_flash",
        "wheel: megatron/core/models/common/embeddings/rope_utils.py:33", triton=True),
    Row("flash-linear-attention 0.6.0", FA + "flash_attn_func, flash_attn_varlen_func",
        "wheel: fla/layers/attn.py:26"),
    Row("ms-swift, sglang, fla-core", IFACE + VARLEN_PAIR, "issue 24"),
    Row("axolotl, nanotron", "from flash_attn.losses.cross_entropy import CrossEntropyLoss", "issue 24", triton=True),
    Row("mamba-ssm, nanotron", "from flash_attn.ops.triton.layer_norm import RMSNorm, layer_norm_fn", "issue 24",
        triton=True, gpu=True),
    Row("nanotron", "from flash_attn.layers.rotary import RotaryEmbedding, apply_rotary_emb", "issue 24", triton=True),
]
# fmt: on


def _triton_importable() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def run_row(row: Row) -> dict:
    """Execute the row's line and check in a fresh namespace (``flash_attn`` pre-imported, as every
    consumer imports it before reaching these lines)."""
    namespace: dict = {}
    try:
        exec("import flash_attn\n" + row.line + "\n" + row.check, namespace)
    except Exception as error:  # a row's failure is its result
        return {"ok": False, "error": f"{type(error).__name__}: {error}", "trace": traceback.format_exc()[-1500:]}
    return {"ok": True, "error": None}


def main() -> None:
    for row in ROWS:
        print(json.dumps({**row._asdict(), **run_row(row)}))
    import torch

    print(json.dumps({"triton": _triton_importable(), "cuda": torch.cuda.is_available()}))


if __name__ == "__main__":
    main()
