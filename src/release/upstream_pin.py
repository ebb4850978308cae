"""The pinned upstream sdist (version and sha256), read from cmake/FlashAttnUpstream.cmake.

The CMake module holds the pin; the wheel sessions read it from there to check a given
``--sdist`` before anything is built, instead of keeping a copy.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from . import _paths

UPSTREAM_CMAKE = _paths.REPO_ROOT / "cmake" / "FlashAttnUpstream.cmake"


@cache
def pin(path: Path = UPSTREAM_CMAKE) -> tuple[str, str]:
    """(version, sha256) of the pinned sdist, e.g. ("2.8.3.post2", "d0f9..."); RuntimeError if absent."""
    text = Path(path).read_text(encoding="utf-8")
    version = re.search(r'^set\(FLASH_ATTN_UPSTREAM_VERSION "([^"]+)"\)', text, re.MULTILINE)
    sha = re.search(r'^set\(FLASH_ATTN_UPSTREAM_SHA256 "([0-9a-f]{64})"\)', text, re.MULTILINE)
    if not version or not sha:
        raise RuntimeError(f"{path} has no set(FLASH_ATTN_UPSTREAM_VERSION/SHA256 ...) line")
    return version.group(1), sha.group(1)
