"""Paths of this checkout, and the package version its flash_attn/_version.py declares.

The rules the release tooling shares with the wheel's runtime (the local version label, which index
serves which wheel) are the package ``flash_attn_wheel_names`` (src/flash_attn_wheel_names), imported
as usual; the kernel sets are ``kernels`` (src/kernels).
"""

from __future__ import annotations

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SRC_DIR = REPO_ROOT / "src"
VERSION_PY = REPO_ROOT / "flash_attn" / "_version.py"
DEFAULT_BUILD_ROOT = REPO_ROOT / "build"
DEFAULT_WHEELHOUSE = REPO_ROOT / "wheelhouse"


def package_version(version_py: Path = VERSION_PY) -> str:
    """The package version from flash_attn/_version.py (the same source pyproject.toml reads)."""
    m = re.search(r'^__version__\s*=\s*"([^"]+)"', version_py.read_text(encoding="utf-8"), re.MULTILINE)
    if not m:
        raise RuntimeError(f'{version_py} has no __version__ = "..." line')
    return m.group(1)
