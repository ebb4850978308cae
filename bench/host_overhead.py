"""Per-call host overhead of the public flash_attn functions, beside their raw operators and SDPA.

Used by ``bench/latency.py --host-overhead`` (one run, the same tensors for every
implementation). Each sample is ``--host-calls`` (default 300) back-to-back calls between two
``torch.cuda.synchronize()``, wall time by ``time.perf_counter``, divided by the number of calls;
every implementation of a case gets ``--host-repeats`` (default 15) samples, interleaved: sample
r of each implementation of the case, then sample r + 1, the starting implementation rotated each
round, so a drift of GPU clocks or host load hits them alike instead of whichever ran last. The
reported figure is the median of the samples, in microseconds per call. For shapes whose kernels
finish faster than the host can issue them this is the host time per call (Python, dispatcher, launch), which is what an
inference loop pays.

Cases (fp16), the shapes of the issue that measured 15-25 us of Python overhead per call:

- dense: B1 H8 S256 D64 causal, B2 H8 S1024 D64, B2 H8 S1024 D128 causal, B8 H16 S512 D128
  causal; ``flash_attn_func`` against ``torch.ops.flash_attn.fwd.default``, and
  ``flash_attn_varlen_func`` (the same batch packed, equal lengths) against
  ``torch.ops.flash_attn.varlen_fwd.default``;
- decode: B=4, one query token, a 4096-token cache, H=32 query and Hk=8 key/value heads, D=128;
  ``flash_attn_with_kvcache`` against ``torch.ops.flash_attn.fwd_kvcache.default``, without and
  with appending one new k/v token per sequence (at a fixed position, so every call does the
  same work);
- every implementation is called through one Python lambda (the raw operators with their
  arguments prepared once), so the differences are what the public functions add;
- SDPA (``sdpa_kernel`` restricted to FLASH_ATTENTION, then CUDNN_ATTENTION) on the same
  tensors in (B, H, S, D) views; decode with ``enable_gqa=True`` over the whole cache.

Targets (issue 14): ``flash_attn_func`` <= 1.1x SDPA flash on each dense shape, and
``flash_attn_with_kvcache`` within 5 us of its raw operator.
"""

from __future__ import annotations

import contextlib
import functools
import time
from dataclasses import dataclass

import bench_common as bc

SDPA = {"sdpa_flash": "FLASH_ATTENTION", "sdpa_cudnn": "CUDNN_ATTENTION"}
API_TARGET_VS_SDPA = 1.1  # flash_attn_func / sdpa_flash per-call time, at most
KVCACHE_TARGET_US = 5.0  # flash_attn_with_kvcache minus its raw operator, at most


@dataclass(frozen=True)
class DenseCase:
    name: str
    batch: int
    heads: int
    seqlen: int
    head_dim: int
    causal: bool


@dataclass(frozen=True)
class DecodeCase:
    name: str
    batch: int
    heads: int
    kv_heads: int
    head_dim: int
    cache: int
    append: bool


def cases(tiny: bool = False) -> tuple[list[DenseCase], list[DecodeCase]]:
    """The dense and decode cases; ``tiny`` shrinks them for the CPU tests."""
    if tiny:
        return [DenseCase("B1 H2 S64 D64", 1, 2, 64, 64, False)], [
            DecodeCase(f"decode B2 cache 128{' append' if a else ''}", 2, 4, 2, 64, 128, a) for a in (False, True)
        ]
    dense = [
        DenseCase("B1 H8 S256 D64 causal", 1, 8, 256, 64, True),
        DenseCase("B2 H8 S1024 D64", 2, 8, 1024, 64, False),
        DenseCase("B2 H8 S1024 D128 causal", 2, 8, 1024, 128, True),
        DenseCase("B8 H16 S512 D128 causal", 8, 16, 512, 128, True),
    ]
    decode = [
        DecodeCase(f"decode B4 H32/8 D128 cache 4096{' append' if a else ''}", 4, 32, 8, 128, 4096, a)
        for a in (False, True)
    ]
    return dense, decode


