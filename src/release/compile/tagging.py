"""Local version labels and wheel re-tagging.

A wheel is tagged with the local version label ``+cu<CUDA>torch<torch>cxx11abi<true|false>.<group>``
(docs/design.md), e.g. ``flash_attn-2.8.3.post2+cu130torch2.14.1cxx11abitrue.legacy.rev1``; a wheel of any
kernel set other than ``release`` gets the set's name as one more segment
(``...legacy.ci``, ``...legacy.dev``, ``...legacy.custom``), so a dry-run wheel never carries the
name of a release wheel. The label is
computed from the wheel's own build info (``flash_attn/build_info_<group>.json``), written in
PEP 440 normal form, and put into the file name, the dist-info folder name, ``METADATA`` and
``RECORD`` by ``wheel pack --local-version`` (wheel >= 0.48), never by renaming the file alone.
A stable-ABI wheel (build info ``torch_abi: "stable"``) is labelled
``+cu<CUDA>torchstable<torch_min>.<group>`` instead (src/flash_attn_wheel_names/label.py), and its ``METADATA``
gets ``Requires-Dist: torch>=<torch_min>`` in place of pyproject.toml's plain ``torch``
(:func:`set_torch_requirement`, before ``wheel pack`` writes the fresh RECORD), so pip and uv refuse
or upgrade a torch below the minimum. An exact wheel gets ``Requires-Dist: torch==<the torch it was
built against>`` (public version, e.g. ``torch==2.14.1``): a plain ``torch`` made pip and uv pick
the newest torch in an empty environment, which that wheel cannot load. PEP 440 ignores a
candidate's local label for a specifier without one, so an installed ``2.14.1+cu130`` satisfies it
and is kept; a different installed torch is replaced by that release (from the index the user
installs from, PyPI's by default). ``METADATA`` also declares every file under
``<dist-info>/licenses/`` with ``License-File`` (:func:`declare_license_files`): scikit-build-core
declares pyproject.toml's ``license-files`` only, not upstream's ``LICENSE-flash-attention`` that
CMakeLists.txt installs beside it.
The tagged wheel appears in the output folder atomically (written to a temporary name in the
same folder, then renamed).

The platform tag: the build writes ``linux_x86_64`` / ``win_amd64``. A Linux wheel that
``auditwheel show`` finds consistent with a manylinux policy (``release.ship.manylinux``) is re-tagged
with that policy's tag (:func:`platform_tag`, :func:`retag_platform`, ``wheel tags``).

Reproducible: the build (scikit-build-core, ``wheel.reproducible``) and ``wheel pack`` both
take their zip timestamps from ``SOURCE_DATE_EPOCH`` (:func:`source_date_epoch`), and ``wheel
pack`` writes members in sorted order with the modes ``wheel unpack`` restored, so the same
inputs give the same bytes.

A file that is not a readable zip (truncated, damaged, a Git LFS pointer) is reported by
:func:`open_wheel` as a ReleaseError, never as a ``zipfile`` traceback.
"""

from __future__ import annotations

import base64
import csv
import email.parser
import email.policy
import hashlib
import io
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from flash_attn_wheel_names import label as wheel_label
from flash_attn_wheel_names import native
from release import _paths, confine
from release.compile import arch_rules
from release.errors import ReleaseError

MIN_WHEEL = (0, 48)


# 1980-01-01, the earliest zip timestamp: used when neither SOURCE_DATE_EPOCH nor git is there.
FALLBACK_EPOCH = 315532800
LFS_POINTER = b"version https://git-lfs.github.com/spec/"


def source_date_epoch(env: dict | None = None) -> str:
    """The zip timestamp of our wheels: $SOURCE_DATE_EPOCH, else the commit time of the checkout's
    HEAD (``git log -1 --format=%ct``), else 1980-01-01. Seconds since 1970, as a string."""
    env = os.environ if env is None else env
    if env.get("SOURCE_DATE_EPOCH", "").strip():
        return env["SOURCE_DATE_EPOCH"].strip()
    try:
        proc = subprocess.run(
            ["git", "-C", str(_paths.REPO_ROOT), "log", "-1", "--format=%ct"], capture_output=True, text=True
        )
        if proc.returncode == 0 and proc.stdout.strip().isdigit():
            return proc.stdout.strip()
    except OSError:
        pass
    return str(FALLBACK_EPOCH)


