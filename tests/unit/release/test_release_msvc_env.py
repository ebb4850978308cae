"""release.windows.msvc_env with faked vswhere and cmd: what it writes to $GITHUB_ENV, and its errors."""

from __future__ import annotations

import subprocess

import pytest

from release.errors import ReleaseError
from release.windows import msvc_env

VS = r"C:\Program Files\Microsoft Visual Studio\2022\Enterprise"
BEFORE = {"Path": r"C:\mingw64\bin;C:\Windows", "ProgramFiles(x86)": r"C:\Program Files (x86)", "TEMP": r"C:\t"}
SET_OUTPUT = "\n".join(
    [
        "=C:=C:\\work",  # cmd's hidden per-drive entry
        rf"Path={VS}\VC\Tools\MSVC\14.44.35207\bin\HostX64\x64;C:\mingw64\bin;C:\Windows",
        r"ProgramFiles(x86)=C:\Program Files (x86)",
        r"TEMP=C:\t",
        rf"INCLUDE={VS}\VC\Tools\MSVC\14.44.35207\include",
        rf"VCToolsInstallDir={VS}\VC\Tools\MSVC\14.44.35207\ ",
        "VCToolsVersion=14.44.35207",
    ]
)


def fake_runner(vswhere_out=VS + "\n", set_out=SET_OUTPUT, set_rc=0):
    calls = []

    def run(cmd):
        calls.append(cmd)
        if isinstance(cmd, list) and cmd[0].endswith("vswhere.exe"):
            return subprocess.CompletedProcess(cmd, 0 if vswhere_out else 1, stdout=vswhere_out, stderr="")
        return subprocess.CompletedProcess(cmd, set_rc, stdout=set_out, stderr="")

    return run, calls


def test_writes_what_vcvarsall_changed_and_cl_as_the_compiler():
    run, calls = fake_runner()
    got = msvc_env.developer_env("x64", BEFORE, run)
    assert set(got) == {"Path", "INCLUDE", "VCToolsInstallDir", "VCToolsVersion", "CC", "CXX"}
    assert got["CC"] == got["CXX"] == "cl"
    assert got["Path"].startswith(VS)
    assert calls[0][0] == r"C:\Program Files (x86)\Microsoft Visual Studio\Installer\vswhere.exe"
    assert msvc_env.VC_COMPONENT in calls[0]
    assert calls[1] == rf'cmd /d /s /c ""{VS}\VC\Auxiliary\Build\vcvarsall.bat" x64 >nul && set"'
    text = msvc_env.github_env_text(got)
    assert "CXX=cl\n" in text and "TEMP=" not in text


def test_names_compare_case_insensitively():
    assert msvc_env.changed({"PATH": "a"}, {"Path": "a", "lib": "x"}) == {"lib": "x"}


def test_no_visual_studio_or_no_cpp_tools_are_clear_errors():
    run, _ = fake_runner(vswhere_out="")
    with pytest.raises(ReleaseError, match="Desktop development with C\\+\\+"):
        msvc_env.developer_env("x64", BEFORE, run)
    run, _ = fake_runner(set_out="Path=C:\\Windows\n")
    with pytest.raises(ReleaseError, match="set no VCToolsInstallDir"):
        msvc_env.developer_env("x64", BEFORE, run)
    run, _ = fake_runner(set_out="", set_rc=1)
    with pytest.raises(ReleaseError, match="vcvarsall.bat x64 failed"):
        msvc_env.developer_env("x64", BEFORE, run)


def test_multiline_values_are_refused():
    with pytest.raises(ReleaseError, match="line breaks"):
        msvc_env.github_env_text({"A": "x\ny"})
