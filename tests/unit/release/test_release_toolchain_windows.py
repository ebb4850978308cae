"""release.compile.toolchain on a faked windows-2022: the host compiler probe asks cl, never MinGW's c++ on PATH."""

from __future__ import annotations

import subprocess

import pytest

from release.compile import toolchain

# What windows-2022 has on PATH after the MSVC developer environment: MSVC's cl and MinGW's gcc.
ON_PATH = {
    "cl": r"C:\Program Files\Microsoft Visual Studio\2022\Enterprise\VC\Tools\MSVC\14.44.35207\bin\Hostx64\x64\cl.exe",
    "c++": r"C:\mingw64\bin\c++.exe",
    "g++": r"C:\mingw64\bin\g++.exe",
}
BANNERS = {
    ON_PATH["cl"]: "Microsoft (R) C/C++ Optimizing Compiler Version 19.44.35207 for x64\n",
    ON_PATH["c++"]: "gcc version 14.2.0 (x86_64-posix-seh-rev1, Built by MinGW-Builds project)\n",
    ON_PATH["g++"]: "gcc version 14.2.0 (x86_64-posix-seh-rev1, Built by MinGW-Builds project)\n",
}


@pytest.fixture
def windows(monkeypatch):
    monkeypatch.setattr(toolchain.sys, "platform", "win32")
    monkeypatch.setattr(toolchain.shutil, "which", lambda name: ON_PATH.get(name))
    asked = []

    def run(cmd, timeout=60):
        asked.append(cmd[0])
        return subprocess.CompletedProcess(cmd, 0, stdout="", stderr=BANNERS[cmd[0]])

    monkeypatch.setattr(toolchain, "_run", run)
    return asked


def test_windows_probe_finds_msvc_not_mingw(windows):
    assert toolchain.probe_compiler({}) == ("msvc", "19.44.35207", ON_PATH["cl"])
    assert windows == [ON_PATH["cl"]], "c++ (MinGW gcc) must not even be asked"


def test_windows_without_cl_finds_no_compiler(windows, monkeypatch):
    monkeypatch.setattr(toolchain.shutil, "which", lambda name: None if name == "cl" else ON_PATH.get(name))
    assert toolchain.probe_compiler({}) == (None, None, None)


def test_cxx_wins_on_every_platform(windows):
    assert toolchain.probe_compiler({"CXX": "g++"})[0] == "gcc"


@pytest.mark.parametrize(
    "platform, names", [("win32", ["cl"]), ("linux", ["c++", "g++", "clang++"]), ("darwin", ["c++", "g++", "clang++"])]
)
def test_compiler_candidates(platform, names):
    assert toolchain.compiler_candidates({}, platform) == names
    assert toolchain.compiler_candidates({"CXX": "cl"}, "linux") == ["cl"]
