"""Kernel latency and throughput of this project's flash_attn against torch SDPA backends (needs a GPU).

    python bench/latency.py --out DIR [--build LABEL=PATH ...] [--shapes release|smoke]
    nox -s bench_latency -- [ARGS]   (the same, --out defaulting to reports/bench_kernels)

For every shape (fp16 and bf16, causal and not, B=2 H=8 S in 1024/4096/8192 D in 64/128, plus
B=4 H=16 S=8192 D=128) and mode (``fwd``: forward; ``fwd_bwd``: forward then backward of all
three inputs), it times ``flash_attn.flash_attn_func`` of each build given with ``--build``
and ``torch.nn.functional.scaled_dot_product_attention`` restricted with
``torch.nn.attention.sdpa_kernel`` to one backend each: FLASH_ATTENTION (PyTorch's copy of
FlashAttention-2), CUDNN_ATTENTION and EFFICIENT_ATTENTION. SDPA gets (B, H, S, D) transposed
views of the same (B, S, H, D) tensors.

Conventions (also written into the result files):

- latency: median of per-call CUDA-event times, in ms, of at least ``--min-iters`` (50) timed
  calls after ``--warmup`` (10) untimed ones; calls are back to back (no L2 flush), inputs are
  fresh ``torch.randn`` tensors per shape (never zeros), shared by every implementation;
- FLOPs: forward = 4*B*H*S^2*D (two matmuls), halved for causal; forward+backward =
  ``--fwd-bwd-flop-factor`` (default 2.5) x forward. Upstream's benchmark_flash_attention.py
  counts 2.5x for the backward alone and 3.5x for forward+backward: multiply our fwd_bwd
  TFLOP/s by 3.5/2.5 = 1.4 to compare with numbers in that convention;
- ratio: baseline median / flash_attn median (> 1: flash_attn is faster);
- a shape the build's kernel set lacks is ``not built`` (KernelNotBuiltError), a shape an SDPA
  backend refuses is ``unsupported``.

With ``--host-overhead`` the run also times, per call, ``flash_attn_func``,
``flash_attn_varlen_func`` and ``flash_attn_with_kvcache`` (decode, with and without appending)
beside their raw operators and SDPA on host-bound shapes (bench/host_overhead.py), into the
``host_overhead`` rows of kernels.json and a "Host overhead per call" table in kernels.md.

Each build runs in its own worker process (``--worker``; two builds register the same torch op
namespace); the SDPA baselines of the kernel tables run in the first build's worker, interleaved per
shape, so a later build's ratios there compare across processes; the host-overhead table times SDPA
in every build's worker, beside that build's calls. Writes
DIR/kernels.json and DIR/kernels.md. About 2.5-3.5 minutes on an H200 for one build.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import bench_common as bc
import host_overhead
import machine

FWD_BWD_FLOP_FACTOR = 2.5  # forward+backward FLOPs = this x forward FLOPs (the convention)
UPSTREAM_FWD_BWD_FLOP_FACTOR = 3.5  # upstream benchmark_flash_attention.py: bwd 2.5x, fwd+bwd 3.5x
MODES = ("fwd", "fwd_bwd")
BASELINES = {  # result name -> torch.nn.attention.SDPBackend member
    "sdpa_flash": "FLASH_ATTENTION",
    "sdpa_cudnn": "CUDNN_ATTENTION",
    "sdpa_efficient": "EFFICIENT_ATTENTION",
}
MIN_TIMED_CALLS = 50


@dataclass(frozen=True)
class Shape:
    dtype: str  # "fp16" | "bf16"
    causal: bool
    batch: int
    heads: int
    seqlen: int
    head_dim: int

    @property
    def key(self) -> str:
        c = "causal" if self.causal else "full"
        return f"{self.dtype}_{c}_b{self.batch}_h{self.heads}_s{self.seqlen}_d{self.head_dim}"


def release_shapes() -> list[Shape]:
    """The release-note shapes (B=2 H=8, S 1024/4096/8192, D 64/128) plus B=4 H=16 S=8192 D=128."""
    shapes = []
    for dtype in ("fp16", "bf16"):
        for causal in (False, True):
            for seqlen in (1024, 4096, 8192):
                for head_dim in (64, 128):
                    shapes.append(Shape(dtype, causal, 2, 8, seqlen, head_dim))
            shapes.append(Shape(dtype, causal, 4, 16, 8192, 128))
    return shapes


def smoke_shapes() -> list[Shape]:
    """Two small shapes, to check the script end to end on a GPU in seconds."""
    return [Shape("fp16", False, 2, 8, 1024, 64), Shape("bf16", True, 2, 8, 1024, 128)]


def tiny_shapes() -> list[Shape]:
    """Two tiny shapes for the CPU tests (--device cpu)."""
    return [Shape("bf16", False, 1, 2, 64, 64), Shape("bf16", True, 1, 2, 64, 128)]


SHAPE_SETS = {"release": release_shapes, "smoke": smoke_shapes, "tiny": tiny_shapes}


def attention_flops(shape: Shape, mode: str, fwd_bwd_factor: float = FWD_BWD_FLOP_FACTOR) -> float:
    """FLOPs of one call: 4*B*H*S^2*D forward (halved when causal); fwd_bwd = factor x forward."""
    f = 4.0 * shape.batch * shape.heads * shape.seqlen**2 * shape.head_dim
    if shape.causal:
        f /= 2.0
    if mode == "fwd":
        return f
    if mode == "fwd_bwd":
        return fwd_bwd_factor * f
    raise ValueError(f"unknown mode {mode!r}; expected one of {MODES}")


def tflops(flops: float, ms: float | None) -> float | None:
    """TFLOP/s of `flops` done in `ms` milliseconds."""
    if ms is None or ms <= 0 or math.isnan(ms):
        return None
    return flops / (ms * 1e-3) / 1e12


def choose_iters(est_ms: float, min_iters: int, max_iters: int, target_s: float) -> int:
    """Timed calls: enough to fill `target_s`, clamped to [min_iters, max_iters] (min at least 50)."""
    lo = max(min_iters, MIN_TIMED_CALLS)
    hi = max(max_iters, lo)
    if est_ms <= 0 or math.isnan(est_ms):
        return hi
    return int(min(hi, max(lo, target_s * 1000.0 / est_ms)))


def classify_error(exc: BaseException) -> str:
    """'not built' (flash_attn kernel set lacks the unit), 'oom', 'unsupported' (SDPA) or 'error'."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    if "KernelNotBuiltError" in names:
        return "not built"
    if "OutOfMemoryError" in names or "out of memory" in str(exc).lower():
        return "oom"
    text = str(exc)
    refusals = ("No available kernel", "No viable backend")  # SDPA's words for a backend refusing the inputs
    if any(r in text for r in refusals) or "not supported" in text.lower() or "unsupported" in text.lower():
        return "unsupported"
    return "error"


