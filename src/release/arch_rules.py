"""The arch rules of cmake/FlashAttnArchGroups.cmake, read from that file, for checks before a build.

The CMake module is the one definition of the arch groups and of which SM each CUDA toolkit can
build (its ``_flash_attn_arch_group_data`` macro). The wheel sessions must refuse a bad arch
before they create a build folder, so this module reads the ``set(FLASH_ATTN_...)`` lines of
that macro instead of keeping a second table, and applies the refusals of
``flash_attn_arch_group_targets`` in the same order with the same wording (only the "what to do"
names the session's flag instead of CMake's ARCHS). CMake keeps its own checks for direct CMake
users.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from . import _paths
from .errors import ReleaseError

ARCH_GROUPS_CMAKE = _paths.REPO_ROOT / "cmake" / "FlashAttnArchGroups.cmake"
_SET_RE = re.compile(r"^\s*set\((FLASH_ATTN_\w+)\s+(.*)\)\s*$")


@dataclass(frozen=True)
class ArchRules:
    """The data of the CMake macro: SM numbers are ints, CUDA versions "x.y" strings."""

    groups: dict[str, list[int]]  # fixed groups only: legacy, blackwell
    known: list[int]
    min_cuda: dict[int, str]
    names: dict[int, str]
    min_arch: int
    thor: list[int]


def _values(text: str) -> list[str]:
    return shlex.split(text.strip())


@cache
def load(path: Path = ARCH_GROUPS_CMAKE) -> ArchRules:
    """Parse the data macro of `path`; RuntimeError when a value the checks need is missing."""
    found: dict[str, list[str]] = {}
    in_macro = False
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.startswith("macro(_flash_attn_arch_group_data"):
            in_macro = True
        elif in_macro and line.startswith("endmacro("):
            break
        elif in_macro:
            m = _SET_RE.match(line)
            if m:
                found[m.group(1)] = _values(m.group(2))
    try:
        known = [int(v) for v in found["FLASH_ATTN_KNOWN_ARCHS"]]
        return ArchRules(
            groups={
                g: [int(v) for v in found[f"FLASH_ATTN_ARCH_GROUP_{g}"]]
                for g in found["FLASH_ATTN_ARCH_GROUPS"]
                if f"FLASH_ATTN_ARCH_GROUP_{g}" in found
            },
            known=known,
            min_cuda={sm: found[f"FLASH_ATTN_ARCH_MIN_CUDA_{sm}"][0] for sm in known},
            names={sm: found[f"FLASH_ATTN_ARCH_NAME_{sm}"][0] for sm in known},
            min_arch=int(found["FLASH_ATTN_MIN_ARCH"][0]),
            thor=[int(v) for v in found["FLASH_ATTN_THOR_ARCHS"]],
        )
    except (KeyError, IndexError, ValueError) as e:
        raise RuntimeError(f"{path}: the arch data macro lacks {e}; keep its set(FLASH_ATTN_...) lines") from None


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text)[:3])


def group_archs(group: str, archs: list[int] | None = None, rules: ArchRules | None = None) -> list[int]:
    """The SMs a group builds: a fixed group's members, or the given archs for custom (sorted)."""
    rules = rules or load()
    if group == "custom":
        return sorted(set(archs or []))
    return list(rules.groups[group])


def check_archs(
    group: str,
    archs: list[int] | None = None,
    cuda_version: str | None = None,
    flag: str = "--cuda-archs",
    rules: ArchRules | None = None,
) -> list[int]:
    """Refuse what ``flash_attn_arch_group_targets`` refuses; returns the group's SM list.

    Per arch, ascending (the oldest problem is named first): below sm_80, Jetson Thor (101/110),
    not a known arch, and, when `cuda_version` (nvcc's, e.g. "12.8.93") is given, newer than the
    toolkit (sm_100/120 need CUDA 12.8, sm_103/121 need 12.9: the MIN_CUDA table of the module).
    Raises ReleaseError with the CMake module's sentence; the remedy names `flag`.
    """
    rules = rules or load()
    members = group_archs(group, archs, rules)
    for sm in members:
        if sm < rules.min_arch:
            raise ReleaseError(
                f"FlashAttention-2 needs sm_80 or newer (Ampere); sm_{sm} was requested in group {group}. "
                f"Remove it from {flag}."
            )
        if sm in rules.thor:
            raise ReleaseError(
                f"sm_{sm} (Jetson Thor) is not built by this project. sm_101 was renamed sm_110 in CUDA 13, and the "
                "blackwell group targets discrete GPUs (sm_100, sm_120) and GB10 (sm_121), not Thor. "
                f"Remove sm_{sm} from {flag}."
            )
        if sm not in rules.known:
            known = ", ".join(f"sm_{k}" for k in rules.known)
            raise ReleaseError(
                f"sm_{sm} is not an architecture this project builds. Known: {known}. Add it to "
                "FLASH_ATTN_KNOWN_ARCHS in cmake/FlashAttnArchGroups.cmake if it is real."
            )
        need = rules.min_cuda[sm]
        if cuda_version and _version_tuple(cuda_version) < _version_tuple(need):
            where = (
                f"leave sm_{sm} out ({flag})"
                if group == "custom"
                else "build the archs this toolkit supports with nox -s wheel_custom -- --cuda-archs ..."
            )
            raise ReleaseError(
                f"sm_{sm} ({rules.names[sm]}) needs CUDA {need} or newer; this toolkit is CUDA {cuda_version}. "
                f"Install CUDA >= {need} or {where}."
            )
    return members
