"""SHA-256 checksums in the format `sha256sum -c` reads.

Each line is ``<64 lowercase hex>  <file name>`` (two spaces: text mode, which GNU sha256sum
writes by default and treats the same as binary on Linux), names relative to the folder of the
checksum file, sorted, with "/" as separator. Files are written atomically.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from .errors import ReleaseError

_LINE_RE = re.compile(r"^([0-9a-fA-F]{64}) [ *](.+)$")


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def atomic_write_text(path: Path, text: str) -> Path:
    """Write `text` to a temporary file beside `path`, then rename it over `path`."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.partial")
    try:
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def format_lines(files: list[Path], base: Path) -> str:
    lines = []
    for f in sorted(files, key=lambda p: p.relative_to(base).as_posix()):
        name = f.relative_to(base).as_posix()
        if "\n" in name or "\\" in name:
            raise ReleaseError(f"file name {name!r} cannot be written to a checksum file")
        lines.append(f"{sha256_file(f)}  {name}\n")
    return "".join(lines)


def write_sha256sums(files: list[Path], dest: Path) -> Path:
    """Write SHA256SUMS `dest` for `files` (all inside dest's folder)."""
    base = Path(dest).parent.resolve()
    return atomic_write_text(dest, format_lines([Path(f).resolve() for f in files], base))


def write_sidecar(path: Path) -> Path:
    """Write `<path>.sha256` holding the one line for `path`."""
    path = Path(path).resolve()
    return atomic_write_text(path.with_name(path.name + ".sha256"), format_lines([path], path.parent))


def parse_sha256sums(text: str) -> list[tuple[str, str]]:
    """[(hex digest, name)] of a checksum file; ReleaseError for a malformed line."""
    entries = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = _LINE_RE.match(line)
        if not m:
            raise ReleaseError(f"line {n} of the checksum file is not '<sha256>  <name>': {line!r}")
        entries.append((m.group(1).lower(), m.group(2)))
    return entries


def verify_sha256sums(sums: Path) -> list[str]:
    """Check every file listed in `sums`; returns the names checked.

    Raises ReleaseError listing each missing file and each mismatch.
    """
    sums = Path(sums)
    base = sums.parent
    problems, checked = [], []
    for digest, name in parse_sha256sums(sums.read_text(encoding="utf-8")):
        target = base / name
        if not target.is_file():
            problems.append(f"{name}: missing")
        elif sha256_file(target) != digest:
            problems.append(f"{name}: checksum mismatch")
        else:
            checked.append(name)
    if problems:
        raise ReleaseError(f"{sums} does not verify:\n  " + "\n  ".join(problems))
    if not checked:
        raise ReleaseError(f"{sums} lists no files")
    return checked
