"""The local version label of a flash_attn wheel: the one definition of its spelling.

``cu<CUDA major><minor>torch<torch version>cxx11abi<true|false>.<group>``, lowercase, e.g.
``cu130torch2.14.1cxx11abitrue.legacy``; a wheel of any kernel set but ``release`` gets the set's
name as one more segment (``...legacy.ci``), so a dry-run wheel never carries a release wheel's
name. The runtime uses it to name the wheel to install (:mod:`flash_attn._compat`); the release
tooling (``release.tagging``, ``release.matrix``) loads this file by path, so it imports nothing
from the package and nothing outside the standard library.
"""

from __future__ import annotations

import re

RELEASE_KERNEL_SET = "release"  # the only kernel set whose label has no kernel-set segment
_SEGMENT_RE = re.compile(r"^[a-z0-9]+$")  # one PEP 440 local segment, already in normal form


def public_version(version: str) -> str:
    """The version without its local label: ``"2.14.1+cu130"`` -> ``"2.14.1"``."""
    return version.split("+", 1)[0].strip()


def cuda_tag(version: str | None) -> str | None:
    """``"13.0.88"`` -> ``"cu130"``, the tag used in torch's and our local version labels; None if unparsable."""
    if not version:
        return None
    parts = version.strip().split(".")
    if len(parts) < 2 or not parts[0].isdigit() or not parts[1].isdigit():
        return None
    return f"cu{int(parts[0])}{int(parts[1])}"


def local_label(
    cuda_version: str, torch_version: str, cxx11_abi: bool, group: str, kernel_set: str = RELEASE_KERNEL_SET
) -> str:
    """The label of a wheel built with CUDA ``cuda_version`` ("13.0" or "13.0.88") against torch
    ``torch_version`` (its own local label is dropped), C++11 ABI flag ``cxx11_abi``, for ``group``
    and ``kernel_set`` (release, dev, ci, custom; added as a last segment unless it is release).

    Raises:
        ValueError: ``cuda_version`` has no numeric major.minor, or ``group``/``kernel_set`` is not
            one lowercase alphanumeric segment.
    """
    tag = cuda_tag(cuda_version)
    if tag is None:
        raise ValueError(f"CUDA version {cuda_version!r} has no major.minor")
    for what, value in (("arch group", group), ("kernel set", kernel_set)):
        if not _SEGMENT_RE.match(value or ""):
            raise ValueError(f"{what} {value!r} is not a lowercase alphanumeric label segment")
    label = f"{tag}torch{public_version(torch_version)}cxx11abi{'true' if cxx11_abi else 'false'}.{group}".lower()
    return label if kernel_set == RELEASE_KERNEL_SET else f"{label}.{kernel_set}"
