"""Upstream FlashAttention-2's extension module name, ``flash_attn_2_cuda``, for code that imports it.

Upstream's wheel installs a compiled module of this name beside the ``flash_attn`` package; this
wheel's kernels are torch operators instead, so this module re-exports the functions of
:mod:`flash_attn._extension`, which keep the compiled module's positional signatures and return
lists (``fwd``, ``varlen_fwd``, ``bwd``, ``varlen_bwd``, ``fwd_kvcache``) over those operators.
Importing it imports ``flash_attn`` (which loads the native library).
"""

from flash_attn._extension import bwd, fwd, fwd_kvcache, varlen_bwd, varlen_fwd

__all__ = ["fwd", "varlen_fwd", "bwd", "varlen_bwd", "fwd_kvcache"]