@contextmanager
def open_wheel(path: Path) -> Iterator[zipfile.ZipFile]:
    """zipfile.ZipFile of `path`; ReleaseError (what the file is, what to do) when it is not a readable zip.

    Covers a missing file, a Git LFS pointer (text beginning "version https://git-lfs"), a
    truncated file, and damaged members (CRC or deflate errors while reading, also in the with body).
    """
    path = Path(path)
    try:
        with open(path, "rb") as f:
            head = f.read(len(LFS_POINTER))
    except OSError as e:
        raise ReleaseError(f"cannot read {path}: {e.strerror}; pass the path of a built .whl") from None
    if head == LFS_POINTER:
        raise ReleaseError(
            f"{path.name} is a Git LFS pointer file, not a wheel. Fetch the real file (git lfs pull) or download "
            "the wheel again."
        )
    try:
        with zipfile.ZipFile(path) as zf:
            yield zf
    except (zipfile.BadZipFile, zlib.error, EOFError) as e:
        raise ReleaseError(
            f"{path.name} is not a readable wheel ({e}): the file is truncated or damaged. Download or build it "
            f"again ({arch_rules.sessions_hint('wheel')})."
        ) from None


# The fields a wheel's build info must hold to be tagged (the label's fallbacks are for older runtimes' records).
_LABEL_FIELDS = ("cuda_version", "torch_version", "cxx11_abi", "group", "kernel_set")


def local_label(info: dict) -> str:
    """The local version label of a build info record, in PEP 440 normal form.

    src/flash_attn_wheel_names/label.py's ``label_of`` (the runtime's definition, also used by release.plan.matrix) of
    cuda_version, the torch version without its own local label, cxx11_abi, the arch group and
    the kernel set (a last segment unless it is ``release``). Raises ReleaseError when a field is
    missing or not label-safe.
    """
    from packaging.version import InvalidVersion, Version

    try:
        missing = [name for name in _LABEL_FIELDS if name not in info]
        if missing:
            raise KeyError(", ".join(missing))
        return Version(f"0+{wheel_label.label_of(info)}").local
    except (KeyError, ValueError, InvalidVersion) as e:
        raise ReleaseError(f"cannot compute the local version label from build info {info}: {e}") from None


def torch_requirement(info: dict) -> str:
    """The ``Requires-Dist`` torch requirement a wheel of this build info must carry: ``torch>=<torch_min>``
    for a stable-ABI build (src/flash_attn_wheel_names/label.py), ``torch==<torch_version without its local label>``
    for an exact one. ReleaseError when unreadable."""
    try:
        stable = wheel_label.torch_requirement(info)
    except ValueError as e:
        raise ReleaseError(f"build info {info.get('group')!r}: {e}; rebuild the wheel") from None
    if stable is not None:
        return stable
    from packaging.version import InvalidVersion, Version

    try:
        return f"torch=={Version(str(info['torch_version'])).public}"
    except (KeyError, InvalidVersion) as e:
        raise ReleaseError(f"build info {info.get('group')!r} has no usable torch_version ({e}); rebuild") from None


def declare_license_files(metadata: str, files: list[str]) -> str:
    """METADATA text with a ``License-File: <path>`` header for each of `files` (paths relative to
    ``<dist-info>/licenses/``, PEP 639) it does not declare yet, after the last License-File header
    (else after the others); the description body is kept byte for byte."""
    head, sep, body = metadata.partition("\n\n")
    if not sep and head.endswith("\n"):
        head, body = head[:-1], "\n"
    lines = head.split("\n")
    declared = [i for i, line in enumerate(lines) if line.lower().startswith("license-file:")]
    have = {lines[i].split(":", 1)[1].strip() for i in declared}
    at = declared[-1] + 1 if declared else len(lines)
    lines[at:at] = [f"License-File: {f}" for f in sorted(files) if f not in have]
    return "\n".join(lines) + sep + body


