"""The test command's own guarantees: skips only for a missing GPU (tests/skip_policy.py), the
upstream tree from the pinned sdist (tests/conftest.py, release.compile.upstream), no machine paths."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from release.compile import upstream
from release.errors import ReleaseError

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"


def _run_suite(tmp_path: Path, body: str) -> subprocess.CompletedProcess:
    """Run a small suite under the skip policy, as tests/conftest.py registers it."""
    (tmp_path / "conftest.py").write_text(
        "from skip_policy import pytest_runtest_logreport, pytest_sessionfinish, pytest_terminal_summary\n"
    )
    (tmp_path / "test_sample.py").write_text(textwrap.dedent(body))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(TESTS)},  # skip_policy.py, for the conftest above
    )


def test_a_foreign_skip_reason_fails_the_run(tmp_path):
    r = _run_suite(
        tmp_path,
        """
        import pytest
        def test_ok(): pass
        def test_machine_path(): pytest.skip("upstream source not unpacked here")
        """,
    )
    assert r.returncode == 1, r.stdout
    assert "skip policy" in r.stdout
    assert "test_sample.py::test_machine_path: upstream source not unpacked here" in r.stdout


@pytest.mark.parametrize(
    "reason", ["needs a CUDA device", "a GPU is present", "flash_attn not built: hdim 96", "needs a second torch"]
)
def test_allowed_skip_reasons_pass(tmp_path, reason):
    r = _run_suite(tmp_path, f"import pytest\ndef test_x(): pytest.skip({reason!r})\n")
    assert r.returncode == 0, r.stdout
    assert "skip policy" not in r.stdout


def test_upstream_tree_is_the_pinned_sdist(upstream_tree, upstream_sdist):
    assert upstream_sdist.name == "flash_attn-2.8.3.post2.tar.gz"
    assert (upstream_tree / "csrc" / "flash_attn" / "src" / "flash.h").is_file()
    assert (upstream_tree / "flash_attn" / "flash_attn_interface.py").is_file()
    assert (upstream_tree / "csrc" / "cutlass" / "include" / "cutlass" / "cutlass.h").is_file()
    assert not (upstream_tree / "csrc" / "composable_kernel").exists()


def test_a_wrong_sdist_is_refused_with_its_hash(tmp_path):
    fake = tmp_path / "flash_attn-2.8.3.post2.tar.gz"
    fake.write_bytes(b"not the pin")
    with pytest.raises(ReleaseError) as e:
        upstream.pinned_sdist(fake)
    assert hashlib.sha256(b"not the pin").hexdigest() in str(e.value)


def test_no_machine_specific_paths_in_the_repo():
    """Absolute paths of one machine make tests skip or tools fail everywhere else."""
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    pattern = re.compile(r"(?<![\w.])/(work|root|home/\w+)/")
    found = []
    for name in files:
        if name.startswith("lab/evidence/"):  # measured logs keep the paths of the machine they ran on
            continue
        path = REPO / name
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
        found += [f"{name}:{i}" for i, line in enumerate(text.splitlines(), 1) if pattern.search(line)]
    assert not found, f"machine-specific absolute paths: {found[:10]}"
