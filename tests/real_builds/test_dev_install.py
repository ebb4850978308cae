"""``nox -s dev`` stays built: an import in a plain shell recompiles nothing and prints nothing.

A real editable install of the ``ci`` kernel set for sm_80 (``nox -s dev``, as a newcomer runs
it, in a nox folder and build root of its own under build/test-dev, kept between runs so a rerun
is incremental), then ``import flash_attn`` by the dev environment's Python, not activated, from
an empty folder, with a PATH whose first folder holds a ``ninja`` and a ``cmake`` that write to a
log and fail: the import must succeed, print nothing, call neither, and leave the build folder's
library as it was, with no step in ``.ninja_log`` but CMake's glob check, which every Ninja run
logs (release.compile.editable says why each could go wrong).

Cost: the first run creates the nox environment and compiles one forward unit for sm_80 + PTX, the
dispatch and the binding sources: 10:20 on the 2-core machine with other builds beside it (the
unit alone 7:29 of it); a rerun, with the build folder kept, about 35 seconds (nox, pip, the import).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from release.compile import progress

ROOT = Path(__file__).resolve().parents[2]
BUILD_ROOT = ROOT / "build" / "test-dev"
DEV = ["--arch-group", "custom", "--cuda-archs", "80", "--kernel-set", "ci", "--build-root", str(BUILD_ROOT)]

pytestmark = pytest.mark.build

FAKE = """#!/bin/sh
echo "$0 $*" >> {log}
exit 1
"""


@pytest.fixture(scope="module")
def dev_env() -> tuple[Path, Path]:
    """Run nox -s dev (ci set, sm_80); returns (the dev environment's python, the editable build folder)."""
    envdir = BUILD_ROOT / "nox"
    cmd = [sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "--envdir", str(envdir), "-s", "dev"]
    env = {**os.environ, "FLASH_ATTN_VISIBLE_SMS": "none"}
    proc = subprocess.run([*cmd, "--", *DEV], cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    folders = [p for p in BUILD_ROOT.glob("custom*-ci-*-editable") if (p / "CMakeCache.txt").is_file()]
    assert len(folders) == 1, f"expected one editable build folder under {BUILD_ROOT}: {folders}"
    python = envdir / "dev" / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    return python, folders[0]


@pytest.mark.skipif(os.name == "nt", reason="the fake tools are POSIX shell scripts")
def test_an_import_in_a_plain_shell_recompiles_and_prints_nothing(dev_env, tmp_path):
    python, bdir = dev_env
    fake = tmp_path / "fake-bin"
    fake.mkdir()
    log = tmp_path / "called.log"
    for tool in ("ninja", "cmake"):
        (fake / tool).write_text(FAKE.format(log=log))
        (fake / tool).chmod(0o755)
    libraries = sorted(bdir.glob("_C_custom*.so"))  # the linked library (its install copy is not a compile)
    assert libraries, f"no _C_custom library in {bdir}"
    log_before = progress.ninja_log_lines(bdir)
    mtimes = [p.stat().st_mtime_ns for p in libraries]
    # A plain shell: no venv activated, no nox, the fake tools first on PATH.
    env = {"HOME": os.environ.get("HOME", str(tmp_path)), "PATH": os.pathsep.join([str(fake), "/usr/bin", "/bin"])}
    empty = tmp_path / "cwd"
    empty.mkdir()  # never the checkout's flash_attn/
    proc = subprocess.run(
        [str(python), "-c", "import flash_attn"], cwd=empty, env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not log.exists(), "the import ran a tool from PATH:\n" + log.read_text()
    assert proc.stdout + proc.stderr == ""
    # Ninja logs CMake's glob check (cmake.verify_globs) on every run; nothing else may have run
    ran = [e.output for e in progress.read_ninja_log(bdir / ".ninja_log", log_before)]
    assert ran, "the import ran no build at all (scikit-build-core's rebuild on import did not run)"
    assert [o for o in ran if not o.endswith("cmake.verify_globs")] == [], "the import rebuilt something"
    assert [p.stat().st_mtime_ns for p in libraries] == mtimes