# -- worker (runs on the GPU) --------------------------------------------------------------------


def _device_record(torch, on_gpu: bool) -> dict:
    """The worker's device as the result file names it: the GPU's name, capability and SM count."""
    if not on_gpu:  # --device cpu: only the tests use it, to run this loop without a GPU
        return {"name": "cpu", "torch": torch.__version__}
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return {
        "name": props.name,
        "capability": f"{props.major}.{props.minor}",
        "multiprocessors": props.multi_processor_count,
        "torch": torch.__version__,
    }


def _import_ours(label: str, result: dict):
    """The flash_attn module this worker times, or None (the reason recorded in ``result["error"]``)."""
    try:
        import flash_attn
        from flash_attn import _loader

        _loader.require_library()  # a missing or unusable library: say so once, not per case
    except Exception as exc:
        result["error"] = f"flash_attn is not usable: {type(exc).__name__}: {exc}"
        print(f"[{label}] {result['error']}", file=sys.stderr)
        return None  # the SDPA baselines of this worker still run
    return flash_attn


def _ours_record(flash_attn) -> dict:
    """Version, file, library and build info (kernel list as its length) of the flash_attn timed."""
    info = flash_attn.build_info() or {}
    kernels = info.pop("kernels", None)
    if kernels is not None:
        info["kernel_units"] = len(kernels)
    return {
        "version": flash_attn.__version__,
        "file": flash_attn.__file__,
        "library": os.environ.get(bc.LIBRARY_ENV),
        "build_info": info,
    }


