"""SHA-256 checksums in the format `sha256sum -c` reads.

Each line is ``<64 lowercase hex>  <file name>`` (two spaces: text mode, which GNU sha256sum
writes by default and treats the same as binary on Linux), names relative to the folder of the
checksum file, sorted, with "/" as separator. Files are written atomically.

The names are relative, as ``sha256sum -c`` expects, so that tool verifies from the checksum
file's folder (``cd wheelhouse && sha256sum -c flash_attn-...whl.sha256``). A checksum file is
read as untrusted input: every name must be a plain file name in that folder (release.confine's
rule, and no "/": a checksum file covers the files beside it), listed once; anything else
(``../outside.txt``, ``/etc/hostname``, ``sub/x``, a link) is refused before any file is read,
with one line naming the checksum file and the line. The verifier resolves the names against the
checksum file's folder, so it works from anywhere:
``python -m release.checksums wheelhouse/flash_attn-...whl.sha256`` (exit 0 when every file
matches, 2 otherwise).
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from release import confine
from release.errors import ReleaseError, run_main
from release.outputs import temp_file

_LINE_RE = re.compile(r"^([0-9a-fA-F]{64}) [ *](.+)$")


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def atomic_write_text(path: Path, text: str) -> Path:
    """Write `text` to a new temporary file beside `path` (release.outputs), then rename it over `path`."""
    path = Path(path)
    tmp = temp_file(path)
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


def parse_sha256sums(text: str, source: object = "the checksum file") -> list[tuple[str, str]]:
    """[(hex digest, name)] of a checksum file's text (`source` names it in messages).

    ReleaseError for a malformed line, a name that is not a plain file name of the checksum file's
    own folder (release.confine.member, and no "/"), or a name listed twice.
    """
    entries, seen = [], set()
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = _LINE_RE.match(line)
        if not m:
            raise ReleaseError(f"line {n} of {source} is not '<sha256>  <name>': {line!r}")
        name = confine.member(m.group(2), source, f"line {n}: name")
        if "/" in name:
            raise ReleaseError(
                f"{source}: line {n}: name {name!r} is in a subfolder; a checksum file lists only the files beside it"
            )
        if name in seen:
            raise ReleaseError(f"{source}: line {n}: {name!r} is listed twice")
        seen.add(name)
        entries.append((m.group(1).lower(), name))
    return entries


def verify_sha256sums(sums: Path) -> list[str]:
    """Check every file listed in `sums`; returns the names checked.

    Raises ReleaseError listing each missing file and each mismatch.
    """
    sums = Path(sums)
    base = sums.parent
    problems, checked = [], []
    try:
        text = sums.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ReleaseError(f"cannot read the checksum file {sums}: {e}") from None
    for digest, name in parse_sha256sums(text, sums):
        target = confine.join(base, name, sums, "name")
        if not target.is_file():
            problems.append(f"{name}: missing (looked for {target})")
        elif (found := sha256_file(target)) != digest:
            problems.append(
                f"{name}: checksum mismatch (sha256 {found}, listed {digest}): the file is damaged, truncated or "
                "another file than the one the checksum was written for; download or build it again"
            )
        else:
            checked.append(name)
    if problems:
        raise ReleaseError(f"{sums} does not verify:\n  " + "\n  ".join(problems))
    if not checked:
        raise ReleaseError(f"{sums} lists no files")
    return checked


def verify_sidecar(path: Path) -> bool:
    """Verify `<path>.sha256` when it exists (before the file is opened); True when it was checked.

    Raises ReleaseError when the sidecar does not list `path`'s name or the hash differs.
    """
    path = Path(path)
    sidecar = path.with_name(path.name + ".sha256")
    if not sidecar.is_file():
        return False
    names = verify_sha256sums(sidecar)
    if names != [path.name]:
        raise ReleaseError(f"{sidecar} lists {names}, not only {path.name}; write it again or remove it")
    return True


def main(argv: list[str] | None = None) -> int:
    """``python -m release.checksums FILE.sha256...``: verify checksum files from any folder."""
    import argparse
    import sys

    p = argparse.ArgumentParser(prog="python -m release.checksums", description="Verify sha256sum-format files.")
    p.add_argument("sums", nargs="+", type=Path, help="SHA256SUMS or <file>.sha256 files")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)

    def body() -> int:
        for sums in args.sums:
            for name in verify_sha256sums(sums):
                print(f"{sums.parent / name}: OK")
        return 0

    return run_main(body, prog="release.checksums", argv=argv)


if __name__ == "__main__":
    raise SystemExit(main())
