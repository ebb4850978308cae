"""Build info: the JSON written beside the native library, and what can be read out of it.

A build writes ``flash_attn/build_info_<group>.json`` next to ``flash_attn/_C_<group>.so``
(``.pyd`` on Windows), for example::

    {"version": "2.8.3.post2", "group": "legacy", "archs": [80, 89, 90],
     "sass": ["sm_80", "sm_89", "sm_90"], "ptx_arch": 90,
     "cuda_version": "13.0.88", "torch_version": "2.14.1+cu130", "torch_cuda_version": "13.0",
     "cxx11_abi": true, "torch_abi": "exact", "torch_min": null, "kernel_set": "dev",
     "kernels": [{"kind": "fwd", "dtype": "fp16", "head_dim": 64, "causal": false}, ...],
     ...}

``torch_abi`` is ``"exact"`` (the binding uses torch's C++ API: it loads only in the torch it was
built against) or ``"stable"`` (torch's stable ABI only: it loads in every torch >= ``torch_min``,
e.g. ``"2.11"``); a build info without these fields (written before they existed) is exact
(:func:`torch_abi`).

Everything here is pure (dicts in, values out) so it can be tested without a GPU or a build.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from flash_attn_wheel_names import label as _label
from flash_attn_wheel_names.label import TORCH_ABI_STABLE, TORCH_ABIS, cuda_tag, public_version

from ._errors import LibraryLoadError

__all__ = [
    "REQUIRED_KEYS",
    "KernelKey",
    "SassTarget",
    "parse",
    "read",
    "kernel_head_dim",
    "dtype_name",
    "kernel_set",
    "describe_kernels",
    "sass_targets",
    "ptx_capability",
    "public_version",
    "cuda_major",
    "cuda_tag",
    "local_label",
    "torch_abi",
    "is_stable",
]

# Keys the runtime relies on; a build info without them is refused with a clear message.
REQUIRED_KEYS: tuple[str, ...] = (
    "version",
    "group",
    "sass",
    "ptx_arch",
    "cuda_version",
    "torch_version",
    "torch_cuda_version",
    "kernel_set",
    "kernels",
    "head_dims",
)

# Kinds and dtypes a "kernels" entry may name (the unit key's fields, which the binding's
# dispatch is written for); the head dims come with each build info ("head_dims").
KERNEL_KINDS: tuple[str, ...] = ("fwd", "fwd_split", "bwd")
KERNEL_DTYPES: tuple[str, ...] = ("fp16", "bf16")


class KernelKey(NamedTuple):
    """One instantiation unit: kind (fwd | fwd_split | bwd), dtype (fp16 | bf16), head dim, causal."""

    kind: str
    dtype: str
    head_dim: int
    causal: bool


class SassTarget(NamedTuple):
    """A SASS target such as ``sm_80`` (variant ""), ``sm_90a`` ("a") or ``sm_100f`` ("f")."""

    major: int
    minor: int
    variant: str

    def __str__(self) -> str:
        return f"sm_{self.major}{self.minor}{self.variant}"


def parse(data: Mapping[str, Any] | str, source: str = "build info") -> dict[str, Any]:
    """Validate a build info (JSON text or an already decoded dict) and return it as a dict.

    Raises:
        LibraryLoadError: the text is not JSON, or a required key is missing or has the wrong
            type. ``source`` (usually the file name) is named in the message.
    """
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as exc:
            raise LibraryLoadError(f"{source} is not valid JSON ({exc}); rebuild or reinstall flash_attn") from None
    if not isinstance(data, Mapping):
        raise LibraryLoadError(f"{source} must hold a JSON object, not {type(data).__name__}")
    info = dict(data)
    missing = [key for key in REQUIRED_KEYS if key not in info]
    if missing:
        raise LibraryLoadError(
            f"{source} lacks {', '.join(missing)}; it was written by an older or foreign build: "
            "rebuild (`nox -s dev` or `pip install .`) or reinstall the wheel"
        )
    problems = []
    if not isinstance(info["group"], str) or not info["group"]:
        problems.append("'group' must be a non-empty string")
    if not isinstance(info["sass"], list) or not all(isinstance(s, str) for s in info["sass"]):
        problems.append("'sass' must be a list of strings such as \"sm_80\"")
    else:
        for target in info["sass"]:
            if _SASS_RE.fullmatch(target) is None:
                problems.append(f"'sass' entry {target!r} is not of the form sm_<major><minor>[a|f]")
    if info["ptx_arch"] is not None and (not isinstance(info["ptx_arch"], int) or isinstance(info["ptx_arch"], bool)):
        problems.append("'ptx_arch' must be an integer such as 90, or null")
    if not isinstance(info["kernels"], list):
        problems.append("'kernels' must be a list")
    else:
        for entry in info["kernels"]:
            if not _valid_kernel_entry(entry):
                problems.append(
                    f'\'kernels\' entry {entry!r} must be {{"kind": fwd|fwd_split|bwd, "dtype": fp16|bf16, '
                    '"head_dim": int, "causal": bool}'
                )
                break
    groups = info.get("arch_groups", {})
    if not isinstance(groups, Mapping) or not all(
        isinstance(s, list) and all(isinstance(x, str) and _SASS_RE.fullmatch(x) for x in s) for s in groups.values()
    ):
        problems.append("'arch_groups' must map group names to SASS lists such as [\"sm_80\"]")
    head_dims = info.get("head_dims", [])
    if not isinstance(head_dims, list) or not all(isinstance(d, int) and not isinstance(d, bool) for d in head_dims):
        problems.append("'head_dims' must be a list of integers")
    for key in ("version", "torch_version", "torch_cuda_version", "cuda_version", "kernel_set"):
        if not isinstance(info[key], str):
            problems.append(f"'{key}' must be a string")
    if info.get("torch_abi") not in (None, *TORCH_ABIS):
        problems.append(f"'torch_abi' must be one of {', '.join(TORCH_ABIS)} (or absent: exact)")
    elif info.get("torch_abi") == TORCH_ABI_STABLE and not (
        isinstance(info.get("torch_min"), str) and re.fullmatch(r"[0-9]+\.[0-9]+", info["torch_min"])
    ):
        problems.append("'torch_min' of a stable-ABI build must be the minimum torch as a string such as \"2.11\"")
    if problems:
        raise LibraryLoadError(f"{source} is malformed: " + "; ".join(problems))
    return info


def read(path: str | Path) -> dict[str, Any]:
    """Read and validate a build info JSON file.

    Raises:
        LibraryLoadError: the file cannot be read or is malformed (see :func:`parse`).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise LibraryLoadError(f"cannot read build info {path}: {exc}; reinstall flash_attn or rebuild it") from None
    return parse(text, source=str(path))


