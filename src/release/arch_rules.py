"""The arch rules of build-manifest.json (archs, arch_groups), applied before a build.

The manifest is the one definition of the arch groups and of which SM each CUDA toolkit can
build; cmake/FlashAttnArchGroups.cmake reads it at configure time. The wheel sessions must refuse
a bad arch before they create a build folder, so this module reads the same tables through
:mod:`release.manifest` and applies the refusals of ``flash_attn_arch_group_targets`` in the same
order with the same wording (only the "what to do" names the session's flag instead of CMake's
ARCHS). CMake keeps its own checks for direct CMake users.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from . import manifest
from .errors import ReleaseError


@dataclass(frozen=True)
class ArchRules:
    """The manifest's arch tables: SM numbers are ints, CUDA versions "x.y" strings."""

    groups: dict[str, list[int]]  # fixed groups only: legacy, blackwell
    known: list[int]
    min_cuda: dict[int, str]
    names: dict[int, str]
    min_arch: int
    refused: dict[int, tuple[str, str]]  # SM -> (name, reason), e.g. 110 -> ("Jetson Thor", "sm_101 was ...")

    @property
    def thor(self) -> list[int]:
        """The SMs refused by name (Jetson Thor: 101, 110)."""
        return sorted(self.refused)


def load(data: dict[str, Any] | None = None) -> ArchRules:
    """The rules of `data` (default: manifest.load()); RuntimeError naming the manifest when one is missing."""
    data = data or manifest.load()
    try:
        archs = data["archs"]
        return ArchRules(
            groups={g["name"]: [int(sm) for sm in g["sms"]] for g in data["arch_groups"] if g["sms"] is not None},
            known=[int(a["sm"]) for a in archs["known"]],
            min_cuda={int(a["sm"]): str(a["min_cuda"]) for a in archs["known"]},
            names={int(a["sm"]): str(a["name"]) for a in archs["known"]},
            min_arch=int(archs["min_sm"]),
            refused={int(a["sm"]): (str(a["name"]), str(a["reason"])) for a in archs.get("refused", [])},
        )
    except (KeyError, TypeError, ValueError) as e:
        raise RuntimeError(
            f"{manifest.path()}: the arch tables (archs, arch_groups) lack {e}; see docs/manifest.md"
        ) from None


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text)[:3])


def group_archs(group: str, archs: list[int] | None = None, rules: ArchRules | None = None) -> list[int]:
    """The SMs a group builds: a fixed group's members, or the given archs for custom (sorted)."""
    rules = rules or load()
    if group not in rules.groups:
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

    Per arch, ascending (the oldest problem is named first): below archs.min_sm (80), refused by
    name (archs.refused: Jetson Thor 101/110), not in archs.known, and, when `cuda_version` (nvcc's,
    e.g. "12.8.93") is given, newer than the toolkit (each known SM's min_cuda: sm_100/120 need
    CUDA 12.8, sm_103/121 need 12.9). Raises ReleaseError with the CMake module's sentence; the
    remedy names `flag`.
    """
    rules = rules or load()
    members = group_archs(group, archs, rules)
    for sm in members:
        if sm < rules.min_arch:
            raise ReleaseError(
                f"FlashAttention-2 needs sm_{rules.min_arch} or newer (Ampere); sm_{sm} was requested in group "
                f"{group}. Remove it from {flag}."
            )
        if sm in rules.refused:
            name, reason = rules.refused[sm]
            raise ReleaseError(f"sm_{sm} ({name}) is not built by this project. {reason}. Remove sm_{sm} from {flag}.")
        if sm not in rules.known:
            known = ", ".join(f"sm_{k}" for k in rules.known)
            raise ReleaseError(
                f"sm_{sm} is not an architecture this project builds. Known: {known}. Add it to "
                "archs.known in build-manifest.json if it is real."
            )
        need = rules.min_cuda[sm]
        if cuda_version and _version_tuple(cuda_version) < _version_tuple(need):
            where = (
                f"leave sm_{sm} out ({flag})"
                if group not in rules.groups
                else "build the archs this toolkit supports with nox -s wheel_custom -- --cuda-archs ..."
            )
            raise ReleaseError(
                f"sm_{sm} ({rules.names[sm]}) needs CUDA {need} or newer; this toolkit is CUDA {cuda_version}. "
                f"Install CUDA >= {need} or {where}."
            )
    return members