def _is_torch(line: str) -> bool:
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    if not line.lower().startswith("requires-dist:"):
        return False
    try:
        return canonicalize_name(Requirement(line.split(":", 1)[1].strip()).name) == "torch"
    except InvalidRequirement:
        return False


def set_torch_requirement(metadata: str, requirement: str) -> str:
    """METADATA text with every ``Requires-Dist`` on torch replaced by one ``Requires-Dist: <requirement>``
    (added after the headers when there was none); the description body is kept byte for byte."""
    head, sep, body = metadata.partition("\n\n")
    if not sep and head.endswith("\n"):  # headers only: keep the final newline where it was
        head, body = head[:-1], "\n"
    lines = head.split("\n")
    keep = [line for line in lines if not _is_torch(line)]
    at = next((i for i, line in enumerate(lines) if _is_torch(line)), None)
    at = len(keep) if at is None else sum(1 for line in lines[:at] if not _is_torch(line))
    keep.insert(at, f"Requires-Dist: {requirement}")
    return "\n".join(keep) + sep + body


def metadata_torch_requirements(wheel: Path) -> list[str]:
    """The ``Requires-Dist`` values on torch in `wheel`'s METADATA (e.g. ``["torch>=2.11"]``)."""
    facts = verify_wheel(wheel)
    with open_wheel(wheel) as zf:
        text = zf.read(f"{facts.dist_info}/METADATA").decode("utf-8")
    head = text.partition("\n\n")[0]
    return [line.split(":", 1)[1].strip() for line in head.split("\n") if _is_torch(line)]


def tagged_version(version: str, label: str) -> str:
    """version (its own local label replaced) + label, normalized: 2.8.3.post2+cu130...legacy."""
    from packaging.version import Version

    return str(Version(f"{Version(version).public}+{label}"))


def read_build_info(wheel: Path) -> dict:
    """The one flash_attn/build_info_<group>.json inside `wheel` (ReleaseError if not exactly one)."""
    with open_wheel(wheel) as zf:
        names = [n for n in zf.namelist() if native.wheel_build_info_group(n)]
        if len(names) != 1:
            raise ReleaseError(
                f"{wheel.name} holds {len(names)} build info files ({names}); expected exactly one "
                "flash_attn/build_info_<group>.json. Rebuild the wheel with a single arch group."
            )
        try:
            return json.loads(zf.read(names[0]))
        except ValueError as e:
            raise ReleaseError(f"{wheel.name}: {names[0]} is not valid JSON ({e}); rebuild the wheel") from None


def native_members(wheel: Path) -> tuple[list[str], list[str]]:
    """(group names of flash_attn/_C_<group>.so|pyd, group names of build_info_<group>.json) in `wheel`."""
    with open_wheel(wheel) as zf:
        names = zf.namelist()
    libs = [group for name in names if (group := native.wheel_library_group(name))]
    infos = [group for name in names if (group := native.wheel_build_info_group(name))]
    return libs, infos


def _wheel_version() -> tuple[int, ...]:
    import wheel

    return tuple(int(x) for x in re.findall(r"\d+", wheel.__version__)[:2])


