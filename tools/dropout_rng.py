#!/usr/bin/env python3
"""Dropout on a GPU: the Philox state the binding writes into Flash_fwd_params is the one the kernel uses.

    python tools/dropout_rng.py [--dtype fp16|bf16] [--seed N]

The binding fills ``Flash_fwd_params::philox_args`` in the form the upstream tree declares (an
``at::PhiloxCudaState`` in flash-attn 2.8.3.post2, four uint64 words in upstream main; see
src/kernels/upstream_shape.py). The forward kernel writes the (seed, offset) it unpacked from it
into the returned ``rng_state``, so a wrong layout shows up as a wrong rng_state or a mask that
ignores the seed. Checks, B=2 S=256 H=4 D=64, dropout_p=0.25, non-causal, through
``torch.ops.flash_attn.fwd`` / ``bwd``:

  state      after torch.cuda.manual_seed(s): rng_state == (s, 0); the next call (s, B*H*32)
             (the offset the generator advanced by) and a different mask
  mask       out == fp32 attention with the kernel's own keep mask (entries of the returned P
             with a negative sign were dropped) scaled by 1/(1-p); dropped fraction 0.25 +- 0.01
  seed       the same seed gives the same mask and output bit for bit; another seed another mask
  replay     rng_state given on the CPU (seed, offset by value) and on the GPU (read through
             pointers, the "captured" form) replays the first call bit for bit
  backward   dq, dk, dv from bwd with the forward's rng_state == fp32 autograd through the same mask

Gates as tools/release_paths.py (rel_Linf <= 2e-2 fp16 / 1e-2 bf16, cosine >= 0.9995). Prints
one table; exit 0 all passed (a kernel the build lacks is SKIP, not built), 1 a check failed,
2 nothing could run (no CUDA device or no usable library).
"""

from __future__ import annotations

import argparse
import os
import sys

import release_paths as rp  # tools/release_paths.py, beside this script: its Row, compare, table, readiness
import torch

B, S, H, D = 2, 256, 4, 64
P_DROP = 0.25
DROP_TOLERANCE = 0.01  # |dropped fraction - p|; B*H*S*S = 524288 Bernoulli draws: sd 0.0006


def fwd(q, k, v, p: float, rng_state: torch.Tensor | None):
    """torch.ops.flash_attn.fwd with return_softmax; returns (out, lse, P, rng_state).

    A stable-ABI build's C++ cannot reach the CUDA generator: there rng_state None is reserved in
    Python first, as the public functions do (flash_attn/_rng.py), so the "state" checks hold the
    reservation to what the exact build's C++ draws."""
    from flash_attn import _rng

    if rng_state is None and p > 0 and _rng.RESERVE:
        rng_state = _rng.forward_rng_state(q, q.shape[0], q.shape[2])
    return torch.ops.flash_attn.fwd(q, k, v, None, p, D**-0.5, False, -1, -1, 0.0, True, rng_state)


def keep_mask(p_matrix: torch.Tensor) -> torch.Tensor:
    """Boolean (B, H, S, S) keep mask from the kernel's P (dropped entries carry a negative sign)."""
    return p_matrix[:, :, :S, :S] >= 0


def reference(q, k, v, keep: torch.Tensor, p: float) -> torch.Tensor:
    """fp32 attention (B, S, H, D) with the given keep mask (B, H, S, S) and inverted-dropout scaling."""
    qt, kt, vt = (t.float().transpose(1, 2) for t in (q, k, v))
    probs = torch.softmax(torch.matmul(qt, kt.transpose(-1, -2)) * D**-0.5, dim=-1)
    probs = probs * keep / (1.0 - p)
    return torch.matmul(probs, vt).transpose(1, 2)


