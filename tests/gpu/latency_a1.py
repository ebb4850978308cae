#!/usr/bin/env python3
"""Forward latency of flash_attn builds side by side (A-1 / A-2 on vs off).

fp16, causal, B=2, H=8, S 1024/4096/8192, D 64/128; median of 50 calls timed one by one with
CUDA events after 50 warm-up calls.

    python tests/gpu/latency_a1.py --lib build_a1/flash_attn/_C_legacy.so --lib build_t0/.../_C_legacy.so \
        [--label A-1 --label threshold-0] [--json latency.json]
    python tests/gpu/latency_a1.py                  # the installed package (or $FLASH_ATTN_LIB) alone

Two builds register the same operator namespace (torch.ops.flash_attn), so they cannot live in
one process: each build is measured in its own subprocess (this script with --worker), one
after the other, and the parent prints the table.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

SHAPES = [(s, d) for d in (64, 128) for s in (1024, 4096, 8192)]
B, H = 2, 8
WARMUP, ITERS = 50, 50


def worker(lib: str | None, out_path: str) -> None:
    import torch

    if lib:
        torch.ops.load_library(lib)

        def fwd(q, k, v, scale):
            return torch.ops.flash_attn.fwd(q, k, v, None, 0.0, scale, True, -1, -1, 0.0, False, None)[0]
    else:
        import flash_attn

        def fwd(q, k, v, scale):
            return flash_attn.flash_attn_func(q, k, v, softmax_scale=scale, causal=True)

    try:
        info = json.loads(torch.ops.flash_attn.build_info())
    except Exception as e:  # noqa: BLE001 - informative only
        info = {"error": str(e)}
    rows = []
    for s, d in SHAPES:
        q, k, v = (torch.randn(B, s, H, d, device="cuda", dtype=torch.float16) for _ in range(3))
        scale = 1.0 / math.sqrt(d)
        try:
            for _ in range(WARMUP):
                fwd(q, k, v, scale)
        except RuntimeError as e:
            if "built without" in str(e):
                rows.append({"s": s, "d": d, "ms": None, "note": "not built"})
                continue
            raise
        torch.cuda.synchronize()
        times = []
        for _ in range(ITERS):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fwd(q, k, v, scale)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        times.sort()
        ms = times[len(times) // 2]
        flops = 4 * B * H * s * s * d / 2  # causal: half of the two GEMMs
        rows.append({"s": s, "d": d, "ms": ms, "tflops": flops / (ms * 1e-3) / 1e12})
    with open(out_path, "w") as f:
        json.dump({"lib": lib, "build_info": info, "device": torch.cuda.get_device_name(), "rows": rows}, f)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--lib",
        action="append",
        default=[],
        help="shared object of a build (repeat for a side-by-side table); default $FLASH_ATTN_LIB or the package",
    )
    ap.add_argument("--label", action="append", default=[], help="column label per --lib")
    ap.add_argument("--json", help="write all results here")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.worker:
        worker(args.lib[0] if args.lib else None, args.out)
        return 0

    libs = args.lib or [os.environ.get("FLASH_ATTN_LIB") or None]
    labels = args.label + [f"build {i + 1}" for i in range(len(args.label), len(libs))]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, lib in enumerate(libs):
            out = os.path.join(tmp, f"r{i}.json")
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--out", out] + (
                ["--lib", lib] if lib else []
            )
            print(f"[latency_a1] {labels[i]}: {lib or 'installed flash_attn'}", flush=True)
            proc = subprocess.run(cmd)
            if proc.returncode != 0:
                print(f"[latency_a1] {labels[i]} failed (exit {proc.returncode})", file=sys.stderr)
                return 1
            with open(out) as f:
                results.append(json.load(f))

    for label, r in zip(labels, results, strict=True):
        print(
            f"{label}: {r['lib'] or 'installed flash_attn'}  "
            f"deltas: {r['build_info'].get('deltas', '?')}  ({r['device']})"
        )
    head = "| S | D | " + " | ".join(f"{name} ms (TFLOP/s)" for name in labels)
    if len(results) > 1:
        head += " | " + " | ".join(f"{name} speedup vs {labels[0]}" for name in labels[1:])
    print(head + " |")
    print("|" + "---|" * (2 + len(results) + max(0, len(results) - 1)))
    for n, (s, d) in enumerate(SHAPES):
        cells = []
        for r in results:
            row = r["rows"][n]
            cells.append("not built" if row["ms"] is None else f"{row['ms']:.3f} ({row['tflops']:.0f})")
        ratios = []
        base = results[0]["rows"][n]["ms"]
        for r in results[1:]:
            other = r["rows"][n]["ms"]
            ratios.append("" if base is None or other is None else f"{base / other:.3f}x")
        print(f"| {s} | {d} | " + " | ".join(cells + ratios) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"labels": labels, "results": results}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
