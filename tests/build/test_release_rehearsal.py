"""The release rehearsal (``nox -s release_rehearsal``, release.plan.rehearsal) on every CI run.

Runs ``.github/workflows/release.yml``'s job chain here: a ``kernel_set=ci`` dispatch (one unit, one
shard, an exact wheel), a tag push (two units in two shards, a stable-ABI wheel smoke-tested under a
second torch, assemble, SHA256SUMS, publish against a ``gh`` stub) and a ``from_run`` dispatch that
assembles and publishes the tag's wheels. The steps' commands come from the YAML; docs/ci.md says
what is emulated. Cost on a 2-core machine: about 11 minutes from a clean clone (three unit
compiles for sm_80: the 1-shard run's unit and the 2-shard run's two, whose shard folders differ;
two binding compiles; venvs and pip installs), 5 minutes on a rerun, whose shards are served by
the rehearsal's sccache folder under build/rehearsal (docs/ci.md).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.build


def test_the_release_job_chain_rehearses_clean():
    if os.name == "nt":
        pytest.skip("the rehearsal runs the Linux jobs, not on Windows")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    root = ROOT / "build" / "rehearsal"
    proc = subprocess.run(
        [sys.executable, "-m", "release.plan.rehearsal", "--root", str(root)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    out = proc.stdout + proc.stderr
    print(out[-3000:])
    assert proc.returncode == 0, out[-12000:]
    assert "every run did what it must" in out
    gh = (root / "gh.log").read_text()
    assert gh.count("gh release upload") == 2  # the tag push and the from_run dispatch published (dry run)
    assert gh.count("deploy pages") == 2  # and deployed their package indexes (dry run)
