"""Enter the MSVC developer environment in a GitHub Actions job, without a third-party action.

``python -m release.windows.msvc_env [--arch x64] [--github-env FILE]`` (release.yml and ci.yml, Windows):

1. ``vswhere`` (installed with every Visual Studio since 2017, at
   ``%ProgramFiles(x86)%\\Microsoft Visual Studio\\Installer\\vswhere.exe``) names the newest
   installation that has the x64 C++ tools (``Microsoft.VisualStudio.Component.VC.Tools.x86.x64``);
2. its ``VC\\Auxiliary\\Build\\vcvarsall.bat <arch>`` runs in ``cmd``, followed by ``set``, which
   prints the environment the script made;
3. every variable that differs from this process's environment (PATH, INCLUDE, LIB, LIBPATH,
   VCToolsInstallDir, ...) is appended to ``$GITHUB_ENV``, with ``CC=cl`` and ``CXX=cl`` so that
   CMake and ``release.compile.toolchain`` take MSVC, never the MinGW gcc that windows-2022 has on PATH.

Nothing is installed and nothing but Microsoft's own tools runs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import PureWindowsPath

from release.errors import ReleaseError, run_main

VC_COMPONENT = "Microsoft.VisualStudio.Component.VC.Tools.x86.x64"
Runner = Callable[[list[str] | str], subprocess.CompletedProcess]


def _run(cmd: list[str] | str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def vswhere_path(env: dict) -> PureWindowsPath:
    """Where the Visual Studio installer keeps vswhere.exe."""
    base = env.get("ProgramFiles(x86)") or env.get("PROGRAMFILES(X86)") or r"C:\Program Files (x86)"
    return PureWindowsPath(base) / "Microsoft Visual Studio" / "Installer" / "vswhere.exe"


def find_vcvarsall(env: dict, run: Runner = _run) -> PureWindowsPath:
    """vcvarsall.bat of the newest Visual Studio with the x64 C++ tools; ReleaseError if there is none."""
    vswhere = vswhere_path(env)
    cmd = [str(vswhere), "-latest", "-products", "*", "-requires", VC_COMPONENT, "-property", "installationPath"]
    try:
        proc = run(cmd)
    except OSError as e:
        raise ReleaseError(f"cannot run {vswhere} ({e}): is Visual Studio (2017 or newer) installed?") from None
    paths = [line.strip() for line in proc.stdout.splitlines() if line.strip()]
    if proc.returncode != 0 or not paths:
        raise ReleaseError(
            f"vswhere found no Visual Studio with {VC_COMPONENT} (exit {proc.returncode}): install the "
            "'Desktop development with C++' workload, or use a windows-2022 runner image"
        )
    return PureWindowsPath(paths[0]) / "VC" / "Auxiliary" / "Build" / "vcvarsall.bat"


def parse_set_output(text: str) -> dict[str, str]:
    """The environment `cmd /c set` prints (NAME=value lines; lines without "=" are skipped)."""
    out = {}
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep and name and not name.startswith("="):  # cmd's hidden =C: entries
            out[name] = value
    return out


def changed(before: dict[str, str], after: dict[str, str]) -> dict[str, str]:
    """Variables of `after` that are new or differ from `before`; names compared case-insensitively
    (Windows), reported with `after`'s spelling."""
    old = {k.upper(): v for k, v in before.items()}
    return {k: v for k, v in after.items() if old.get(k.upper()) != v}


def developer_env(arch: str, env: dict, run: Runner = _run) -> dict[str, str]:
    """The variables vcvarsall.bat `arch` sets or changes, plus CC=cl and CXX=cl."""
    vcvarsall = find_vcvarsall(env, run)
    # One string, passed to CreateProcess as it is: cmd /s strips the outer quotes and keeps the inner
    # ones (a list would have its quotes backslash-escaped, which cmd does not understand).
    proc = run(f'cmd /d /s /c ""{vcvarsall}" {arch} >nul && set"')
    after = parse_set_output(proc.stdout)
    if proc.returncode != 0 or not after:
        raise ReleaseError(f"{vcvarsall} {arch} failed (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}")
    new = changed(env, after)
    if not any(k.upper() == "VCTOOLSINSTALLDIR" for k in after):
        raise ReleaseError(f"{vcvarsall} {arch} ran but set no VCToolsInstallDir: the C++ tools are not installed")
    return {**new, "CC": "cl", "CXX": "cl"}


def github_env_text(variables: dict[str, str]) -> str:
    """NAME=value lines for $GITHUB_ENV; ReleaseError for a value on several lines."""
    bad = [k for k, v in variables.items() if "\n" in v or "\r" in v]
    if bad:
        raise ReleaseError(f"variables with line breaks cannot be written as NAME=value: {bad}")
    return "".join(f"{k}={v}\n" for k, v in sorted(variables.items()))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m release.windows.msvc_env", description=__doc__.split("\n")[0])
    p.add_argument("--arch", default="x64", help="vcvarsall.bat architecture (default x64)")
    p.add_argument("--github-env", default=os.environ.get("GITHUB_ENV"), help="file to append to ($GITHUB_ENV)")
    args = p.parse_args(argv)

    def body() -> None:
        variables = developer_env(args.arch, dict(os.environ))
        text = github_env_text(variables)
        if args.github_env:
            with open(args.github_env, "a", encoding="utf-8") as f:
                f.write(text)
        print(f"release: MSVC developer environment ({args.arch}): {len(variables)} variables", end="")
        print(f" appended to {args.github_env}" if args.github_env else "")
        for name in ("VCToolsVersion", "WindowsSDKVersion", "CC", "CXX"):
            if name in variables:
                print(f"  {name}={variables[name]}")

    return run_main(body, prog="release.windows.msvc_env")


if __name__ == "__main__":
    sys.exit(main())
