"""The local version label of a flash_attn wheel: the one definition of its spelling.

``cu<CUDA major><minor>torch<torch version>cxx11abi<true|false>.<group>``, lowercase, e.g.
``cu130torch2.14.1cxx11abitrue.legacy``. The runtime uses it to name the wheel to install
(:mod:`flash_attn._compat`); the release tooling (``release.tagging``, ``release.matrix``) loads
this file by path, so it imports nothing from the package and nothing outside the standard
library.
"""

from __future__ import annotations


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


def local_label(cuda_version: str, torch_version: str, cxx11_abi: bool, group: str) -> str:
    """The label of a wheel built with CUDA ``cuda_version`` ("13.0" or "13.0.88") against torch
    ``torch_version`` (its own local label is dropped), C++11 ABI flag ``cxx11_abi``, for ``group``.

    Raises:
        ValueError: ``cuda_version`` has no numeric major.minor.
    """
    tag = cuda_tag(cuda_version)
    if tag is None:
        raise ValueError(f"CUDA version {cuda_version!r} has no major.minor")
    return f"{tag}torch{public_version(torch_version)}cxx11abi{'true' if cxx11_abi else 'false'}.{group}".lower()