def _valid_kernel_entry(entry: Any) -> bool:
    return (
        isinstance(entry, Mapping)
        and entry.get("kind") in KERNEL_KINDS
        and entry.get("dtype") in KERNEL_DTYPES
        and isinstance(entry.get("head_dim"), int)
        and isinstance(entry.get("causal"), bool)
    )


def kernel_head_dim(head_dim: int, head_dims: Iterable[int]) -> int:
    """Head dim of the kernels that serve ``head_dim``: the smallest of ``head_dims`` (the build
    info's "head_dims", e.g. 32, 64, 96, 128, 192, 256) that is >= it; 0 if none is or < 1."""
    if head_dim < 1:
        return 0
    for candidate in sorted(head_dims):
        if head_dim <= candidate:
            return candidate
    return 0


_DTYPE_NAMES = {"torch.float16": "fp16", "torch.bfloat16": "bf16"}


def dtype_name(dtype: Any) -> str | None:
    """``"fp16"`` for torch.float16, ``"bf16"`` for torch.bfloat16, None for every other dtype."""
    return _DTYPE_NAMES.get(str(dtype))


def kernel_set(info: Mapping[str, Any]) -> frozenset[KernelKey]:
    """The instantiation units the library holds, as a frozenset of :class:`KernelKey`."""
    return frozenset(
        KernelKey(entry["kind"], entry["dtype"], int(entry["head_dim"]), bool(entry["causal"]))
        for entry in info.get("kernels", ())
    )