def _implementations(args: argparse.Namespace, flash_attn) -> dict:
    """{name: (fn(q, k, v, causal), context factory)}: this build's flash_attn_func, then the SDPA backends."""
    impls: dict = {}
    if flash_attn is not None:

        def ours(q, k, v, causal):
            return flash_attn.flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=causal)

        impls[f"flash_attn[{args.label}]"] = (ours, contextlib.nullcontext)
    if args.with_baselines:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        from torch.nn.functional import scaled_dot_product_attention as sdpa

        def run_sdpa(q, k, v, causal):
            return sdpa(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal).transpose(1, 2)

        # The backend restriction is entered once around a whole case, not per call.
        for name, member in BASELINES.items():
            impls[name] = (run_sdpa, functools.partial(sdpa_kernel, [getattr(SDPBackend, member)]))
    return impls


def _make_call(torch, fn, mode: str, tensors: tuple, causal: bool):
    """A no-argument call of ``fn`` for ``mode``: the forward, or the forward and the gradients of q, k, v."""
    if mode == "fwd":
        q, k, v, _ = tensors

        def call():
            return fn(q, k, v, causal)
    else:
        q, k, v, dout = tensors

        def call():
            out = fn(q, k, v, causal)
            return torch.autograd.grad(out, (q, k, v), dout)

    return call


def _failed_shape(shape: Shape, impls: dict, exc: BaseException) -> list[dict]:
    """The cases of a shape whose inputs could not be made (OOM on a small GPU): every one failed."""
    return [
        {"shape": asdict(shape), "mode": mode, "impl": name, "status": classify_error(exc), "message": str(exc)[:300]}
        for mode in MODES
        for name in impls
    ]


def _check_against_sdpa(cases: list[dict], outputs: dict) -> None:
    """Sanity check of what was timed: each forward output's max abs difference to the first SDPA baseline's."""
    reference = next((outputs[b] for b in BASELINES if b in outputs), None)
    if reference is None:
        return
    for case in cases:
        if case["mode"] == "fwd" and case.get("status") == "ok" and case["impl"] in outputs:
            diff = float((outputs[case["impl"]].float() - reference.float()).abs().max())
            # NaN/inf in an output must stay visible (strict JSON would write it as null)
            case["max_abs_diff_vs_sdpa"] = round(diff, 5) if math.isfinite(diff) else "non-finite"