def run(dtype: torch.dtype, seed: int) -> list[rp.Row]:
    rows: list[rp.Row] = []

    def check(name: str, ok: bool, note: str) -> None:
        rows.append(rp.Row(name, "-", status="PASS" if ok else "FAIL", note=note))

    gen = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = (torch.randn(B, S, H, D, device="cuda", generator=gen).to(dtype) for _ in range(3))
    philox_seed = seed + 1
    torch.cuda.manual_seed(philox_seed)
    out1, lse1, p1, rng1 = fwd(q, k, v, P_DROP, None)
    out2, _, p2, rng2 = fwd(q, k, v, P_DROP, None)
    state1, state2 = rng1.cpu().tolist(), rng2.cpu().tolist()
    check("state", state1 == [philox_seed, 0], f"rng_state {state1}, expected [{philox_seed}, 0]")
    check("state", state2 == [philox_seed, B * H * 32], f"next call {state2}, expected [{philox_seed}, {B * H * 32}]")
    keep1, keep2 = keep_mask(p1), keep_mask(p2)
    check("state", not torch.equal(keep1, keep2), "the next call draws another mask")

    dropped = 1.0 - keep1.float().mean().item()
    check("mask", abs(dropped - P_DROP) <= DROP_TOLERANCE, f"dropped fraction {dropped:.4f} (p = {P_DROP})")
    rows.append(rp.compare("mask", "out", out1, reference(q, k, v, keep1, P_DROP), dtype))

    torch.cuda.manual_seed(philox_seed)
    out_again, _, p_again, _ = fwd(q, k, v, P_DROP, None)
    check("seed", torch.equal(out_again, out1) and torch.equal(p_again, p1), "same seed: same output and P")
    torch.cuda.manual_seed(philox_seed + 1)
    _, _, p_other, _ = fwd(q, k, v, P_DROP, None)
    check("seed", not torch.equal(keep_mask(p_other), keep1), "another seed: another mask")

    for where in ("cpu", "cuda"):
        given = torch.tensor(state1, dtype=torch.int64, device=where)
        out_r, _, p_r, rng_r = fwd(q, k, v, P_DROP, given)
        same = torch.equal(out_r, out1) and torch.equal(p_r, p1) and rng_r.cpu().tolist() == state1
        check("replay", same, f"rng_state on the {where}: output, P and reported state of the first call")

    try:
        dout = torch.randn(B, S, H, D, device="cuda", generator=gen).to(dtype)
        dq, dk, dv, _ = torch.ops.flash_attn.bwd(
            dout, q, k, v, out1, lse1, None, P_DROP, D**-0.5, False, -1, -1, 0.0, False, rng1
        )
    except Exception as exc:  # a build without the backward unit reports SKIP
        if rp.not_built_cause(exc) is None:
            raise
        rows.append(rp.Row("backward", "-", status="SKIP", note=f"not built: {str(exc).split('(')[0].strip()}"))
        return rows
    q32, k32, v32 = (t.detach().float().requires_grad_() for t in (q, k, v))
    reference(q32, k32, v32, keep1, P_DROP).backward(dout.float())
    for name, got, ref in (("dq", dq, q32.grad), ("dk", dk, k32.grad), ("dv", dv, v32.grad)):
        rows.append(rp.compare("backward", name, got, ref, dtype))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtype", choices=list(rp.DTYPES), default="fp16")
    parser.add_argument("--seed", type=int, default=None, help="default: a fresh random seed (printed)")
    args = parser.parse_args(argv)
    if rp.flash_attn is None:
        print(f"dropout_rng: cannot import flash_attn ({rp._IMPORT_ERROR}); install the wheel or run `nox -s dev`")
        return 2
    if not torch.cuda.is_available():
        print("dropout_rng: no CUDA device; nothing checked")
        return 2
    error = rp.readiness_error(torch.cuda.current_device())
    if error is not None:
        print(f"dropout_rng: flash_attn cannot run here: {error}")
        return 2
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little") % (2**30)
    dtype = rp.DTYPES[args.dtype]
    try:
        rows = run(dtype, seed)
    except Exception as exc:
        not_built = rp.not_built_cause(exc)
        if not_built is None:
            raise
        rows = [rp.Row("forward", "-", status="SKIP", note=f"not built: {str(not_built).split('(')[0].strip()}")]
    upstream = (rp.flash_attn.build_info() or {}).get("upstream", {})
    title = (
        f"flash_attn {rp.flash_attn.__version__} on {torch.cuda.get_device_name()}: {args.dtype}, dropout {P_DROP}, "
        f"B={B} S={S} H={H} D={D}, seed {seed}; upstream philox_args {upstream.get('philox_args', '?')}"
    )
    print(rp.format_table(rows, title))
    failed = any(row.status == "FAIL" for row in rows)
    print("FAILED" if failed else "PASSED")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