def describe_kernels(keys: Iterable[KernelKey]) -> str:
    """Short human description of a kernel set, e.g. ``fwd: fp16 hd64,128 (causal+non-causal); ...``."""
    keys = list(keys)
    if not keys:
        return "no kernels"
    parts = []
    for kind in KERNEL_KINDS:
        for dtype in KERNEL_DTYPES:
            entries = [key for key in keys if key.kind == kind and key.dtype == dtype]
            if not entries:
                continue
            dims = sorted({key.head_dim for key in entries})
            causal = {key.causal for key in entries}
            if causal == {True, False}:
                mode = "causal+non-causal"
            else:
                mode = "causal only" if True in causal else "non-causal only"
            parts.append(f"{kind} {dtype} hd{','.join(str(d) for d in dims)} ({mode})")
    return "; ".join(parts)


_SASS_RE = re.compile(r"sm_(\d+)([af]?)")


def _split_arch(value: int) -> tuple[int, int]:
    """90 -> (9, 0); 121 -> (12, 1): the last digit is the minor version, as in ``sm_121``."""
    return value // 10, value % 10


def sass_targets(info: Mapping[str, Any]) -> list[SassTarget]:
    """The SASS targets of the build, parsed from ``info["sass"]`` (``"sm_80"`` -> ``SassTarget(8, 0, "")``)."""
    targets = []
    for text in info.get("sass", ()):
        match = _SASS_RE.fullmatch(text)
        if match is None:
            continue
        major, minor = _split_arch(int(match.group(1)))
        targets.append(SassTarget(major, minor, match.group(2)))
    return targets


def ptx_capability(info: Mapping[str, Any]) -> tuple[int, int] | None:
    """Compute capability of the embedded PTX (``ptx_arch`` 90 -> (9, 0)), or None without PTX."""
    value = info.get("ptx_arch")
    if value is None or isinstance(value, bool) or not isinstance(value, int):
        return None
    return _split_arch(value)


def cuda_major(version: str | None) -> int | None:
    """Major of a CUDA version string (``"13.0.88"`` -> 13); None if absent or unparsable."""
    if not version:
        return None
    head = version.strip().split(".", 1)[0]
    return int(head) if head.isdigit() else None


def torch_abi(info: Mapping[str, Any]) -> str:
    """``"exact"`` or ``"stable"``: the build info's ``torch_abi``, exact when absent (older builds)."""
    return _label.torch_abi(info)


def is_stable(info: Mapping[str, Any]) -> bool:
    """True for a stable-ABI build (one wheel for every torch >= ``torch_min``)."""
    return torch_abi(info) == TORCH_ABI_STABLE


def local_label(info: Mapping[str, Any], group: str | None = None) -> str:
    """Local version label of the wheel this build info describes, for ``group`` (default: its own).

    :func:`flash_attn_wheel_names.label.label_of`, e.g. ``cu130torch2.14.1cxx11abitrue.legacy.rev1`` (plus ``.ci``
    etc. for a kernel set other than release, so the name of the other group's wheel keeps this
    wheel's set); never raises for a label-unsafe field: without a CUDA version, or with a set name
    that is no label segment, it still names torch, ABI and group.
    """
    try:
        return _label.label_of(info, group)
    except ValueError:
        plain = {**info, "cuda_version": "0.0", "kernel_set": _label.RELEASE_KERNEL_SET}
        return _label.label_of(plain, group).replace("cu00", "cu", 1)