def retag(wheel: Path, dest_dir: Path, label: str | None = None, python: str = sys.executable) -> Path:
    """Write `wheel` with local label `label` (default: from its build info) into `dest_dir`.

    Unpacks with `wheel unpack`, re-packs with `wheel pack --local-version` (which renames the
    dist-info folder, rewrites METADATA's Version and writes a fresh RECORD), checks the result,
    then moves it into dest_dir under a temporary name and renames it, so dest_dir never holds a
    half-written wheel. Returns the final path.
    """
    if _wheel_version() < MIN_WHEEL:
        raise ReleaseError("re-tagging needs wheel >= 0.48 (wheel pack --local-version): pip install 'wheel>=0.48'")
    wheel = Path(wheel)
    info = read_build_info(wheel)
    label = label or local_label(info)
    requirement = torch_requirement(info)
    dest_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".retag-", dir=dest_dir) as tmp:
        tmp = Path(tmp)
        _check_call([python, "-m", "wheel", "unpack", "-d", str(tmp / "unpacked"), str(wheel)])
        (root,) = list((tmp / "unpacked").iterdir())
        # METADATA before pack writes the RECORD: the torch requirement, and every license file declared
        (metadata,) = root.glob("*.dist-info/METADATA")
        licenses = metadata.parent / "licenses"
        shipped = [p.relative_to(licenses).as_posix() for p in licenses.rglob("*") if p.is_file()]
        text = set_torch_requirement(metadata.read_bytes().decode("utf-8"), requirement)
        metadata.write_bytes(declare_license_files(text, shipped).encode("utf-8"))
        (tmp / "packed").mkdir()
        pack = [python, "-m", "wheel", "pack", "--local-version", label, "-d", str(tmp / "packed"), str(root)]
        _check_call(pack, env={**os.environ, "SOURCE_DATE_EPOCH": source_date_epoch()})
        (packed,) = list((tmp / "packed").glob("*.whl"))
        facts = verify_wheel(packed)
        expected = tagged_version(facts.version, label)
        if facts.version != expected:
            raise ReleaseError(f"re-tagged wheel {packed.name} has version {facts.version}, expected {expected}")
        if metadata_torch_requirements(packed) != [requirement]:
            raise ReleaseError(f"re-tagged wheel {packed.name} does not require {requirement} in its METADATA")
        final = dest_dir / packed.name
        partial = dest_dir / f".{packed.name}.partial"
        shutil.move(str(packed), partial)
        os.replace(partial, final)
    return final


def _check_call(cmd: list[str], env: dict | None = None) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise ReleaseError(f"{' '.join(cmd)} failed (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}")


@dataclass(frozen=True)
class WheelFacts:
    name: str  # normalized project name, e.g. flash-attn
    version: str  # the full version, same in file name, dist-info folder and METADATA
    tags: tuple[str, ...]
    dist_info: str  # dist-info folder name


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def verify_wheel(path: Path) -> WheelFacts:
    """Check that a wheel is self-consistent; raise ReleaseError naming the first disagreement.

    File name parses (packaging), its version equals the dist-info folder's and METADATA's
    (compared as strings of the normal form, which is what the file name must hold), and every
    RECORD line's hash and size match the member (RECORD lists every member). Every member name and
    RECORD path must follow release.confine's rule (relative, normalised, no ``..``, drive or
    backslash), and no member may be a symbolic link.
    """
    from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
    from packaging.version import Version

    path = Path(path)
    try:
        name, version, _, tags = parse_wheel_filename(path.name)
    except InvalidWheelFilename as e:
        raise ReleaseError(f"{path.name}: {e}") from None
    file_version = path.name.split("-")[1]
    if file_version != str(version):
        raise ReleaseError(f"{path.name}: version '{file_version}' in the file name is not in normal form ({version})")
    with open_wheel(path) as zf:
        members = zf.namelist()
        for info in zf.infolist():  # release.confine's rule for every member, and no symlink member
            confine.member(info.filename[:-1] if info.is_dir() else info.filename, path.name, "member")
            if stat.S_ISLNK(info.external_attr >> 16):
                raise ReleaseError(f"{path.name}: member {info.filename!r} is a symbolic link; build the wheel again")
        dist_infos = sorted({m.split("/")[0] for m in members if m.split("/")[0].endswith(".dist-info")})
        if len(dist_infos) != 1:
            raise ReleaseError(f"{path.name}: expected one .dist-info folder, found {dist_infos}")
        dist_info = dist_infos[0]
        di_name, _, di_version = dist_info[: -len(".dist-info")].rpartition("-")
        if canonicalize_name(di_name) != name or di_version != file_version:
            raise ReleaseError(f"{path.name}: dist-info folder {dist_info} does not match the file name")
        for needed in ("METADATA", "RECORD"):
            if f"{dist_info}/{needed}" not in members:
                raise ReleaseError(f"{path.name} has no {dist_info}/{needed}: not a complete wheel; build it again")
        meta = email.parser.BytesParser(policy=email.policy.compat32).parsebytes(zf.read(f"{dist_info}/METADATA"))
        if meta["Version"] != file_version or Version(meta["Version"]) != version:
            raise ReleaseError(f"{path.name}: METADATA Version {meta['Version']} differs from the file name")
        if canonicalize_name(meta["Name"]) != name:
            raise ReleaseError(f"{path.name}: METADATA Name {meta['Name']} differs from the file name")
        record = f"{dist_info}/RECORD"
        try:
            rows = list(csv.reader(io.StringIO(zf.read(record).decode("utf-8"))))
        except (UnicodeDecodeError, csv.Error) as e:
            raise ReleaseError(f"{path.name}: {record} is not UTF-8 CSV ({e}); build the wheel again") from None
        listed = set()
        for row in rows:
            if not row:
                continue
            if len(row) != 3 or (row[2] and not row[2].isdigit()):
                raise ReleaseError(f"{path.name}: RECORD row {row!r} is not 'path,hash,size'; build the wheel again")
            member, digest, size = row
            confine.member(member, f"{path.name} {record}", "path")
            listed.add(member)
            if member == record:
                continue
            if member not in members:
                raise ReleaseError(f"{path.name}: RECORD lists {member}, which is not in the wheel")
            data = zf.read(member)
            if digest != _record_hash(data) or (size and int(size) != len(data)):
                raise ReleaseError(f"{path.name}: RECORD hash/size of {member} does not match its content")
        missing = [m for m in members if m not in listed and not m.endswith("/")]
        if missing:
            raise ReleaseError(f"{path.name}: RECORD does not list {missing}")
    return WheelFacts(name=name, version=file_version, tags=tuple(sorted(str(t) for t in tags)), dist_info=dist_info)