class _Worker:
    """One worker process: torch, the implementations it times and its result file (``--result``)."""

    def __init__(self, args: argparse.Namespace, torch) -> None:
        self.args = args
        self.torch = torch
        self.on_gpu = args.device == "cuda"
        self.result: dict = {"label": args.label, "flash_attn": None, "device": None, "cases": []}
        self.result_path = Path(args.result)
        self.flash_attn = None
        self.impls: dict = {}

    def save(self) -> None:
        """Rewrite the result file with everything measured so far (the parent reads it after a crash too)."""
        self.result_path.write_text(json.dumps(self.result, indent=1) + "\n", encoding="utf-8")

    def sync(self) -> None:
        """Wait for the GPU's queued work (nothing on the CPU)."""
        if self.on_gpu:
            self.torch.cuda.synchronize()

    def fail_case(self, case: dict, exc: BaseException) -> None:
        """Record ``exc`` as the case's status and message; the GPU is synchronised, errors of that ignored."""
        case.update(status=classify_error(exc), message=f"{type(exc).__name__}: {str(exc)[:300]}")
        with contextlib.suppress(Exception):
            self.sync()

    def timed(self, fn) -> tuple[list[float], int]:
        """Per-call times (ms) of ``fn`` after the warm-up calls, and their count (:func:`choose_iters`)."""
        args, torch = self.args, self.torch
        for _ in range(args.warmup):
            fn()
        self.sync()
        t0 = time.perf_counter()
        for _ in range(2):
            fn()
        self.sync()
        est_ms = (time.perf_counter() - t0) / 2 * 1000.0
        n = choose_iters(est_ms, args.min_iters, args.max_iters, args.target_s)
        if not self.on_gpu:
            times = []
            for _ in range(n):
                t = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t) * 1000.0)
            return times, n
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        for i in range(n):
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)], n

    def start_cases(self, shape: Shape, mode: str, tensors: tuple, cases: list[dict], outputs: dict) -> dict:
        """One first call of every implementation: a case each in ``cases``; those that ran, as live entries."""
        live: dict[str, dict] = {}
        for name, (fn, context) in self.impls.items():
            case = {"shape": asdict(shape), "mode": mode, "impl": name}
            cases.append(case)
            call = _make_call(self.torch, fn, mode, tensors, shape.causal)
            try:
                with context():
                    first = call()
                    if mode == "fwd":
                        outputs[name] = first
                    del first
            except Exception as exc:
                self.fail_case(case, exc)
                continue
            live[name] = {"case": case, "call": call, "context": context, "times": [], "n": 0}
        return live

    def time_rounds(self, live: dict) -> None:
        """Every live implementation timed once per round, in turn; one that raises leaves ``live``."""
        # Every implementation is timed in each of args.rounds rounds, in turn (ours, SDPA flash, ...,
        # ours, ...), and the rounds' calls are pooled: a drift of clocks or of the host during the
        # run then reaches every implementation alike instead of the one that ran at that moment.
        for _ in range(self.args.rounds):
            for name, entry in list(live.items()):
                try:
                    with entry["context"]():
                        times, n = self.timed(entry["call"])
                except Exception as exc:
                    self.fail_case(entry["case"], exc)
                    del live[name]
                    continue
                entry["times"] += times
                entry["n"] += n

    def finish_cases(self, live: dict, shape: Shape, mode: str) -> None:
        """The timed cases' statistics, TFLOP/s and status ``ok``."""
        args = self.args
        for entry in live.values():
            stats = bc.summarize(entry["times"])
            flops = attention_flops(shape, mode, args.fwd_bwd_flop_factor)
            rate = tflops(flops, stats["median"])  # None for a median of 0 ms (no timing resolution)
            entry["case"].update(
                status="ok",
                timed_calls=entry["n"],
                warmup_calls=args.warmup,
                rounds=args.rounds,
                ms=stats,
                tflops=None if rate is None else round(rate, 1),
                flops=flops,
            )

    def run_shape(self, index: int, shape: Shape, gen) -> list[dict]:
        """Every (mode, implementation) case of one shape, on fresh random inputs seeded by ``index``."""
        torch, args = self.torch, self.args
        gen.manual_seed(args.seed + index)
        dims = (shape.batch, shape.seqlen, shape.heads, shape.head_dim)
        dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[shape.dtype]
        try:
            q, k, v, dout = (torch.randn(dims, device=args.device, dtype=dt, generator=gen) for _ in range(4))
        except Exception as exc:  # OOM on a small GPU
            return _failed_shape(shape, self.impls, exc)
        plain = (q, k, v, dout)
        grads = tuple(t.detach().clone().requires_grad_(True) for t in (q, k, v)) + (dout,)
        cases: list[dict] = []
        outputs: dict = {}
        for mode in MODES:
            live = self.start_cases(shape, mode, plain if mode == "fwd" else grads, cases, outputs)
            self.time_rounds(live)
            self.finish_cases(live, shape, mode)
        _check_against_sdpa(cases, outputs)
        return cases

    def run_host_overhead(self) -> None:
        """The host-overhead rows (bench/host_overhead.py) into the result, one line each on stderr."""
        args = self.args
        self.result["host_overhead"] = host_overhead.run(
            self.torch,
            args.device,
            args.label,
            self.flash_attn,
            args.with_baselines or args.host_baselines,
            args.shapes == "tiny",
            args.host_calls,
            args.host_repeats,
            self.sync,
            classify_error,
            args.seed,
        )
        self.save()
        for r in self.result["host_overhead"]:
            value = r["us"]["median"] if r.get("us") else r["status"]
            print(f"[{args.label}] host {r['case']} {r['function']} {r['impl']}: {value}", file=sys.stderr)

    def run_shapes(self) -> None:
        """Every shape of ``--shapes`` in turn; the result file is rewritten and a line printed after each."""
        args = self.args
        shapes = SHAPE_SETS[args.shapes]()
        gen = self.torch.Generator(device=args.device)
        for index, shape in enumerate(shapes):
            cases = self.run_shape(index, shape, gen)
            self.result["cases"].extend(cases)
            self.save()
            summary = ", ".join(
                f"{c['mode']}:{c['impl']}={c['ms']['median'] if c.get('ms') else c['status']}" for c in cases
            )
            print(f"[{args.label}] {index + 1}/{len(shapes)} {shape.key}: {summary}", file=sys.stderr, flush=True)


