"""The release package's layers (pyproject.toml [tool.importlinter], docs/design.md "Layers"), checked
by import-linter in the README's test command as `nox -s lint` checks them.

- The package as it is keeps the contracts.
- A copy of the package with one upward import (the old build -> ship edge: an engine module
  importing a shipping one) breaks them, and the report names the edge.
- A copy with a module placed in no layer breaks them (the contract is exhaustive: new code is placed).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import importlinter  # noqa: F401  (tool_pins.lint; the tests session installs it: a missing pin fails here)

ROOT = Path(__file__).resolve().parents[2]

# import-linter's command line, run in a child so that each check sees only the copy it is given.
LINT = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def lint_imports(src: Path, config: Path, cwd: Path) -> subprocess.CompletedProcess:
    """`lint-imports` on the ``release`` package found first in `src`, with the contracts of `config`
    (a pyproject.toml); exit status 0 when every contract is kept, 1 when one is broken."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(src), *sys.path]))
    return subprocess.run(
        [sys.executable, "-c", LINT, "--config", str(config), "--no-cache", "--no-logo"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def copy_of_the_package(tmp_path: Path) -> Path:
    """A copy of src/release under `tmp_path`/src (source files only); returns that src folder."""
    src = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "release", src / "release", ignore=shutil.ignore_patterns("__pycache__"))
    return src


def test_the_release_package_keeps_its_layers(tmp_path):
    run = lint_imports(ROOT / "src", ROOT / "pyproject.toml", tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "release: each layer imports only the layers below it KEPT" in run.stdout


def test_an_upward_import_breaks_the_layers(tmp_path):
    src = copy_of_the_package(tmp_path)
    options = src / "release" / "compile" / "options.py"
    options.write_text(options.read_text(encoding="utf-8") + "\nfrom release.ship import smoke  # noqa\n")
    run = lint_imports(src, ROOT / "pyproject.toml", tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "BROKEN" in run.stdout
    assert "release.compile.options -> release.ship.smoke" in run.stdout


def test_a_module_in_no_layer_breaks_the_layers(tmp_path):
    src = copy_of_the_package(tmp_path)
    (src / "release" / "unplaced.py").write_text('"""A module nobody placed in a layer."""\n')
    run = lint_imports(src, ROOT / "pyproject.toml", tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "release.unplaced" in run.stdout
