"""Upstream FlashAttention-2 2.8.3's private API of ``flash_attn_interface``, over this wheel's operators.

Packages that build their own attention (ring and sequence parallelism, context parallelism)
import these underscored names from ``flash_attn.flash_attn_interface`` rather than the public
functions: ``_flash_attn_forward``, ``_flash_attn_varlen_forward``, ``_flash_attn_backward``,
``_flash_attn_varlen_backward`` (ring-flash-attn, yunchang, colossalai, ms-swift, fla, sglang,
deepspeed), the ``_wrapped_*`` operator handles (diffusers), ``_get_block_size_n`` (upstream's
tests). They read them with ``inspect.getfullargspec`` (of the function, or of ``_init_fn`` when
it is a torch custom op) and call them with keyword arguments, so each has upstream's parameter
names, order, defaults and annotations, and upstream's return values:

* the forwards return ``(out, softmax_lse, S_dmask, rng_state)``, shapes as the public functions
  (``S_dmask`` ``(0,)`` unless ``return_softmax``; ``rng_state`` int64 ``(2,)`` with dropout, else
  ``(0,)`` where upstream returns an unused ``(2,)``);
* the backwards write the gradients into the caller's ``dq``, ``dk``, ``dv`` (often views of one
  larger buffer) and return ``softmax_d``; a None one is computed and dropped; ``rng_state=None``
  is accepted (no dropout; with dropout a fresh state is drawn, as upstream does).

Like upstream they are torch custom operators ``flash_attn::_flash_attn_forward`` etc. (the
backwards declare ``dq``, ``dk``, ``dv`` mutated), with fake implementations, so
``torch.compile`` traces consumer code through them; unlike upstream's they are registered for
every device type, so a CPU tensor gets this package's InputError rather than a dispatcher error.
Each calls the same operators, checks and dropout reservation as the public functions, through
:func:`flash_attn._extension.call` (the operators copy a q/k/v whose last dim is strided, so no
``maybe_contiguous`` is needed before them). The gradients reach ``dq``/``dk``/``dv`` by a copy
(one extra pass over each on the device): this wheel's backward operators allocate their outputs.
"""

# No `from __future__ import annotations`: torch.library.custom_op reads the annotations as
# objects, and consumers compare getfullargspec (annotations included) with upstream's, whose
# objects are typing's Optional and Tuple (hence the ruff exemptions UP006/UP035/UP045).
# ruff: noqa: UP006, UP035, UP045
import inspect
from typing import Any, Optional, Tuple

import torch

from . import _build_info, _extension, _loader
from ._errors import InputError

__all__ = [
    "_flash_attn_forward",
    "_flash_attn_varlen_forward",
    "_flash_attn_backward",
    "_flash_attn_varlen_backward",
    "_wrapped_flash_attn_forward",
    "_wrapped_flash_attn_varlen_forward",
    "_wrapped_flash_attn_backward",
    "_wrapped_flash_attn_varlen_backward",
    "_get_block_size_n",
    "maybe_contiguous",
    "round_multiple",
]

_GRADIENTS = ("dq", "dk", "dv")


def maybe_contiguous(x):
    """``x`` with a unit stride in its last dim: ``x`` itself when it has one (or is None), else a
    contiguous copy. What the kernels need of q/k/v; the operators apply it themselves."""
    return x.contiguous() if x is not None and x.stride(-1) != 1 else x


def round_multiple(x, m):
    """The smallest multiple of ``m`` that is >= ``x`` (ints or SymInts), e.g. the 128-rounded sequence
    lengths of ``S_dmask``."""
    return (x + m - 1) // m * m


# kBlockN, the key/value rows per tile of the forward kernel that serves each kernel head dim, as
# chosen by run_mha_fwd_hdim<D> in upstream csrc/flash_attn/src/flash_fwd_launch_template.h (the
# third argument of Flash_fwd_kernel_traits; this project's deltas keep the tiles). Per head dim:
# (without dropout, with dropout), and for head dim 128 on sm86/sm89 (non-causal, causal) without
# dropout. tests/unit/runtime/test_upstream_api.py reads the numbers back from the template.
_BLOCK_N = {32: (128, 128), 64: (128, 64), 96: (64, 64), 128: (64, 32), 192: (64, 64), 256: (64, 64)}
_BLOCK_N_SM8X_HDIM128 = (32, 64)


def _get_block_size_n(device, head_dim, is_dropout, is_causal):
    """Key block size (tokens) of the forward kernel this wheel runs for ``head_dim`` on ``device``.

    ``S_dmask`` (the probabilities a forward returns with dropout) is written tile by tile; upstream's
    tests use this size to undo that layout. Head dims run the kernel of the next size up (32, 64,
    96, 128, 192, 256); sm86/sm89 (compute capability 8.x other than 8.0) pick their own tiles for
    head dim 128.

    Args:
        device: a CUDA device (``torch.device``, index or None for the current one).
        head_dim: the caller's head dim, 1 .. 256.
        is_dropout: whether ``dropout_p > 0``.
        is_causal: whether the call is causal.

    Returns:
        The block size N: 32, 64 or 128.

    Raises:
        InputError (a ValueError): ``head_dim`` is not in 1 .. 256.
    """
    kernel_dim = _build_info.kernel_head_dim(head_dim, _loader.STATE.head_dims or _BLOCK_N)
    if kernel_dim == 0:
        raise InputError(f"head_dim must be in 1 .. 256 (FlashAttention-2's kernels), got {head_dim}")
    major, minor = torch.cuda.get_device_capability(device)
    if kernel_dim == 128 and major == 8 and minor > 0 and not is_dropout:
        return _BLOCK_N_SM8X_HDIM128[bool(is_causal)]
    return _BLOCK_N[kernel_dim][bool(is_dropout)]