def _worker(args: argparse.Namespace) -> int:
    """The ``--worker`` process: time one build (and the baselines), write ``--result``; 2 on an error."""
    if args.lib:
        os.environ[bc.LIBRARY_ENV] = str(Path(args.lib).resolve())  # the checkout is on PYTHONPATH (BuildTarget.env)
    import torch

    w = _Worker(args, torch)
    if w.on_gpu and not torch.cuda.is_available():
        w.result["error"] = "torch.cuda.is_available() is False: this benchmark needs a CUDA GPU"
        w.save()
        print(w.result["error"], file=sys.stderr)
        return 2
    w.result["device"] = _device_record(torch, w.on_gpu)
    if not args.no_ours:
        w.flash_attn = _import_ours(args.label, w.result)
    if w.flash_attn is not None:
        w.result["flash_attn"] = _ours_record(w.flash_attn)
    w.impls = _implementations(args, w.flash_attn)
    if args.host_overhead:
        w.run_host_overhead()
    w.run_shapes()
    w.save()
    return 2 if w.result.get("error") else 0


# -- parent: run workers, merge, render -----------------------------------------------------------


def _worker_command(
    args: argparse.Namespace, target: bc.BuildTarget, result: Path, with_baselines: bool, no_ours: bool
) -> list[str]:
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        "--result",
        str(result),
        "--label",
        target.label,
        "--shapes",
        args.shapes,
        "--warmup",
        str(args.warmup),
        "--min-iters",
        str(args.min_iters),
        "--max-iters",
        str(args.max_iters),
        "--target-s",
        str(args.target_s),
        "--rounds",
        str(args.rounds),
        "--seed",
        str(args.seed),
        "--fwd-bwd-flop-factor",
        str(args.fwd_bwd_flop_factor),
        "--device",
        args.device,
    ]
    if args.host_overhead:
        cmd += ["--host-overhead", "--host-calls", str(args.host_calls), "--host-repeats", str(args.host_repeats)]
        if not args.no_baselines:  # every build's host calls beside SDPA in its own process (side by side)
            cmd.append("--host-baselines")
    if target.kind == "library":
        cmd += ["--lib", str(target.library)]
    if with_baselines:
        cmd.append("--with-baselines")
    if no_ours:
        cmd.append("--no-ours")
    return cmd


def merge(workers: list[dict]) -> dict:
    """{(shape key, mode): {impl: case}} and the ordered implementation names, from worker results."""
    table: dict = {}
    impls: list[str] = []
    for w in workers:
        for case in w.get("cases", []):
            shape = Shape(**case["shape"])
            table.setdefault((shape.key, case["mode"]), {"shape": shape})[case["impl"]] = case
            if case["impl"] not in impls:
                impls.append(case["impl"])
    ours = [i for i in impls if i not in BASELINES]
    base = [b for b in BASELINES if b in impls]
    return {"table": table, "ours": ours, "baselines": base}


def ratio(baseline_case: dict | None, ours_case: dict | None) -> float | None:
    """baseline median / ours median (> 1: ours faster); None unless both ran."""
    if not baseline_case or not ours_case:
        return None
    if baseline_case.get("status") != "ok" or ours_case.get("status") != "ok":
        return None
    return baseline_case["ms"]["median"] / ours_case["ms"]["median"]


def rows_with_ratios(merged: dict) -> list[dict]:
    """One flat record per (shape, mode) with each implementation's numbers and every ratio."""
    rows = []
    for (_key, mode), cases in merged["table"].items():
        shape = cases["shape"]
        row = {"shape": asdict(shape), "mode": mode, "results": {}, "ratios": {}}
        for impl in merged["ours"] + merged["baselines"]:
            c = cases.get(impl)
            if c is None:
                continue
            row["results"][impl] = {
                k: c.get(k)
                for k in ("status", "ms", "tflops", "timed_calls", "rounds", "message", "max_abs_diff_vs_sdpa")
                if c.get(k) is not None
            }
        for ours in merged["ours"]:
            for base in merged["baselines"]:
                r = ratio(cases.get(base), cases.get(ours))
                row["ratios"][f"{ours} vs {base}"] = None if r is None else round(r, 3)
        rows.append(row)
    return rows


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v is not None and v > 0]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _cell(result: dict | None) -> str:
    if not result:
        return ""
    if result.get("status") != "ok":
        return result.get("status", "?")
    ms, tf = result["ms"]["median"], result.get("tflops")
    ms_text = f"{ms:.3f}" if ms >= 1 else f"{ms:.4f}"
    tf_text = "-" if tf is None else f"{tf:.0f}" if tf >= 10 else f"{tf:.1f}"
    return f"{ms_text} ({tf_text})"


