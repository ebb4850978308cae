#!/usr/bin/env python3
"""A-1 on a GPU: the forward output and LSE stay exact when the row max grows at every key block.

Checks one build of flash_attn (the installed package, or a shared object given with --lib /
$FLASH_ATTN_LIB) against fp32 attention on inputs whose scaled row max grows by a few log2
units at every key block the kernel visits (it visits key blocks from the last to the first):

  grow@N   score(i, j) = -(4 / N) * j log2 units + noise: the max grows by about 4 per block of
           N keys.  N runs over 32, 64, 128, 256, so whatever kBlockN the kernel picked for a
           head dim (32..256, upstream's launch heuristics), one pattern grows by ~4 per block at
           exactly that block size and the others by 0.5..32 per block (both skip and rescale paths).
  random   plain N(0, 1) q, k, v
  masked   causal with Sq > Sk (bottom-right aligned): the first Sq - Sk rows see no key at all

fp16 and bf16, causal and not, D 64/128/256, S 1000 (ragged last block) and 8192.  Gates against
fp32 attention (scores, softmax and LSE in fp32): rel_Linf = max|a - b| / max|b| <= 2e-2 (fp16),
<= 1e-2 (bf16), cosine >= 0.9995, for the output and for the LSE.  Fully masked rows must give
output 0 and an infinite LSE.

    python tests/gpu/rescale_skip.py [--lib PATH] [--save A.pt] [--compare-to B.pt] [--quick]
    python tests/gpu/rescale_skip.py --compare A.pt B.pt      # no GPU needed

--save writes the outputs of every case (LSE in full, a fixed subset of output rows, and a
sha256 of the whole output) plus the seed; --compare-to reruns with the seed of the other file
and then requires the two builds to agree to rounding (e.g. an A-1 build vs a
FLASH_ATTN_RESCALE_THRESHOLD=0 build).  Head dims the build left out ('built without') are
reported as 'not built' and skipped.  Exit status 0 when every check passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import time
from dataclasses import dataclass

import torch

GATES = {torch.float16: 2e-2, torch.bfloat16: 1e-2}
COSINE_GATE = 0.9995
# two builds that differ only in A-1 (or A-2) must agree this well
AGREE_GATES = {"float16": 5e-3, "bfloat16": 1e-2, "lse_abs": 1e-3, "cosine": 0.99999}
GROW_BLOCKS = (32, 64, 128, 256)
SAVED_ROWS = 256


@dataclass
class Case:
    pattern: str  # "grow@N", "random", "masked"
    dtype: torch.dtype
    causal: bool
    d: int
    sq: int
    sk: int
    b: int
    h: int

    @property
    def name(self) -> str:
        dt = "fp16" if self.dtype == torch.float16 else "bf16"
        return f"{self.pattern}/{dt}/{'causal' if self.causal else 'full'}/d{self.d}/s{self.sq}x{self.sk}"


def cases(quick: bool = False, dims=(64, 128, 256)) -> list[Case]:
    out = []
    seqlens = (1000, 2048) if quick else (1000, 8192)
    for d in dims:
        for dtype in (torch.float16, torch.bfloat16):
            for causal in (False, True):
                for s in seqlens:
                    b, h = (2, 4) if s >= 4096 else (1, 2)  # long: no split-KV; short: split-KV likely
                    for n in GROW_BLOCKS:
                        out.append(Case(f"grow@{n}", dtype, causal, d, s, s, b, h))
                    out.append(Case("random", dtype, causal, d, s, s, b, h))
            out.append(Case("masked", dtype, True, d, 1024, 512, 1, 2))
    return out


# ---------------------------------------------------------------------------------------------
# Inputs


def make_inputs(case: Case, seed: int, device: str = "cuda"):
    """q, k, v (B, S, H, D) in case.dtype; fresh random values (seeded per case), never zeros."""
    g = torch.Generator(device=device)
    g.manual_seed((seed * 1_000_003 + int(hashlib.sha256(case.name.encode()).hexdigest()[:8], 16)) % 2**63)
    dev, dt = device, case.dtype
    B, H, D = case.b, case.h, case.d
    randn = lambda *shape: torch.randn(*shape, generator=g, device=dev, dtype=torch.float32)  # noqa: E731
    v = randn(B, case.sk, H, D)
    if case.pattern in ("random", "masked"):
        return randn(B, case.sq, H, D).to(dt), randn(B, case.sk, H, D).to(dt), v.to(dt)
    n = int(case.pattern.split("@")[1])
    rate = 4.0 / n  # log2 units per key position
    scale = 1.0 / math.sqrt(D)
    scale_log2 = scale * math.log2(math.e)
    # noise of about 0.5 log2 units (std) from the other D - 2 dims
    sigma = math.sqrt(0.5 / (math.sqrt(D - 2) * scale_log2))
    q = randn(B, case.sq, H, D) * sigma
    k = randn(B, case.sk, H, D) * sigma
    # dims 0 and 1 carry the trend: q = 1, k = hi + lo (two terms, so bf16 keeps it precise)
    j = torch.arange(case.sk, device=dev, dtype=torch.float32)
    trend = (-rate * j / scale_log2)[None, :, None].expand(B, case.sk, H)
    hi = trend.to(dt).float()
    lo = trend - hi
    q[..., 0] = 1.0
    q[..., 1] = 1.0
    k[..., 0] = hi
    k[..., 1] = lo
    return q.to(dt), k.to(dt), v.to(dt)


def reference(q, k, v, causal: bool, scale: float):
    """fp32 attention; returns out (B, Sq, H, D) fp32, lse (B, H, Sq) fp32 (-inf for empty rows)."""
    qf, kf, vf = (t.float().transpose(1, 2) for t in (q, k, v))  # (B, H, S, D)
    s = torch.matmul(qf, kf.transpose(-1, -2)) * scale
    sq, sk = s.shape[-2], s.shape[-1]
    if causal:  # bottom-right aligned, as flash_attn
        i = torch.arange(sq, device=s.device)[:, None]
        jj = torch.arange(sk, device=s.device)[None, :]
        s.masked_fill_(jj > i + (sk - sq), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.softmax(s, dim=-1).nan_to_num_(0.0)
    out = torch.matmul(p, vf).transpose(1, 2)
    return out, lse


# ---------------------------------------------------------------------------------------------
# The build under test


class NotBuilt(Exception):
    """The build's kernel set left this case's unit out."""


class Unavailable(Exception):
    """No usable native library (not built, wrong GPU, cannot load)."""


class Backend:
    """flash_attn forward from the installed package or from a given shared object."""

    def __init__(self, lib: str | None):
        self.lib = lib
        if lib:
            torch.ops.load_library(lib)
            self.source = lib
        else:
            import flash_attn

            self.flash_attn = flash_attn
            self.source = getattr(flash_attn, "__file__", "flash_attn")

    def build_info(self) -> dict:
        try:
            if not self.lib:
                info = self.flash_attn.build_info()
                return info if isinstance(info, dict) else {"error": "no build info"}
            return json.loads(torch.ops.flash_attn.build_info())
        except Exception as e:  # noqa: BLE001 - informative only
            return {"error": f"build_info unavailable: {e}"}

    def fwd(self, q, k, v, causal: bool, scale: float):
        try:
            if self.lib:
                res = torch.ops.flash_attn.fwd(q, k, v, None, 0.0, scale, causal, -1, -1, 0.0, False, None)
                return res[0], res[1]
            out, lse, _ = self.flash_attn.flash_attn_func(
                q, k, v, softmax_scale=scale, causal=causal, return_attn_probs=True
            )
            return out, lse
        except RuntimeError as e:
            kind = type(e).__name__
            if kind == "KernelNotBuiltError" or "built without" in str(e):
                raise NotBuilt(str(e).splitlines()[0]) from e
            if kind in ("LibraryNotBuiltError", "LibraryLoadError", "TorchMismatchError", "UnsupportedGPUError"):
                raise Unavailable(f"{kind}: {e}") from e
            raise


# ---------------------------------------------------------------------------------------------
# Metrics


def rel_linf(a: torch.Tensor, b: torch.Tensor) -> float:
    denom = b.abs().max().item()
    return (a - b).abs().max().item() / (denom if denom > 0 else 1.0)


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double().flatten(), b.double().flatten()
    na, nb = a.norm().item(), b.norm().item()
    if na == 0 or nb == 0:
        return 1.0 if na == nb else 0.0
    return float((a @ b).item() / (na * nb))


def check_case(backend, case: Case, seed: int, device: str = "cuda") -> dict:
    q, k, v = make_inputs(case, seed, device)
    scale = 1.0 / math.sqrt(case.d)
    out, lse = backend.fwd(q, k, v, case.causal, scale)
    if device == "cuda":
        torch.cuda.synchronize()
    ref_out, ref_lse = reference(q, k, v, case.causal, scale)
    gate = GATES[case.dtype]
    out32 = out.float()
    lse = lse.float()
    empty = torch.isinf(ref_lse)  # rows without any visible key
    res = {"name": case.name}
    problems = []
    if not torch.isfinite(out32).all():
        problems.append("non-finite output")
    if empty.any():
        if not torch.isinf(lse[empty]).all():
            problems.append("empty rows: LSE not infinite")
        rows = empty.transpose(1, 2)  # (B, Sq, H)
        if out32[rows].abs().max().item() != 0.0:
            problems.append("empty rows: output not 0")
    full = ~empty
    res["out_rel_linf"] = rel_linf(out32, ref_out)
    res["out_cos"] = cosine(out32, ref_out)
    res["lse_rel_linf"] = rel_linf(lse[full], ref_lse[full])
    res["lse_cos"] = cosine(lse[full], ref_lse[full])
    for key in ("out", "lse"):
        if not res[f"{key}_rel_linf"] <= gate:
            problems.append(f"{key} rel_Linf {res[f'{key}_rel_linf']:.2e} > {gate:g}")
        if not res[f"{key}_cos"] >= COSINE_GATE:
            problems.append(f"{key} cosine {res[f'{key}_cos']:.6f} < {COSINE_GATE}")
    res["status"] = "FAIL" if problems else "pass"
    res["problems"] = problems
    # what --save keeps: full LSE, a fixed subset of rows of the output, a digest of all of it
    rows = torch.linspace(0, case.sq - 1, min(SAVED_ROWS, case.sq), device=out.device).long()
    res["saved"] = {
        "lse": lse.cpu(),
        "out_rows": rows.cpu(),
        "out": out[:, rows].cpu(),
        "out_sha256": hashlib.sha256(out.contiguous().view(torch.uint8).cpu().numpy().tobytes()).hexdigest(),
    }
    return res


def compare_results(a: dict, b: dict) -> tuple[list[dict], bool]:
    """Two saved runs of the same cases (same seed) agree to rounding?"""
    if a["meta"]["seed"] != b["meta"]["seed"]:
        raise SystemExit(
            f"seeds differ ({a['meta']['seed']} vs {b['meta']['seed']}): rerun one with "
            f"--compare-to the other so both see the same inputs"
        )
    rows, ok = [], True
    for name, ca in a["cases"].items():
        cb = b["cases"].get(name)
        if cb is None or "saved" not in ca or "saved" not in cb:
            continue
        sa, sb = ca["saved"], cb["saved"]
        dt = "bfloat16" if "/bf16/" in name else "float16"
        oa, ob = sa["out"].float(), sb["out"].float()
        la, lb = sa["lse"], sb["lse"]
        fin = torch.isfinite(lb)
        r = {
            "name": name,
            "bit_identical": sa["out_sha256"] == sb["out_sha256"],
            "out_rel_linf": rel_linf(oa, ob),
            "out_cos": cosine(oa, ob),
            "lse_abs": (la[fin] - lb[fin]).abs().max().item() if fin.any() else 0.0,
            "inf_match": bool(torch.equal(torch.isinf(la), torch.isinf(lb))),
        }
        good = (
            r["out_rel_linf"] <= AGREE_GATES[dt]
            and r["out_cos"] >= AGREE_GATES["cosine"]
            and r["lse_abs"] <= AGREE_GATES["lse_abs"]
            and r["inf_match"]
        )
        r["status"] = "agree" if good else "DIFFER"
        ok &= good
        rows.append(r)
    return rows, ok and bool(rows)


# ---------------------------------------------------------------------------------------------
# Reporting


def print_check_table(results: list[dict]) -> None:
    print("| case | out rel_Linf | out cos | LSE rel_Linf | LSE cos | status |")
    print("|---|---|---|---|---|---|")
    for r in results:
        if r["status"] == "not built":
            print(f"| {r['name']} | | | | | not built |")
            continue
        extra = f" ({'; '.join(r['problems'])})" if r["problems"] else ""
        print(
            f"| {r['name']} | {r['out_rel_linf']:.2e} | {r['out_cos']:.6f} | {r['lse_rel_linf']:.2e} | "
            f"{r['lse_cos']:.6f} | {r['status']}{extra} |"
        )


def print_compare_table(rows: list[dict]) -> None:
    print("| case | bit-identical | out rel_Linf | out cos | LSE max abs diff | status |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['name']} | {'yes' if r['bit_identical'] else 'no'} | {r['out_rel_linf']:.2e} | "
            f"{r['out_cos']:.7f} | {r['lse_abs']:.2e} | {r['status']} |"
        )


def run_checks(lib: str | None, seed: int, quick: bool, dims, only: str | None = None) -> dict:
    # the fp32 reference must be real fp32 (the grow inputs have scores of 1e4 with fine structure)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    backend = Backend(lib)
    results = []
    for case in cases(quick, dims):
        if only and only not in case.name:
            continue
        try:
            results.append(check_case(backend, case, seed))
        except NotBuilt as e:
            results.append({"name": case.name, "status": "not built", "problems": [str(e)]})
        torch.cuda.empty_cache()
    return {
        "meta": {
            "seed": seed,
            "source": backend.source,
            "build_info": backend.build_info(),
            "device": torch.cuda.get_device_name(),
            "torch": torch.__version__,
            "quick": quick,
            "gates": {"fp16": GATES[torch.float16], "bf16": GATES[torch.bfloat16], "cosine": COSINE_GATE},
        },
        "cases": {r["name"]: r for r in results},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--lib",
        default=os.environ.get("FLASH_ATTN_LIB"),
        help="shared object to load (torch.ops.flash_attn); default $FLASH_ATTN_LIB, else the installed package",
    )
    ap.add_argument("--save", help="write results (.pt) for a later --compare")
    ap.add_argument("--compare-to", help="results (.pt) of another build: reuse its seed and require agreement")
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare two saved result files and exit")
    ap.add_argument("--seed", type=int, default=None, help="input seed (default: fresh)")
    ap.add_argument("--quick", action="store_true", help="S 1000/2048 instead of 1000/8192")
    ap.add_argument("--dims", default="64,128,256")
    ap.add_argument("--only", help="run only cases whose name contains this")
    ap.add_argument(
        "--expect-fail",
        action="store_true",
        help="for a FLASH_ATTN_RESCALE_BROKEN_NO_MAX_RESET build: succeed only if grow cases fail",
    )
    args = ap.parse_args(argv)

    if args.compare:
        a, b = (torch.load(p, weights_only=False) for p in args.compare)
        rows, ok = compare_results(a, b)
        print_compare_table(rows)
        print(f"compared {len(rows)} cases: {'agree to rounding' if ok else 'DIFFER'}")
        return 0 if ok else 1

    if not torch.cuda.is_available():
        print("rescale_skip: no CUDA device", file=sys.stderr)
        return 1
    other = torch.load(args.compare_to, weights_only=False) if args.compare_to else None
    seed = other["meta"]["seed"] if other else (args.seed if args.seed is not None else int(time.time_ns() % 2**31))
    t0 = time.time()
    try:
        data = run_checks(args.lib, seed, args.quick, tuple(int(x) for x in args.dims.split(",")), args.only)
    except (Unavailable, ImportError, OSError) as e:
        print(f"rescale_skip: no usable flash_attn build: {e}", file=sys.stderr)
        return 1
    results = list(data["cases"].values())
    print(
        f"build: {data['meta']['source']}  deltas: {data['meta']['build_info'].get('deltas', '?')}  "
        f"device: {data['meta']['device']}  seed: {seed}"
    )
    print_check_table(results)
    checked = [r for r in results if r["status"] != "not built"]
    failed = [r for r in checked if r["status"] == "FAIL"]
    print(
        f"{len(checked) - len(failed)} passed, {len(failed)} failed, "
        f"{len(results) - len(checked)} not built ({time.time() - t0:.0f} s)"
    )
    if args.save:
        torch.save(data, args.save)
        print(f"saved {args.save}")
    ok = not failed and bool(checked)
    if args.expect_fail:
        grow_failed = [r for r in failed if r["name"].startswith("grow@")]
        ok = bool(grow_failed)
        print(f"--expect-fail: {len(grow_failed)} grow cases failed: {'as expected' if ok else 'NOT DETECTED'}")
    if other is not None:
        rows, agree = compare_results(other, data)
        print_compare_table(rows)
        print(f"compared {len(rows)} cases with {args.compare_to}: {'agree to rounding' if agree else 'DIFFER'}")
        ok = ok and agree
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
