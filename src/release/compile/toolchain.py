"""Probe of the build toolchain: nvcc, torch (version, CUDA, C++ ABI) and the host C++ compiler.

:func:`probe` asks the machine; :func:`check` turns what it found into a clear error before a
build starts (missing nvcc, CPU-only torch, torch built for another CUDA major than nvcc's,
missing host compiler, a torch other than the one asked for). Both are separate so tests and
the sessions can mock the probe.

Run ``python -m release.compile.toolchain`` to print what a build on this machine would use.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from release.errors import ReleaseError, run_main


@dataclass(frozen=True)
class Toolchain:
    """What one build would compile and link with. Any field is None when not found."""

    nvcc: str | None  # path of nvcc
    cuda_version: str | None  # nvcc's version, e.g. "13.0.88"
    python: str  # the interpreter that builds (and whose torch is linked)
    torch_version: str | None  # e.g. "2.14.1+cu130"
    torch_cuda_version: str | None  # torch.version.cuda, e.g. "13.0"; None for a CPU build
    cxx11_abi: bool | None
    compiler_id: str | None  # gcc, clang, msvc
    compiler_version: str | None  # e.g. "12.2.0", "19.44.35207"
    compiler: str | None  # path or name of the host C++ compiler

    def as_dict(self) -> dict:
        return asdict(self)


def _run(cmd: list[str], timeout: float = 60) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None


def probe_nvcc(env: dict | None = None) -> tuple[str | None, str | None]:
    """(path, version) of the nvcc CMake would use: $CUDACXX, else nvcc on PATH, else $CUDA_HOME/bin.

    CMake takes a set $CUDACXX and nothing else, so when it names no working nvcc the result is
    ($CUDACXX, None) and :func:`check` says so, instead of probing another nvcc than CMake's.
    """
    env = os.environ if env is None else env
    if env.get("CUDACXX"):
        path = env["CUDACXX"]
        proc = _run([path, "--version"])
        m = proc is not None and proc.returncode == 0 and _nvcc_version(proc.stdout)
        return (path, m) if m else (path, None)
    candidates = [shutil.which("nvcc")]
    for home in (env.get("CUDA_HOME"), env.get("CUDA_PATH")):
        if home:
            candidates.append(str(Path(home) / "bin" / ("nvcc.exe" if os.name == "nt" else "nvcc")))
    for path in filter(None, candidates):
        proc = _run([path, "--version"])
        if proc is None or proc.returncode != 0:
            continue
        version = _nvcc_version(proc.stdout)
        if version:
            return path, version
    return None, None


def _nvcc_version(text: str) -> str | None:
    m = re.search(r"V(\d+\.\d+\.\d+)", text) or re.search(r"release (\d+\.\d+)", text)
    return m.group(1) if m else None


_TORCH_QUERY = (
    "import json, torch; print(json.dumps({'version': torch.__version__, 'cuda': torch.version.cuda, "
    "'abi': bool(torch._C._GLIBCXX_USE_CXX11_ABI)}))"
)


def probe_torch(python: str = sys.executable) -> dict | None:
    """{"version", "cuda", "abi"} of the torch importable by `python`, or None."""
    proc = _run([python, "-c", _TORCH_QUERY], timeout=300)
    if proc is None or proc.returncode != 0:
        return None
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None


def parse_compiler_banner(text: str) -> tuple[str, str] | None:
    """(id, version) from `cc -v` / `cl` output: gcc, clang or msvc."""
    m = re.search(r"\bclang version (\d+(?:\.\d+)*)", text)
    if m:
        return "clang", m.group(1)
    m = re.search(r"\bgcc version (\d+(?:\.\d+)*)", text)
    if m:
        return "gcc", m.group(1)
    m = re.search(r"Microsoft \(R\) C/C\+\+ Optimizing Compiler Version (\d+(?:\.\d+)*)", text)
    if m:
        return "msvc", m.group(1)
    return None


def compiler_candidates(env: dict, platform: str | None = None) -> list[str]:
    """Names of the host C++ compiler to probe, in order: $CXX when set; else on Windows only ``cl``
    (nvcc accepts only MSVC there, and a ``c++`` on PATH is another compiler: windows-2022 images put
    MinGW's gcc in C:\\mingw64\\bin on PATH); elsewhere c++, g++, clang++. `platform`: sys.platform."""
    if env.get("CXX"):
        return [env["CXX"]]
    return ["cl"] if (platform or sys.platform) == "win32" else ["c++", "g++", "clang++"]


def probe_compiler(env: dict | None = None) -> tuple[str | None, str | None, str | None]:
    """(id, version, path) of the host C++ compiler CMake would pick (:func:`compiler_candidates`)."""
    env = os.environ if env is None else env
    for name in compiler_candidates(env):
        path = shutil.which(name) or (name if os.path.isfile(name) else None)
        if not path:
            continue
        is_cl = Path(path).stem.lower() == "cl"
        proc = _run([path] if is_cl else [path, "-v"])
        if proc is None:
            continue
        found = parse_compiler_banner(proc.stdout + proc.stderr)
        if found:
            return found[0], found[1], path
    return None, None, None


def probe(python: str = sys.executable, env: dict | None = None) -> Toolchain:
    """Ask this machine what a build with `python` would use."""
    nvcc, cuda = probe_nvcc(env)
    torch = probe_torch(python) or {}
    cid, cver, cxx = probe_compiler(env)
    return Toolchain(
        nvcc=nvcc,
        cuda_version=cuda,
        python=python,
        torch_version=torch.get("version"),
        torch_cuda_version=torch.get("cuda"),
        cxx11_abi=torch.get("abi"),
        compiler_id=cid,
        compiler_version=cver,
        compiler=cxx,
    )


def torch_public_version(version: str) -> str:
    """The torch version without its local label: "2.14.1+cu130" -> "2.14.1"."""
    from packaging.version import Version

    return Version(version).public


def check(tc: Toolchain, want_torch: str | None = None, need_torch: bool = True) -> None:
    """Raise ReleaseError when `tc` cannot build a wheel (or is not the torch asked for).

    need_torch=False checks only nvcc and the host compiler: the kernel objects compile without
    torch (release.archive.archives)."""
    if tc.nvcc and not tc.cuda_version:
        what = "does not exist" if not Path(tc.nvcc).exists() else "does not run as nvcc (no version from --version)"
        raise ReleaseError(
            f"CUDACXX={tc.nvcc} {what}. Point CUDACXX at the nvcc of a CUDA toolkit (12.8 or newer; 13.x for torch "
            "cu13x builds), e.g. /usr/local/cuda/bin/nvcc, or unset it to use the nvcc on PATH."
        )
    if not tc.nvcc or not tc.cuda_version:
        raise ReleaseError(
            "no nvcc found (looked at $CUDACXX, PATH, $CUDA_HOME/bin). Install the CUDA toolkit (nvcc 12.8 or "
            "newer; 13.x for torch cu13x builds) and put its bin/ on PATH, or set CUDACXX=/path/to/nvcc."
        )
    if need_torch:
        _check_torch(tc, want_torch)
    if not tc.compiler_id:
        raise ReleaseError(
            "no host C++ compiler found (looked at $CXX, c++, g++, clang++, cl). Install gcc/g++ (Linux) or "
            "open a Visual Studio Developer Command Prompt (Windows), or set CXX."
        )


def _check_torch(tc: Toolchain, want_torch: str | None) -> None:
    if not tc.torch_version:
        raise ReleaseError(
            f"torch is not importable by {tc.python}. Install the torch you build against into it "
            "(e.g. pass --torch-version 2.14.1 to the nox session)."
        )
    if not tc.torch_cuda_version:
        raise ReleaseError(
            f"torch {tc.torch_version} is a CPU build; install a CUDA build of torch whose CUDA major matches "
            f"nvcc {tc.cuda_version}."
        )
    nvcc_major = tc.cuda_version.split(".")[0]
    torch_major = tc.torch_cuda_version.split(".")[0]
    if nvcc_major != torch_major:
        raise ReleaseError(
            f"torch {tc.torch_version} is built with CUDA {tc.torch_cuda_version} but nvcc ({tc.nvcc}) is CUDA "
            f"{tc.cuda_version}: the CUDA majors must match. Install a torch built for CUDA {nvcc_major}.x, or put "
            f"a CUDA {torch_major}.x nvcc first on PATH (or set CUDACXX)."
        )
    if want_torch and torch_public_version(tc.torch_version) != torch_public_version(want_torch):
        raise ReleaseError(
            f"asked for torch {want_torch} but {tc.python} has torch {tc.torch_version}. "
            f"Install it with: {tc.python} -m pip install torch=={want_torch}"
        )


def ensure_torch(version: str, python: str = sys.executable) -> str:
    """Install torch==`version` into `python`'s environment unless its torch already is that version.

    Returns the torch version in place afterwards. With a venv made with --system-site-packages,
    the system torch is reused when it matches, which avoids a multi-GB download per session.
    """
    found = probe_torch(python)
    if found and torch_public_version(found["version"]) == torch_public_version(version):
        return found["version"]
    print(f"release: installing torch=={version} into {python} (found {found and found['version']})", flush=True)
    proc = subprocess.run([python, "-m", "pip", "install", f"torch=={version}"])
    if proc.returncode != 0:
        raise ReleaseError(
            f"pip could not install torch=={version} (exit {proc.returncode}). Check the version exists for this "
            "platform, or point pip at a torch index with PIP_INDEX_URL / PIP_EXTRA_INDEX_URL."
        )
    found = probe_torch(python)
    if not found:
        raise ReleaseError(f"torch=={version} was installed but {python} cannot import it")
    return found["version"]


def main(argv: list[str] | None = None) -> int:
    """``python -m release.compile.toolchain``: print the probe as JSON, then check it (exit 2 with the
    reason when a build here would fail). Takes no arguments but ``--help``."""
    argparse.ArgumentParser(
        prog="python -m release.compile.toolchain", description=__doc__.split("\n\n")[0]
    ).parse_args(argv)

    def body() -> int:
        tc = probe()
        print(json.dumps(tc.as_dict(), indent=1))
        check(tc)
        return 0

    return run_main(body, prog="release.compile.toolchain")


if __name__ == "__main__":
    sys.exit(main())