def _raw_ops(torch):
    """``torch.ops.flash_attn`` or None when no library registered it (only SDPA is timed then)."""
    try:
        ops = torch.ops.flash_attn
        ops.fwd.default  # noqa: B018 - raises when the namespace has no such operator
        return ops
    except (AttributeError, RuntimeError):
        return None


@dataclass(frozen=True)
class _Kit:
    """What building the timed calls of every case needs: torch, the functions and the input maker."""

    torch: object
    device: str
    label: str
    flash_attn: object  # the module, or None when only SDPA is timed
    ops: object  # torch.ops.flash_attn, or None
    sdpa: object  # torch.nn.functional.scaled_dot_product_attention
    sdpa_contexts: dict  # SDPA name -> sdpa_kernel context factory (empty without baselines)
    randn: object  # randn(*shape): a fresh input tensor of the run's dtype on the device


def _dense_calls(kit: _Kit, c: DenseCase) -> list:
    """The timed calls of one dense case: the API and raw fwd/varlen_fwd, then SDPA, on one set of inputs."""
    torch, label, null, sdpa = kit.torch, kit.label, contextlib.nullcontext, kit.sdpa
    flash_attn, ops = kit.flash_attn, kit.ops
    out = []
    q, k, v = (kit.randn(c.batch, c.seqlen, c.heads, c.head_dim) for _ in range(3))
    scale = c.head_dim**-0.5
    packed = [x.reshape(c.batch * c.seqlen, c.heads, c.head_dim) for x in (q, k, v)]
    cu = torch.arange(0, c.batch + 1, device=kit.device, dtype=torch.int32) * c.seqlen
    if flash_attn is not None:
        out.append(
            (
                c.name,
                "flash_attn_func",
                f"api[{label}]",
                lambda q=q, k=k, v=v, c=c: flash_attn.flash_attn_func(q, k, v, causal=c.causal),
                null,
            )
        )
        out.append(
            (
                c.name,
                "flash_attn_varlen_func",
                f"api[{label}]",
                lambda p=packed, cu=cu, c=c: flash_attn.flash_attn_varlen_func(
                    *p, cu, cu, c.seqlen, c.seqlen, causal=c.causal
                ),
                null,
            )
        )
    if ops is not None:
        fwd_args = (q, k, v, None, 0.0, scale, c.causal, -1, -1, 0.0, False, None)
        varlen_args = (*packed, cu, cu, None, None, None, None, c.seqlen, c.seqlen, 0.0, scale, False, c.causal)
        varlen_args += (-1, -1, 0.0, False, None)
        out.append((c.name, "flash_attn_func", f"raw[{label}]", lambda op=ops.fwd.default, a=fwd_args: op(*a), null))
        out.append(
            (
                c.name,
                "flash_attn_varlen_func",
                f"raw[{label}]",
                lambda op=ops.varlen_fwd.default, a=varlen_args: op(*a),
                null,
            )
        )
    views = [x.transpose(1, 2) for x in (q, k, v)]
    for name, context in kit.sdpa_contexts.items():
        out.append((c.name, "sdpa", name, lambda t=views, c=c: sdpa(*t, is_causal=c.causal), context))
    return out


