"""Build options of the wheel sessions: command-line flags, environment variables, CMake defines.

Every CMake option of the build (cmake/FlashAttnOptions.cmake, cmake/FlashAttnDeltas.cmake) can
be given as a flag after ``--`` or as the environment variable of the same name; the flag wins.
The resolved options are passed to CMake as ``-C cmake.define.NAME=VALUE`` on every build, so a
reused build directory never keeps a stale value in its cache (a CMake cache variable ignores
the environment once it is set).

:func:`parse` turns an argument list into :class:`BuildOptions`; :func:`BuildOptions.validate`
checks everything that can be checked before anything is built (group, archs, kernel set,
output folder) and raises :class:`~release.errors.ReleaseError` with what to do next.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from . import _paths, manifest
from .errors import ReleaseError

_MANIFEST = manifest.load()
_OPTIONS = _MANIFEST["options"]
GROUPS = tuple(manifest.arch_groups(_MANIFEST))
FATBIN_MODES = tuple(_OPTIONS["FLASH_ATTN_FATBIN_COMPRESSION"]["choices"])
MIN_SM = int(_MANIFEST["archs"]["min_sm"])
DEFAULT_KERNEL_SET = _OPTIONS["FLASH_ATTN_KERNEL_SET"]["default"]
_SDIST = f"flash_attn-{_MANIFEST['upstream']['version']}.tar.gz"

# (CLI dest, CMake/env name, help) of the pass-through options; None means "not given".
# Defaults are the manifest's (options.<name>.default), which CMake applies.
PASS_THROUGH = tuple(
    (dest, name, text.format(default=_OPTIONS[name]["default"]))
    for dest, name, text in (
        ("fatbin_compression", "FLASH_ATTN_FATBIN_COMPRESSION", "nvcc --compress-mode (default {default})"),
        ("source_dir", "FLASH_ATTN_SOURCE_DIR", "local upstream/fork tree instead of the pinned sdist"),
        ("sdist", "FLASH_ATTN_SDIST", f"already-downloaded {_SDIST} (hash-checked)"),
        ("cutlass_dir", "FLASH_ATTN_CUTLASS_DIR", "CUTLASS include directory"),
        ("apply_deltas", "FLASH_ATTN_APPLY_DELTAS", "ON/OFF: apply the kernel deltas A-1, A-2 (default {default})"),
        ("rescale_threshold", "FLASH_ATTN_RESCALE_THRESHOLD", "A-1 threshold in log2 units (default {default})"),
        ("packed_fma", "FLASH_ATTN_PACKED_FMA", "ON/OFF: A-2 packed FMA on sm_100+ (default {default})"),
    )
)


def parse_archs(text: str) -> list[int]:
    """SM numbers from "80;90", "80,90", "8.0 9.0" or "sm_80": sorted, without duplicates."""
    archs = set()
    for entry in filter(None, re.split(r"[;,\s]+", text.strip())):
        m = re.fullmatch(r"(?:sm_)?(\d+)|(\d+)\.(\d)", entry)
        if not m:
            raise ReleaseError(
                f"'{entry}' in --cuda-archs is not an SM number. Write it as 80, 8.0 or sm_80 "
                "(several: --cuda-archs 80,90); suffixes such as 'a'/'f' are chosen by the build."
            )
        sm = int(m.group(1)) if m.group(1) else int(m.group(2)) * 10 + int(m.group(3))
        if sm < MIN_SM:
            raise ReleaseError(f"sm_{sm} in --cuda-archs: FlashAttention-2 needs sm_{MIN_SM} or newer (Ampere).")
        archs.add(sm)
    return sorted(archs)


def _on_off(value: str | None, what: str) -> str | None:
    if value is None:
        return None
    v = value.strip().upper()
    if v in ("1", "ON", "TRUE", "YES", "Y"):
        return "ON"
    if v in ("0", "OFF", "FALSE", "NO", "N"):
        return "OFF"
    raise ReleaseError(f"{what}='{value}' is not a boolean; use ON or OFF.")


@dataclass
class BuildOptions:
    """Everything one wheel build needs to know besides the toolchain."""

    group: str
    kernel_set: str = DEFAULT_KERNEL_SET
    cuda_archs: list[int] = field(default_factory=list)
    torch_version: str | None = None
    out_dir: Path = _paths.DEFAULT_WHEELHOUSE
    build_root: Path = _paths.DEFAULT_BUILD_ROOT
    jobs: int | None = None
    passthrough: dict[str, str] = field(default_factory=dict)  # CMake name -> value
    smoke: bool = True
    smoke_deps: bool = True
    verbose: bool = False

    def validate(self, check_out: bool = True) -> tuple[str, list]:
        """Check the options before building; returns kernel_set.resolve(self.kernel_set).

        Raises ReleaseError for an unknown group, a custom group without archs (or archs for a
        fixed group), an unknown kernel set, a bad job count or fatbin mode, and an output
        folder that already holds a flash_attn wheel of another version.
        """
        if self.group not in GROUPS:
            raise ReleaseError(
                f"unknown arch group '{self.group}'. Valid groups: {', '.join(GROUPS)} "
                "(nox -s wheel_blackwell, wheel_legacy, or wheel_custom -- --cuda-archs 80,90)."
            )
        if self.group == "custom" and not self.cuda_archs:
            raise ReleaseError(
                "the custom arch group needs --cuda-archs, e.g. nox -s wheel_custom -- --cuda-archs 80,90"
            )
        if self.group != "custom" and self.cuda_archs:
            raise ReleaseError(
                f"--cuda-archs applies to the custom group only; the {self.group} group has fixed archs. "
                f"Use nox -s wheel_custom -- --cuda-archs {','.join(map(str, self.cuda_archs))}"
            )
        if self.jobs is not None and self.jobs < 1:
            raise ReleaseError(f"--jobs {self.jobs}: give a positive number of parallel nvcc jobs, or leave it out")
        mode = self.passthrough.get("FLASH_ATTN_FATBIN_COMPRESSION")
        if mode is not None and mode not in FATBIN_MODES:
            raise ReleaseError(f"fatbin compression '{mode}' is not one of {', '.join(FATBIN_MODES)}")
        ks = _paths.kernel_set()
        try:
            resolved = ks.resolve(self.kernel_set)
        except ks.KernelSetError as e:
            raise ReleaseError(f"kernel set: {e}") from None
        if check_out:
            check_out_dir(self.out_dir, _paths.package_version())
        return resolved

    def cmake_defines(self) -> dict[str, str]:
        """The -D values of this build (all of them, so a reused cache never keeps a stale one)."""
        defines = {
            "FLASH_ATTN_ARCH_GROUP": self.group,
            "FLASH_ATTN_CUDA_ARCHS": ";".join(map(str, self.cuda_archs)),
            "FLASH_ATTN_KERNEL_SET": self.kernel_set,
            "FLASH_ATTN_JOBS": str(self.jobs) if self.jobs else "",
        }
        defines.update(self.passthrough)
        return defines


def check_out_dir(out_dir: Path, version: str) -> None:
    """Refuse an output folder that holds flash_attn wheels of another (public) version."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename
    from packaging.version import Version

    if not out_dir.exists():
        return
    if not out_dir.is_dir():
        raise ReleaseError(f"output folder {out_dir} exists and is not a folder; pass another --out")
    ours = Version(version).public
    for whl in sorted(out_dir.glob("*.whl")):
        try:
            name, ver, _, _ = parse_wheel_filename(whl.name)
        except InvalidWheelFilename:
            continue
        if name == "flash-attn" and ver.public != ours:
            raise ReleaseError(
                f"output folder {out_dir} already holds {whl.name} (version {ver.public}); this build makes "
                f"{ours}. Move the old wheels away or pass another --out, so a release folder holds one version."
            )


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The wheel sessions' flags (the arch group is the caller's)."""
    named = ", ".join(_MANIFEST["kernels"]["sets"])
    p.add_argument(
        "--kernel-set", help=f"{named} (default {DEFAULT_KERNEL_SET}), or unit names/patterns (FLASH_ATTN_KERNEL_SET)"
    )
    p.add_argument("--cuda-archs", help="SM list for the custom group, e.g. 80,90 (FLASH_ATTN_CUDA_ARCHS)")
    p.add_argument("--torch-version", help="torch to build against; installed into the session if it differs")
    p.add_argument("--out", type=Path, help="output folder of the tagged wheel (default wheelhouse/)")
    p.add_argument("--build-root", type=Path, help="parent of the keyed build directories (default build/)")
    p.add_argument("--jobs", type=int, help="parallel nvcc jobs (FLASH_ATTN_JOBS; default from cores and memory)")
    for dest, name, text in PASS_THROUGH:
        p.add_argument("--" + dest.replace("_", "-"), dest=dest, help=f"{text} ({name})")
    p.add_argument("--no-smoke", dest="smoke", action="store_false", help="skip the smoke test (not for releases)")
    p.add_argument(
        "--smoke-no-deps", dest="smoke_deps", action="store_false", help="smoke test: pip install --no-deps (offline)"
    )
    p.add_argument("-v", "--verbose", action="store_true", help="show every line of the build output")


def from_namespace(ns: argparse.Namespace, env: Mapping[str, str] | None = None) -> BuildOptions:
    """BuildOptions from parsed flags; unset flags fall back to the environment variables."""
    env = os.environ if env is None else env

    def pick(flag_value, name):
        if flag_value not in (None, ""):
            return str(flag_value)
        value = env.get(name, "")
        return value if value != "" else None

    archs_text = pick(ns.cuda_archs, "FLASH_ATTN_CUDA_ARCHS")
    jobs_text = pick(ns.jobs, "FLASH_ATTN_JOBS")
    try:
        jobs = int(jobs_text) if jobs_text is not None else None
    except ValueError:
        raise ReleaseError(f"FLASH_ATTN_JOBS='{jobs_text}' is not a number of parallel jobs") from None
    passthrough = {}
    for dest, name, _ in PASS_THROUGH:
        value = pick(getattr(ns, dest), name)
        if value is None:
            continue
        if name in ("FLASH_ATTN_APPLY_DELTAS", "FLASH_ATTN_PACKED_FMA"):
            value = _on_off(value, name)
        elif name in ("FLASH_ATTN_SOURCE_DIR", "FLASH_ATTN_SDIST", "FLASH_ATTN_CUTLASS_DIR"):
            value = str(Path(value).expanduser().resolve())
        passthrough[name] = value
    return BuildOptions(
        group=ns.group,
        kernel_set=pick(ns.kernel_set, "FLASH_ATTN_KERNEL_SET") or DEFAULT_KERNEL_SET,
        cuda_archs=parse_archs(archs_text) if archs_text else [],
        torch_version=ns.torch_version,
        out_dir=(ns.out or _paths.DEFAULT_WHEELHOUSE).resolve(),
        build_root=(ns.build_root or _paths.DEFAULT_BUILD_ROOT).resolve(),
        jobs=jobs,
        passthrough=passthrough,
        smoke=ns.smoke,
        smoke_deps=ns.smoke_deps,
        verbose=ns.verbose,
    )
