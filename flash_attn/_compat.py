"""Decisions: can this library be loaded with the running torch, and can it run on a given GPU?

All functions are pure: they take the build info dict, a compute capability tuple, a device name
and version strings, and return a verdict or a message. :mod:`flash_attn._loader` feeds them the
live values; the unit tests feed them made-up ones.

GPU rule (what :func:`check_device` decides), in this order:

1. **SASS.** A SASS target ``sm_XY`` runs on every GPU with the same major and a minor >= Y
   (CUDA's binary compatibility within a major); like the CUDA runtime, the newest such target
   is used: compute capability 8.6 and 8.7 run ``sm_80``, 8.9 runs ``sm_89``, 10.3 runs
   ``sm_100``, 12.1 runs ``sm_121``.
   Arch-specific targets (``sm_90a``) run only on exactly that capability; family targets
   (``sm_100f``) follow the same-major rule.
2. **Another arch group.** Otherwise, when one of the project's arch groups has SASS for the GPU
   (the build info's ``arch_groups``: every fixed group's SASS, written by the build from its
   manifest), the GPU is refused and the error names that group's wheel: a ``.legacy`` wheel on
   an RTX 5090 (12.0) says to install the ``.blackwell`` one. The PTX of
   the wheel would JIT-compile there, but it would recompile every kernel of the library at
   first use, so the matching wheel is the answer.
3. **PTX.** Otherwise, when the build embeds PTX for ``compute_<ptx_arch>`` and the GPU's
   capability is >= ``ptx_arch``, the GPU runs that PTX, JIT-compiled by the driver at first use
   (slow once, then cached). This is the path for GPUs newer than every arch group.
4. Otherwise the GPU is refused: capability below the build info's ``min_arch`` (8.0:
   FlashAttention-2 needs Ampere or newer), or
   an architecture no group builds (e.g. Thor, sm_110) with no usable PTX.

torch rule (what :func:`check_torch` decides), by the build info's ``torch_abi``:

- ``exact`` (also a build info without the field): the library links against torch's C++ API,
  so the running torch must have the same release (``2.14.1``; the local label such as
  ``+cu130`` may differ), the same CUDA major as the torch it was built against, and the same
  C++11 ABI flag.
- ``stable``: the library uses torch's stable ABI only (built for ``TORCH_TARGET_VERSION`` =
  ``torch_min``), so any torch release >= ``torch_min`` loads it, with the same CUDA major as the
  torch it was built against; no C++11 ABI flag (no libstdc++ type crosses the stable ABI).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flash_attn_wheel_names import label as _label

from . import _build_info as bi

__all__ = [
    "DeviceVerdict",
    "group_sass",
    "sass_runs_on",
    "ptx_runs_on",
    "group_for_capability",
    "wheel_name",
    "check_device",
    "check_torch",
    "release_tuple",
]


def group_sass(build_info: Mapping[str, Any]) -> dict[str, list[bi.SassTarget]]:
    """SASS of the project's fixed arch groups, from the build info's ``arch_groups``.

    ``{"legacy": ["sm_80", ...], ...}`` -> ``{"legacy": [SassTarget(8, 0, ""), ...], ...}``; empty
    for a build info without it (written before the key existed).
    """
    groups = build_info.get("arch_groups") or {}
    return {name: bi.sass_targets({"sass": sass}) for name, sass in groups.items()}


def _min_capability(build_info: Mapping[str, Any]) -> tuple[int, int]:
    """Oldest compute capability FlashAttention-2 runs on (build info ``min_arch``, 80 -> (8, 0))."""
    return bi.ptx_capability({"ptx_arch": build_info.get("min_arch", 80)}) or (8, 0)


@dataclass(frozen=True)
class DeviceVerdict:
    """Whether a library can run on a GPU, and how.

    Attributes:
        ok: True when the kernels can run.
        route: ``"sass"`` (native code), ``"ptx"`` (JIT-compiled from PTX) or ``"none"``.
        target: the SASS (``"sm_80"``) or PTX (``"compute_90"``) target used; ``""`` when none.
        message: one sentence for people; for a refusal, the full error text.
        suggested_group: for a refusal, the arch group whose wheel would run; else None.
    """

    ok: bool
    route: str
    target: str
    message: str
    suggested_group: str | None = None


def _cc(capability: tuple[int, int]) -> str:
    return f"{capability[0]}.{capability[1]}"


def _sm(capability: tuple[int, int]) -> str:
    return f"sm_{capability[0]}{capability[1]}"


def sass_runs_on(target: bi.SassTarget, capability: tuple[int, int]) -> bool:
    """True when SASS ``target`` runs on a GPU of ``capability`` (rule 1 of the module doc)."""
    major, minor = capability
    if target.variant == "a":
        return (target.major, target.minor) == (major, minor)
    return target.major == major and target.minor <= minor


def ptx_runs_on(ptx: tuple[int, int] | None, capability: tuple[int, int]) -> bool:
    """True when PTX for compute capability ``ptx`` can be JIT-compiled for ``capability``."""
    return ptx is not None and tuple(capability) >= tuple(ptx)


def group_for_capability(build_info: Mapping[str, Any], capability: tuple[int, int]) -> str | None:
    """The project's arch group with SASS for ``capability`` (e.g. ``"legacy"``), or None.

    The groups are the build info's ``arch_groups`` (see :func:`group_sass`).
    """
    for group, targets in group_sass(build_info).items():
        if any(sass_runs_on(target, capability) for target in targets):
            return group
    return None


def wheel_name(build_info: Mapping[str, Any], group: str, dist_version: str | None = None) -> str:
    """Requirement string of this release for ``group``, e.g.
    ``flash_attn==2.8.3.post2+cu130torch2.14.1cxx11abitrue.blackwell.rev1``.

    ``dist_version`` (the installed distribution's version) is preferred when its local label has
    the build's group right before the revision segment (``...legacy.rev1[.ci]``): only the group
    is swapped, the rest stays exact.
    """
    own = str(build_info.get("group", ""))
    if dist_version and "+" in dist_version:
        public, local = dist_version.split("+", 1)
        swapped = _label.swap_group(local, own, group)
        if swapped is not None:
            return f"flash_attn=={public}+{swapped}"
    return f"flash_attn=={bi.public_version(str(build_info['version']))}+{bi.local_label(build_info, group)}"


def _describe_build(build_info: Mapping[str, Any]) -> str:
    sass = ", ".join(str(t) for t in bi.sass_targets(build_info)) or "none"
    ptx = bi.ptx_capability(build_info)
    ptx_text = f"compute_{ptx[0]}{ptx[1]}" if ptx else "none"
    return f"arch group '{build_info.get('group')}': SASS {sass}; PTX {ptx_text}"


def check_device(
    build_info: Mapping[str, Any],
    capability: tuple[int, int],
    device_name: str,
    *,
    device_index: int | None = None,
    dist_version: str | None = None,
) -> DeviceVerdict:
    """Decide whether the library described by ``build_info`` runs on a GPU.

    Args:
        build_info: the library's build info (keys ``group``, ``sass``, ``ptx_arch``, ``version``...).
        capability: the GPU's compute capability ``(major, minor)``, e.g. ``(8, 6)``.
        device_name: the GPU's name, e.g. ``"NVIDIA A10"``; used in messages only.
        device_index: CUDA device index, used in messages only.
        dist_version: installed distribution version (with local label), used to name the wheel.

    Returns:
        A :class:`DeviceVerdict`; ``message`` is the error text when ``ok`` is False.
    """
    capability = (int(capability[0]), int(capability[1]))
    gpu = f"GPU {device_index} " if device_index is not None else "GPU "
    gpu += f"'{device_name}' (compute capability {_cc(capability)}, {_sm(capability)})"
    release = dist_version or str(build_info.get("version"))
    build = _describe_build(build_info)

    runnable = [target for target in bi.sass_targets(build_info) if sass_runs_on(target, capability)]
    if runnable:
        # like the CUDA runtime: the newest SASS that runs (8.9 takes sm_89 over sm_80)
        target = max(runnable, key=lambda t: (t.minor, t.variant != ""))
        how = "native" if (target.major, target.minor) == capability else "binary compatible within the major"
        return DeviceVerdict(True, "sass", str(target), f"{gpu} runs the {target} SASS ({how})")

    own_group = str(build_info.get("group"))
    other = group_for_capability(build_info, capability)
    if other is not None and other != own_group:
        wheel = wheel_name(build_info, other, dist_version)
        other_sass = ", ".join(str(target) for target in group_sass(build_info)[other])
        message = (
            f"flash_attn {release} ({build}) cannot run on {gpu}: {_sm(capability)} is covered by the "
            f"'{other}' arch group (SASS {other_sass}). Install the .{other} wheel of this release instead: "
            f"pip install '{wheel}' (same flash_attn, CUDA and torch; only the arch group differs)."
        )
        return DeviceVerdict(False, "none", "", message, other)

    ptx = bi.ptx_capability(build_info)
    if ptx_runs_on(ptx, capability):
        target = f"compute_{ptx[0]}{ptx[1]}"
        return DeviceVerdict(
            True,
            "ptx",
            target,
            f"{gpu} has no SASS in this build; it runs the {target} PTX, JIT-compiled by the driver at "
            "first use (slow once, then cached)",
        )

    minimum = _min_capability(build_info)
    if capability < minimum:
        reason = (
            f"FlashAttention-2 kernels need compute capability {_cc(minimum)} (Ampere) or newer; no flash_attn wheel "
            "runs on this GPU (use torch.nn.functional.scaled_dot_product_attention instead)"
        )
    elif other is not None:  # own group should have covered it: a custom or inconsistent build
        reason = (
            f"this build lacks {_sm(capability)} although its group '{own_group}' should hold it; rebuild "
            f"flash_attn for {_sm(capability)} or install {wheel_name(build_info, other, dist_version)}"
        )
    else:
        reason = (
            f"no arch group of this project has SASS for {_sm(capability)} and this build's PTX cannot be "
            f"JIT-compiled for it; build flash_attn from source for {_sm(capability)} (a 'custom' arch group)"
        )
    return DeviceVerdict(False, "none", "", f"flash_attn {release} ({build}) cannot run on {gpu}: {reason}.", other)


def check_torch(
    build_info: Mapping[str, Any],
    torch_version: str,
    torch_cuda_version: str | None,
    cxx11_abi: bool | None = None,
    *,
    dist_version: str | None = None,
) -> str | None:
    """Compare the running torch with the torch the library was built against.

    Args:
        build_info: the library's build info (``torch_version``, ``torch_cuda_version``, ``cxx11_abi``).
        torch_version: ``torch.__version__`` of the running torch, e.g. ``"2.14.1+cu130"``.
        torch_cuda_version: ``torch.version.cuda`` (``"13.0"``), None for a CPU-only or ROCm torch.
        cxx11_abi: ``torch.compiled_with_cxx11_abi()``; None skips that comparison.
        dist_version: installed distribution version, named in the message.

    Returns:
        None when they match, else the error message (naming both versions and what to install).
    """
    if bi.is_stable(build_info):
        return _check_torch_range(build_info, torch_version, torch_cuda_version, dist_version=dist_version)
    built = str(build_info["torch_version"])
    built_cuda = str(build_info.get("torch_cuda_version") or "")
    problems = []
    if bi.public_version(built) != bi.public_version(torch_version):
        problems.append(f"torch {bi.public_version(torch_version)} is not torch {bi.public_version(built)}")
    if torch_cuda_version is None:
        problems.append("the running torch has no CUDA support (a CPU-only or ROCm build)")
    elif bi.cuda_major(built_cuda) is not None and bi.cuda_major(built_cuda) != bi.cuda_major(torch_cuda_version):
        problems.append(f"CUDA {torch_cuda_version} has another major than CUDA {built_cuda}")
    built_abi = build_info.get("cxx11_abi")
    if cxx11_abi is not None and isinstance(built_abi, bool) and built_abi != bool(cxx11_abi):
        problems.append(
            f"the C++11 ABI flag differs (built {str(built_abi).lower()}, running {str(cxx11_abi).lower()})"
        )
    if not problems:
        return None
    release = dist_version or str(build_info.get("version"))
    running_cuda = torch_cuda_version or "none"
    tag = bi.cuda_tag(built_cuda)
    index = f" --index-url https://download.pytorch.org/whl/{tag}" if tag else ""
    running_tag = bi.cuda_tag(torch_cuda_version) or "cu?"
    return (
        f"flash_attn {release} was built against torch {built} (CUDA {built_cuda or '?'}), but torch "
        f"{torch_version} (CUDA {running_cuda}) is running: {'; '.join(problems)}. The native library "
        "uses torch's C++ API, which changes between torch releases, so it was not loaded. Install the "
        f"torch it was built for (pip install torch=={bi.public_version(built)}{index}) or the flash_attn "
        f"wheel built for your torch (local version label {running_tag}torch{bi.public_version(torch_version)}"
        f"...{build_info.get('group')})."
    )


def release_tuple(version: str) -> tuple[int, ...]:
    """The numeric release of a torch version: ``"2.14.1+cu130"`` -> (2, 14, 1), ``"2.16.0.dev20261201"``
    -> (2, 16, 0), ``"2.11"`` -> (2, 11); the leading run of dot-separated integers."""
    parts = []
    for piece in bi.public_version(version).split("."):
        digits = "".join(itertools.takewhile(str.isdigit, piece))
        if not digits:
            break
        parts.append(int(digits))
        if len(digits) != len(piece):  # "0a0", "0rc1": a pre-release of this release
            break
    return tuple(parts)


def _check_torch_range(
    build_info: Mapping[str, Any], torch_version: str, torch_cuda_version: str | None, *, dist_version: str | None
) -> str | None:
    """:func:`check_torch` for a stable-ABI build: torch >= ``torch_min`` and the same CUDA major."""
    torch_min = str(build_info.get("torch_min") or "")
    built_cuda = str(build_info.get("torch_cuda_version") or build_info.get("cuda_version") or "")
    running = bi.public_version(torch_version)
    problems = []
    if release_tuple(torch_version) < release_tuple(torch_min):
        problems.append(f"torch {running} is older than {torch_min}")
    if torch_cuda_version is None:
        problems.append("the running torch has no CUDA support (a CPU-only or ROCm build)")
    elif bi.cuda_major(built_cuda) is not None and bi.cuda_major(built_cuda) != bi.cuda_major(torch_cuda_version):
        problems.append(f"CUDA {torch_cuda_version} has another major than CUDA {built_cuda}")
    if not problems:
        return None
    release = dist_version or str(build_info.get("version"))
    major = bi.cuda_major(built_cuda)
    tag = bi.cuda_tag(built_cuda)
    index = f" --index-url https://download.pytorch.org/whl/{tag}" if tag else ""
    running_tag = bi.cuda_tag(torch_cuda_version) or "cu?"
    return (
        f"flash_attn {release} is a stable-ABI build for torch >= {torch_min} with CUDA {major if major else '?'}.x "
        f"(built with torch {build_info.get('torch_version')}, CUDA {built_cuda or '?'}), but torch {torch_version} "
        f"(CUDA {torch_cuda_version or 'none'}) is running: {'; '.join(problems)}. The native library uses "
        "torch's stable ABI, which older torch releases and other CUDA majors do not provide, so it was not "
        f"loaded. Install a torch in its range (pip install 'torch>={torch_min}'{index}) or the per-torch "
        f"flash_attn wheel built for your torch (local version label {running_tag}torch{running}"
        f"...{build_info.get('group')})."
    )