def _decode_calls(kit: _Kit, c: DecodeCase) -> list:
    """The timed calls of one decode case: the API and raw fwd_kvcache, then SDPA with GQA over the cache."""
    torch, label, null, sdpa, randn = kit.torch, kit.label, contextlib.nullcontext, kit.sdpa, kit.randn
    flash_attn, ops = kit.flash_attn, kit.ops
    out = []
    q = randn(c.batch, 1, c.heads, c.head_dim)
    k_cache, v_cache = (randn(c.batch, c.cache, c.kv_heads, c.head_dim) for _ in range(2))
    new = (
        (randn(c.batch, 1, c.kv_heads, c.head_dim), randn(c.batch, 1, c.kv_heads, c.head_dim))
        if c.append
        else (None, None)
    )
    seqlens = torch.full((c.batch,), c.cache // 2, device=kit.device, dtype=torch.int32)
    if flash_attn is not None:
        out.append(
            (
                c.name,
                "flash_attn_with_kvcache",
                f"api[{label}]",
                lambda q=q, kc=k_cache, vc=v_cache, n=new, s=seqlens: flash_attn.flash_attn_with_kvcache(
                    q, kc, vc, *n, cache_seqlens=s
                ),
                null,
            )
        )
    if ops is not None:
        args = (q, k_cache, v_cache, *new, seqlens, None, None, None, None, None, None)
        args += (c.head_dim**-0.5, False, -1, -1, 0.0, True, 0)
        out.append(
            (
                c.name,
                "flash_attn_with_kvcache",
                f"raw[{label}]",
                lambda op=ops.fwd_kvcache.default, a=args: op(*a),
                null,
            )
        )
    views = (q.transpose(1, 2), k_cache.transpose(1, 2), v_cache.transpose(1, 2))
    for name, context in kit.sdpa_contexts.items():
        out.append((c.name, "sdpa", name, lambda t=views: sdpa(*t, enable_gqa=True), context))
    return out


def calls_for(torch, device: str, label: str, flash_attn, with_baselines: bool, tiny: bool, generator) -> list:
    """``(case, function, impl, callable, context)`` for every timed call; impl is ``api[label]``,
    ``raw[label]`` or an SDPA name (SDPA only ``with_baselines``). Inputs are drawn from ``generator``
    case by case, dense cases first."""
    dense, decode = cases(tiny)
    dtype = torch.float16 if device == "cuda" else torch.bfloat16
    ops = _raw_ops(torch) if flash_attn is not None else None
    sdpa_contexts = {}
    if with_baselines:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        sdpa_contexts = {name: functools.partial(sdpa_kernel, [getattr(SDPBackend, m)]) for name, m in SDPA.items()}
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    def randn(*shape):
        return torch.randn(*shape, device=device, dtype=dtype, generator=generator)

    kit = _Kit(torch, device, label, flash_attn, ops, sdpa, sdpa_contexts, randn)
    out = []
    for c in dense:
        out += _dense_calls(kit, c)
    for c in decode:
        out += _decode_calls(kit, c)
    return out


def sample_us(fn, calls: int, sync) -> float:
    """Microseconds per call of ``calls`` back-to-back calls of ``fn`` between two ``sync()``."""
    sync()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return (time.perf_counter() - t0) / calls * 1e6


def run(
    torch,
    device: str,
    label: str,
    flash_attn,
    with_baselines: bool,
    tiny: bool,
    calls: int,
    repeats: int,
    sync,
    classify,
    seed: int = 0,
) -> list[dict]:
    """Time every call of :func:`calls_for`, the implementations of one case interleaved sample by
    sample (see the module documentation); one record per call, failures as their status."""
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    entries = calls_for(torch, device, label, flash_attn, with_baselines, tiny, generator)
    records = [{"case": case, "function": function, "impl": impl} for case, function, impl, _, _ in entries]
    samples: list[list[float]] = [[] for _ in entries]
    by_case: dict[str, list[int]] = {}
    for index, entry in enumerate(entries):
        by_case.setdefault(entry[0], []).append(index)

    def attempt(index: int, action) -> bool:
        """``action(fn)`` under the entry's context; False (the failure recorded) when it raised."""
        _, _, _, fn, context = entries[index]
        try:
            with context():
                action(fn)
            return True
        except Exception as exc:
            records[index].update(status=classify(exc), message=f"{type(exc).__name__}: {str(exc)[:300]}")
            with contextlib.suppress(Exception):
                sync()
            return False

    for indices in by_case.values():
        live = [i for i in indices if attempt(i, lambda fn: (fn(), sync()))]  # warm-up call
        for r in range(repeats):
            start = r % len(live) if live else 0
            for index in live[start:] + live[:start]:
                if "status" not in records[index]:  # not failed in an earlier round
                    attempt(index, lambda fn, index=index: samples[index].append(sample_us(fn, calls, sync)))
    for index, record in enumerate(records):
        if "status" not in record:
            record.update(status="ok", us=bc.summarize(samples[index], 2), calls=calls, repeats=repeats)
    return records


def _median(record: dict | None) -> float | None:
    return record["us"]["median"] if record and record.get("status") == "ok" else None


def rows(workers: list[dict]) -> list[dict]:
    """One row per (case, function, build): api and raw us per call, their difference, SDPA's, the ratio.

    Each build is compared with the SDPA samples of its own worker (timed interleaved with it, in the
    same process); a worker without them (an older record) borrows the first worker's, and the row
    then says so (``sdpa_from``).
    """
    sdpa_of: list[dict] = []  # per worker: case -> impl -> record
    found: dict = {}
    order: list = []
    for index, w in enumerate(workers):
        sdpa_of.append({})
        for r in w.get("host_overhead") or []:
            if r["function"] == "sdpa":
                sdpa_of[index].setdefault(r["case"], {})[r["impl"]] = r
                continue
            kind, _, label = r["impl"].partition("[")
            key = (r["case"], r["function"], label.rstrip("]"))
            if key not in found:
                order.append(key)
            found.setdefault(key, {})[kind] = (r, index)
    out = []
    for case, function, label in order:
        got = {kind: record for kind, (record, _) in found[(case, function, label)].items()}
        worker = next(iter(found[(case, function, label)].values()))[1]
        own = sdpa_of[worker].get(case)
        borrowed = next((i for i, s in enumerate(sdpa_of) if s.get(case)), None) if own is None else worker
        sdpa = sdpa_of[borrowed][case] if borrowed is not None else {}
        api, raw = _median(got.get("api")), _median(got.get("raw"))
        flash = _median(sdpa.get("sdpa_flash"))
        row = {
            "case": case,
            "function": function,
            "build": label,
            "api_us": api,
            "raw_us": raw,
            "overhead_us": None if api is None or raw is None else round(api - raw, 2),
            "sdpa_us": {name: _median(sdpa.get(name)) for name in SDPA},
            "sdpa_from": "own worker" if borrowed == worker else ("none" if borrowed is None else f"worker {borrowed}"),
            "api_vs_sdpa_flash": None if api is None or not flash else round(api / flash, 3),
            "status": {kind: got[kind]["status"] for kind in got},
        }
        if function == "flash_attn_func":
            row["target_met"] = (
                None if row["api_vs_sdpa_flash"] is None else row["api_vs_sdpa_flash"] <= API_TARGET_VS_SDPA
            )
        elif function == "flash_attn_with_kvcache":
            row["target_met"] = None if row["overhead_us"] is None else row["overhead_us"] <= KVCACHE_TARGET_US
        out.append(row)
    return out


def render(table: list[dict], calls: int, repeats: int) -> str:
    """The Markdown section of the host-overhead rows."""
    if not table:
        return ""
    headers = [
        "case",
        "function",
        "build",
        "api us",
        "raw op us",
        "api - raw us",
        *[f"{n} us" for n in SDPA],
        "api / sdpa_flash",
        "target",
    ]
    body = []
    for r in table:
        met = r.get("target_met")
        body.append(
            [
                r["case"],
                f"`{r['function']}`",
                r["build"] + ("" if r.get("sdpa_from", "own worker") == "own worker" else f" (SDPA: {r['sdpa_from']})"),
                bc.fmt(r["api_us"], 1),
                bc.fmt(r["raw_us"], 1),
                bc.fmt(r["overhead_us"], 1),
                *[bc.fmt(r["sdpa_us"][n], 1) for n in SDPA],
                bc.fmt(r["api_vs_sdpa_flash"], 2, "x"),
                "" if met is None else ("met" if met else "missed"),
            ]
        )
    text = (
        "\n## Host overhead per call\n\n"
        f"- microseconds per call: median over {repeats} samples of {calls} back-to-back calls between two "
        "synchronizations (perf_counter), the implementations of a case interleaved sample by sample; fp16; "
        "`raw op` is `torch.ops.flash_attn.<op>.default` (the OpOverload, called from Python) with the "
        "arguments the function passes; SDPA is timed in each build's own worker process, interleaved with "
        "that build's calls\n"
        f"- targets: `flash_attn_func` <= {API_TARGET_VS_SDPA}x SDPA flash; `flash_attn_with_kvcache` within "
        f"{KVCACHE_TARGET_US:.0f} us of its raw operator\n\n"
    )
    return text + bc.md_table(headers, body, "lll" + "r" * (len(headers) - 3))
