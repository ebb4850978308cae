"""The release rehearsal (``nox -s release_rehearsal``, release.workflow.rehearsal) on every CI run.

Runs ``.github/workflows/release.yml`` and ``index.yml`` here, jobs by ``needs:``, each step with the
token permissions its job has: a ``kernel_set=ci`` dispatch (one unit, one shard, an exact wheel), a
tag push (two units in two shards, a stable-ABI wheel smoke-tested under a second torch, assemble,
SHA256SUMS, publish of a DRAFT release to a fake GitHub, attested), a ``from_run`` dispatch that
assembles and updates the draft, the same with a failed first attempt re-run ("Re-run failed jobs"),
the maintainer publishing the draft (index.yml's release run dispatches index.yml on main, which
deploys the index of every published release), and a ``from_run`` dispatch after publishing, whose
publish job must refuse. The steps' commands come from the YAML; docs/ci.md says what is emulated.
Cost on a 2-core machine: about 11 minutes from a clean clone (three unit
compiles for sm_80: the 1-shard run's unit and the 2-shard run's two, whose shard folders differ;
two binding compiles; venvs and pip installs), 5 minutes on a rerun, whose shards are served by
the rehearsal's sccache folder under build/rehearsal (docs/ci.md).
"""

from __future__ import annotations

import json
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
        [sys.executable, "-m", "release.workflow.rehearsal", "--root", str(root)],
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
    # the tag push, the from_run dispatch and the re-run attempt uploaded to the draft; after publishing, nothing
    assert gh.count("gh release upload") == 3
    assert gh.count("gh workflow run index.yml") == 1 and gh.count("deploy pages") == 1
    releases = [json.loads(p.read_text()) for p in (root / "github" / "releases").glob("*/release.json")]
    assert len(releases) == 2 and not any(r["draft"] for r in releases)  # this one (published) and the previous
    pages = "".join(p.read_text() for p in (root / "github" / "pages").rglob("*.html"))
    for r in releases:
        assert f"/releases/download/{r['tag_name']}/" in pages
