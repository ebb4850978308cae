"""The names and messages the native library and Python agree on: the one definition of each.

- the native library of arch group ``<group>``: ``flash_attn/_C_<group>.so`` (``.pyd`` on Windows;
  CMakeLists.txt builds the target ``_C_${group}`` with that suffix, cmake/FlashAttnOptions.cmake);
- its build info: ``flash_attn/build_info_<group>.json`` beside it (CMakeLists.txt installs it);
- the start of the text a kernel the kernel set left out raises from C++: src/kernels/generate_units.py
  writes it into the generated dispatch from :data:`NOT_BUILT_PREFIX`, and ``flash_attn._checks``
  turns an error that starts with it into ``KernelNotBuiltError``.

A group is one lowercase alphanumeric label segment (``flash_attn_wheel_names.label`` puts it into the
wheel's version label), so the library name allows nothing else. The runtime (``flash_attn._loader``),
the release tooling (``release.compile.tagging``, ``release.compile.builder``) and the smoke check import
these rules from here. Standard library only; importing it has no side effects.
"""

from __future__ import annotations

import re

LIBRARY_PREFIX = "_C_"
LIBRARY_SUFFIXES = (".so", ".pyd")  # cmake/FlashAttnOptions.cmake FLASH_ATTN_MODULE_SUFFIX
PACKAGE = "flash_attn"  # the wheel folder both files are installed into
BUILD_INFO_PREFIX = "build_info_"
BUILD_INFO_SUFFIX = ".json"
# The message of a kernel left out of the kernel set starts with this (rendered into C++ by
# src/kernels/generate_units.py; matched by flash_attn._checks).
NOT_BUILT_PREFIX = "flash_attn was built without"

_GROUP = "[a-z0-9]+"  # one label segment, as flash_attn_wheel_names.label requires of a group
# Optional dotted tags between the group and the suffix (``_C_legacy.cpython-312-x86_64-linux-gnu.so``,
# which a hand-made build may produce) are accepted by the loader, never written by CMakeLists.txt.
_LIBRARY_RE = re.compile(rf"{LIBRARY_PREFIX}(?P<group>{_GROUP})(?:\.[^./]+)*\.(?:so|pyd)")
_BUILD_INFO_RE = re.compile(rf"{BUILD_INFO_PREFIX}(?P<group>{_GROUP}){re.escape(BUILD_INFO_SUFFIX)}")


def library_pattern() -> re.Pattern[str]:
    """The compiled regex a native library file name (no folder) fully matches; its group ``group`` is
    the arch group. Use :func:`library_group` unless a pattern object is needed."""
    return _LIBRARY_RE


def library_name(group: str, suffix: str = ".so") -> str:
    """The file name of ``group``'s native library: ``library_name("legacy")`` -> ``"_C_legacy.so"``."""
    return f"{LIBRARY_PREFIX}{group}{suffix}"


def build_info_name(group: str) -> str:
    """The file name of ``group``'s build info: ``"legacy"`` -> ``"build_info_legacy.json"``."""
    return f"{BUILD_INFO_PREFIX}{group}{BUILD_INFO_SUFFIX}"


def library_group(file_name: str) -> str | None:
    """The arch group of a native library file name (no folder), None when ``file_name`` is not one:
    ``"_C_legacy.so"`` -> ``"legacy"``, ``"_C_legacy.cpython-312-x86_64-linux-gnu.so"`` -> ``"legacy"``,
    ``"_C_my_group.so"`` -> None (a group is one lowercase alphanumeric segment)."""
    match = _LIBRARY_RE.fullmatch(file_name)
    return match.group("group") if match else None


def build_info_group(file_name: str) -> str | None:
    """The arch group of a build info file name: ``"build_info_legacy.json"`` -> ``"legacy"``, else None."""
    match = _BUILD_INFO_RE.fullmatch(file_name)
    return match.group("group") if match else None


def wheel_library_group(member: str) -> str | None:
    """The group of a wheel member that is a native library directly in ``flash_attn/`` (the layout
    CMakeLists.txt installs: ``flash_attn/_C_<group>.so``), else None."""
    folder, _, name = member.rpartition("/")
    return library_group(name) if folder == PACKAGE and name.endswith(LIBRARY_SUFFIXES) else None


def wheel_build_info_group(member: str) -> str | None:
    """The group of a wheel member that is ``flash_attn/build_info_<group>.json``, else None."""
    folder, _, name = member.rpartition("/")
    return build_info_group(name) if folder == PACKAGE else None


def is_not_built_message(message: str) -> bool:
    """Whether a native error message says the kernel set left the called kernel out: it holds
    :data:`NOT_BUILT_PREFIX` (anywhere: torch may put its own text before the library's)."""
    return NOT_BUILT_PREFIX in message
