"""FlashAttention-2 for PyTorch, built per GPU arch group.

The attention kernels are upstream FlashAttention-2's (2.8.3), compiled into the native library
``flash_attn/_C_<group>`` (group ``legacy`` for sm_80/86/89/90 GPUs, ``blackwell`` for
sm_100/120/121) and registered as ``torch.ops.flash_attn.*``. The public functions keep
upstream's names, signatures, defaults and return values.

Importing never fails for lack of a GPU or a build: the library is located, checked against the
running torch and loaded here (see :mod:`flash_attn._loader`); if that is impossible the reason
is kept and raised at the first kernel call. ``python -m flash_attn`` prints the build info and
whether this wheel can run on the GPUs present.
"""

from ._metadata import package_version as _package_version

__version__ = _package_version()

from . import _loader  # noqa: E402

_loader.initialize()

from ._errors import (  # noqa: E402
    FlashAttnError,
    InputError,
    KernelNotBuiltError,
    LibraryLoadError,
    LibraryNotBuiltError,
    TorchMismatchError,
    UnsupportedGPUError,
)
from .flash_attn_interface import (  # noqa: E402
    flash_attn_func,
    flash_attn_kvpacked_func,
    flash_attn_qkvpacked_func,
    flash_attn_varlen_func,
    flash_attn_varlen_kvpacked_func,
    flash_attn_varlen_qkvpacked_func,
    flash_attn_with_kvcache,
)


def build_info():
    """The build info of the native library (a dict; see :mod:`flash_attn._build_info`), or None.

    None means no usable build info was found (a source checkout without a build, or a broken
    installation); ``python -m flash_attn`` says which.
    """
    info = _loader.STATE.build_info
    return None if info is None else dict(info)


__all__ = [
    "__version__",
    "build_info",
    "flash_attn_func",
    "flash_attn_kvpacked_func",
    "flash_attn_qkvpacked_func",
    "flash_attn_varlen_func",
    "flash_attn_varlen_kvpacked_func",
    "flash_attn_varlen_qkvpacked_func",
    "flash_attn_with_kvcache",
    "FlashAttnError",
    "InputError",
    "KernelNotBuiltError",
    "LibraryLoadError",
    "LibraryNotBuiltError",
    "TorchMismatchError",
    "UnsupportedGPUError",
]