def _run(op: str, given: dict, fake: bool = False) -> list:
    """Call operator ``op`` on a private function's arguments (its locals() at entry)."""
    values = {("is_causal" if name == "causal" else name): value for name, value in given.items()}
    into = [given.get(name) for name in _GRADIENTS]
    return _extension.call(op, values, into=into, fake=fake)


def _register_fake(function: Any, op: str, pick: Any) -> None:
    """The fake of custom op ``function``: the operator's fake on the same arguments (shapes only)."""
    bind = inspect.signature(function._init_fn).bind

    def fake(*args: Any, **kwargs: Any) -> Any:
        bound = bind(*args, **kwargs)
        bound.apply_defaults()
        return pick(_run(op, bound.arguments, fake=True))

    function.register_fake(fake)


@torch.library.custom_op("flash_attn::_flash_attn_forward", mutates_args=())
def _flash_attn_forward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
    dropout_p: float, softmax_scale: float, causal: bool, window_size_left: int, window_size_right: int,
    softcap: float, alibi_slopes: Optional[torch.Tensor], return_softmax: bool,
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    """Upstream's private forward over a padded batch: q ``(B, Sq, H, D)``, k/v ``(B, Sk, Hk, D)`` fp16/bf16
    CUDA, ``D`` a multiple of 8 and <= 256 (no padding here), options as :func:`flash_attn.flash_attn_func`
    (``window_size`` split in two, ``softmax_scale`` required, ``return_softmax`` needs dropout).
    Returns ``(out, softmax_lse, S_dmask, rng_state)``. Raises the errors of ``flash_attn_func``."""
    return tuple(_run("fwd", locals()))


@torch.library.custom_op("flash_attn::_flash_attn_varlen_forward", mutates_args=())
def _flash_attn_varlen_forward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor,
    max_seqlen_q: int, max_seqlen_k: int, dropout_p: float, softmax_scale: float, causal: bool,
    window_size_left: int = -1, window_size_right: int = -1, softcap: float = 0.0,
    alibi_slopes: Optional[torch.Tensor] = None, return_softmax: bool = False,
    block_table: Optional[torch.Tensor] = None, leftpad_k: Optional[torch.Tensor] = None,
    seqused_k: Optional[torch.Tensor] = None, zero_tensors: bool = False,
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    """Upstream's private forward over packed variable-length sequences: q ``(Tq, H, D)``, k/v ``(Tk, Hk, D)``
    (or a paged cache with ``block_table``), cu_seqlens int32 ``(B + 1,)``, max_seqlen ints (tokens),
    leftpad_k/seqused_k None or int32 ``(B,)``, other options as :func:`flash_attn.flash_attn_varlen_func`.
    Returns ``(out, softmax_lse, S_dmask, rng_state)``, softmax_lse fp32 ``(H, Tq)``. Raises as that function."""
    return tuple(_run("varlen_fwd", locals()))


@torch.library.custom_op("flash_attn::_flash_attn_backward", mutates_args=_GRADIENTS)
def _flash_attn_backward(
    dout: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, softmax_lse: torch.Tensor,
    dq: Optional[torch.Tensor], dk: Optional[torch.Tensor], dv: Optional[torch.Tensor],
    dropout_p: float, softmax_scale: float, causal: bool, window_size_left: int, window_size_right: int,
    softcap: float, alibi_slopes: Optional[torch.Tensor], deterministic: bool, rng_state: Optional[torch.Tensor] = None,
) -> torch.Tensor:  # fmt: skip
    """Upstream's private backward of :func:`_flash_attn_forward`: writes the gradients into ``dq``, ``dk``,
    ``dv`` (None: not returned) and returns softmax_d fp32 ``(B, H, round_multiple(Sq, 128))``. ``rng_state``:
    the forward's. Raises the errors of :func:`flash_attn.flash_attn_func`."""
    return _run("bwd", locals())[3]


@torch.library.custom_op("flash_attn::_flash_attn_varlen_backward", mutates_args=_GRADIENTS)
def _flash_attn_varlen_backward(
    dout: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, softmax_lse: torch.Tensor,
    dq: Optional[torch.Tensor], dk: Optional[torch.Tensor], dv: Optional[torch.Tensor],
    cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int,
    dropout_p: float, softmax_scale: float, causal: bool, window_size_left: int, window_size_right: int,
    softcap: float, alibi_slopes: Optional[torch.Tensor], deterministic: bool,
    rng_state: Optional[torch.Tensor] = None, zero_tensors: bool = False,
) -> torch.Tensor:  # fmt: skip
    """Upstream's private backward of :func:`_flash_attn_varlen_forward`: writes ``dq``, ``dk``, ``dv`` and
    returns softmax_d fp32 ``(H, Tq + 128 * B)``. Raises the errors of :func:`flash_attn.flash_attn_varlen_func`."""
    return _run("varlen_bwd", locals())[3]


_register_fake(_flash_attn_forward, "fwd", tuple)
_register_fake(_flash_attn_varlen_forward, "varlen_fwd", tuple)
_register_fake(_flash_attn_backward, "bwd", lambda result: result[3])
_register_fake(_flash_attn_varlen_backward, "varlen_bwd", lambda result: result[3])

# The operator packets (OpOverloadPacket), as upstream names them: calls through the dispatcher.
_wrapped_flash_attn_forward = torch.ops.flash_attn._flash_attn_forward
_wrapped_flash_attn_varlen_forward = torch.ops.flash_attn._flash_attn_varlen_forward
_wrapped_flash_attn_backward = torch.ops.flash_attn._flash_attn_backward
_wrapped_flash_attn_varlen_backward = torch.ops.flash_attn._flash_attn_varlen_backward
