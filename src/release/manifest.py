"""The build manifest (build-manifest.json) as the release tooling reads it.

The manifest holds the build's tables: upstream pin, arch groups, kernel sets, unit costs,
option defaults, release matrix and tool pins (docs/manifest.md). CMake reads the same file
(cmake/FlashAttnManifest.cmake), src/kernels/kernel_set.py too; the runtime gets what it needs
through the build info (a source checkout's flash_attn/_loader.py reads the group names only).
``$FLASH_ATTN_MANIFEST`` points every reader at another copy (tests do).

Stdlib only: ``nox -s matrix`` and ``.ci/run`` read it before anything is installed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from flash_attn_wheel_names import manifest_file
from release import _paths

ENV = manifest_file.ENV
DEFAULT_PATH = _paths.REPO_ROOT / manifest_file.NAME


def path() -> Path:
    """The manifest in use: ``$FLASH_ATTN_MANIFEST`` when set, else build-manifest.json of this checkout
    (the rule is :func:`flash_attn_wheel_names.manifest_file.path`'s)."""
    return manifest_file.path(_paths.REPO_ROOT)


def load(file: Path | None = None) -> dict[str, Any]:
    """The manifest as a dict. Raises RuntimeError naming the file when it is missing or not JSON."""
    file = file or path()
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise RuntimeError(
            f"cannot read the build manifest {file}: {e}. Restore it (git checkout -- build-manifest.json) "
            f"or unset {ENV}."
        ) from None


def arch_groups(data: dict | None = None) -> dict[str, dict]:
    """Arch group name -> its entry (``sms``, ``ptx``, ``released``, ``gpus``), in manifest order."""
    data = data or load()
    return {g["name"]: g for g in data["arch_groups"]}


def option_default(name: str, data: dict | None = None) -> str:
    """The default of the CMake option ``name`` (e.g. FLASH_ATTN_KERNEL_SET -> "release")."""
    return (data or load())["options"][name]["default"]


def option_choices(name: str, data: dict | None = None) -> list[str]:
    """The values option `name` accepts: its ``choices``, or the ``name`` of every entry of the manifest
    list its ``choices_from`` names (FLASH_ATTN_ARCH_GROUP: the arch groups); [] for other options."""
    data = data or load()
    entry = data["options"][name]
    if entry.get("choices_from"):
        return [item["name"] for item in data[entry["choices_from"]]]
    return list(entry.get("choices") or [])


def option_text(name: str, key: str, data: dict | None = None) -> str:
    """Text `key` (``doc``, ``invalid``) of option `name` with {choices} (", "-joined), {min}, {below} and
    {default} filled in from the same entry, so a bound or a choice is written once; "" when absent.
    cmake/FlashAttnOptions.cmake (flash_attn_option_text) fills in the same placeholders."""
    data = data or load()
    entry = data["options"][name]
    text = (entry.get(key) or "").replace("{choices}", ", ".join(option_choices(name, data)))
    for placeholder in ("min", "below", "default"):
        text = text.replace("{" + placeholder + "}", str(entry.get(placeholder, "")))
    return text


def upstream_pin(data: dict | None = None) -> tuple[str, str]:
    """(version, sha256) of the pinned upstream sdist, e.g. ("2.8.3.post2", "d0f9...")."""
    upstream = (data or load())["upstream"]
    return upstream["version"], upstream["sha256"]
