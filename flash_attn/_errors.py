"""Exception types raised by flash_attn before any kernel runs.

Every error subclasses :class:`FlashAttnError`, itself a :class:`RuntimeError` (upstream
FlashAttention-2 reports its checks as ``RuntimeError`` from C++, so code that catches that keeps
working). Input errors are also :class:`ValueError`, so the usual Python idiom works as well.
"""

from __future__ import annotations

__all__ = [
    "FlashAttnError",
    "LibraryNotBuiltError",
    "LibraryLoadError",
    "TorchMismatchError",
    "UnsupportedGPUError",
    "KernelNotBuiltError",
    "InputError",
]


class FlashAttnError(RuntimeError):
    """Base class of every error flash_attn raises on its own."""


class LibraryNotBuiltError(FlashAttnError):
    """No native library ``flash_attn/_C_<group>`` exists: a source checkout that was never built."""


class LibraryLoadError(FlashAttnError):
    """The native library exists but cannot be used: unreadable build info or a failed load."""


class TorchMismatchError(LibraryLoadError):
    """The running torch (version, CUDA major or C++ ABI) is not the one the library was built against.

    Raised before the library is loaded, so no undefined-symbol error can surface.
    """


class UnsupportedGPUError(FlashAttnError):
    """The GPU's compute capability is not covered by the SASS or PTX of this wheel's arch group."""


class KernelNotBuiltError(FlashAttnError):
    """The call needs an instantiation unit (head dim, dtype, causal) that the kernel set left out."""


class InputError(FlashAttnError, ValueError):
    """An argument has the wrong device, dtype, shape, stride or value."""
