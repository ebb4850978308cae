"""Kernel sets: which FlashAttention-2 instantiation units a build compiles.

A *unit* is one translation unit that instantiates one upstream kernel template for one
(kind, dtype, head dim, causal) combination. Its name is the key used everywhere
(build info, explicit lists, stub messages)::

    <kind>_hdim<D>_<dtype>[_causal]      e.g. fwd_hdim64_fp16, bwd_hdim128_bf16_causal

kind is ``fwd`` (plain forward), ``fwd_split`` (split-KV forward, used by the KV-cache path
and by the split heuristic) or ``bwd``; dtype is ``fp16`` or ``bf16``; D is one of the head
dims upstream instantiates. Kinds, dtypes, head dims and the named sets are ``kernels`` in
build-manifest.json; the compile cost of each unit is ``unit_costs`` there.

Named sets (``kernels.sets``) are lists of patterns over the unit names: ``release`` (every
unit upstream 2.8.3 builds), ``dev`` (head dims 64 and 128), ``ci`` (one forward unit).

Anything else is an explicit list: comma- or semicolon-separated unit names or shell-style
patterns over them (``fwd_hdim64_*``, ``*_hdim128_bf16*``). Patterns that match nothing are
an error, so a typo never silently builds less than asked.

This module is pure Python (stdlib only) so CMake can run it at configure time and the tests
and the release tooling can import it. It reads the manifest named by $FLASH_ATTN_MANIFEST,
else build-manifest.json of this checkout.
"""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass
from pathlib import Path

# src/ is on the path wherever this module runs: PYTHONPATH=src for the tooling, and CMake sets it for
# generate_units.py (cmake/FlashAttnKernelSet.cmake).
from flash_attn_wheel_names import manifest_file


def manifest_path() -> Path:
    """The build manifest in use: $FLASH_ATTN_MANIFEST, else build-manifest.json of this checkout
    (the rule is flash_attn_wheel_names.manifest_file's)."""
    return manifest_file.path(Path(__file__).resolve().parents[2])


def _load_manifest() -> dict:
    path = manifest_path()
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise SystemExit(f"error: cannot read the build manifest {path}: {e}") from None


_MANIFEST = _load_manifest()
_KERNELS = _MANIFEST["kernels"]
KINDS = tuple(_KERNELS["kinds"])
DTYPES = tuple(_KERNELS["dtypes"])
HEAD_DIMS = tuple(_KERNELS["head_dims"])
NAMED_SETS = tuple(_KERNELS["sets"])

# Compile seconds of one unit for one arch, used to start the longest units first (Ninja starts
# edges in the order the sources are listed) and to weight the progress ETA; provenance in the
# manifest (unit_costs.measured_source, unit_costs.above_source).
_COSTS = _MANIFEST["unit_costs"]
_MEASURED_SECONDS = _COSTS["measured_seconds"]  # "<kind>_hdim<D>[_causal]" -> seconds
_MEASURED_DIMS = sorted({int(re.search(r"_hdim(\d+)", k).group(1)) for k in _MEASURED_SECONDS})
_ABOVE_HEAD_DIM = int(_COSTS["above_head_dim"])
_ABOVE_FACTOR = _COSTS["above_factor"]
_COST_UNIT_SECONDS = _MEASURED_SECONDS[_COSTS["reference_unit"]]

_CTYPE = _KERNELS["dtypes"]
_KIND_RE = "|".join(sorted(map(re.escape, KINDS), key=len, reverse=True))
_DTYPE_RE = "|".join(map(re.escape, DTYPES))
_UNIT_RE = re.compile(rf"^({_KIND_RE})_hdim(\d+)_({_DTYPE_RE})(_causal)?$")


class KernelSetError(ValueError):
    """A kernel set name or explicit list that cannot be built; the message says what to do."""


@dataclass(frozen=True, order=True)
class Unit:
    """One instantiation unit: kind (fwd|fwd_split|bwd), dtype (fp16|bf16), head_dim, causal."""

    kind: str
    dtype: str
    head_dim: int
    causal: bool

    @property
    def name(self) -> str:
        return f"{self.kind}_hdim{self.head_dim}_{self.dtype}" + ("_causal" if self.causal else "")

    @property
    def seconds(self) -> float:
        """Predicted compile seconds of this unit for one arch on the reference host of
        ``unit_costs.measured_source`` (16 concurrent compiles on a 16-core host, nvcc 13.0)."""
        return self.cost * _COST_UNIT_SECONDS

    @property
    def cost(self) -> float:
        """Relative compile cost (unitless, the manifest's reference unit = 1.0).

        A head dim without a measurement takes the nearest measured one (ties: the larger, so 96
        takes 128); above ``above_head_dim`` the kind's ``above_factor`` applies.
        """
        measured_dim = min(_MEASURED_DIMS, key=lambda d: (abs(d - self.head_dim), -d))
        seconds = _MEASURED_SECONDS[f"{self.kind}_hdim{measured_dim}" + ("_causal" if self.causal else "")]
        if self.head_dim > _ABOVE_HEAD_DIM and measured_dim != self.head_dim:
            seconds *= _ABOVE_FACTOR[self.kind]
        return seconds / _COST_UNIT_SECONDS

    def describe(self) -> str:
        """Human text for stub errors, e.g. 'the backward kernel for head dim 96, bf16, causal'."""
        what = _KERNELS["kinds"][self.kind]
        mask = "causal" if self.causal else "non-causal"
        return f"the {what} kernel for head dim {self.head_dim}, {self.dtype}, {mask}"

    def as_dict(self) -> dict:
        return {"kind": self.kind, "dtype": self.dtype, "head_dim": self.head_dim, "causal": self.causal}


