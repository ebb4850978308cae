"""Where the host time of one attention call goes: torch.profiler tables of flash_attn's calls beside SDPA's.

For the cases of ``bench/host_overhead.py`` (``--case`` picks them by name prefix; default the
first dense case and the decode case), each implementation (the public function, its raw
operator, SDPA flash and cuDNN) is called ``--calls`` times back to back under
``torch.profiler`` with CPU and CUDA activities, after a warm-up outside the profiler. Printed per
implementation: the per-call wall time without the profiler (microseconds, median of 5 samples
of ``--calls`` calls; every implementation is timed before the first profile), then the
profiler's operator and CUDA runtime rows (``cudaLaunchKernel``, ``cudaFuncSetAttribute``, ...)
by self CPU time, divided by the number of calls. The profiler
slows every call down (it records each operator), so its rows say what a call does and what
each part costs relative to the others, while the wall time says what it costs.

Usage (on a GPU machine, the wheel importable; bench/ is found beside this file)::

    python3 lab/host_profile.py [--case "B1 H8 S256"] [--calls 200] [--rows 18]

Exits 0 when every implementation ran, 1 otherwise; it checks no target (bench/latency.py
--host-overhead does).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import host_overhead  # noqa: E402  (bench/host_overhead.py: the cases and their callables)


def _per_call_rows(prof, calls: int, rows: int) -> list[str]:
    """The profiler's rows with the most self CPU time, as microseconds per call."""
    events = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    lines = [f"    {'self CPU us/call':>16} {'CPU total us/call':>17} {'count/call':>10}  name"]
    for e in events[:rows]:
        lines.append(
            f"    {e.self_cpu_time_total / calls:16.2f} {e.cpu_time_total / calls:17.2f} "
            f"{e.count / calls:10.2f}  {e.key[:90]}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    """Command line (module documentation): 0 when every implementation ran, 1 otherwise, 2 for bad options."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--case",
        action="append",
        help="case name prefix (bench/host_overhead.py), repeatable; default the first dense and decode case",
    )
    p.add_argument("--calls", type=int, default=200, help="calls per profile and per wall sample (default 200)")
    p.add_argument("--rows", type=int, default=18, help="profiler rows per implementation (default 18)")
    args = p.parse_args(argv)
    if args.calls < 1:
        p.error("--calls must be at least 1")

    import torch
    from torch.profiler import ProfilerActivity, profile

    import flash_attn

    if not torch.cuda.is_available():
        print("host_profile: no CUDA device; run it on a GPU machine", file=sys.stderr)
        return 1
    generator = torch.Generator(device="cuda")
    generator.manual_seed(0)
    entries = host_overhead.calls_for(torch, "cuda", "wheel", flash_attn, True, False, generator)
    wanted = args.case or ["B1 H8 S256", "decode B4 H32/8 D128 cache 4096 append"]
    entries = [e for e in entries if any(e[0].startswith(w) for w in wanted)]
    if not entries:
        print(f"host_profile: no case starts with {wanted}", file=sys.stderr)
        return 1
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, flash_attn {flash_attn.__version__}")
    # Wall times first, for every implementation, so that no profiler has run in this process yet
    # (the profiler attaches CUPTI, which may stay attached after it stops).
    walls: dict[int, float] = {}
    failed: dict[int, str] = {}
    for index, (_, _, _, fn, context) in enumerate(entries):
        try:
            with context():
                for _ in range(20):
                    fn()
                torch.cuda.synchronize()
                samples = [host_overhead.sample_us(fn, args.calls, torch.cuda.synchronize) for _ in range(5)]
            walls[index] = statistics.median(samples)
        except Exception as exc:  # report and go on: one failing implementation must not hide the others
            failed[index] = f"{type(exc).__name__}: {str(exc)[:300]}"
            with contextlib.suppress(Exception):
                torch.cuda.synchronize()
    for index, (case, function, impl, fn, context) in enumerate(entries):
        print(f"\n== {case} | {function} | {impl}")
        if index in failed:
            print(f"    failed: {failed[index]}")
            continue
        print(f"    wall: {walls[index]:.2f} us/call (median of 5 x {args.calls} calls, before any profiling)")
        with context(), profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(args.calls):
                fn()
            torch.cuda.synchronize()
        print("\n".join(_per_call_rows(prof, args.calls, args.rows)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
