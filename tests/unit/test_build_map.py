"""The build map of docs/design.md names every cmake/ module, and only modules and files that exist.

A module renamed or moved (a cmake/ file, a ``release.*`` module, a script of src/) makes the map
wrong silently; this test names the entry to update.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def build_map(text: str) -> str:
    """The "## Build map" section of design.md's `text` (up to the next level-2 heading); "" without one."""
    m = re.search(r"^## Build map\n(.*?)(?=^## )", text, re.M | re.S)
    return m.group(1) if m else ""


def missing_names(section: str, root: Path) -> list[str]:
    """What `section` names that does not exist under `root`: ``*.cmake`` files (in cmake/ or
    cmake/scripts/), ``release.*`` modules (under src/), and ``src/...`` paths (globs allowed)."""
    out = []
    for name in sorted(set(re.findall(r"\b(\w+\.cmake)\b", section))):
        if not any((root / d / name).is_file() for d in ("cmake", "cmake/scripts")):
            out.append(name)
    for module in sorted(set(re.findall(r"\brelease(?:\.\w+)+", section))):
        path = root / "src" / Path(*module.split("."))
        if not (path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()):
            out.append(module)
    for rel in sorted(set(re.findall(r"\bsrc/[\w/.*]+\w", section))):
        if not list(root.glob(rel)):
            out.append(rel)
    return out


def test_the_build_map_names_every_cmake_module():
    section = build_map((ROOT / "docs" / "design.md").read_text(encoding="utf-8"))
    assert section, "docs/design.md lost its '## Build map' section"
    unnamed = [p.name for p in sorted((ROOT / "cmake").glob("*.cmake")) if p.name not in section]
    assert unnamed == [], "add each to the build map of docs/design.md"


def test_the_build_map_names_only_what_exists():
    section = build_map((ROOT / "docs" / "design.md").read_text(encoding="utf-8"))
    assert missing_names(section, ROOT) == []


def test_a_renamed_module_is_found():
    section = (
        "`FlashAttnGone.cmake`, `FlashAttnOptions.cmake`, `release.build.wheels_old`, `release.manifest`, "
        "`src/kernels/gone.py`, `src/binding/*.cpp`"
    )
    assert missing_names(section, ROOT) == ["FlashAttnGone.cmake", "release.build.wheels_old", "src/kernels/gone.py"]
