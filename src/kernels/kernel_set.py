"""Kernel sets: which FlashAttention-2 instantiation units a build compiles.

A *unit* is one translation unit that instantiates one upstream kernel template for one
(kind, dtype, head dim, causal) combination. Its name is the key used everywhere
(build info, explicit lists, stub messages)::

    <kind>_hdim<D>_<dtype>[_causal]      e.g. fwd_hdim64_fp16, bwd_hdim128_bf16_causal

kind is ``fwd`` (plain forward), ``fwd_split`` (split-KV forward, used by the KV-cache path
and by the split heuristic) or ``bwd``; dtype is ``fp16`` or ``bf16``; D is one of the head
dims upstream instantiates (32, 64, 96, 128, 192, 256).

Named sets:

- ``release``: every unit upstream 2.8.3 builds (3 kinds x 2 dtypes x 6 head dims x causal or
  not = 72 units).
- ``dev``: head dims 64 and 128, both dtypes, all kinds, causal or not (24 units).
- ``ci``: the smallest set that still links and runs one forward (fwd_hdim64_fp16).

Anything else is an explicit list: comma- or semicolon-separated unit names or shell-style
patterns over them (``fwd_hdim64_*``, ``*_hdim128_bf16*``). Patterns that match nothing are
an error, so a typo never silently builds less than asked.

This module is pure Python (stdlib only) so CMake can run it at configure time and the tests
and the release tooling can import it.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass

KINDS = ("bwd", "fwd_split", "fwd")
DTYPES = ("fp16", "bf16")
HEAD_DIMS = (32, 64, 96, 128, 192, 256)
NAMED_SETS = ("release", "dev", "ci")

# Compile seconds of one unit for one arch, used to start the longest units first (Ninja starts
# edges in the order the sources are listed) and to weight the progress ETA. Measured for sm_90 on
# an H200 host, 16 concurrent compiles, nvcc 13.0, mean of fp16 and bf16
# (docs/evidence/h200-2026-11-29-dev/build.md); keys are (kind, head dim, causal).
_MEASURED_SECONDS = {
    ("fwd_split", 64, False): 334.6, ("fwd_split", 128, False): 334.0,
    ("fwd_split", 64, True): 205.3, ("fwd_split", 128, True): 224.1,
    ("bwd", 64, False): 263.4, ("bwd", 128, False): 266.1,
    ("bwd", 64, True): 191.8, ("bwd", 128, True): 196.8,
    ("fwd", 64, False): 163.1, ("fwd", 128, False): 228.8,
    ("fwd", 64, True): 112.4, ("fwd", 128, True): 189.8,
}  # fmt: skip
# Head dims without a measurement take the nearer of 64 and 128 (96 takes 128, the heavier), then:
# above 128 upstream's launchers drop the even-M/N variants, which roughly halves the forward and
# split-KV instantiations (fwd hdim192 causal 109 s vs fwd hdim128 causal 190 s), while the
# backward grows (bwd hdim256 317 s vs bwd hdim128 276 s); both figures are in docs/design.md.
_ABOVE_128_FACTOR = {"fwd_split": 0.57, "fwd": 0.57, "bwd": 1.15}
_COST_UNIT_SECONDS = _MEASURED_SECONDS[("fwd", 128, False)]

_CTYPE = {"fp16": "cutlass::half_t", "bf16": "cutlass::bfloat16_t"}
_UNIT_RE = re.compile(r"^(bwd|fwd_split|fwd)_hdim(\d+)_(fp16|bf16)(_causal)?$")


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
    def cost(self) -> float:
        """Relative compile cost (unitless, fwd hdim128 non-causal = 1.0); see _MEASURED_SECONDS."""
        measured_dim = 64 if self.head_dim < 96 else 128
        seconds = _MEASURED_SECONDS[(self.kind, measured_dim, self.causal)]
        if self.head_dim > 128:
            seconds *= _ABOVE_128_FACTOR[self.kind]
        return seconds / _COST_UNIT_SECONDS

    def describe(self) -> str:
        """Human text for stub errors, e.g. 'the backward kernel for head dim 96, bf16, causal'."""
        what = {"fwd": "forward", "fwd_split": "split-KV forward", "bwd": "backward"}[self.kind]
        mask = "causal" if self.causal else "non-causal"
        return f"the {what} kernel for head dim {self.head_dim}, {self.dtype}, {mask}"

    def as_dict(self) -> dict:
        return {"kind": self.kind, "dtype": self.dtype, "head_dim": self.head_dim, "causal": self.causal}


def all_units() -> list[Unit]:
    """Every unit upstream FlashAttention-2 2.8.3 instantiates (the ``release`` set)."""
    return [Unit(k, t, d, c) for k in KINDS for t in DTYPES for d in HEAD_DIMS for c in (False, True)]


def parse_unit(name: str) -> Unit:
    """Parse a unit name; raises KernelSetError for anything that is not one."""
    m = _UNIT_RE.match(name)
    if not m or int(m.group(2)) not in HEAD_DIMS:
        raise KernelSetError(
            f"'{name}' is not a kernel unit name; expected <kind>_hdim<D>_<dtype>[_causal] with kind in "
            f"{', '.join(KINDS)}, D in {', '.join(map(str, HEAD_DIMS))}, dtype in fp16, bf16"
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
    if spec == "release":
        chosen = everything
    elif spec == "dev":
        chosen = [u for u in everything if u.head_dim in (64, 128)]
    elif spec == "ci":
        chosen = [Unit("fwd", "fp16", 64, False)]
    else:
        chosen = set()
        for pattern in filter(None, (p.strip() for p in re.split(r"[,;]", spec))):
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
        return "custom", order_heaviest_first(chosen)
    return spec, order_heaviest_first(chosen)


def order_heaviest_first(units) -> list[Unit]:
    """Units sorted by decreasing compile cost, ties broken by name for a stable order."""
    return sorted(units, key=lambda u: (-u.cost, u.name))


def cpp_type(dtype: str) -> str:
    """The CUTLASS element type upstream's templates take for a dtype name."""
    return _CTYPE[dtype]
