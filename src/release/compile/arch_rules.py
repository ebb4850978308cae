"""The arch-group rules, asked of the CMake module that holds them, before a build.

The rules (which groups exist, which SMs a group builds, which SMs this project refuses and which
CUDA toolkit each SM needs) are written once, in cmake/FlashAttnArchGroups.cmake, from the tables
of build-manifest.json (archs, arch_groups). The wheel sessions must refuse a bad group or arch
before they create a build folder, so this module runs those functions through ``cmake -P
cmake/scripts/CheckArchGroup.cmake`` (as :mod:`release.compile.upstream` runs the sdist fetch) and turns
CMake's message into a :class:`~release.errors.ReleaseError`; the remedies name the session's flag
and sessions instead of CMake's ARCHS (the script's ARCHS_FLAG, GROUP_HINT and TOOLKIT_HINT).

The manifest is the one in use (``$FLASH_ATTN_MANIFEST`` or the checkout's, :func:`manifest.path`).
"""

from __future__ import annotations

import re
import shutil
import subprocess

from release import _paths, manifest
from release.errors import ReleaseError

CHECK_SCRIPT = _paths.REPO_ROOT / "cmake" / "scripts" / "CheckArchGroup.cmake"
_ARCHS_PREFIX = "flash_attn-archs="
# The sessions' way to build the custom group (CMake's remedies say GROUP custom ARCHS ...), and what to
# do when a fixed group holds an SM the toolkit cannot build (CMake's own says: leave it out).
_CUSTOM_PREFIX = "nox -s wheel_custom --"
_TOOLKIT_HINT = f"build the archs this toolkit supports with {_CUSTOM_PREFIX} --cuda-archs ..."


def _cmake() -> str:
    cmake = shutil.which("cmake")
    if cmake is None:
        pin = next((s for s in manifest.load()["tool_pins"]["build"] if s.startswith("cmake==")), "cmake")
        raise ReleaseError(
            f"cmake is not on PATH; install it (pip install {pin}, the sessions' pin): the arch rules are "
            "cmake/FlashAttnArchGroups.cmake's"
        )
    return cmake


def cmake_message(stderr: str) -> str:
    """The text of the first ``message(FATAL_ERROR)`` in CMake's `stderr`, on one line, without the
    module's ``flash_attn: `` prefix (CMake indents and wraps it, and puts two blanks after a full stop).
    Falls back to the whole stderr, whitespace collapsed, when no such block is found."""
    m = re.search(r"\(message\):\n(.*?)(?:\nCall Stack|\n\n|\Z)", stderr, re.DOTALL)
    text = " ".join((m.group(1) if m else stderr).split())
    return text.removeprefix("flash_attn: ")


def _run(defines: dict[str, str]) -> list[int]:
    cmd = [_cmake(), f"-DFLASH_ATTN_MANIFEST={manifest.path()}"]
    cmd += [f"-D{name}={value}" for name, value in defines.items()]
    cmd += ["-P", str(CHECK_SCRIPT)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    found = [line[len(_ARCHS_PREFIX) :] for line in r.stdout.splitlines() if line.startswith(_ARCHS_PREFIX)]
    if r.returncode != 0 or not found:
        raise ReleaseError(cmake_message(r.stderr or r.stdout))
    return [int(sm) for sm in found[-1].split(";") if sm]


def parse_archs(text: str, flag: str = "--cuda-archs") -> list[int]:
    """SM numbers from a custom list as the user wrote it ("80;90", "80,90", "8.0 9.0", "sm_80"):
    sorted, without duplicates, [] for a list of separators only. Raises ReleaseError (naming `flag`)
    for an entry that is no SM spelling and for an SM below archs.min_sm; the other rules wait for
    :func:`check_archs`, when the group is known."""
    return _run({"PARSE_ONLY": "ON", "ARCHS": text, "ARCHS_FLAG": flag})


def check_group(group: str, hint: str) -> None:
    """Raise ReleaseError unless `group` is an arch group of the manifest.

    The message is the CMake module's (it names the valid groups) ending in `hint`, what to run
    instead, e.g. the sessions of :func:`sessions_hint` in parentheses.
    """
    _run({"GROUP": group, "GROUP_ONLY": "ON", "GROUP_HINT": hint})


def check_archs(group: str, archs: list[int] | None = None, cuda_version: str | None = None,
                flag: str = "--cuda-archs", group_hint: str | None = None) -> list[int]:  # fmt: skip
    """The SMs `group` builds (a fixed group's from the manifest, else `archs`, sorted), checked.

    Runs flash_attn_arch_group_parse and flash_attn_arch_group_check of
    cmake/FlashAttnArchGroups.cmake: the group must exist (the message ends in `group_hint`),
    custom needs `archs` and a fixed group takes none; then per SM ascending: below archs.min_sm,
    refused by name (archs.refused), not in archs.known and, when `cuda_version` (nvcc's, e.g.
    "12.8.93") is given, newer than the toolkit. Raises ReleaseError with the module's sentence;
    its remedies name `flag` and the custom session.
    """
    defines = {"GROUP": group, "ARCHS": ",".join(map(str, archs or [])), "ARCHS_FLAG": flag}
    defines.update(TOOLKIT_HINT=_TOOLKIT_HINT, CUSTOM_PREFIX=_CUSTOM_PREFIX)
    if group_hint is not None:
        defines["GROUP_HINT"] = group_hint
    if cuda_version:
        defines["CUDA_VERSION"] = cuda_version
    return _run(defines)


def sessions_hint(session: str, data: dict | None = None, repeat_nox: bool = False) -> str:
    """The sessions of every group, for messages: ``nox -s wheel_blackwell, wheel_legacy, or
    wheel_custom -- --cuda-archs 80,90`` (``session`` is the prefix, e.g. wheel; with `repeat_nox`
    every name gets its ``nox -s``). A group without fixed SMs (custom) gets its example list."""
    names = []
    for name, group in manifest.arch_groups(data).items():
        text = f"{session}_{name}" + ("" if group["sms"] else " -- --cuda-archs 80,90")
        names.append(f"nox -s {text}" if repeat_nox or not names else text)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])}, or {names[-1]}"
