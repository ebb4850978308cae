"""The scripts of tools/ and lab/ use only the public modules of the release package.

A module whose name starts with ``_`` is private to the release package: what a script needs of
it gets a public name first (as ``release.ship.smoke_check.package_build_info`` did for
tools/validate.py). Read with ``ast``, so a docstring that names a private module does not count.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SCRIPTS = sorted((REPO / "tools").glob("*.py")) + sorted((REPO / "lab").glob("*.py"))


def private_release_imports(source: str) -> list[str]:
    """The ``release._*`` modules (or ``from release import _x`` names) that ``source`` imports."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "release" and any(part.startswith("_") for part in parts[1:]):
                found.append(name)
    return found


def test_the_scan_sees_private_imports():
    assert private_release_imports("from release._smoke_check import package_build_info") == [
        "release._smoke_check",
        "release._smoke_check.package_build_info",
    ]
    assert private_release_imports("from release import _paths") == ["release._paths"]
    assert private_release_imports("import release._paths as p") == ["release._paths"]
    assert private_release_imports('"""release._paths"""\nfrom release import manifest') == []


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_script_imports_a_private_release_module(script):
    assert private_release_imports(script.read_text(encoding="utf-8")) == []
