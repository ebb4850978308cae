"""Build directory names: one CMake binary directory per thing that changes every object file.

The name holds the arch group (with its archs for ``custom``), the kernel set (a short hash of
the resolved unit names for an explicit list), the torch version, the CUDA version and the host
compiler, e.g. ``legacy-dev-torch2.14.1-cu130-gcc12``; a stable-ABI binding (``--torch-abi stable``)
adds ``stable<torch_min>`` after the torch (``legacy-dev-torch2.14.1-stable2.11-cu130-gcc12``), since
its objects differ from the exact binding's of the same torch. Building another torch or toolkit
therefore gets a fresh directory and never links stale objects, while building the same name
again reuses the directory and Ninja recompiles nothing that did not change. Everything else
(fatbin compression, deltas, jobs, upstream source) is a CMake cache value of the same
directory: changing it recompiles exactly what depends on it.

Not to be confused with the kernel objects' key (cmake/FlashAttnKernels.cmake, release.archive.archives.key_of):
the SHA-256 that says which kernels archive a build may link.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from kernels import kernel_set as kernel_sets
from release.compile.toolchain import Toolchain, torch_public_version


def cuda_digits(cuda_version: str) -> str:
    """CUDA major and minor digits: "13.0.88" -> "130", "12.8" -> "128"."""
    m = re.match(r"^(\d+)\.(\d+)", cuda_version.strip())
    if not m:
        raise ValueError(f"'{cuda_version}' is not a CUDA version (x.y or x.y.z)")
    return m.group(1) + m.group(2)


def compiler_token(compiler_id: str, compiler_version: str) -> str:
    """gcc 12.2.0 -> gcc12; clang 17.0.6 -> clang17; msvc 19.44.35207 -> msvc1944."""
    parts = compiler_version.split(".")
    if compiler_id == "msvc":
        return "msvc" + "".join(parts[:2])
    return f"{compiler_id}{parts[0]}"


def kernel_set_token(spec: str) -> str:
    """release / dev / ci, or list-<8 hex> over the resolved unit names of an explicit list.

    Two spellings of the same units (patterns vs names, another order) share a directory.
    """
    name, units = kernel_sets.resolve(spec)
    if name != "custom":
        return name
    digest = hashlib.sha256(",".join(sorted(u.name for u in units)).encode()).hexdigest()[:8]
    return f"list-{digest}"


def group_token(group: str, archs: list[int] | None = None) -> str:
    """legacy, blackwell, or custom_sm80_90."""
    if group == "custom":
        return "custom_sm" + "_".join(str(a) for a in sorted(set(archs or [])))
    return group


def build_dir_name(
    group: str,
    kernel_set: str,
    torch_version: str,
    cuda_version: str,
    compiler_id: str,
    compiler_version: str,
    archs: list[int] | None = None,
    torch_min: str | None = None,
) -> str:
    """e.g. legacy-dev-torch2.14.1-cu130-gcc12; with ``torch_min`` (a stable-ABI binding)
    legacy-dev-torch2.14.1-stable2.11-cu130-gcc12."""
    parts = [group_token(group, archs), kernel_set_token(kernel_set), "torch" + torch_public_version(torch_version)]
    if torch_min:
        parts.append("stable" + torch_min)
    parts += ["cu" + cuda_digits(cuda_version), compiler_token(compiler_id, compiler_version)]
    return "-".join(parts)


def build_dir(
    build_root: Path,
    group: str,
    kernel_set: str,
    tc: Toolchain,
    archs: list[int] | None = None,
    torch_min: str | None = None,
) -> Path:
    """build_root / :func:`build_dir_name` for a group and kernel set built with toolchain `tc`
    (``torch_min``: a stable-ABI binding for torch >= it, None for the exact one)."""
    name = build_dir_name(
        group, kernel_set, tc.torch_version, tc.cuda_version, tc.compiler_id, tc.compiler_version, archs, torch_min
    )
    return build_root / name