def all_units() -> list[Unit]:
    """Every unit of the manifest's kinds x dtypes x head dims x causal or not."""
    return [Unit(k, t, d, c) for k in KINDS for t in DTYPES for d in HEAD_DIMS for c in (False, True)]


def parse_unit(name: str) -> Unit:
    """Parse a unit name; raises KernelSetError for anything that is not one."""
    m = _UNIT_RE.match(name)
    if not m or int(m.group(2)) not in HEAD_DIMS:
        raise KernelSetError(
            f"'{name}' is not a kernel unit name; expected <kind>_hdim<D>_<dtype>[_causal] with kind in "
            f"{', '.join(KINDS)}, D in {', '.join(map(str, HEAD_DIMS))}, dtype in {', '.join(DTYPES)}"
        )
    return Unit(m.group(1), m.group(3), int(m.group(2)), bool(m.group(4)))


def resolve(spec: str) -> tuple[str, list[Unit]]:
    """Resolve a kernel set name or explicit list to (set name, units ordered heaviest first).

    The set name is the named set, or ``custom`` for an explicit list. Raises KernelSetError
    for an empty spec, or a pattern that matches no unit.
    """
    spec = (spec or "").strip()
    if not spec:
        raise KernelSetError(f"empty kernel set; use one of {', '.join(NAMED_SETS)} or an explicit list of unit names")
    everything = all_units()
    named = spec in NAMED_SETS
    patterns = _KERNELS["sets"][spec]["units"] if named else [p.strip() for p in re.split(r"[,;]", spec)]
    chosen = set()
    for pattern in filter(None, patterns):
        hits = [u for u in everything if fnmatch.fnmatchcase(u.name, pattern)]
        if not hits:
            raise KernelSetError(
                f"kernel set entry '{pattern}' matches no unit. Use a named set ({', '.join(NAMED_SETS)}) or "
                "unit names / patterns such as fwd_hdim64_fp16, bwd_hdim128_*, fwd*_hdim64_bf16*"
            )
        chosen.update(hits)
    if not chosen:  # only separators, e.g. "," or ";"
        raise KernelSetError(
            f"kernel set '{spec}' lists no unit; use one of {', '.join(NAMED_SETS)} or unit names such as "
            "fwd_hdim64_fp16"
        )
    return (spec if named else "custom"), order_heaviest_first(chosen)


def order_heaviest_first(units) -> list[Unit]:
    """Units sorted by decreasing compile cost, ties broken by name for a stable order."""
    return sorted(units, key=lambda u: (-u.cost, u.name))


def cpp_type(dtype: str) -> str:
    """The CUTLASS element type upstream's templates take for a dtype name."""
    return _CTYPE[dtype]


class ShardError(ValueError):
    """A shard spec that is not ``K/N`` with 1 <= K <= N; the message says what to pass."""


def parse_shard(text: str) -> tuple[int, int]:
    """Parse a shard spec ``K/N`` (1-based: ``3/8`` is the third of eight) into (K, N).

    Raises ShardError for anything else (``0/8``, ``9/8``, ``3``, ``a/b``).
    """
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text or "")
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise ShardError(f"shard '{text}' is not K/N with 1 <= K <= N (for example 3/8: the third of eight shards)")
    return int(m.group(1)), int(m.group(2))


def split_shards(units, count: int) -> list[list[Unit]]:
    """Split units into `count` shards of nearly equal predicted compile time.

    Longest-processing-time-first: units heaviest first (``order_heaviest_first``), each onto the
    shard with the least predicted seconds so far (ties: the lowest index). Deterministic for a
    given manifest, so every machine of a sharded build computes the same split. Shards can be
    empty when there are fewer units than shards. Each shard keeps the heaviest-first order.
    Raises ShardError when count < 1.
    """
    if count < 1:
        raise ShardError(f"the shard count must be at least 1, got {count}")
    shards: list[list[Unit]] = [[] for _ in range(count)]
    load = [0.0] * count
    for unit in order_heaviest_first(units):
        i = min(range(count), key=lambda k: (load[k], k))
        shards[i].append(unit)
        load[i] += unit.seconds
    return shards