_MANYLINUX_RE = re.compile(r"^manylinux_(\d+)_(\d+)$")


def platform_tag(policy: str, arch: str = "x86_64") -> str:
    """The wheel platform tag of a manylinux policy (PEP 600): manylinux_2_28 -> manylinux_2_28_x86_64.

    Raises ReleaseError for anything but ``manylinux_<glibc major>_<glibc minor>`` (legacy aliases
    such as manylinux2014 are not accepted: the release names its glibc floor explicitly).
    """
    if not _MANYLINUX_RE.match(policy or ""):
        raise ReleaseError(
            f"manylinux policy {policy!r} is not of the form manylinux_<major>_<minor>, e.g. manylinux_2_28"
        )
    return f"{policy}_{arch}"


def retag_platform(wheel: Path, platform: str, python: str = sys.executable) -> Path:
    """Replace the platform tag of `wheel` with `platform`, in place of the original file.

    Runs ``wheel tags --platform-tag`` (which rewrites the WHEEL file's Tag lines, the RECORD and
    the file name) on a copy in a temporary folder beside `wheel`, checks the result with
    :func:`verify_wheel`, renames it into `wheel`'s folder, then removes `wheel`: at every moment the
    folder holds one complete wheel. Returns the new path (the same path when the tag is already
    `platform`). Raises ReleaseError when the tool fails or the result does not carry `platform`.
    """
    wheel = Path(wheel)
    facts = verify_wheel(wheel)
    if {t.rsplit("-", 1)[-1] for t in facts.tags} == {platform}:
        return wheel
    with tempfile.TemporaryDirectory(prefix=".platform-", dir=wheel.parent) as tmp:
        copy = Path(tmp) / wheel.name
        shutil.copyfile(wheel, copy)
        _check_call(
            [python, "-m", "wheel", "tags", "--remove", "--platform-tag", platform, str(copy)],
            env={**os.environ, "SOURCE_DATE_EPOCH": source_date_epoch()},  # same zip timestamps as retag
        )
        (tagged,) = [p for p in Path(tmp).glob("*.whl")]
        new = verify_wheel(tagged)
        if {t.rsplit("-", 1)[-1] for t in new.tags} != {platform} or new.version != facts.version:
            raise ReleaseError(f"wheel tags made {tagged.name} from {wheel.name}; expected platform tag {platform}")
        final = wheel.parent / tagged.name
        os.replace(tagged, final)
    wheel.unlink()
    return final
