"""The SASS and PTX targets an nvcc object embeds, read from its fatbin headers (stdlib only).

An object nvcc compiles (ELF ``.o`` on Linux, COFF ``.obj`` on Windows) embeds a fatbin: a header
followed by entries, one per cubin (SASS of one SM) or PTX. The arch of a kernels archive's
objects is read from there, never from a file or folder name. NVIDIA documents no layout; this
one (little-endian) was measured on objects compiled with nvcc 13.0 (``-gencode
arch=compute_80,code=sm_80``, ``code=compute_90`` and ``sm_100f``; a device kernel and a host-only
source: both embed one cubin per SASS target), and tests/unit/release/test_release_fatbin.py
compiles such an object when nvcc is on PATH:

    fatbin header, 16 bytes:   u32 magic 0xBA55ED50, u16 version 1, u16 header size (16),
                               u64 size of the entries that follow
    entry header (>= 32 bytes): u16 kind (1 PTX, 2 ELF cubin), u16 version, u32 header size,
                               u64 payload size, u32 x2, u16 x2, u32 SM number (80, 90, 100...)
                               at offset 28; the payload follows the header, the next entry
                               follows the payload

Containers are not parsed: the object's bytes are scanned for the fatbin magic, so the same code
reads ELF and COFF objects. A family-specific cubin (``sm_100f``) carries its SM number (100);
the family is a flag this module does not read.
"""

from __future__ import annotations

import struct

MAGIC = 0xBA55ED50
_HEADER = struct.Struct("<IHHQ")  # magic, version, header size, size of the entries
_ENTRY = struct.Struct("<HHIQ")  # kind, version, header size, payload size
_ARCH_OFFSET = 28
_ENTRY_MIN = _ARCH_OFFSET + 4
KINDS = {1: "ptx", 2: "sass"}


class NotAFatbin(ValueError):
    """The bytes hold no fatbin, or one whose headers run past its end (a damaged object)."""


def entries(data: bytes) -> list[tuple[str, int]]:
    """[(kind, SM)] of every entry of every fatbin in `data` (an object file's bytes), in order:
    kind "sass" (an ELF cubin) or "ptx"; SM as an int (80 for sm_80 / compute_80).

    Raises NotAFatbin when `data` holds no fatbin, or a header's sizes run past the data or its
    fatbin (truncated or damaged), or an entry has a kind other than PTX or ELF.
    """
    found: list[tuple[str, int]] = []
    magic = struct.pack("<I", MAGIC)
    start = data.find(magic)
    while start >= 0:
        if start + _HEADER.size > len(data):
            raise NotAFatbin(f"a fatbin header at byte {start} is cut off")
        _, version, header_size, size = _HEADER.unpack_from(data, start)
        end = start + header_size + size
        if version != 1 or header_size < _HEADER.size or end > len(data):
            raise NotAFatbin(f"the fatbin at byte {start} has version {version}, sizes {header_size}+{size}")
        pos = start + header_size
        while pos < end:
            if pos + _ENTRY_MIN > end:
                raise NotAFatbin(f"an entry header at byte {pos} runs past its fatbin")
            kind, _, entry_header, payload = _ENTRY.unpack_from(data, pos)
            if kind not in KINDS or entry_header < _ENTRY_MIN or pos + entry_header + payload > end:
                raise NotAFatbin(f"the entry at byte {pos} has kind {kind}, sizes {entry_header}+{payload}")
            (sm,) = struct.unpack_from("<I", data, pos + _ARCH_OFFSET)
            found.append((KINDS[kind], sm))
            pos += entry_header + payload
        start = data.find(magic, end)
    if not found:
        raise NotAFatbin("no fatbin entry (no device code compiled into it)")
    return found


def targets(data: bytes) -> tuple[set[int], set[int]]:
    """(SASS SMs, PTX SMs) of an object's bytes (:func:`entries`); raises NotAFatbin like it."""
    found = entries(data)
    return {sm for kind, sm in found if kind == "sass"}, {sm for kind, sm in found if kind == "ptx"}


def expected(cuda_architectures: str) -> tuple[set[int], set[int]]:
    """(SASS SMs, PTX SMs) a CMake CUDA_ARCHITECTURES list asks for: ``80-real`` SASS only,
    ``90-virtual`` PTX only, ``90`` both, ``100f-real`` SASS of SM 100 (family-specific), entries
    separated by ";" or ","; ValueError for an entry that is none of these."""
    sass, ptx = set(), set()
    for entry in filter(None, (e.strip() for e in cuda_architectures.replace(",", ";").split(";"))):
        number, _, how = entry.partition("-")
        digits = number.rstrip("af")
        if not digits.isdigit() or how not in ("", "real", "virtual"):
            raise ValueError(f"'{entry}' is not a CUDA_ARCHITECTURES entry")
        if how != "virtual":
            sass.add(int(digits))
        if how != "real":
            ptx.add(int(digits))
    return sass, ptx
