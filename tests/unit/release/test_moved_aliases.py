"""The deprecated aliases at the old paths of moved modules (docs/design.md "Layers"): for one
release, ``python -m <old path>`` prints one ``warning:`` line naming the new path and then does
exactly what ``python -m <new path>`` does; importing the old path warns (``DeprecationWarning``) and
gives the same module object.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
MOVED = {
    "release.build.wheels": "release.sessions.wheels",
    "release.build.dev": "release.sessions.dev",
    "release.build.toolchain": "release.compile.toolchain",
    "release.build.torch_independence": "release.archive.torch_independence",
    "release.ship.checksums": "release.checksums",
    "release.plan.rehearsal": "release.workflow.rehearsal",
    "release.plan.fake_github": "release.workflow.fake_github",
}


def python(*args: str) -> subprocess.CompletedProcess:
    """`python ARGS` with the release package on the path, as the nox sessions run it."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_every_alias_the_module_index_names_is_tested():
    index = (ROOT / "src" / "release" / "__init__.py").read_text(encoding="utf-8")
    listed = dict(
        re.findall(r"^- :mod:`(release\.[\w.]+)`\s+deprecated alias of :mod:`(release\.[\w.]+)`", index, re.M)
    )
    assert listed == MOVED


@pytest.mark.parametrize("old", sorted(MOVED))
def test_the_old_python_m_path_warns_once_and_runs_the_new_module(old):
    new = MOVED[old]
    then, now = python("-m", old, "--help"), python("-m", new, "--help")
    assert (then.returncode, then.stdout) == (now.returncode, now.stdout)
    warning = f"warning: {old} moved to {new}; the old path is an alias kept for one release, use {new}\n"
    assert then.stderr == warning + now.stderr
    assert "moved to" not in now.stderr


@pytest.mark.parametrize("old", sorted(MOVED))
def test_importing_the_old_path_warns_and_gives_the_new_module(old):
    new = MOVED[old]
    assert python("-c", f"import {old} as o, {new} as n; assert o is n").returncode == 0
    strict = python("-W", "error::DeprecationWarning", "-c", f"import {old}")
    assert strict.returncode == 1 and f"DeprecationWarning: {old} moved to {new}" in strict.stderr
