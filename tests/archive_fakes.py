"""Stand-in kernels archives for the release tooling tests: objects with a fatbin of chosen SMs, and
shard archives sealed and named the way release.archive.archives writes them.

In tests/, which pytest puts on sys.path for every test (tests/conftest.py lives here).
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

from release.archive import archives, integrity

SET = ["fwd_hdim64_fp16", "fwd_hdim64_fp16_causal", "bwd_hdim64_fp16"]
FIELDS = {
    "definitions": "FLASH_NAMESPACE=flash;FLASH_ATTN_RESCALE_THRESHOLD=8.0f",
    "format": "1",
    "cuda_architectures": "80-real",
}
TOKENS = {"group": "custom_sm80", "set": "list"}


def fatbin_object(text: str, sass=(80,), ptx=()) -> bytes:
    """Bytes standing in for an nvcc object: a prefix, then one fatbin (release.archive.fatbin's layout)
    holding a cubin entry per SM of `sass` and a PTX entry per SM of `ptx`, payloads from `text`."""
    entries = b""
    for kind, sm in [(2, s) for s in sass] + [(1, s) for s in ptx]:
        payload = f"{text} {kind} {sm}".encode()
        entries += struct.pack("<HHIQIIHHI", kind, 0x101, 32, len(payload), 0, 0, 0, 0, sm) + payload
    return b"\x7fELF stand-in " + struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(entries)) + entries


def _record(units, shard):
    kernels_list = []
    for name in units:
        kind, rest = name.split("_hdim")
        d, dtype, *causal = rest.split("_")
        kernels_list.append({"kind": kind, "dtype": dtype, "head_dim": int(d), "causal": bool(causal)})
    return {"kernel_set": "custom", "kernels": kernels_list, "shard": shard}


def write_archive(folder_parent: Path, manifest: dict, objects: dict[str, bytes]) -> Path:
    """Seal `manifest` (release.archive.integrity.seal), write it and `objects` ({unit: bytes}) into
    the folder its key names under `folder_parent`; returns the folder."""
    manifest = dict(manifest, objects=[
        {"file": f"objects/{u}.o", "unit": u, "sha256": hashlib.sha256(b).hexdigest()} for u, b in objects.items()
    ])  # fmt: skip
    manifest, name = integrity.seal(manifest)
    folder = folder_parent / name
    (folder / "objects").mkdir(parents=True)
    for unit, data in objects.items():
        (folder / "objects" / f"{unit}.o").write_bytes(data)
    (folder / archives.MANIFEST_NAME).write_text(json.dumps(manifest))
    return folder


def make_shard(root: Path, index: int, count: int, units: list[str], fields=None, sass=(80,)) -> Path:
    """A shard archive holding `units` (plus the dispatch in shard 1) as small stand-in objects with a
    fatbin of `sass`; its build key is the hash of `fields` (default FIELDS), as CMake writes it, and
    its folder is named by its archive key, as pack writes it."""
    fields = fields or FIELDS
    manifest = {"fields": fields, "name": TOKENS, "kernels": _record(SET, {"index": index, "count": count,
                                                                         "units": units})}  # fmt: skip
    objects = {u: fatbin_object(f"object of {u} {archives.key_of(fields)}", sass)
               for u in units + (["dispatch"] if index == 1 else [])}  # fmt: skip
    return write_archive(root, manifest, objects)