def render_markdown(record: dict) -> str:
    """The Markdown report: machine, conventions, one table per mode, geometric-mean ratios."""
    ours = record["implementations"]["flash_attn"]
    bases = record["implementations"]["baselines"]
    conv = record["conventions"]
    parts = ["# flash_attn kernel benchmark\n\n", machine.markdown(record["machine"]), "\n## Conventions\n\n"]
    parts.append(
        f"- cell: median latency in ms over >= {conv['min_timed_calls']} timed calls per round (CUDA events, "
        f"after {conv['warmup_calls']} warm-up calls), {conv.get('rounds', 1)} round(s) per case with every "
        "implementation timed in turn in each, the rounds' calls pooled; TFLOP/s in parentheses\n"
        f"- FLOPs: forward = 4*B*H*S^2*D, halved for causal; fwd_bwd = {conv['fwd_bwd_flop_factor']} x forward "
        f"(upstream's benchmark uses {UPSTREAM_FWD_BWD_FLOP_FACTOR} x for fwd+bwd: multiply fwd_bwd TFLOP/s by "
        f"{UPSTREAM_FWD_BWD_FLOP_FACTOR / conv['fwd_bwd_flop_factor']:.2f} to compare)\n"
        "- ratio: baseline median / flash_attn median (> 1: flash_attn faster); inputs: fresh torch.randn per "
        "shape, (B, S, H, D) for flash_attn, transposed (B, H, S, D) views for SDPA; no L2 flush\n"
        "- `not built`: the build's kernel set lacks the unit; `unsupported`: the SDPA backend refused the shape\n"
    )
    for build in record["builds"]:
        bi = (build.get("flash_attn") or {}).get("build_info") or {}
        parts.append(
            f"- build `{build['label']}`: {build.get('source') or 'installed flash_attn'}; kernel set "
            f"{bi.get('kernel_set', '?')}, fatbin compression {bi.get('fatbin_compression', '?')}, "
            f"deltas {json.dumps(bi.get('deltas')) if 'deltas' in bi else '?'}\n"
        )
    for mode in MODES:
        rows = [r for r in record["results"] if r["mode"] == mode]
        if not rows:
            continue
        headers = ["dtype", "causal", "B", "H", "S", "D"] + ours + bases
        headers += [f"{o} / {b}" for o in ours for b in bases]
        body = []
        for r in rows:
            s = r["shape"]
            line = [s["dtype"], "yes" if s["causal"] else "no", s["batch"], s["heads"], s["seqlen"], s["head_dim"]]
            line += [_cell(r["results"].get(i)) for i in ours + bases]
            line += [bc.fmt(r["ratios"].get(f"{o} vs {b}"), 2, "x") for o in ours for b in bases]
            body.append(line)
        title = "forward" if mode == "fwd" else "forward + backward"
        parts.append(f"\n## {title} (`{mode}`)\n\n")
        parts.append(bc.md_table(headers, body, "llrrrr" + "r" * (len(headers) - 6)))
    if record.get("geomean_ratios"):
        parts.append("\n## Geometric mean of the ratios (shapes where both ran)\n\n")
        body = [
            [k, mode, bc.fmt(v, 3, "x")]
            for k, per_mode in record["geomean_ratios"].items()
            for mode, v in per_mode.items()
        ]
        parts.append(bc.md_table(["flash_attn vs baseline", "mode", "geomean ratio"], body, "llr"))
    problems = [
        (r, i, res)
        for r in record["results"]
        for i, res in r["results"].items()
        if res.get("status") not in ("ok", None) and res.get("message")
    ]
    if problems:
        parts.append("\n## Messages\n\n")
        seen = set()
        for r, impl, res in problems:
            msg = f"- {impl} {r['mode']} {Shape(**r['shape']).key}: {res['status']}: {res['message']}"
            if (impl, res["message"]) not in seen:
                seen.add((impl, res["message"]))
                parts.append(msg + "\n")
    for w in record["workers"]:
        if w.get("error") or w.get("returncode"):
            parts.append(f"\n**worker `{w['label']}` failed** (exit {w.get('returncode')}): {w.get('error')}\n")
    conv_host = record["conventions"].get("host_overhead")
    if record.get("host_overhead") and conv_host:
        parts.append(host_overhead.render(record["host_overhead"], conv_host["calls"], conv_host["repeats"]))
    parts.append(f"\nTotal run time {record['wall_s']:.0f} s.\n")
    return "".join(parts)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = bc.script_parser(__doc__)
    bc.add_out_and_builds(
        p,
        "result folder (kernels.json, kernels.md)",
        "a build to time: CMake build dir, _C_<group>.so, install folder or .whl; repeatable. "
        "Default: the flash_attn the interpreter imports",
    )
    p.add_argument(
        "--shapes",
        choices=sorted(SHAPE_SETS),
        default="release",
        help="release: the 28 shapes (default); smoke: 2 small shapes; tiny: for the CPU tests",
    )
    p.add_argument("--no-baselines", action="store_true", help="skip the SDPA baselines")
    p.add_argument("--baselines-only", action="store_true", help="only the SDPA baselines (no flash_attn needed)")
    p.add_argument("--warmup", type=int, default=10, help="untimed calls before timing (default 10)")
    p.add_argument("--min-iters", type=int, default=MIN_TIMED_CALLS, help="timed calls at least (>= 50)")
    p.add_argument("--max-iters", type=int, default=200, help="timed calls at most (default 200)")
    p.add_argument(
        "--target-s",
        type=float,
        default=0.2,
        help="timed calls fill about this many seconds per case, within the bounds (default 0.2)",
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="rounds per case: every implementation is timed once per round, in turn, and the rounds' "
        "calls are pooled (default 3)",
    )
    p.add_argument(
        "--fwd-bwd-flop-factor",
        type=float,
        default=FWD_BWD_FLOP_FACTOR,
        help=f"fwd_bwd FLOPs = this x forward FLOPs (default {FWD_BWD_FLOP_FACTOR}; upstream uses "
        f"{UPSTREAM_FWD_BWD_FLOP_FACTOR})",
    )
    p.add_argument(
        "--host-overhead",
        action="store_true",
        help="also time the per-call host overhead of the public functions (bench/host_overhead.py)",
    )
    p.add_argument("--host-calls", type=int, default=300, help="back-to-back calls per repeat (default 300)")
    p.add_argument(
        "--host-repeats", type=int, default=15, help="samples per implementation, host-overhead timing (default 15)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help=argparse.SUPPRESS)  # cpu: tests only
    p.add_argument("--worker-timeout-s", type=float, default=1200)
    # internal: one worker process per build
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    p.add_argument("--label", default="installed", help=argparse.SUPPRESS)
    p.add_argument("--lib", help=argparse.SUPPRESS)
    p.add_argument("--with-baselines", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--host-baselines", action="store_true", help=argparse.SUPPRESS)  # SDPA in the host table only
    p.add_argument("--no-ours", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    if args.min_iters < MIN_TIMED_CALLS:
        p.error(f"--min-iters must be at least {MIN_TIMED_CALLS}")
    if not args.worker and args.out is None:
        p.error("--out is required")
    if args.host_calls < 1 or args.host_repeats < 1:
        p.error("--host-calls and --host-repeats must be at least 1")
    if args.no_baselines and args.baselines_only:
        p.error("--no-baselines and --baselines-only exclude each other")
    return args


def _run_worker(args: argparse.Namespace, target: bc.BuildTarget, result_file: Path, with_baselines: bool) -> dict:
    """Run one worker process for ``target`` and return its result, with label, exit status and error."""
    result_file.unlink(missing_ok=True)
    cmd = _worker_command(args, target, result_file, with_baselines, args.baselines_only)
    print(
        f"latency.py: worker '{target.label}' ({target.kind}{', with SDPA baselines' if with_baselines else ''})",
        file=sys.stderr,
        flush=True,
    )
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=target.env(), timeout=args.worker_timeout_s)
        rc, err = proc.returncode, None
    except subprocess.TimeoutExpired:
        rc, err = None, f"timed out after {args.worker_timeout_s:.0f} s"
    data = {}
    if result_file.is_file():
        try:
            data = json.loads(result_file.read_text(encoding="utf-8"))
        except ValueError as exc:
            err = f"unreadable worker result: {exc}"
    data.update(
        label=target.label,
        source=target.source,
        kind=target.kind,
        returncode=rc,
        wall_s=round(time.perf_counter() - t0, 1),
    )
    if err or data.get("error"):
        data["error"] = err or data.get("error")
    if rc not in (0, None) and not data.get("error"):
        data["error"] = f"worker exited with status {rc} (see its output above)"
    return data


def geomean_ratios(merged: dict, results: list[dict]) -> dict:
    """{"<ours> vs <baseline>": {mode: geometric mean of that ratio over the shapes where both ran}}."""
    geo: dict = {}
    for o in merged["ours"]:
        for b in merged["baselines"]:
            key = f"{o} vs {b}"
            geo[key] = {
                m: (
                    None
                    if (g := geomean([r["ratios"].get(key) for r in results if r["mode"] == m])) is None
                    else round(g, 3)
                )
                for m in MODES
            }
    return geo


def conventions(args: argparse.Namespace) -> dict:
    """How the numbers were taken, as written into kernels.json (and rendered in kernels.md)."""
    return {
        "latency": "median of per-call CUDA event times (ms), back-to-back calls, no L2 flush",
        "warmup_calls": args.warmup,
        "min_timed_calls": max(args.min_iters, MIN_TIMED_CALLS),
        "max_timed_calls": args.max_iters,
        "target_seconds_per_case": args.target_s,
        "rounds": args.rounds,
        "flops_fwd": "4*B*H*S^2*D, halved for causal",
        "fwd_bwd_flop_factor": args.fwd_bwd_flop_factor,
        "upstream_fwd_bwd_flop_factor": UPSTREAM_FWD_BWD_FLOP_FACTOR,
        "ratio": "baseline median / flash_attn median (> 1: flash_attn faster)",
        "inputs": "fresh torch.randn per shape (seed + shape index), shared by all implementations",
        "sdpa_layout": "(B, H, S, D) transposed views of the (B, S, H, D) tensors",
        "shape_set": args.shapes,
        "host_overhead": {"calls": args.host_calls, "repeats": args.host_repeats} if args.host_overhead else None,
    }


def main(argv: list[str] | None = None) -> int:
    """The command line (module doc): the workers, then kernels.json and kernels.md; 1 when a worker or case failed."""
    args = _parse(argv)
    if args.worker:
        return _worker(args)
    started = time.perf_counter()
    out = bc.result_dir(args.out)
    work = out / "kernels_work"
    work.mkdir(exist_ok=True)
    targets = bc.targets_or_not_run(
        args.build, work / "wheels", out, "kernels", "flash_attn kernel benchmark", "latency.py"
    )
    if targets is None:
        return 2
    if args.baselines_only:
        targets = [bc.BuildTarget(label="sdpa", kind="installed")]
    machine_info = machine.collect()
    workers = [
        _run_worker(args, target, work / f"worker_{target.label}.json", i == 0 and not args.no_baselines)
        for i, target in enumerate(targets)
    ]
    merged = merge(workers)
    results = rows_with_ratios(merged)
    record = {
        "benchmark": "kernels",
        "machine": machine_info,
        "device": next((w.get("device") for w in workers if w.get("device")), None),
        "conventions": conventions(args),
        "implementations": {"flash_attn": merged["ours"], "baselines": merged["baselines"]},
        "builds": [{k: w.get(k) for k in ("label", "source", "kind", "flash_attn")} for w in workers],
        "workers": [{k: w.get(k) for k in ("label", "returncode", "error", "wall_s", "device")} for w in workers],
        "results": results,
        "geomean_ratios": geomean_ratios(merged, results),
        "host_overhead": host_overhead.rows(workers),
        "wall_s": round(time.perf_counter() - started, 1),
    }
    bc.write_and_announce(out, "kernels", record, render_markdown(record), "latency.py")
    failed = [w for w in workers if w.get("error")]
    # a flash_attn case that raised (not "not built", not an SDPA refusal) fails the run too
    errors = [r for r in results for i in merged["ours"] if (r["results"].get(i) or {}).get("status") == "error"]
    return 1 if failed or errors else 0


if __name__ == "__main__":
    sys.exit(main())
