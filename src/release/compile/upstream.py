"""The pinned upstream sdist for tests and tools, obtained the way the build obtains it.

The build owns the download cache and the hash check (cmake/FlashAttnUpstream.cmake, with the pin
from build-manifest.json); this module runs that code through ``cmake -P
cmake/scripts/FetchUpstreamSdist.cmake`` instead of repeating it, then extracts the sdist where
the caller asks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from release import _paths, manifest
from release.errors import ReleaseError

FETCH_SCRIPT = _paths.REPO_ROOT / "cmake" / "scripts" / "FetchUpstreamSdist.cmake"
_RESULT_PREFIX = "flash_attn-sdist="
# Parts of the sdist that nothing here compiles or reads (the ROCm backend's sources, 39 MB).
_SKIPPED = ("csrc/composable_kernel",)


def _skipped(relative: str) -> bool:
    return any(relative == s or relative.startswith(s + "/") for s in _SKIPPED)


def pinned_sdist(sdist: str | os.PathLike | None = None, python: str = sys.executable) -> Path:
    """Path of the verified pinned sdist (flash_attn-<pin>.tar.gz).

    `sdist` (else $FLASH_ATTN_SDIST) names an already-downloaded file, which is hash-checked;
    without one the pin is downloaded with pip into the build's download cache when absent.
    Raises ReleaseError with CMake's message when cmake is missing, the download fails, or the
    file's SHA-256 is not the pin.
    """
    cmake = shutil.which("cmake")
    if cmake is None:
        pin = next((s for s in manifest.load()["tool_pins"]["build"] if s.startswith("cmake==")), "cmake")
        raise ReleaseError(
            f"cmake is not on PATH; install it (pip install {pin}, the sessions' pin) to fetch the upstream sdist"
        )
    given = sdist if sdist is not None else os.environ.get("FLASH_ATTN_SDIST") or None
    cmd = [cmake, f"-DPYTHON={python}"]
    if given:
        cmd.append(f"-DFLASH_ATTN_SDIST={Path(given).expanduser().resolve()}")
    cmd += ["-P", str(FETCH_SCRIPT)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    found = [line[len(_RESULT_PREFIX) :] for line in r.stdout.splitlines() if line.startswith(_RESULT_PREFIX)]
    if r.returncode != 0 or not found:
        raise ReleaseError(f"could not obtain the pinned upstream sdist:\n{(r.stderr or r.stdout).strip()}")
    return Path(found[-1])


def extract_sdist(sdist: Path, dest: Path) -> Path:
    """Extract `sdist` into `dest` and return the tree's root (the folder holding setup.py, csrc/).

    The ROCm sources are left out. Members are extracted with tarfile's "data" filter, so an
    archive cannot write outside `dest`. Raises ReleaseError for an archive of another layout.
    """
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(sdist) as tar:
        members = tar.getmembers()
        roots = {m.name.split("/", 1)[0] for m in members}
        if len(roots) != 1:
            raise ReleaseError(f"{sdist} is not an sdist with one top-level folder (found {sorted(roots)[:5]})")
        (root,) = roots
        wanted = [m for m in members if not _skipped(m.name.split("/", 1)[-1])]
        tar.extractall(dest, members=wanted, filter="data")
    tree = dest / root
    if not (tree / "csrc" / "flash_attn" / "src" / "flash.h").is_file():
        raise ReleaseError(f"{sdist} has no csrc/flash_attn/src/flash.h: not a FlashAttention-2 sdist")
    return tree
