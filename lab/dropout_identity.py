#!/usr/bin/env python3
"""Dropout of two wheels, bit for bit: a stable-ABI wheel against a per-torch wheel, same seeds.

    python lab/dropout_identity.py --save exact.pt          # in an environment with the per-torch wheel
    python lab/dropout_identity.py --save stable.pt         # in one with the stable-ABI wheel (same GPU)
    python lab/dropout_identity.py --compare exact.pt stable.pt

``--save`` (needs a CUDA device) runs three shapes through the public functions with
``dropout_p = 0.17`` after ``torch.manual_seed``: B=2 S=256 H=4 D=64; GQA causal B=1 Sq=100 Sk=300
H=8 Hk=2 D=128; varlen (sequences of 77 and 223 tokens) H=6 D=64. For each it keeps the output,
the LSE, the dropout probabilities P (dropped entries negative), dq, dk, dv and the default CUDA
generator's offset after the call, with the wheel's version and torch ABI, in one ``torch.save``
file (CPU tensors). The inputs come from a generator of their own, so both runs see the same
inputs; the Philox state comes from ``torch.manual_seed`` as a user's would.

``--compare A B`` (CPU is enough) prints one line per shape and tensor and exits 0 when every
tensor is bit-identical (``torch.equal``) and every generator offset equal, 1 otherwise, 2 when a
file is unreadable or the two runs used different shapes or seeds. The head dims (64, 128) are in
the ``dev`` kernel set.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

P_DROP = 0.17
SEED = 1234  # torch.manual_seed before each shape's call (+ the shape's index)
INPUT_SEED = 99  # the inputs' own generator


def _shapes():
    """(name, kind, q shape, k/v shape, causal, cu_seqlens or None)."""
    return [
        ("base", "padded", (2, 256, 4, 64), (2, 256, 4, 64), False, None),
        ("gqa_causal", "padded", (1, 100, 8, 128), (1, 300, 2, 128), True, None),
        ("varlen", "varlen", (300, 6, 64), (300, 6, 64), False, [0, 77, 300]),
    ]


def run_shapes(device: str = "cuda") -> dict:
    """Every shape's tensors (CPU) and generator offset, for --save."""
    import flash_attn

    info = flash_attn.build_info() or {}
    result = {
        "flash_attn": flash_attn.__version__,
        "torch_abi": info.get("torch_abi") or "exact",
        "torch": str(torch.__version__),  # a plain str: weights_only loading refuses TorchVersion
        "seed": SEED,
        "p": P_DROP,
        "shapes": {},
    }
    gen = torch.Generator(device=device).manual_seed(INPUT_SEED)
    for index, (name, kind, q_shape, kv_shape, causal, cu) in enumerate(_shapes()):
        q, k, v = (
            torch.randn(shape, device=device, generator=gen, dtype=torch.float16).requires_grad_()
            for shape in (q_shape, kv_shape, kv_shape)
        )
        dout = torch.randn(q_shape, device=device, generator=gen, dtype=torch.float16)
        torch.manual_seed(SEED + index)
        if kind == "varlen":
            cu_t = torch.tensor(cu, dtype=torch.int32, device=device)
            longest = max(cu[i + 1] - cu[i] for i in range(len(cu) - 1))
            out, lse, probs = flash_attn.flash_attn_varlen_func(
                q,
                k,
                v,
                cu_t,
                cu_t,
                longest,
                longest,
                dropout_p=P_DROP,
                causal=causal,
                return_attn_probs=True,
                deterministic=True,
            )
        else:
            out, lse, probs = flash_attn.flash_attn_func(
                q, k, v, dropout_p=P_DROP, causal=causal, return_attn_probs=True, deterministic=True
            )
        offset = torch.cuda.default_generators[torch.cuda.current_device()].get_offset()
        out.backward(dout)
        tensors = {"out": out, "lse": lse, "P": probs, "dq": q.grad, "dk": k.grad, "dv": v.grad}
        result["shapes"][name] = {
            "tensors": {key: value.detach().cpu() for key, value in tensors.items()},
            "generator_offset": offset,
        }
    return result


def compare(a: dict, b: dict) -> tuple[list[str], bool]:
    """Lines of the comparison and whether everything is bit-identical.

    Raises ValueError when the two runs are not comparable (other seeds, p or shapes).
    """
    for key in ("seed", "p"):
        if a.get(key) != b.get(key):
            raise ValueError(f"the runs used different {key}: {a.get(key)} and {b.get(key)}")
    if set(a["shapes"]) != set(b["shapes"]):
        raise ValueError(f"the runs hold different shapes: {sorted(a['shapes'])} and {sorted(b['shapes'])}")
    lines = [
        f"A: flash_attn {a['flash_attn']} ({a['torch_abi']}, torch {a['torch']}); "
        f"B: flash_attn {b['flash_attn']} ({b['torch_abi']}, torch {b['torch']}); dropout {a['p']}"
    ]
    ok = True
    for name in a["shapes"]:
        sa, sb = a["shapes"][name], b["shapes"][name]
        same_offset = sa["generator_offset"] == sb["generator_offset"]
        ok &= same_offset
        lines.append(
            f"  {name:<11} generator offset {sa['generator_offset']} / {sb['generator_offset']}: "
            f"{'same' if same_offset else 'DIFFERENT'}"
        )
        for key, ta in sa["tensors"].items():
            tb = sb["tensors"].get(key)
            same = tb is not None and ta.shape == tb.shape and ta.dtype == tb.dtype and torch.equal(ta, tb)
            ok &= same
            detail = "bit-identical" if same else _difference(ta, tb)
            lines.append(f"  {name:<11} {key:<4} {tuple(ta.shape)}: {detail}")
    lines.append("PASSED: bit-identical" if ok else "FAILED: the runs differ")
    return lines, ok


def _difference(ta: torch.Tensor, tb: torch.Tensor | None) -> str:
    if tb is None:
        return "DIFFERENT (missing in B)"
    if ta.shape != tb.shape or ta.dtype != tb.dtype:
        return f"DIFFERENT (B is {tuple(tb.shape)} {tb.dtype})"
    diff = (ta.float() - tb.float()).abs()
    return f"DIFFERENT ({int((diff > 0).sum())} elements, max |diff| {diff.max().item():.3g})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--save", type=Path, help="run the shapes here (CUDA) and write this file")
    which.add_argument("--compare", type=Path, nargs=2, metavar=("A", "B"), help="compare two saved runs")
    args = parser.parse_args(argv)
    if args.save:
        if not torch.cuda.is_available():
            print("dropout_identity: --save needs a CUDA device; nothing run")
            return 2
        result = run_shapes()
        torch.save(result, args.save)
        print(f"dropout_identity: {len(result['shapes'])} shapes of flash_attn {result['flash_attn']} "
              f"({result['torch_abi']}) written to {args.save}")  # fmt: skip
        return 0
    try:
        a, b = (torch.load(path, weights_only=True) for path in args.compare)
        lines, ok = compare(a, b)
    except (OSError, RuntimeError, ValueError, KeyError) as exc:
        print(f"dropout_identity: cannot compare {args.compare[0]} and {args.compare[1]}: {exc}")
        return 2
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
