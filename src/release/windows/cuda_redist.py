"""Install a CUDA toolkit on Windows from NVIDIA's redistributable archives (release.yml, ci.yml).

``python -m release.windows.cuda_redist`` with ``CUDA_FULL`` (e.g. 13.0.2, the exact toolkit: the
manifest ``redistrib_<CUDA_FULL>.json`` pins every component's version and sha256) and
``CUDA_ROOT`` (e.g. C:\\cuda) in the environment; ``CUDA_REDIST_URL`` replaces NVIDIA's base URL
(tests use a file:// folder). Every archive is checked against the manifest's sha256 and merged
into CUDA_ROOT; ``GITHUB_PATH`` gets CUDA_ROOT\\bin and ``GITHUB_ENV`` CUDA_PATH, CUDA_HOME and
CUDACXX. Each download is tried 4 times (10, 30, 90 s apart) before the step fails.

Why not the installer: it is slower and known to hang on windows-2022 images, and Ninja builds
need no Visual Studio integration. Stdlib only: it runs before anything is installed.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

from release.errors import ReleaseError, run_main

NVIDIA_REDIST = "https://developer.download.nvidia.com/compute/cuda/redist/"
WANTED = (
    "cuda_nvcc",
    "cuda_crt",
    "libnvvm",
    "cuda_cudart",
    "cuda_cccl",
    "cuda_nvtx",
    "cuda_cupti",
    "cuda_profiler_api",
)
REQUIRED = frozenset({"cuda_nvcc", "cuda_cudart", "cuda_cccl"})
# Components NVIDIA renamed: the first name the manifest lists is installed (CUDA 13.3's redistrib
# lists CCCL as the standalone "cccl", earlier ones as "cuda_cccl"; docs/ci.md).
RENAMED = {"cuda_cccl": ("cuda_cccl", "cccl")}
RETRY_DELAYS = (10, 30, 90)  # seconds between the attempts of one download


def fetch(url: str, timeout: float, delays=RETRY_DELAYS, sleep=time.sleep) -> bytes:
    """The body at `url`, retried after each of `delays` on a network error; the last error is raised."""
    for attempt in range(len(delays) + 1):
        try:
            with urllib.request.urlopen(url, timeout=timeout) as r:
                return r.read()
        except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
            if attempt == len(delays):
                raise
            print(f"{url}: {e}; retrying in {delays[attempt]} s", flush=True)
            sleep(delays[attempt])
    raise AssertionError("unreachable")


def install(version: str, root: Path, base: str = NVIDIA_REDIST) -> list[str]:
    """Install the WANTED components of `version` into `root`; returns the components installed.

    Raises ReleaseError (exit status 2 through main) when a required component is missing, an
    archive's sha256 differs from the manifest's, or the result has no nvvm/bin.
    """
    manifest = json.loads(fetch(f"{base}redistrib_{version}.json", timeout=60))
    done = []
    for wanted in WANTED:
        names = RENAMED.get(wanted, (wanted,))
        name = next((n for n in names if "windows-x86_64" in manifest.get(n, {})), wanted)
        item = manifest.get(name, {}).get("windows-x86_64")
        if item is None:
            if wanted in REQUIRED:
                raise ReleaseError(
                    f"redistrib_{version}.json has no windows-x86_64 {' or '.join(names)}; it lists {sorted(manifest)}"
                )
            print(f"{name}: not in redistrib_{version}.json, skipped")
            continue
        data = fetch(base + item["relative_path"], timeout=900)
        digest = hashlib.sha256(data).hexdigest()
        if digest != item["sha256"]:
            raise ReleaseError(f"{name}: sha256 {digest} differs from the manifest's {item['sha256']}")
        with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(io.BytesIO(data)) as zf:
            zf.extractall(tmp)
            (top,) = Path(tmp).iterdir()
            shutil.copytree(top, root, dirs_exist_ok=True)
        print(f"{name} {item.get('version')}: installed into {root}")
        done.append(name)
    if not (root / "nvvm" / "bin").is_dir():
        raise ReleaseError(f"no nvvm/bin under {root}: nvcc cannot compile; the manifest lists {sorted(manifest)}")
    return done


REQUIRED_ENV = ("CUDA_FULL", "CUDA_ROOT", "GITHUB_PATH", "GITHUB_ENV")


def main(argv: list[str] | None = None) -> int:
    """Install the toolkit the environment names (module docstring); ``--help`` says which variables.

    Exit status 0 installed, 2 a variable missing or a download or checksum failure (ReleaseError)."""
    argparse.ArgumentParser(
        prog="python -m release.windows.cuda_redist",
        description=__doc__.split("\n")[0],
        epilog="Reads CUDA_FULL (e.g. 13.0.2), CUDA_ROOT (e.g. C:\\cuda), GITHUB_PATH and GITHUB_ENV from the "
        "environment; CUDA_REDIST_URL optionally replaces NVIDIA's base URL.",
    ).parse_args(sys.argv[1:] if argv is None else argv)

    def body() -> None:
        missing = [name for name in REQUIRED_ENV if not os.environ.get(name)]
        if missing:
            raise ReleaseError(
                f"set {', '.join(missing)} in the environment (e.g. CUDA_FULL=13.0.2 CUDA_ROOT=C:\\cuda; GitHub "
                "Actions sets GITHUB_PATH and GITHUB_ENV): see python -m release.windows.cuda_redist --help"
            )
        version, root = os.environ["CUDA_FULL"], Path(os.environ["CUDA_ROOT"])
        install(version, root, os.environ.get("CUDA_REDIST_URL") or NVIDIA_REDIST)
        with open(os.environ["GITHUB_PATH"], "a", encoding="utf-8") as f:
            f.write(f"{root / 'bin'}\n")
        with open(os.environ["GITHUB_ENV"], "a", encoding="utf-8") as f:
            f.write(f"CUDA_PATH={root}\nCUDA_HOME={root}\nCUDACXX={root / 'bin' / 'nvcc.exe'}\n")

    return run_main(body, prog="release.windows.cuda_redist")


if __name__ == "__main__":
    sys.exit(main())
