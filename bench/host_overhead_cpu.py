"""The Python layer's share of the per-call host time, measured on the CPU (no GPU, no build).

Registers operators with the schemas of docs/operators.md (inferred from the fakes' annotations)
in the namespace ``flash_attn_cpu_bench``, implemented for CPU tensors by the fake implementations of
``flash_attn._ops`` (called once per input shape; later calls return those outputs, so the
operator itself costs little more than the dispatcher), binds them as the loader binds the native
library, and times, per call, each public function against its raw operator handle with the
arguments the function passes. ``api - raw`` is then what ``flash_attn_interface.py``,
``_autograd.py`` and ``_checks.py`` add per call: the number that the GPU benchmark
(``bench/latency.py --host-overhead``) measures as "api - raw us", without the GPU's noise.

The cases are the shapes of bench/host_overhead.py (fp16 on the CPU; the fakes allocate empty
outputs, so the shape only matters for the allocations). Timing: ``--calls`` back-to-back calls
per sample, ``--repeats`` samples, the implementations of a case interleaved sample by sample;
the figure is the minimum and the median over the samples, in microseconds per call. The clock
is the thread's CPU time (``time.thread_time``), so time the thread spends preempted on a shared
machine does not count; ``--wall`` uses ``time.perf_counter`` instead.

Usage::

    python3 bench/host_overhead_cpu.py [--calls 2000] [--repeats 15]

Prints one line per case: api and raw as median (min), and api - raw as the difference of the
medians (of the minima; the steadier figure on a busy machine). Exits 0; it checks nothing.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

# The checkout's flash_attn (run with PYTHONPATH=.:src, docs/benchmarks.md).
import flash_attn
from flash_attn import _build_info, _checks, _compat, _loader, _ops

REPO_ROOT = Path(__file__).resolve().parents[1]

NAMESPACE = "flash_attn_cpu_bench"


def schema(name: str) -> str:
    """The schema of operator ``name`` inferred from its fake's annotations (the fakes take the
    arguments of docs/operators.md in order, tests/unit/runtime/test_fakes.py checks that); int,
    not SymInt, as the native library declares them."""
    mutated = ("k_cache", "v_cache") if name == "fwd_kvcache" else ()
    return name + torch.library.infer_schema(_ops.FAKES[name], mutates_args=mutated).replace("SymInt", "int")


def _memoized(fake):
    """``fake`` computed once per q shape and then replayed (the bench times the layers above it)."""
    seen = {}

    def impl(q, *args):
        key = tuple(q.shape)
        if key not in seen:
            seen[key] = fake(q, *args)
        return seen[key]

    return impl


def setup() -> None:
    """Define the CPU operators, bind them and make the loader state say "ready" for the CPU."""
    library = torch.library.Library(NAMESPACE, "DEF")
    for name, fake in _ops.FAKES.items():
        library.define(schema(name))
        library.impl(name, _memoized(fake), "CPU")
    library.define("build_info() -> str")
    library.impl("build_info", lambda: "{}", "CompositeExplicitAutograd")
    setup.library = library  # keep the registrations alive
    info = {
        "version": "0",
        "group": "legacy",
        "archs": [90],
        "sass": ["sm_90"],
        "ptx_arch": 90,
        "cuda_version": "13.0",
        "torch_version": torch.__version__,
        "torch_cuda_version": "13.0",
        "cxx11_abi": True,
        "kernel_set": "cpu-bench",
        "kernels": [
            {"kind": kind, "dtype": "fp16", "head_dim": hd, "causal": causal}
            for kind in ("fwd", "fwd_split", "bwd")
            for hd in (64, 128)
            for causal in (False, True)
        ],
        "head_dims": [64, 128],
    }
    _ops.bind(NAMESPACE)
    state = _loader.STATE
    state.status, state.error = "ready", None
    state.build_info = _build_info.parse(info)
    state.kernels = _build_info.kernel_set(state.build_info)
    _loader._DEVICE_VERDICTS[-1] = _compat.DeviceVerdict(True, "sass", "sm_90", "cpu bench")
    _checks.KERNEL_DEVICE_TYPE = "cpu"
    _checks.reset()


def calls() -> list[tuple[str, object, object]]:
    """``(case, api callable, raw callable)`` for the shapes of bench/host_overhead.py."""
    ops = getattr(torch.ops, NAMESPACE)
    dtype = torch.float16
    out = []
    for name, b, h, s, d, causal in (
        ("B1 H8 S256 D64 causal", 1, 8, 256, 64, True),
        ("B2 H8 S1024 D64", 2, 8, 1024, 64, False),
    ):
        q, k, v = (torch.randn(b, s, h, d, dtype=dtype) for _ in range(3))
        args = (q, k, v, None, 0.0, d**-0.5, causal, -1, -1, 0.0, False, None)
        out.append(
            (
                f"flash_attn_func {name}",
                lambda q=q, k=k, v=v, c=causal: flash_attn.flash_attn_func(q, k, v, causal=c),
                lambda op=ops.fwd.default, a=args: op(*a),
            )
        )
        packed = [x.reshape(b * s, h, d) for x in (q, k, v)]
        cu = torch.arange(0, b + 1, dtype=torch.int32) * s
        vargs = (*packed, cu, cu, None, None, None, None, s, s, 0.0, d**-0.5, False, causal, -1, -1, 0.0, False, None)
        out.append(
            (
                f"flash_attn_varlen_func {name}",
                lambda p=packed, cu=cu, s=s, c=causal: flash_attn.flash_attn_varlen_func(*p, cu, cu, s, s, causal=c),
                lambda op=ops.varlen_fwd.default, a=vargs: op(*a),
            )
        )
    b, h, hk, d, cache = 4, 32, 8, 128, 4096
    q = torch.randn(b, 1, h, d, dtype=dtype)
    k_cache, v_cache = (torch.randn(b, cache, hk, d, dtype=dtype) for _ in range(2))
    seqlens = torch.full((b,), cache // 2, dtype=torch.int32)
    for append in (False, True):
        new = (torch.randn(b, 1, hk, d, dtype=dtype), torch.randn(b, 1, hk, d, dtype=dtype)) if append else (None, None)
        args = (q, k_cache, v_cache, *new, seqlens, None, None, None, None, None, None)
        args += (d**-0.5, False, -1, -1, 0.0, True, 0)
        out.append(
            (
                f"flash_attn_with_kvcache decode{' append' if append else ''}",
                lambda n=new: flash_attn.flash_attn_with_kvcache(q, k_cache, v_cache, *n, cache_seqlens=seqlens),
                lambda op=ops.fwd_kvcache.default, a=args: op(*a),
            )
        )
    return out


def per_call_us(fn, n: int, clock) -> float:
    t0 = clock()
    for _ in range(n):
        fn()
    return (clock() - t0) / n * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="back-to-back calls per sample (default 2000)")
    parser.add_argument("--repeats", type=int, default=15, help="samples per implementation (default 15)")
    parser.add_argument("--wall", action="store_true", help="wall time (perf_counter) instead of thread CPU time")
    args = parser.parse_args(argv)
    clock = time.perf_counter if args.wall else time.thread_time
    setup()
    print(
        f"torch {torch.__version__}; us per call ({'wall' if args.wall else 'thread CPU'} time), "
        f"median (min) of {args.repeats} x {args.calls} calls"
    )
    print(f"{'case':45} {'api':>14} {'raw':>14} {'api - raw':>14}")
    for case, api, raw in calls():
        api(), raw()
        samples = {"api": [], "raw": []}
        for _ in range(args.repeats):
            samples["api"].append(per_call_us(api, args.calls, clock))
            samples["raw"].append(per_call_us(raw, args.calls, clock))
        api_us, raw_us = samples["api"], samples["raw"]
        cells = [f"{statistics.median(x):6.2f} ({min(x):5.2f})" for x in (api_us, raw_us)]
        # min - min: on a busy machine the fastest sample of each is the least disturbed one
        diff = (statistics.median(api_us) - statistics.median(raw_us), min(api_us) - min(raw_us))
        cells.append(f"{diff[0]:6.2f} ({diff[1]:5.2f})")
        print(f"{case:45} " + " ".join(f"{c:>14}" for c in cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
