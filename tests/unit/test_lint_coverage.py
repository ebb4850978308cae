"""ruff lints every tracked .py file: no folder is skipped for its name.

ruff's default excludes skip any folder named ``build`` (src/release/build, tests/build were once
never linted); pyproject.toml's ``exclude`` replaces them and skips only the repository root's build
output. This lists the files ``ruff check --show-files`` would check, with the project's config, and
fails on any tracked .py file not among them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def tracked_python_files() -> set[Path]:
    """The .py files git tracks in this checkout, as absolute paths."""
    out = subprocess.run(["git", "ls-files", "-z", "*.py"], cwd=ROOT, capture_output=True, check=True).stdout
    return {(ROOT / name).resolve() for name in out.decode().split("\0") if name}


def files_ruff_checks() -> set[Path]:
    """The files `ruff check .` run at the repository root (as `nox -s lint` runs it) would check."""
    run = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--show-files", "."], cwd=ROOT, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    return {Path(line).resolve() for line in run.stdout.splitlines() if line.strip()}


def test_ruff_checks_every_tracked_python_file():
    tracked = tracked_python_files()
    assert ROOT / "src" / "release" / "build.py" in tracked  # named build: ruff must still check it
    missed = sorted(p.relative_to(ROOT).as_posix() for p in tracked - files_ruff_checks())
    assert missed == [], f"tracked .py files ruff does not check (pyproject.toml [tool.ruff] exclude): {missed}"


def test_no_tracked_python_file_sits_in_a_folder_named_build():
    # ruff's defaults and structure-drawing tools skip folders named build as build output; the old
    # package path release.build is a module (src/release/build.py) for that reason
    inside = sorted(
        p.relative_to(ROOT).as_posix() for p in tracked_python_files() if "build" in p.relative_to(ROOT).parts[:-1]
    )
    assert inside == [], f"Python files in a folder named build: {inside}"
