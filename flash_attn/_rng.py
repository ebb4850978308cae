"""The Philox state of dropout in the stable-ABI build, reserved in Python before the forward runs.

The forward operators take ``Tensor? rng_state``: an int64 ``(2,)`` tensor (Philox seed, Philox
offset), on the CPU or on q's GPU (docs/operators.md). When it is None and ``dropout_p > 0`` the
exact build (torch's C++ API) draws it inside C++ from the default CUDA generator of q's device:
seed = the generator's ``initial_seed()``, offset = its offset before the call, and the offset
advances by ``B * H * 32`` (upstream's counter increment per forward, ``params.b * params.h * 32``,
``philox_increment`` in src/binding/params.h; torch rounds an increment up to a multiple of 4,
which this already is). Torch's stable ABI has no CUDA generator before torch 2.13 and no Philox
state in any version, so the stable build cannot do that in C++; this module does the same steps
on the same generator in Python and passes the result as ``rng_state``:

    g = torch.cuda.default_generators[device_index]
    seed, offset = g.initial_seed(), g.get_offset()
    g.set_offset(offset + B * H * 32)
    rng_state = torch.tensor([seed as int64, offset], dtype=torch.int64)   # CPU

So for the same ``torch.manual_seed`` a stable wheel draws the same dropout mask as a per-torch
wheel, later random ops see the same generator state, and the backward regenerates the mask from
the ``rng_state`` the forward returns. ``initial_seed()`` is a uint64 (up to 2**64 - 1) while the
tensor is int64: a seed >= 2**63 is stored as the int64 with the same 64 bits (:func:`as_int64`),
which the kernels read back as the uint64 they were given.

Which path applies is decided once per process, from the loaded build info
(:func:`configure`, called by the loader): :data:`RESERVE` is True only for a stable-ABI build. The
public functions test ``_rng.RESERVE and dropout_p > 0`` and pass None otherwise, so an exact
build and a call without dropout pay one attribute read.

CUDA graphs: a graph replays the captured kernel with the captured ``rng_state``, so every replay
would draw the same mask (the exact build uses torch's graph-safe Philox state for this, which
the stable ABI does not expose). Under capture (``torch.cuda.is_current_stream_capturing()``) the
reservation therefore raises :class:`~flash_attn.FlashAttnError` instead of reusing one mask.

``torch.compile``: a reservation made while Dynamo traces would be baked into the graph as a
constant (one mask for every run). While tracing (Dynamo, or a dispatch mode such as make_fx's or
FakeTensorMode, or q a tensor subclass), the reservation is the custom operator
``flash_attn_rng::philox_reserve`` (this module, tagged ``nondeterministic_seeded`` so it is never
deduplicated or recomputed in the backward), which the compiled graph runs on every call; its fake
returns an int64 ``(2,)`` CPU tensor. It is registered by :func:`configure` for stable builds only.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, Protocol

import torch

from . import _build_info
from ._errors import FlashAttnError

__all__ = [
    "PHILOX_STRIDE",
    "RESERVE",
    "OP_NAME",
    "configure",
    "philox_increment",
    "varlen_batch",
    "as_int64",
    "reserve",
    "rng_state",
    "generator_for",
    "capturing",
    "forward_rng_state",
]

# Philox counter offset one forward uses per (batch, head): upstream's philox increment b * h * 32
# (src/binding/params.h); a multiple of 4, so torch's rounding of increments leaves it unchanged.
PHILOX_STRIDE = 32

# True when the loaded library is a stable-ABI build (configure()); read on every call with dropout.
RESERVE = False

OP_NAME = "flash_attn_rng::philox_reserve"
_OP: list[Any] = []  # the registered custom operator (once per process)

_UINT64 = 1 << 64
_INT64_MAX = (1 << 63) - 1


class PhiloxGenerator(Protocol):
    """What a reservation needs of a generator (``torch.cuda.default_generators[i]``, or a test's fake)."""

    def initial_seed(self) -> int: ...
    def get_offset(self) -> int: ...
    def set_offset(self, offset: int) -> Any: ...


def configure(build_info: Mapping[str, Any] | None) -> None:
    """Decide, once per load, whether the Python layer reserves the Philox state (:data:`RESERVE`).

    True for a stable-ABI build info (``torch_abi == "stable"``), False for an exact one, one without
    ``torch_abi`` (older builds) or None (no library loaded). For a stable build the custom operator
    used under ``torch.compile`` is registered here (once), never during tracing.
    """
    global RESERVE
    RESERVE = build_info is not None and _build_info.is_stable(build_info)
    if RESERVE and not _OP:
        _OP.append(_register_op())


def philox_increment(batch: int, heads: int) -> int:
    """Philox counter offset one forward with dropout uses: ``batch * heads * 32``.

    ``batch`` is B (varlen: ``len(cu_seqlens_q) - 1``), ``heads`` the query heads H.
    """
    return batch * heads * PHILOX_STRIDE


def varlen_batch(cu_seqlens_q: Any) -> int:
    """B of a varlen call: ``len(cu_seqlens_q) - 1`` (0 for what is no such tensor: the operator refuses it)."""
    return max(cu_seqlens_q.numel() - 1, 0) if isinstance(cu_seqlens_q, torch.Tensor) else 0


def as_int64(seed: int) -> int:
    """The int64 with the same 64 bits as the uint64 ``seed`` (torch's ``initial_seed()``, 0 .. 2**64 - 1).

    ``2**64 - 1`` -> -1, ``2**63`` -> -2**63, smaller seeds unchanged; the kernels read the int64 back as
    that uint64. Raises ValueError for a value outside 0 .. 2**64 - 1.
    """
    if not 0 <= seed < _UINT64:
        raise ValueError(f"a Philox seed is a uint64 (0 .. 2**64 - 1), got {seed}")
    return seed - _UINT64 if seed > _INT64_MAX else seed


def reserve(generator: PhiloxGenerator, batch: int, heads: int) -> tuple[int, int]:
    """Reserve one forward's Philox range on ``generator``: returns (seed as int64, offset before the call)
    and advances the generator's offset by :func:`philox_increment` (what the exact build's C++ does)."""
    return _take(generator, philox_increment(batch, heads))


# Read-and-advance of the offset as one step for the Python threads of this process (get_offset and
# set_offset each take the generator's lock, but not both at once). C++ users of the same generator in
# other threads (torch's own random ops) take only the generator's lock, so a draw of theirs between
# the two calls can still overlap ours: the exact build, which holds that lock across both, has no
# such window (docs/stable-abi.md).
_TAKE_LOCK = threading.Lock()


def _take(generator: PhiloxGenerator, increment: int) -> tuple[int, int]:
    with _TAKE_LOCK:
        seed = generator.initial_seed()
        offset = generator.get_offset()
        generator.set_offset(offset + increment)
    return as_int64(seed), offset


def rng_state(generator: PhiloxGenerator, batch: int, heads: int) -> torch.Tensor:
    """:func:`reserve` as the operators' ``rng_state``: int64 ``(2,)`` CPU tensor (seed, offset)."""
    return torch.tensor(reserve(generator, batch, heads), dtype=torch.int64)


def generator_for(device: torch.device) -> PhiloxGenerator:
    """The default CUDA generator of ``device`` (index None: the current device); tests replace it."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    return torch.cuda.default_generators[index]


def capturing() -> bool:
    """True while the current CUDA stream is being captured into a CUDA graph; tests replace it."""
    return torch.cuda.is_current_stream_capturing()


_CAPTURE_MESSAGE = (
    "flash_attn: dropout_p > 0 inside CUDA-graph capture is not supported by this stable-ABI wheel: torch's "
    "stable ABI gives no graph-safe Philox state, so every replay of the graph would reuse the dropout mask "
    "drawn at capture. Use the per-torch flash_attn wheel (local version label cu<XY>torch<version>..., "
    "built with --torch-abi exact) for dropout in captured graphs, or call with dropout_p=0 inside the graph."
)


def _reserve_now(q: torch.Tensor, increment: int) -> torch.Tensor:
    if capturing():
        raise FlashAttnError(_CAPTURE_MESSAGE)
    return torch.tensor(_take(generator_for(q.device), increment), dtype=torch.int64)


def forward_rng_state(q: torch.Tensor, batch: int, heads: int) -> torch.Tensor:
    """The ``rng_state`` a public function passes to ``fwd`` / ``varlen_fwd`` in a stable-ABI build with
    ``dropout_p > 0`` (callers test :data:`RESERVE` and ``dropout_p`` first).

    Eager: reserves now on the default CUDA generator of q's device. While ``torch.compile`` traces:
    the custom operator ``flash_attn_rng::philox_reserve``, so each run of the compiled graph reserves
    anew.

    Raises:
        FlashAttnError: the current CUDA stream is being captured into a CUDA graph (see the module doc).
    """
    increment = philox_increment(batch, heads)
    if torch.compiler.is_compiling() or _tracing(q):
        return torch.ops.flash_attn_rng.philox_reserve.default(q, increment)
    return _reserve_now(q, increment)


def _tracing(q: torch.Tensor) -> bool:
    """True under a tracer other than Dynamo (make_fx, FakeTensorMode, export): a dispatch mode is
    active or q is a tensor subclass (a FakeTensor). The operator then records the reservation in the
    graph instead of reading the generator once at trace time."""
    return type(q) is not torch.Tensor or _dispatch_modes() > 0


def _dispatch_modes() -> int:
    stack = getattr(torch._C, "_len_torch_dispatch_stack", None)
    return stack() if stack is not None else 0


def _register_op() -> Any:
    """Register ``flash_attn_rng::philox_reserve(Tensor q, SymInt increment) -> Tensor`` (see the module doc)."""

    @torch.library.custom_op(OP_NAME, mutates_args=(), tags=(torch.Tag.nondeterministic_seeded,))
    def philox_reserve(q: torch.Tensor, increment: int) -> torch.Tensor:
        return _reserve_now(q, increment)

    @philox_reserve.register_fake
    def _(q: torch.Tensor, increment: int) -> torch.Tensor:
        return torch.empty((2,), dtype=torch.int64, device="cpu")

    return philox_reserve
