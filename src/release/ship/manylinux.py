"""The manylinux gate of a Linux wheel: ``auditwheel show`` accepts the policy, then the wheel is re-tagged.

``python -m release.ship.manylinux WHEEL_OR_FOLDER... [--policy manylinux_2_28]`` (``nox -s manylinux``).
For each ``flash_attn-*-linux_x86_64.whl``:

1. ``auditwheel show --json`` reads every ELF file of the wheel;
2. :func:`audit` turns its report into problems: symbol versions of glibc / libstdc++ / libgcc newer
   than the policy allows (``sym_tag``), blacklisted symbols, PyFPE / UCS2 / ISA flags, and every
   external library the policy does not list *except* those torch provides at run time
   (:data:`PROVIDED_BY_TORCH`: libtorch*, libc10*, libcudart, the driver's libcuda), which are never
   vendored; and a wheel that already vendors libraries (a ``*.libs/`` folder) is refused;
3. no problem: the platform tag becomes ``<policy>_x86_64`` (``release.compile.tagging.retag_platform``)
   and the ``.sha256`` beside the wheel is rewritten; a problem: exit 2, the wheel left as it was.

``auditwheel repair`` is not used: it would copy libtorch and libcudart into the wheel.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from release import checksums
from release.compile import tagging
from release.errors import ReleaseError, run_main

DEFAULT_POLICY = "manylinux_2_28"
# DT_NEEDED libraries the wheel may keep external: torch's wheel and its nvidia-* dependencies
# install them, and the extension must use those very copies (one libtorch, one CUDA runtime).
PROVIDED_BY_TORCH = (
    re.compile(r"^libtorch(_cpu|_cuda|_python)?\.so$"),
    re.compile(r"^libc10(_cuda)?\.so$"),
    re.compile(r"^libcudart\.so\.\d+$"),
    re.compile(r"^libcuda\.so\.1$"),  # the driver, present on any machine with a GPU
)
_TAG_RE = re.compile(r"^manylinux_(\d+)_(\d+)_\w+$")


def glibc_of(tag: str) -> tuple[int, int] | None:
    """(2, 28) of manylinux_2_28_x86_64; None for linux_x86_64 (no manylinux policy holds)."""
    m = _TAG_RE.match(tag or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def provided_by_torch(lib: str) -> bool:
    return any(p.match(lib) for p in PROVIDED_BY_TORCH)


def _newer_symbols(versioned: dict[str, list[str]], glibc: tuple[int, int]) -> list[str]:
    """The GLIBC_x.y versions above `glibc`, and the highest GLIBCXX / CXXABI / GCC version, for the message."""
    found: dict[str, tuple[int, ...]] = {}
    newer = set()
    for versions in versioned.values():
        for v in versions:
            name, _, number = v.partition("_")
            if not number or not all(x.isdigit() for x in number.split(".")):
                continue
            key = tuple(int(x) for x in number.split("."))
            if name == "GLIBC" and key[:2] > glibc:
                newer.add(v)
            elif name in ("GLIBCXX", "CXXABI", "GCC") and key > found.get(name, ()):
                found[name] = key
    top = [f"{n}_{'.'.join(map(str, k))}" for n, k in sorted(found.items())]
    return sorted(newer) + top


def audit(report: dict, policy: str = DEFAULT_POLICY, direct: set[str] | None = None) -> list[str]:
    """Problems that keep a wheel from the policy's tag, from an ``auditwheel show --json`` report.

    `report` is auditwheel's version-1 JSON (keys sym_tag, pyfpe, ucs2, unsupported_isa,
    versioned_symbols, external_libs, policy_upgrades). `direct` is the set of DT_NEEDED names of
    the wheel's own ELF files (:func:`direct_needed`); when given, libraries auditwheel reached only
    through torch's (e.g. libcublas via libtorch_cuda, when torch is importable where auditwheel
    runs) are torch's dependencies, not the wheel's. Returns [] when the wheel may be tagged
    `policy` with the libraries of :data:`PROVIDED_BY_TORCH` left external.
    """
    if report.get("version") != 1 or "sym_tag" not in report:
        return [f"not an auditwheel show --json report (version 1): {sorted(report)}"]
    target = tagging.platform_tag(policy)
    want = glibc_of(target)
    problems = []
    got = glibc_of(report["sym_tag"])
    if got is None or got > want:
        symbols = ", ".join(_newer_symbols(report.get("versioned_symbols", {}), want))
        problems.append(
            f"its symbol versions need {report['sym_tag']}, newer than {target} ({symbols}). Build it in the "
            f"{policy} image (release_matrix.oses in build-manifest.json), whose compiler keeps to glibc "
            f"{want[0]}.{want[1]}."
        )
    for flag, what in (("pyfpe", "uses PyFPE_jbuf"), ("ucs2", "is built for UCS2"), ("unsupported_isa", "needs ISA")):
        if report.get(flag):
            problems.append(f"it {what} (auditwheel: not allowed by any manylinux policy)")
    upgrade = (report.get("policy_upgrades") or {}).get(target, {})
    if upgrade.get("blacklisted_symbols"):
        problems.append(f"it uses symbols {target} forbids: {upgrade['blacklisted_symbols']}")
    needed = upgrade.get("libs_to_eliminate", [])
    foreign = [lib for lib in needed if not provided_by_torch(lib) and (direct is None or lib in direct)]
    if foreign:
        problems.append(
            f"it needs external libraries that neither {target} nor torch provides: {', '.join(foreign)}. Link "
            "them statically or drop the dependency (they are never vendored)."
        )
    return problems


def direct_needed(wheel: Path) -> set[str] | None:
    """DT_NEEDED names of every ELF file in `wheel` (pyelftools, installed with auditwheel); None without it."""
    try:
        from elftools.common.exceptions import ELFError
        from elftools.elf.dynamic import DynamicSection
        from elftools.elf.elffile import ELFFile
    except ImportError:
        return None
    needed: set[str] = set()
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            data = zf.read(name)
            if not data.startswith(b"\x7fELF"):
                continue
            try:
                elf = ELFFile(io.BytesIO(data))
                for section in elf.iter_sections():
                    if isinstance(section, DynamicSection):
                        needed |= {t.needed for t in section.iter_tags() if t.entry.d_tag == "DT_NEEDED"}
            except ELFError:
                continue
    return needed


def vendored(wheel: Path) -> list[str]:
    """Members in a ``*.libs/`` folder (what auditwheel repair would have added)."""
    with zipfile.ZipFile(wheel) as zf:
        return [n for n in zf.namelist() if n.split("/")[0].endswith(".libs")]


def auditwheel_show(wheel: Path, auditwheel: str | None = None) -> dict:
    """``auditwheel show --json WHEEL`` as data; ReleaseError when the tool is missing or fails."""
    exe = auditwheel or shutil.which("auditwheel")
    if not exe:
        raise ReleaseError("auditwheel is not installed: run this through nox -s manylinux (it installs the pin)")
    proc = subprocess.run([exe, "show", "--json", str(wheel)], capture_output=True, text=True)
    try:
        report = json.loads(proc.stdout[proc.stdout.index("{") :])  # the JSON (logs go to stderr)
    except ValueError:
        report = None
    if proc.returncode != 0 or not isinstance(report, dict):
        raise ReleaseError(f"auditwheel show {wheel.name} failed (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}")
    return report


def gate(wheel: Path, policy: str = DEFAULT_POLICY, auditwheel: str | None = None) -> Path:
    """Audit `wheel` and re-tag it `<policy>_x86_64`, rewriting its .sha256; returns the new path."""
    wheel = Path(wheel)
    problems = [f"it vendors libraries: {', '.join(v)}"] if (v := vendored(wheel)) else []
    report = auditwheel_show(wheel, auditwheel)
    problems += audit(report, policy, direct_needed(wheel))
    if problems:
        raise ReleaseError(f"{wheel.name} is not {policy}:\n  " + "\n  ".join(problems))
    old_sidecar = wheel.with_name(wheel.name + ".sha256")
    new = tagging.retag_platform(wheel, tagging.platform_tag(policy))
    if new != wheel:
        checksums.write_sidecar(new)
        if old_sidecar.exists():
            old_sidecar.unlink()
    external = ", ".join(sorted(report.get("external_libs", {}))) or "none"
    print(f"release: {new.name}: {policy} (symbols {report['sym_tag']}; external, from torch: {external})")
    return new


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m release.ship.manylinux", description=__doc__.split("\n")[0])
    p.add_argument("wheels", nargs="+", type=Path, help="linux_x86_64 wheels or folders of them")
    p.add_argument("--policy", default=DEFAULT_POLICY, help=f"manylinux_<major>_<minor> (default {DEFAULT_POLICY})")
    args = p.parse_args(argv)

    def body() -> None:
        wheels = []
        for w in args.wheels:
            wheels += sorted(w.glob("flash_attn-*-linux_x86_64.whl")) if w.is_dir() else [w]
        if not wheels:
            raise ReleaseError(f"no flash_attn-*-linux_x86_64.whl in {', '.join(map(str, args.wheels))}")
        for w in wheels:
            gate(w, args.policy)

    return run_main(body, prog="release.ship.manylinux")


if __name__ == "__main__":
    sys.exit(main())
