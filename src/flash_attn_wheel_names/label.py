"""The local version label of a flash_attn wheel: the one definition of its spelling.

Two builds (the build info's ``torch_abi``; a build info without it is ``exact``, as every wheel
written before the field existed):

- ``exact`` (torch's C++ API, one wheel per torch release):
  ``cu<CUDA major><minor>torch<torch version>cxx11abi<true|false>.<group>``, e.g.
  ``cu130torch2.14.1cxx11abitrue.legacy.rev1``;
- ``stable`` (torch's stable ABI only, one wheel for every torch >= its minimum):
  ``cu<CUDA major><minor>torchstable<minimum torch>.<group>``, e.g. ``cu130torchstable2.11.legacy.rev1``
  (no C++11 ABI flag: the stable ABI passes no libstdc++ type between torch and the library).

Both end in this project's revision of the upstream release, ``rev<REVISION>``
(``cu130torch2.14.1cxx11abitrue.legacy.rev1``): the public version is upstream's own
(``flash_attn/_version.py``), so the revision is what tells two releases of this project apart.

Lowercase, PEP 440 normal form; a wheel of any kernel set but ``release`` gets the set's
name as one more segment (``...legacy.rev1.ci``), so a dry-run wheel never carries a release
wheel's name. The runtime uses it to name the wheel to install (:mod:`flash_attn._compat`), and the
release tooling to tag wheels and plan their names (``release.compile.tagging``, ``release.plan.matrix``):
both import this module, so it imports nothing outside the standard library.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# This project's revision of the upstream release named by flash_attn/_version.py: raised by one
# for every release of this project made on the same upstream release, back to 1 when the pin moves.
REVISION = 1
RELEASE_KERNEL_SET = "release"  # the only kernel set whose label has no kernel-set segment
TORCH_ABI_EXACT = "exact"  # build info "torch_abi" of the per-torch binding (and of every older build info)
TORCH_ABI_STABLE = "stable"  # build info "torch_abi" of the stable-ABI binding
TORCH_ABIS = (TORCH_ABI_EXACT, TORCH_ABI_STABLE)
_SEGMENT_RE = re.compile(r"^[a-z0-9]+$")  # one PEP 440 local segment, already in normal form
_MIN_RE = re.compile(r"^[0-9]+\.[0-9]+$")  # a minimum torch release: major.minor, e.g. 2.11


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


def torch_abi(info: Mapping[str, Any]) -> str:
    """The torch ABI of a build info: its ``torch_abi`` (``"exact"`` or ``"stable"``), ``"exact"``
    when the field is absent or null (a build info written before it existed).

    Raises:
        ValueError: ``torch_abi`` is another value.
    """
    value = info.get("torch_abi") or TORCH_ABI_EXACT
    if value not in TORCH_ABIS:
        raise ValueError(f"torch_abi {value!r} is not one of {', '.join(TORCH_ABIS)}")
    return value


def torch_requirement(info: Mapping[str, Any]) -> str | None:
    """The ``Requires-Dist`` torch requirement of a build info's wheel: ``torch>=<torch_min>`` for a
    stable-ABI build (no upper bound: the stable ABI is meant to load in every later torch), None for
    an exact build (its metadata keeps pyproject.toml's plain ``torch``; the import check names the
    exact torch).

    Raises:
        ValueError: a stable build info without a ``torch_min`` such as ``"2.11"``.
    """
    if torch_abi(info) != TORCH_ABI_STABLE:
        return None
    torch_min = info.get("torch_min")
    if not isinstance(torch_min, str) or not _MIN_RE.match(torch_min):
        raise ValueError(f"a stable-ABI build info needs torch_min such as '2.11', found {torch_min!r}")
    return f"torch>={torch_min}"


def local_label(
    cuda_version: str,
    torch_version: str | None,
    cxx11_abi: bool,
    group: str,
    kernel_set: str = RELEASE_KERNEL_SET,
    *,
    torch_abi: str = TORCH_ABI_EXACT,
    torch_min: str | None = None,
) -> str:
    """The label of a wheel built with CUDA ``cuda_version`` ("13.0" or "13.0.88") for ``group``
    and ``kernel_set`` (release, dev, ci, custom; added as a last segment unless it is release),
    followed by ``rev<REVISION>`` before the kernel-set segment.

    ``torch_abi="exact"``: against torch ``torch_version`` (its own local label is dropped) with
    C++11 ABI flag ``cxx11_abi``. ``torch_abi="stable"``: for every torch >= ``torch_min``
    (``"2.11"``); ``torch_version`` and ``cxx11_abi`` are not part of the label then.

    Raises:
        ValueError: ``cuda_version`` has no numeric major.minor, ``group``/``kernel_set`` is not
            one lowercase alphanumeric segment, ``torch_abi`` is unknown, or a stable label has no
            ``torch_min`` of the form ``<major>.<minor>``.
    """
    tag = cuda_tag(cuda_version)
    if tag is None:
        raise ValueError(f"CUDA version {cuda_version!r} has no major.minor")
    for what, value in (("arch group", group), ("kernel set", kernel_set)):
        if not _SEGMENT_RE.match(value or ""):
            raise ValueError(f"{what} {value!r} is not a lowercase alphanumeric label segment")
    if torch_abi == TORCH_ABI_STABLE:
        if not _MIN_RE.match(torch_min or ""):
            raise ValueError(f"a stable-ABI label needs the minimum torch as <major>.<minor>, got {torch_min!r}")
        label = f"{tag}torchstable{torch_min}.{group}"
    elif torch_abi == TORCH_ABI_EXACT:
        label = f"{tag}torch{public_version(torch_version or '')}cxx11abi{'true' if cxx11_abi else 'false'}.{group}"
    else:
        raise ValueError(f"torch ABI {torch_abi!r} is not one of {', '.join(TORCH_ABIS)}")
    label = f"{label.lower()}.rev{REVISION}"
    return label if kernel_set == RELEASE_KERNEL_SET else f"{label}.{kernel_set}"


def label_of(info: Mapping[str, Any], group: str | None = None) -> str:
    """The label of the wheel a build info describes, for ``group`` (default: its own): the one way a
    build info becomes a :func:`local_label`, used by the runtime (``flash_attn._build_info.local_label``,
    which names the other group's wheel) and the release tooling (``release.compile.tagging.local_label``).

    The CUDA is the build's toolkit (``cuda_version``), else torch's (``torch_cuda_version``); a
    missing ``cxx11_abi`` is true and a missing ``kernel_set`` is release (the release tooling
    refuses a build info without them before asking). Raises KeyError without ``torch_version`` or
    ``group``, ValueError as :func:`local_label` does.
    """
    group = group or info["group"]
    cuda = info.get("cuda_version") if cuda_tag(info.get("cuda_version")) else info.get("torch_cuda_version")
    return local_label(
        cuda,
        info["torch_version"],
        bool(info.get("cxx11_abi", True)),
        group,
        str(info.get("kernel_set") or RELEASE_KERNEL_SET),
        torch_abi=torch_abi(info),
        torch_min=info.get("torch_min"),
    )


def swap_group(label: str, own: str, group: str) -> str | None:
    """``label`` with its arch-group segment ``own`` (the one right before ``rev<REVISION>``)
    replaced by ``group``: ``cu130torch2.14.1cxx11abitrue.legacy.rev1.ci`` -> ``...blackwell.rev1.ci``.
    None when the label has no such segment (a label of another revision or spelling)."""
    segments = label.split(".")
    for i in range(len(segments) - 1):
        if segments[i] == own and segments[i + 1] == f"rev{REVISION}":
            return ".".join(segments[:i] + [group] + segments[i + 1 :])
    return None
