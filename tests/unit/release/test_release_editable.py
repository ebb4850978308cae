"""The editable install's tools (release.compile.editable): the relay, the path hook, the pinned ninja."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from release.compile import editable
from release.errors import ReleaseError
from release.sessions import dev

posix = pytest.mark.skipif(os.name == "nt", reason="the relay is a POSIX script; on Windows the ninja itself")


def fake_ninja(tmp_path: Path, out: str, rc: int = 0) -> Path:
    """A 'ninja' that prints `out` on stdout, its arguments on stderr, and exits `rc`."""
    path = tmp_path / "ninja"
    code = f"import sys\nprint({out!r}, end='')\nprint(sys.argv[1:], file=sys.stderr)\nsys.exit({rc})\n"
    path.write_text(f"#!{sys.executable}\n{code}")
    path.chmod(0o755)
    return path


def relay(tmp_path: Path, out: str, *args: str, rc: int = 0) -> subprocess.CompletedProcess:
    # a build folder with a space and a quote in its path, as a checkout may have
    script = editable.write_ninja_relay(tmp_path / "my build's folder", fake_ninja(tmp_path, out, rc))
    return subprocess.run([str(script), *args], capture_output=True, text=True, timeout=60)


@posix
def test_the_relay_says_nothing_when_there_is_no_work(tmp_path):
    # what an up-to-date build prints: CMake's glob check (every run), then nothing else to do
    r = relay(tmp_path, "[0/2] Re-checking globbed directories...\nninja: no work to do.\n")
    assert (r.returncode, r.stdout) == (0, "")
    assert "no work" not in r.stderr and "globbed" not in r.stderr


@posix
def test_the_relay_passes_each_step_line_to_stderr_and_the_exit_status(tmp_path):
    steps = "[1/2] Building CUDA object kernels/units/fwd.cu.o\n[2/2] Linking CUDA shared module _C_custom.so\n"
    r = relay(tmp_path, steps + "FAILED: x\n", "-C", "b", rc=1)
    assert r.returncode == 1 and r.stdout == ""
    assert steps + "FAILED: x\n" in r.stderr
    assert "['-C', 'b']" in r.stderr  # the arguments reach ninja unchanged


@posix
def test_a_relay_written_for_a_relative_build_folder_runs_from_anywhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    script = editable.write_ninja_relay(Path("b"), fake_ninja(tmp_path, "1.13.2\n"))
    assert script.is_absolute()
    other = tmp_path / "elsewhere"
    other.mkdir()
    r = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60, cwd=other)
    assert (r.returncode, r.stdout) == (0, "1.13.2\n"), r.stderr


@posix
def test_the_relay_leaves_version_and_tools_on_stdout_for_cmake(tmp_path):
    assert relay(tmp_path, "1.13.2\n", "--version").stdout == "1.13.2\n"
    assert relay(tmp_path, "restat done\n", "-t", "restat").stdout == "restat done\n"


def test_the_pinned_ninja_is_found_by_its_package_not_by_path(monkeypatch, tmp_path):
    # PATH without any ninja: the ninja package's own binary (tool_pins.build) is still found.
    monkeypatch.setenv("PATH", str(tmp_path))
    ninja = editable.pinned_ninja()
    assert ninja.is_absolute() and ninja.name.startswith("ninja")
    out = subprocess.run([str(ninja), "--version"], capture_output=True, text=True, timeout=60).stdout
    assert out.startswith(editable.importlib.metadata.version("ninja"))  # 1.13.2.git.kitware...: the wheel's build


def test_without_a_ninja_the_message_says_how_to_get_one(monkeypatch, tmp_path):
    monkeypatch.setattr(editable, "tool_path", lambda dist, exe, env=None: None)
    with pytest.raises(ReleaseError, match="install the build pins"):
        editable.pinned_ninja()


def test_the_path_hook_puts_the_configured_cmake_first(tmp_path):
    cmake_dir = tmp_path / "cmake" / "bin"
    (tmp_path / "site").mkdir()
    hook = editable.write_path_hook(tmp_path / "site", cmake_dir / "cmake")
    assert hook.name == editable.PTH_NAME
    code = "import os, site, sys; site.addsitedir(sys.argv[1]); print(os.environ['PATH'])"
    # first on a PATH that has another folder first; left as it is when it is first already
    for path, want in (
        (os.pathsep.join(["/elsewhere", "/usr/bin"]), [str(cmake_dir), "/elsewhere", "/usr/bin"]),
        (os.pathsep.join([str(cmake_dir), "/usr/bin"]), [str(cmake_dir), "/usr/bin"]),
    ):
        env = {**os.environ, "PATH": path}
        out = subprocess.run([sys.executable, "-c", code, str(hook.parent)], env=env, capture_output=True, text=True)
        assert out.stdout.strip().split(os.pathsep) == want


def test_the_configured_cmake_is_read_from_the_cache(tmp_path):
    (tmp_path / "CMakeCache.txt").write_text(
        f"CMAKE_BUILD_TYPE:STRING=Release\nCMAKE_COMMAND:INTERNAL={sys.executable}\n"
    )
    assert editable.configured_cmake(tmp_path) == Path(sys.executable)
    (tmp_path / "CMakeCache.txt").write_text("CMAKE_COMMAND:INTERNAL=/no/such/cmake\n")
    with pytest.raises(ReleaseError, match="run nox -s dev again"):
        editable.configured_cmake(tmp_path)
    with pytest.raises(ReleaseError, match="not readable"):
        editable.configured_cmake(tmp_path / "none")


def test_the_install_records_the_relay_and_silences_the_hook(tmp_path):
    cmd = dev.install_command("py", tmp_path / "b", {"FLASH_ATTN_KERNEL_SET": "ci"}, tmp_path / "b" / "relay")
    assert "-Ceditable.verbose=false" in cmd and "-Ceditable.rebuild=true" in cmd
    assert f"-Ccmake.define.CMAKE_MAKE_PROGRAM={tmp_path / 'b' / 'relay'}" in cmd
    assert f"-Cbuild-dir={tmp_path / 'b'}" in cmd
