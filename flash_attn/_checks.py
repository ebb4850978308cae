"""The few checks the Python layer owns; every other input check belongs to the C++ operators.

The operators validate their inputs themselves (``src/binding/checks.h`` and the validate
blocks of ``fwd.cpp``, ``bwd.cpp``, ``kvcache.cpp``) and raise ``RuntimeError`` texts that say
what was found, what is allowed and what to do. Python does not repeat those checks, and it
does not predict the kernels' dispatch (causal kernel, split-KV): the operators decide, and a
unit the kernel set left out raises ``flash_attn was built without ...`` from C++. This module
keeps only what C++ cannot know cheaply, so nothing here runs per call once it has passed:

* :func:`require_device`: once per device, whether the native library is loaded and this
  wheel's arch group runs on that GPU (the message names the wheel to install), and that the
  device is a CUDA device at all (a meta tensor would otherwise reach the fake kernels);
* :func:`window`, :func:`packed`, :func:`cache_seqlens_length`: the Python-only argument forms
  (a ``window_size`` pair, a packed qkv/kv tensor, an ``int`` ``cache_seqlens``);
* :func:`call`: runs an operator and, only when it raised, re-raises its message as
  :class:`~flash_attn.InputError` or :class:`~flash_attn.KernelNotBuiltError` (with the content
  of the loaded kernel set added), so the error classes of the public API stay what they were.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import torch

from flash_attn_wheel_names import native as _native

from . import _build_info, _loader, _ops
from ._errors import InputError, KernelNotBuiltError
from ._tracing import constant_result

__all__ = ["require_device", "reset", "window", "packed", "cache_seqlens_length", "translate", "call"]

# Devices that passed require_device (torch.device objects). reset() empties it.
_READY: set[torch.device] = set()

# The device type the kernels run on (the CPU tests of the emulated library set "cpu").
KERNEL_DEVICE_TYPE = "cuda"

# The operators' own messages: ArgChecker's "flash_attn::<op>: ..." (src/binding/checks.h) and the
# dispatcher's "flash_attn::<op>() Expected a value of type ..." (any flash_attn* namespace, so
# the CPU test operators translate alike). The dispatch stubs' text is flash_attn_wheel_names.native's.
_INPUT_PREFIX = re.compile(r"flash_attn\w*::")


def reset() -> None:
    """Forget which devices passed :func:`require_device` (after the loader state changed)."""
    _READY.clear()


@constant_result
def _admit(device: torch.device) -> bool:
    """The once-per-device check; ``torch.compile`` runs it while tracing (marked constant)."""
    if device.type != KERNEL_DEVICE_TYPE:
        raise InputError(
            f"q is on device '{device}'; FlashAttention-2 kernels run on CUDA devices only: "
            "move the inputs with .cuda() or .to('cuda')"
        )
    index = device.index
    if index is None:
        index = torch.cuda.current_device() if device.type == "cuda" else -1
    _loader.require_ready(index)
    _READY.add(device)
    return True


def require_device(q: Any) -> dict[str, Callable[..., Any]]:
    """Raise unless kernels can run where ``q`` lives; the work is done once per device.

    Returns the operators to call, by name: :data:`flash_attn._ops.OPS` (the handles Dynamo
    traces) while ``torch.compile`` traces, :data:`flash_attn._ops.EAGER` otherwise.

    Raises:
        InputError: ``q`` is not a tensor, or not on a CUDA device.
        LibraryNotBuiltError, TorchMismatchError, LibraryLoadError, UnsupportedGPUError: from
            :func:`flash_attn._loader.require_ready` (the last names the wheel to install).
    """
    if not isinstance(q, torch.Tensor):
        raise InputError(f"q must be a torch.Tensor, got {type(q).__name__}")
    if torch.compiler.is_compiling():
        _admit(q.device)  # at trace time only (marked constant): compiled graphs carry no check
        return _ops.OPS
    if q.device not in _READY:
        _admit(q.device)
    return _ops.EAGER


def window(window_size: Any) -> tuple[Any, Any]:
    """``(left, right)`` of a ``window_size`` pair (tokens; the operators check the values)."""
    try:
        left, right = window_size
    except (TypeError, ValueError):
        raise InputError(
            f"window_size must be a pair (left, right) of token counts, -1 meaning unbounded; got {window_size!r}"
        ) from None
    return left, right


def packed(name: str, tensor: Any, dims: int, count: int, layout: str) -> None:
    """A packed qkv/kv tensor: ``dims``-D with ``count`` at dim ``dims - 3`` (qkv: 3, kv: 2)."""
    if not isinstance(tensor, torch.Tensor) or tensor.dim() != dims or tensor.shape[dims - 3] != count:
        found = tuple(tensor.shape) if isinstance(tensor, torch.Tensor) else type(tensor).__name__
        raise InputError(f"{name} must have shape {layout}, got {found}")


def cache_seqlens_length(value: int) -> int:
    """An ``int`` ``cache_seqlens`` (the operator only sees the int32 tensor made of it)."""
    if isinstance(value, bool) or value < 0:
        raise InputError(f"cache_seqlens must be an int >= 0, an int32 tensor (B,) or None, got {value!r}")
    return value


def _kernel_set_text() -> str:
    state = _loader.STATE
    if not state.kernels:
        return ""
    head_dims = sorted({key.head_dim for key in state.kernels})
    dtypes = sorted({key.dtype for key in state.kernels})
    return (
        f" The kernel set '{state.kernel_set_name}' holds head dims {head_dims} for {', '.join(dtypes)}: "
        f"{_build_info.describe_kernels(state.kernels)}. Head dims run the kernel of the next size up "
        f"({', '.join(map(str, state.head_dims))}); use a head dim and dtype the set holds, or install a release "
        "wheel."
    )


def translate(error: RuntimeError) -> RuntimeError:
    """The exception to raise for an operator's ``error`` (its message, the API's error class)."""
    message = str(error)
    if _native.is_not_built_message(message):
        return KernelNotBuiltError(message + _kernel_set_text())
    if _INPUT_PREFIX.match(message):
        return InputError(message)
    return error


def call(op: Callable[..., Any], *args: Any) -> Any:
    """``op(*args)``, its RuntimeError re-raised through :func:`translate` (free when none is raised)."""
    try:
        return op(*args)
    except RuntimeError as error:
        raise translate(error) from None
