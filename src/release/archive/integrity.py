"""The integrity rule of kernels archives: their manifest's shape, their content-addressed key,
their folder name and their objects (stdlib only, so CMake's Python can run it).

This module owns the rule; ``release.archive.archives`` (pack, gather, the wheel flow's
``--kernels``) and cmake/FlashAttnKernels.cmake (``flash_attn_import_kernels``, which runs
``python -m release.archive.integrity ARCHIVE --expect FILE`` at configure time) both call it.

Two keys (docs/release.md, "Kernels archives and shards"):

- the **build key** (``build_key``): the SHA-256 of the ``name=value`` lines of the fields CMake
  records (compiler, flags, definitions, gencode targets, kernel set, upstream tree), sorted by
  name: :func:`build_key`, the same computation as flash_attn_kernel_key in CMake. The shards of
  one split share it; a link compares it with its own configuration's.
- the **archive key** (``key``): the SHA-256 of lines holding the build key, the name tokens
  (group, kernel set), the shard, and a Merkle-style digest of the object list (the SHA-256 of
  one ``<sha256> <file> <unit>`` line per object, sorted by file): :func:`archive_key`. Every
  object's relative path and bytes are covered, so a swapped object or an edited manifest changes
  it. The folder's name is ``kernels-<group>-<set>-<key[:12]>[-shard<K>of<N>]``
  (:func:`archive_name`).

:func:`verify` reads an archive folder and refuses, with one message naming the folder and the
entry: a manifest of another shape; an object path outside the folder (release.confine); a key
that is not the one recomputed from the objects read (their sha256) and the recorded fields; a
folder whose name is not the one its key gives; an object whose fatbin holds SASS or PTX of
other SMs than the fields' ``cuda_architectures`` (release.archive.fatbin, read from the object's
bytes).

What it cannot tell: a manifest whose fields were edited, its key recomputed with this very rule
and its folder renamed is self-consistent; a link still refuses it when its build key is not the
linking build's, but an archive is trusted only as far as where it came from (the release
workflow's own artifacts).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

from release import confine
from release.archive import fatbin
from release.errors import ReleaseError, run_main

MANIFEST_NAME = "kernels-manifest.json"
FORMAT = 2  # 2: the archive key covers the objects (issue 34); 1 keyed the fields only
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_TOKEN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
_UNIT = re.compile(r"^[A-Za-z0-9_]{1,128}$")
AGAIN = "copy the archive again or rebuild it (nox -s archive_<group>, nox -s archive_gather)"


def build_key(fields: dict[str, str]) -> str:
    """The build key of `fields` as cmake/FlashAttnKernels.cmake's flash_attn_kernel_key computes it: the
    SHA-256 of "name=value\\n" lines sorted by name (the tests check both against each other). 64 hex."""
    return hashlib.sha256("".join(f"{n}={fields[n]}\n" for n in sorted(fields)).encode("utf-8")).hexdigest()


def objects_digest(objects: list[dict]) -> str:
    """The Merkle-style digest of an object list: SHA-256 of one "<sha256> <file> <unit>\\n" line per
    object, sorted by file. 64 hex."""
    lines = sorted(f"{o['sha256']} {o['file']} {o['unit']}\n" for o in objects)
    return hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()


def archive_key(manifest: dict) -> str:
    """The archive key of a manifest (module docstring): over its build key, name tokens, shard and
    :func:`objects_digest` of its objects. 64 hex. The manifest must have passed :func:`check_shape`."""
    shard = manifest["kernels"]["shard"]
    lines = [
        f"format={FORMAT}",
        f"build_key={manifest['build_key']}",
        f"group={manifest['name']['group']}",
        f"set={manifest['name']['set']}",
        "shard=" + (f"{shard['index']}of{shard['count']}" if shard else "whole"),
        f"objects={objects_digest(manifest['objects'])}",
    ]
    return hashlib.sha256("".join(f"{line}\n" for line in lines).encode("utf-8")).hexdigest()


def archive_name(group_token: str, set_token: str, key: str, shard: dict | None) -> str:
    """kernels-legacy-dev-<12 hex of the archive key>[-shard3of8]."""
    name = f"kernels-{group_token}-{set_token}-{key[:12]}"
    return name + (f"-shard{shard['index']}of{shard['count']}" if shard else "")


def seal(manifest: dict) -> tuple[dict, str]:
    """(the manifest with format, build key and archive key set, its folder name); for pack and gather.
    Raises ReleaseError when its shape is wrong (a bug of the writer, or a damaged input)."""
    manifest = dict(manifest, format=FORMAT, build_key=build_key(manifest["fields"]), key="0" * 64)
    check_shape(manifest, "the manifest being written")
    manifest["key"] = archive_key(manifest)
    shard = manifest["kernels"]["shard"]
    return manifest, archive_name(manifest["name"]["group"], manifest["name"]["set"], manifest["key"], shard)


def _bad(file: object, what: str) -> ReleaseError:
    return ReleaseError(f"{file}: {what}; the manifest is damaged or was edited: {AGAIN}")


def _is_int(value: object, low: int) -> bool:
    return type(value) is int and value >= low


def check_shape(manifest: object, file: object) -> dict:
    """`manifest` (parsed JSON) when it has the format-2 shape, else ReleaseError naming `file` and the
    first entry that is wrong. Object paths must be confined (release.confine) below ``objects/``."""
    if not isinstance(manifest, dict):
        raise _bad(file, f"holds a JSON {type(manifest).__name__}, not an object")
    if manifest.get("format") != FORMAT:
        raise ReleaseError(
            f"{file} is not a format-{FORMAT} kernels manifest (format {manifest.get('format')!r}); rebuild the "
            "archive with this checkout (nox -s archive_<group>)"
        )
    for name in ("key", "build_key"):
        if not isinstance(manifest.get(name), str) or not _HEX64.match(manifest[name]):
            raise _bad(file, f"'{name}' is not 64 lowercase hex digits")
    fields = manifest.get("fields")
    if not isinstance(fields, dict) or not fields or not all(isinstance(v, str) for v in fields.values()):
        raise _bad(file, "'fields' is not an object of strings")
    tokens = manifest.get("name")
    if not isinstance(tokens, dict) or not all(isinstance(tokens.get(k), str) and _TOKEN.match(tokens[k])
                                               for k in ("group", "set")):  # fmt: skip
        raise _bad(file, '\'name\' is not {"group": token, "set": token}')
    kernels = manifest.get("kernels")
    if not isinstance(kernels, dict) or not isinstance(kernels.get("kernel_set"), str):
        raise _bad(file, "'kernels' is not an object with a 'kernel_set'")
    records = kernels.get("kernels")
    shapes = {"kind": str, "dtype": str, "head_dim": int, "causal": bool}
    if not isinstance(records, list) or not all(
        isinstance(r, dict) and all(type(r.get(k)) is t for k, t in shapes.items()) for r in records
    ):
        raise _bad(file, "'kernels.kernels' is not a list of {kind, dtype, head_dim, causal}")
    shard = kernels.get("shard", "absent")
    if shard is not None and not (
        isinstance(shard, dict)
        and _is_int(shard.get("count"), 1)
        and _is_int(shard.get("index"), 1)
        and shard["index"] <= shard["count"]
        and isinstance(shard.get("units"), list)
        and all(isinstance(u, str) for u in shard["units"])
    ):
        raise _bad(file, "'kernels.shard' is neither null nor {index, count, units} with 1 <= index <= count")
    objects = manifest.get("objects")
    if not isinstance(objects, list) or not objects:
        raise _bad(file, "'objects' is not a non-empty list")
    seen = set()
    for n, obj in enumerate(objects):
        if not isinstance(obj, dict):
            raise _bad(file, f"objects[{n}] is not an object")
        where = f"objects[{n}].file"
        confine.member(obj.get("file"), file, where)
        if not obj["file"].startswith("objects/") or obj["file"].count("/") != 1:
            raise _bad(file, f"{where} {obj['file']!r} is not objects/<name>")
        if obj["file"] in seen:
            raise _bad(file, f"{where} {obj['file']!r} is listed twice")
        seen.add(obj["file"])
        if not isinstance(obj.get("unit"), str) or not _UNIT.match(obj["unit"]):
            raise _bad(file, f"objects[{n}].unit is not a unit name")
        if not isinstance(obj.get("sha256"), str) or not _HEX64.match(obj["sha256"]):
            raise _bad(file, f"objects[{n}].sha256 is not 64 lowercase hex digits")
    try:
        fatbin.expected(fields.get("cuda_architectures", ""))
    except ValueError as e:
        raise _bad(file, f"fields.cuda_architectures: {e}") from None
    if not fatbin.expected(fields.get("cuda_architectures", ""))[0]:
        raise _bad(file, "fields.cuda_architectures names no SASS target")
    return manifest


def read(path: Path) -> dict:
    """The manifest of the archive folder `path`, checked: its shape (:func:`check_shape`), its build
    key against its fields, its archive key against its object list, and the folder's name against
    the key. Objects are not read (:func:`verify` does). ReleaseError naming the folder otherwise."""
    path = Path(path)
    file = path / MANIFEST_NAME
    if not file.is_file() or file.is_symlink():
        what = "does not exist" if not path.exists() else f"has no {MANIFEST_NAME}"
        raise ReleaseError(
            f"{path} {what}: expected a kernels archive folder written by nox -s archive_<group> or "
            "nox -s archive_gather."
        )
    try:
        manifest = json.loads(file.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise ReleaseError(f"{file} is not valid JSON ({e}); {AGAIN}.") from None
    check_shape(manifest, file)
    if build_key(manifest["fields"]) != manifest["build_key"]:
        raise ReleaseError(
            f"{file}: its build key {manifest['build_key'][:12]} is not the hash of the fields it records "
            f"({build_key(manifest['fields'])[:12]}), so the manifest was edited or damaged; {AGAIN}."
        )
    if archive_key(manifest) != manifest["key"]:
        raise ReleaseError(
            f"{file}: its key {manifest['key'][:12]} is not the hash of its build key, name and object list "
            f"({archive_key(manifest)[:12]}), so the manifest was edited or damaged; {AGAIN}."
        )
    want = archive_name(
        manifest["name"]["group"], manifest["name"]["set"], manifest["key"], manifest["kernels"]["shard"]
    )
    if path.name != want:
        raise ReleaseError(
            f"{path}: the folder's name is not {want}, the name its key and manifest give; an archive is not "
            "renamed (a renamed folder names another group, set or shard than it holds): use the folder as written, "
            f"or {AGAIN}"
        )
    return manifest


def verify(path: Path, manifest: dict | None = None) -> dict:
    """:func:`read` the archive `path` (unless its `manifest` is given), then read every object: a
    regular file inside the folder, whose sha256 is the listed one, whose fatbin holds SASS of
    exactly the SMs and PTX of no other SM than the fields' ``cuda_architectures``; the archive key
    recomputed from the sha256s read must be the recorded one. Returns the manifest; ReleaseError
    naming the folder and the object otherwise."""
    path = Path(path)
    manifest = read(path) if manifest is None else manifest
    want_sass, want_ptx = fatbin.expected(manifest["fields"]["cuda_architectures"])
    read_objects = []
    for obj in manifest["objects"]:
        f = confine.join(path, obj["file"], path, f"object of unit {obj['unit']}")
        if not f.is_file():
            raise ReleaseError(f"{path} lacks {obj['file']} (unit {obj['unit']}); {AGAIN}.")
        data = f.read_bytes()
        got = hashlib.sha256(data).hexdigest()
        if got != obj["sha256"]:
            raise ReleaseError(
                f"{f} (unit {obj['unit']}) has sha256 {got}, its manifest says {obj['sha256']}: the file is damaged "
                f"or was swapped; {AGAIN}."
            )
        try:
            sass, ptx = fatbin.targets(data)
        except fatbin.NotAFatbin as e:
            raise ReleaseError(
                f"{f} (unit {obj['unit']}) is not an nvcc object of this archive: {e}; {AGAIN}."
            ) from None
        if sass != want_sass or not ptx <= want_ptx:
            raise ReleaseError(
                f"{f} (unit {obj['unit']}) holds SASS {_sms(sass)} and PTX {_sms(ptx)}, but {path.name} is for SASS "
                f"{_sms(want_sass)} and PTX {_sms(want_ptx)} (fields.cuda_architectures): an object of another arch; "
                f"{AGAIN}."
            )
        read_objects.append(dict(obj, sha256=got))
    if archive_key(dict(manifest, objects=read_objects)) != manifest["key"]:  # the objects read, not the list
        raise ReleaseError(f"{path}: the key of the objects read is not the recorded key; {AGAIN}.")
    return manifest


def _sms(sms: set[int]) -> str:
    return "{" + ", ".join(f"sm_{s}" for s in sorted(sms)) + "}" if sms else "{}"


def check_expected(path: Path, manifest: dict, expect: dict) -> None:
    """The link's checks (flash_attn_import_kernels): `expect` is {"build_key", "fields", "units"} of
    the linking configuration. ReleaseError when the archive's build key differs (naming each field
    that differs), when it is one shard only, or when its units are not `expect["units"]`."""
    what = f"the kernels archive FLASH_ATTN_KERNELS={path}"
    if manifest["build_key"] != expect["build_key"]:
        theirs = manifest["fields"]
        diff = [
            f"{name}: archive '{theirs.get(name, '(not recorded)')}', this build '{value}'"
            for name, value in sorted(expect["fields"].items())
            if theirs.get(name) != value
        ] + [f"{name}: archive '{theirs[name]}', this build (not recorded)" for name in sorted(theirs)
             if name not in expect["fields"]]  # fmt: skip
        raise ReleaseError(
            f"{what} was built with another build key ({manifest['build_key'][:12]}, this build "
            f"{expect['build_key'][:12]}): "
            + "; ".join(diff or ["(the key format differs)"])
            + ". Build the kernels with the same options and toolchain, or leave FLASH_ATTN_KERNELS empty to compile "
            "them here."
        )
    shard = manifest["kernels"]["shard"]
    if shard is not None:
        raise ReleaseError(
            f"{what} is shard {shard['index']}/{shard['count']} only. Gather all {shard['count']} shards first: "
            "nox -s archive_gather -- <shard folders...>"
        )
    have = sorted({o["unit"] for o in manifest["objects"]} - {"dispatch"})
    if have != sorted(expect["units"]):
        raise ReleaseError(
            f"{what} holds the units {','.join(have)}, but this build's kernel set has "
            f"{','.join(sorted(expect['units']))}. Pass the archive of this kernel set (FLASH_ATTN_KERNEL_SET) or "
            "leave FLASH_ATTN_KERNELS empty."
        )


def main(argv: list[str] | None = None) -> int:
    """``python -m release.archive.integrity ARCHIVE [--expect FILE]``: verify an archive folder; with
    --expect (written by flash_attn_import_kernels), also the link's checks. Exit 0, or 2 with one
    ``error:`` line. Prints the objects' paths, one a line, for CMake's IMPORTED_OBJECTS."""
    p = argparse.ArgumentParser(prog="python -m release.archive.integrity", description=__doc__.split("\n")[0])
    p.add_argument("archive", type=Path)
    p.add_argument("--expect", type=Path, help='JSON {"build_key", "fields", "units"} of the linking build')
    args = p.parse_args(argv)

    def body() -> int:
        manifest = verify(args.archive)
        if args.expect:
            check_expected(args.archive, manifest, json.loads(args.expect.read_text(encoding="utf-8")))
        for obj in manifest["objects"]:
            print((args.archive / obj["file"]).as_posix())
        return 0

    return run_main(body, prog="release.archive.integrity", argv=argv)


if __name__ == "__main__":
    sys.exit(main())
