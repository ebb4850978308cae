"""Paths of this checkout, and the two runtime modules the release tooling shares with the wheel.

flash_attn/_label.py (the local version label) and flash_attn/_install.py (which index serves which
wheel) ship inside the wheel's ``flash_attn`` package, and the release tooling must spell names the
same way, from this checkout's copy. A normal import cannot reach them: ``import flash_attn._label``
runs ``flash_attn/__init__.py``, which loads the native library (and, in a smoke or validate session,
finds the installed wheel's copy instead of this one). So :func:`label` and :func:`install` load those
two stdlib-only files by path: the only modules the release tooling loads that way
(tests/unit/test_imports.py checks it). The kernel sets are a plain import: ``from kernels import
kernel_set`` (src/kernels/__init__.py).
"""

from __future__ import annotations

import importlib.util
import re
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

REPO_ROOT = Path(__file__).resolve().parents[2]
SRC_DIR = REPO_ROOT / "src"
VERSION_PY = REPO_ROOT / "flash_attn" / "_version.py"
LABEL_PY = REPO_ROOT / "flash_attn" / "_label.py"
INSTALL_PY = REPO_ROOT / "flash_attn" / "_install.py"
DEFAULT_BUILD_ROOT = REPO_ROOT / "build"
DEFAULT_WHEELHOUSE = REPO_ROOT / "wheelhouse"


def _load_file(name: str, path: Path) -> ModuleType:
    """Import one stdlib-only source file as module `name` (once), without its package."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look the module up while the class is created
    spec.loader.exec_module(module)
    return module


@cache
def label() -> ModuleType:
    """flash_attn/_label.py as a module: the local version label's one definition.

    Loaded by path, never as ``flash_attn._label``: importing the package would load the native
    library (and, in a smoke or validate session, an installed wheel's copy instead of this one).
    """
    return _load_file("flash_attn_label", LABEL_PY)


@cache
def install() -> ModuleType:
    """flash_attn/_install.py as a module (which index serves which wheel), loaded by path as label()."""
    return _load_file("flash_attn_install", INSTALL_PY)


def package_version(version_py: Path = VERSION_PY) -> str:
    """The package version from flash_attn/_version.py (the same source pyproject.toml reads)."""
    m = re.search(r'^__version__\s*=\s*"([^"]+)"', version_py.read_text(encoding="utf-8"), re.MULTILINE)
    if not m:
        raise RuntimeError(f'{version_py} has no __version__ = "..." line')
    return m.group(1)
