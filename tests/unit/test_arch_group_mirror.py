"""cmake/FlashAttnArchGroups.cmake owns the arch groups; the runtime keeps a mirror of them.

An installed wheel knows only its own group (from its build info), yet its GPU check must name
the other group's wheel, so flash_attn/_compat.py carries the table too. This test keeps the
mirror equal to the CMake data, so a change in one place without the other fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

from flash_attn import _compat

CMAKE = Path(__file__).resolve().parents[2] / "cmake" / "FlashAttnArchGroups.cmake"


def cmake_groups() -> dict[str, list[int]]:
    text = CMAKE.read_text()
    found = dict(re.findall(r"set\(FLASH_ATTN_ARCH_GROUP_(\w+) ([0-9 ]+)\)", text))
    return {name: [int(x) for x in archs.split()] for name, archs in found.items()}


def test_runtime_group_table_mirrors_cmake():
    groups = cmake_groups()
    assert set(groups) == {"legacy", "blackwell"}, groups
    mirror = {name: [t.major * 10 + t.minor for t in targets] for name, targets in _compat.GROUP_SASS.items()}
    assert mirror == groups
