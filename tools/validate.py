"""Validation of an installed flash_attn wheel on a GPU: the release-note suite and its report.

Run on a machine with a CUDA GPU where the wheel is installed: ``nox -s validate -- WHEEL``
installs it and runs this; without nox, from a folder that holds no flash_attn/::

    PYTHONPATH=<checkout>/src python <checkout>/tools/validate.py --out reports/ [--wheel flash_attn-...whl]

Only the standard library, torch, the installed flash_attn and the smoke check's build-info reader
(``release.ship.smoke_check.package_build_info``, stdlib only; hence src/ on PYTHONPATH) are used. It
is a GPU test suite, not release logic: the release tooling only reads the reports it writes
(``release.ship.publish``). Every check draws fresh random inputs (never zeros) and compares against
torch ``scaled_dot_product_attention`` computed in fp32 on the same inputs (masks for causal/window; a
plain fp32 reference where SDPA cannot express the case: softcap, fully masked rows). Gates
(docs/design.md): fp16 rel_Linf <= 2e-2, bf16 rel_Linf <= 1e-2, cosine >= 0.9995. Backward gates
(this suite's choice, stated in the report): gradients finite, rel_Linf <= 5e-2 (fp16) / 1e-1
(bf16), cosine >= 0.999 vs the fp32 reference gradients.

Suite:
- accuracy, 8 cases: fp16/bf16 x causal or not x head dim 64/128 (B=2, S=1024, H=8);
- accuracy, 10 shapes: odd lengths, Sq != Sk, GQA/MQA, every head dim, decode (Sq=1), fp16 and bf16;
- backward on the 8 cases: finiteness and gradient error vs fp32;
- edge probes: LSE shape and finiteness (and value), determinism of two calls, S=1, S=2, H=1,
  D=256 bf16, softcap with causal, window (0,0) equals V, window (128,128);
- latency: forward and forward+backward, 50 warm-up + 50 timed iterations with CUDA events
  (median), beside torch SDPA's flash backend on the same inputs.

A case whose kernel unit (head dim, dtype, causal) the wheel's kernel set left out is reported
as "not built", never as passed; a case that raises is reported as FAILED with the error. Writes
``validation-<version>-sm<NN>.json`` (strict JSON: NaN/inf as null) and ``.md`` into --out, with
the hardware and software context read from the machine, also when the suite cannot run. Exit
status 0 when every built case passed its gate, 1 when one failed, 2 when the suite could not run.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import hashlib
import importlib
import importlib.metadata
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from flash_attn_wheel_names import native  # src/ on PYTHONPATH, as for the line below
from release.ship.smoke_check import package_build_info

GATES = {"fp16": 2e-2, "bf16": 1e-2}
COSINE_MIN = 0.9995
BWD_GATES = {"fp16": 5e-2, "bf16": 1e-1}
BWD_COSINE_MIN = 0.999
WARMUP, TIMED = 50, 50

ACCURACY_CASES = [
    {"dtype": dt, "causal": c, "b": 2, "sq": 1024, "sk": 1024, "h": 8, "hk": 8, "d": d}
    for dt in ("fp16", "bf16")
    for c in (False, True)
    for d in (64, 128)
]
SHAPES = [
    {"b": 1, "sq": 128, "sk": 128, "h": 8, "hk": 8, "d": 32, "causal": False},
    {"b": 2, "sq": 113, "sk": 203, "h": 4, "hk": 4, "d": 64, "causal": False},
    {"b": 2, "sq": 512, "sk": 512, "h": 8, "hk": 2, "d": 64, "causal": True},
    {"b": 3, "sq": 777, "sk": 777, "h": 6, "hk": 1, "d": 96, "causal": False},
    {"b": 1, "sq": 2048, "sk": 2048, "h": 16, "hk": 16, "d": 128, "causal": True},
    {"b": 2, "sq": 256, "sk": 1024, "h": 8, "hk": 8, "d": 128, "causal": True},
    {"b": 4, "sq": 1, "sk": 512, "h": 8, "hk": 8, "d": 128, "causal": False},
    {"b": 2, "sq": 512, "sk": 512, "h": 8, "hk": 8, "d": 192, "causal": False},
    {"b": 1, "sq": 1024, "sk": 1024, "h": 4, "hk": 4, "d": 256, "causal": True},
    {"b": 8, "sq": 64, "sk": 64, "h": 2, "hk": 2, "d": 80, "causal": False},
]
EDGE_BASE = {"b": 2, "sq": 512, "sk": 512, "h": 8, "hk": 8, "d": 64}
WINDOW_SEQ = 1024  # sequence length of the window (128,128) probe
LATENCY_SHAPES = [
    {"b": 2, "h": 8, "s": s, "d": 128, "dtype": "fp16", "causal": c} for s in (1024, 4096, 8192) for c in (False, True)
] + [{"b": 2, "h": 16, "s": 4096, "d": 64, "dtype": "bf16", "causal": True}]


# -- kernel availability -------------------------------------------------------------------------


def round_head_dim(d: int, head_dims) -> int:
    """The instantiated head dim a call with head dim d uses: the next of ``head_dims`` (the build
    info's "head_dims", e.g. 32, 64, ..., 256). Raises ValueError above the largest."""
    for hd in sorted(head_dims):
        if d <= hd:
            return hd
    raise ValueError(f"head dim {d} > {max(head_dims, default=0)} is not supported")


def built_units(info: dict) -> set[tuple[str, str, int, bool]]:
    """(kind, dtype, head_dim, causal) of every unit in a build info's "kernels" list."""
    units = set()
    for k in info.get("kernels", []):
        if isinstance(k, dict):
            units.add((k["kind"], k["dtype"], int(k["head_dim"]), bool(k["causal"])))
    return units


def needed_unit(kind: str, dtype: str, d: int, causal: bool, head_dims, sq: int = 2) -> tuple[str, str, int, bool]:
    """The unit a call needs (head dims as for round_head_dim); upstream treats causal with Sq=1 as non-causal."""
    return (kind, dtype, round_head_dim(d, head_dims), causal and sq > 1)


# -- inputs, reference, metrics ------------------------------------------------------------------


def _torch():
    import torch

    return torch


def dtype_of(name: str):
    torch = _torch()
    return {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[name]


def make_qkv(shape: dict, dtype: str, device, requires_grad: bool = False, generator=None):
    """Fresh N(0,1) q (B,Sq,H,D), k/v (B,Sk,Hk,D) in `dtype` (never zeros)."""
    torch = _torch()
    dt = dtype_of(dtype)
    q = torch.randn(shape["b"], shape["sq"], shape["h"], shape["d"], device=device, dtype=dt, generator=generator)
    k = torch.randn(shape["b"], shape["sk"], shape["hk"], shape["d"], device=device, dtype=dt, generator=generator)
    v = torch.randn(shape["b"], shape["sk"], shape["hk"], shape["d"], device=device, dtype=dt, generator=generator)
    return tuple(t.requires_grad_(requires_grad) for t in (q, k, v))


def attention_mask(sq: int, sk: int, causal: bool, window: tuple[int, int], device):
    """Boolean (Sq, Sk) mask, True = attend, FlashAttention-2 semantics (bottom-right aligned).

    Query i sits at key position i + Sk - Sq; causal allows keys <= that position; a window
    (left, right) allows keys in [pos - left, pos + right], -1 meaning unbounded.
    Returns None when nothing is masked.
    """
    torch = _torch()
    left, right = window
    if causal:
        right = 0
    if left < 0 and right < 0:
        return None
    pos = torch.arange(sq, device=device)[:, None] + (sk - sq)
    key = torch.arange(sk, device=device)[None, :]
    mask = torch.ones(sq, sk, dtype=torch.bool, device=device)
    if right >= 0:
        mask &= key <= pos + right
    if left >= 0:
        mask &= key >= pos - left
    return mask


def reference(q, k, v, causal=False, window=(-1, -1), softcap=0.0, scale=None):
    """fp32 reference (out (B,Sq,H,D) fp32, lse (B,H,Sq) fp32) of the same inputs.

    torch SDPA in fp32 where it can express the case (no softcap, no fully masked row), else
    the explicit softmax; LSE always from the explicit scores (natural log).
    """
    torch = _torch()
    b, sq, h, d = q.shape
    sk, hk = k.shape[1], k.shape[2]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    qf = q.detach().float().transpose(1, 2)
    kf = k.detach().float().repeat_interleave(h // hk, dim=2).transpose(1, 2)
    vf = v.detach().float().repeat_interleave(h // hk, dim=2).transpose(1, 2)
    mask = attention_mask(sq, sk, causal, window, q.device)
    scores = torch.matmul(qf, kf.transpose(-1, -2)) * scale
    if softcap > 0:
        scores = softcap * torch.tanh(scores / softcap)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    empty_rows = mask is not None and bool((~mask.any(dim=-1)).any())
    if softcap == 0 and not empty_rows:
        out = torch.nn.functional.scaled_dot_product_attention(qf, kf, vf, attn_mask=mask, scale=scale)
    else:
        p = torch.softmax(scores, dim=-1).nan_to_num(0.0)
        out = torch.matmul(p, vf)
    return out.transpose(1, 2), lse


def metrics(out, ref) -> dict:
    """rel_Linf = max|out-ref| / max|ref|, cosine similarity of the flattened tensors, finiteness."""
    torch = _torch()
    o, r = out.detach().float().flatten(), ref.detach().float().flatten()
    finite = bool(torch.isfinite(o).all())
    denom = r.abs().max().clamp_min(1e-12)
    rel = float((o - r).abs().max() / denom) if finite else float("inf")
    cos = float(torch.nn.functional.cosine_similarity(o, r, dim=0)) if finite else float("nan")
    return {"rel_linf": rel, "cosine": cos, "finite": finite}


def passes(m: dict, dtype: str, backward: bool = False) -> bool:
    limit = (BWD_GATES if backward else GATES)[dtype]
    cos_min = BWD_COSINE_MIN if backward else COSINE_MIN
    return m["finite"] and m["rel_linf"] <= limit and m["cosine"] >= cos_min


# -- the kernels under test ----------------------------------------------------------------------


class NotBuilt(Exception):
    """The call needs a unit the kernel set left out."""


def error_text(e: BaseException) -> str:
    """First line of an unexpected error, for the detail of a FAILED record."""
    lines = f"{type(e).__name__}: {e}".strip().splitlines()
    return ("error: " + (lines[0] if lines else type(e).__name__))[:300]


class FlashAttn:
    """Calls the installed flash_attn: its public flash_attn_func when present (upstream's
    signature), else the registered operators torch.ops.flash_attn.fwd/bwd."""

    def __init__(self, module):
        self.module = module
        self.func = getattr(module, "flash_attn_func", None)
        self.api = "flash_attn.flash_attn_func" if self.func else "torch.ops.flash_attn"

    @staticmethod
    def _translate(e: Exception):
        if type(e).__name__ == "KernelNotBuiltError" or native.is_not_built_message(str(e)):
            return NotBuilt(str(e))
        return e

    def forward(self, q, k, v, causal=False, window=(-1, -1), softcap=0.0):
        """(out, lse). Differentiable when the public API is present."""
        torch = _torch()
        scale = 1.0 / math.sqrt(q.shape[-1])
        try:
            if self.func is not None:
                out, lse, _ = self.func(
                    q, k, v, softmax_scale=scale, causal=causal, window_size=window, softcap=softcap,
                    return_attn_probs=True,
                )  # fmt: skip
                return out, lse
            out, lse, _, _ = torch.ops.flash_attn.fwd(
                q, k, v, None, 0.0, scale, causal, window[0], window[1], softcap, False, None
            )
            return out, lse
        except Exception as e:  # noqa: BLE001 - translated or re-raised
            translated = self._translate(e)
            if translated is e:
                raise
            raise translated from e

    def grads(self, q, k, v, dout, causal=False):
        """(dq, dk, dv) of sum(out * dout)."""
        torch = _torch()
        try:
            if self.func is not None:
                q, k, v = (t.detach().requires_grad_(True) for t in (q, k, v))
                out, _ = self.forward(q, k, v, causal=causal)
                return torch.autograd.grad(out, (q, k, v), dout)
            scale = 1.0 / math.sqrt(q.shape[-1])
            out, lse, _, rng = torch.ops.flash_attn.fwd(q, k, v, None, 0.0, scale, causal, -1, -1, 0.0, False, None)
            dq, dk, dv, _ = torch.ops.flash_attn.bwd(
                dout, q, k, v, out, lse, None, 0.0, scale, causal, -1, -1, 0.0, False, rng
            )
            return dq, dk, dv
        except NotBuilt:
            raise
        except Exception as e:  # noqa: BLE001
            translated = self._translate(e)
            if translated is e:
                raise
            raise translated from e


# -- the suite -----------------------------------------------------------------------------------


class Suite:
    def __init__(self, attn, built: set | None, device="cuda", seed: int = 0, head_dims=()):
        """built: units of the build info (None: assume every unit); head_dims: the build info's "head_dims"."""
        self.attn, self.built, self.device, self.head_dims = attn, built, device, tuple(head_dims)
        torch = _torch()
        self.gen = torch.Generator(device=device).manual_seed(seed)

    def missing(self, kind, dtype, d, causal, sq=2) -> str | None:
        if self.built is None:
            return None
        unit = needed_unit(kind, dtype, d, causal, self.head_dims, sq)
        if unit in self.built:
            return None
        k, dt, hd, c = unit
        return f"{k}_hdim{hd}_{dt}{'_causal' if c else ''} not in the kernel set"

    def _not_built(self, record, why):
        record.update(status="not built", detail=why)
        return record

    def _failed(self, record, e: BaseException):
        record.update(status="FAILED", detail=error_text(e))
        return record

    def forward_check(self, name, shape, dtype, causal=False, window=(-1, -1), softcap=0.0) -> dict:
        record = {"name": name, "dtype": dtype, "causal": causal}
        record.update({k: shape[k] for k in ("b", "sq", "sk", "h", "hk", "d")})
        if window != (-1, -1):
            record["window"] = list(window)
        if softcap:
            record["softcap"] = softcap
        why = self.missing("fwd", dtype, shape["d"], causal, shape["sq"])
        if why:
            return self._not_built(record, why)
        try:
            q, k, v = make_qkv(shape, dtype, self.device, generator=self.gen)
            try:
                out, lse = self.attn.forward(q, k, v, causal=causal, window=window, softcap=softcap)
            except NotBuilt as e:
                return self._not_built(record, str(e))
            ref, ref_lse = reference(q, k, v, causal, window, softcap)
            if tuple(out.shape) != tuple(ref.shape):
                raise ValueError(f"output shape {list(out.shape)}, expected {list(ref.shape)}")
            m = metrics(out, ref)
            record.update(m, status="passed" if passes(m, dtype) else "FAILED")
            if lse is not None:
                record["lse"] = {"shape": list(lse.shape), "finite": bool(_torch().isfinite(lse).all())}
                fin = _torch().isfinite(ref_lse)
                if tuple(lse.shape) != tuple(ref_lse.shape):
                    record["lse"]["max_abs_err"] = None  # the LSE probe fails on the shape
                elif fin.any():
                    record["lse"]["max_abs_err"] = float((lse.float()[fin] - ref_lse[fin]).abs().max())
                else:
                    record["lse"]["max_abs_err"] = 0.0
        except Exception as e:  # noqa: BLE001 - one case that raises is a failed case, not a lost report
            return self._failed(record, e)
        return record

    def accuracy(self) -> list[dict]:
        return [
            self.forward_check(
                f"{c['dtype']} {'causal' if c['causal'] else 'non-causal'} D={c['d']}", c, c["dtype"], c["causal"]
            )
            for c in ACCURACY_CASES
        ]

    def shapes(self) -> list[dict]:
        rows = []
        for s in SHAPES:
            for dtype in ("fp16", "bf16"):
                name = f"B={s['b']} Sq={s['sq']} Sk={s['sk']} H={s['h']}/{s['hk']} D={s['d']}"
                rows.append(self.forward_check(name, s, dtype, s["causal"]))
        return rows

    def backward(self) -> list[dict]:
        torch = _torch()
        rows = []
        for c in ACCURACY_CASES:
            name = f"{c['dtype']} {'causal' if c['causal'] else 'non-causal'} D={c['d']}"
            record = {"name": name, "dtype": c["dtype"], "causal": c["causal"], "d": c["d"]}
            why = self.missing("bwd", c["dtype"], c["d"], c["causal"]) or self.missing(
                "fwd", c["dtype"], c["d"], c["causal"]
            )
            if why:
                rows.append(self._not_built(record, why))
                continue
            try:
                q, k, v = make_qkv(c, c["dtype"], self.device, generator=self.gen)
                dout = torch.randn(q.shape, device=self.device, dtype=q.dtype, generator=self.gen)
                try:
                    got = self.attn.grads(q, k, v, dout, causal=c["causal"])
                except NotBuilt as e:
                    rows.append(self._not_built(record, str(e)))
                    continue
                qf, kf, vf = (t.detach().float().requires_grad_(True) for t in (q, k, v))
                ref = _reference_differentiable(qf, kf, vf, c["causal"])
                want = torch.autograd.grad(ref, (qf, kf, vf), dout.float())
                per = {n: metrics(g, w) for n, g, w in zip(("dq", "dk", "dv"), got, want, strict=True)}
            except Exception as e:  # noqa: BLE001 - reported as a failed case
                rows.append(self._failed(record, e))
                continue
            ok = all(passes(m, c["dtype"], backward=True) for m in per.values())
            record.update(
                finite=all(m["finite"] for m in per.values()),
                rel_linf=max(m["rel_linf"] for m in per.values()),
                cosine=min(m["cosine"] for m in per.values()),
                grads=per,
                status="passed" if ok else "FAILED",
            )
            rows.append(record)
        return rows

    def edges(self) -> list[dict]:
        torch = _torch()
        rows = []
        base = dict(EDGE_BASE)

        # LSE shape, finiteness and value
        r = self.forward_check("LSE shape and finiteness", base, "fp16")
        if r["status"] != "not built":
            lse = r.get("lse")
            ok = (
                lse is not None
                and lse["shape"] == [base["b"], base["h"], base["sq"]]
                and lse["finite"]
                and lse["max_abs_err"] is not None
                and lse["max_abs_err"] <= 1e-2
            )
            r["status"] = "passed" if ok and r["status"] == "passed" else "FAILED"
            r["detail"] = f"lse {lse}" if lse else r.get("detail") or "the API returned no LSE"
        rows.append(r)

        # determinism of two calls
        r = {"name": "determinism of two calls", "dtype": "fp16", **base}
        why = self.missing("fwd", "fp16", base["d"], True)
        if why:
            rows.append(self._not_built(r, why))
        else:
            try:
                q, k, v = make_qkv(base, "fp16", self.device, generator=self.gen)
                a, _ = self.attn.forward(q, k, v, causal=True)
                b, _ = self.attn.forward(q, k, v, causal=True)
                same = bool(torch.equal(a, b))
                r.update(status="passed" if same else "FAILED", detail="bitwise equal" if same else "outputs differ")
            except NotBuilt as e:
                self._not_built(r, str(e))
            except Exception as e:  # noqa: BLE001 - reported as a failed case
                self._failed(r, e)
            rows.append(r)

        rows.append(self.forward_check("S=1", {**base, "sq": 1, "sk": 1}, "fp16"))
        rows.append(self.forward_check("S=2", {**base, "sq": 2, "sk": 2}, "fp16", causal=True))
        rows.append(self.forward_check("H=1", {**base, "h": 1, "hk": 1}, "bf16"))
        rows.append(self.forward_check("D=256 bf16", {**base, "d": 256}, "bf16", causal=True))
        # Scaled scores of N(0,1) inputs are ~N(0,1): a cap of 0.5 bends most of them.
        rows.append(self.forward_check("softcap with causal", base, "bf16", causal=True, softcap=0.5))

        r = self.forward_check("window (0,0) equals V", base, "fp16", window=(0, 0))
        if r["status"] not in ("not built",):
            # out must equal v: each query sees only its own key, softmax of one score is 1.
            try:
                q, k, v = make_qkv(base, "fp16", self.device, generator=self.gen)
                out, _ = self.attn.forward(q, k, v, window=(0, 0))
                err = float((out.float() - v.float()).abs().max())
                r["max_abs_err_vs_v"] = err
                r["status"] = "passed" if err <= 1e-3 and r["status"] == "passed" else "FAILED"
            except NotBuilt as e:
                self._not_built(r, str(e))
            except Exception as e:  # noqa: BLE001 - reported as a failed case
                self._failed(r, e)
        rows.append(r)
        rows.append(
            self.forward_check(
                "window (128,128)", {**base, "sq": WINDOW_SEQ, "sk": WINDOW_SEQ}, "fp16", window=(128, 128)
            )
        )
        return rows

    def latency(self, warmup: int = WARMUP, timed: int = TIMED) -> list[dict]:
        torch = _torch()
        rows = []
        for s in LATENCY_SHAPES:
            shape = {"b": s["b"], "sq": s["s"], "sk": s["s"], "h": s["h"], "hk": s["h"], "d": s["d"]}
            name = f"{s['dtype']} B={s['b']} H={s['h']} S={s['s']} D={s['d']} {'causal' if s['causal'] else ''}"
            record = {"name": name.strip(), **s}
            why = self.missing("fwd", s["dtype"], s["d"], s["causal"]) or self.missing(
                "bwd", s["dtype"], s["d"], s["causal"]
            )
            if why:
                rows.append(self._not_built(record, why))
                continue
            flops = 4 * s["b"] * s["h"] * s["s"] * s["s"] * s["d"] / (2 if s["causal"] else 1)
            causal = s["causal"]
            try:
                q, k, v = make_qkv(shape, s["dtype"], self.device, generator=self.gen)
                dout = torch.randn_like(q)
                fwd = functools.partial(self.attn.forward, q, k, v, causal=causal)
                fwd_bwd = functools.partial(self.attn.grads, q, k, v, dout, causal=causal)
                sdpa = functools.partial(_sdpa_flash, *(t.transpose(1, 2) for t in (q, k, v)), causal=causal)
                record["fwd_ms"] = time_cuda(fwd, warmup, timed)
                record["fwd_bwd_ms"] = time_cuda(fwd_bwd, warmup, timed)
            except NotBuilt as e:
                rows.append(self._not_built(record, str(e)))
                continue
            except Exception as e:  # noqa: BLE001 - reported as a failed row
                rows.append(self._failed(record, e))
                continue
            try:
                record["sdpa_flash_fwd_ms"] = time_cuda(sdpa, warmup, timed)
            except Exception as e:  # noqa: BLE001 - the baseline is optional
                record["sdpa_flash_fwd_ms"] = None
                record["detail"] = f"SDPA flash backend unavailable: {e}".splitlines()[0]
            record["fwd_tflops"] = flops / (record["fwd_ms"] * 1e-3) / 1e12
            record["fwd_bwd_tflops"] = 3.5 * flops / (record["fwd_bwd_ms"] * 1e-3) / 1e12
            record["status"] = "measured"
            rows.append(record)
        return rows


def _sdpa_flash(q, k, v, causal):
    """torch SDPA restricted to its flash backend (PyTorch's copy of FlashAttention-2)."""
    torch = _torch()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)


def _reference_differentiable(q, k, v, causal):
    """fp32 reference output that autograd can differentiate (explicit softmax)."""
    torch = _torch()
    h, hk = q.shape[2], k.shape[2]
    qt = q.transpose(1, 2)
    kt = k.repeat_interleave(h // hk, dim=2).transpose(1, 2)
    vt = v.repeat_interleave(h // hk, dim=2).transpose(1, 2)
    scores = torch.matmul(qt, kt.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    mask = attention_mask(q.shape[1], k.shape[1], causal, (-1, -1), q.device)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), vt).transpose(1, 2)


def time_cuda(fn, warmup: int, timed: int) -> float:
    """Median milliseconds of one call: `warmup` untimed calls, then `timed` calls between CUDA events."""
    torch = _torch()
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(timed):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


# -- context -------------------------------------------------------------------------------------


def import_installed_flash_attn():
    """Import flash_attn; refuse a copy other than the installed distribution's (e.g. a checkout's).

    Run as a script, this folder (tools/) is sys.path[0]; a source checkout's flash_attn/ is found
    only through the working directory or PYTHONPATH, and would shadow the wheel under test.
    Raises RuntimeError naming both places (main() turns it into a setup error, exit status 2).
    An editable install (its files are not in the distribution's RECORD) is taken as it is.
    """
    module = importlib.import_module("flash_attn")
    try:
        dist = importlib.metadata.distribution("flash_attn")
    except importlib.metadata.PackageNotFoundError:
        return module  # nothing installed: whatever was imported is under test (require_ready checks it)
    init = next((f for f in dist.files or () if str(f).replace("\\", "/") == "flash_attn/__init__.py"), None)
    if init is not None:
        installed = Path(dist.locate_file(init)).resolve()
        imported = Path(module.__file__ or "").resolve()
        if imported != installed:
            raise RuntimeError(
                f"imported flash_attn from {imported.parent}, not the installed wheel's {installed.parent}; "
                "run from a folder without a flash_attn/ and with only src/ on PYTHONPATH "
                "(nox -s validate -- WHEEL does)"
            )
    return module


def read_build_info(module) -> dict:
    """The build info the package exposes, else build_info_*.json beside it (the smoke check's
    reader, release.ship.smoke_check.package_build_info). Raises RuntimeError when there is none."""
    return package_build_info(module)[0]


def _cmd(cmd: list[str]) -> str | None:
    if not shutil.which(cmd[0]):
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() or None


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def context(module, info: dict, device_index: int = 0, wheel: Path | None = None) -> dict:
    torch = _torch()
    props = torch.cuda.get_device_properties(device_index)
    try:
        version = importlib.metadata.version("flash_attn")
    except importlib.metadata.PackageNotFoundError:
        version = getattr(module, "__version__", None)
    ctx = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
        "gpu": props.name,
        "compute_capability": f"{props.major}.{props.minor}",
        "gpu_memory_gib": round(props.total_memory / 2**30, 1),
        "gpu_count": torch.cuda.device_count(),
        "driver": _cmd(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]),
        "cuda_runtime": torch.version.cuda,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "os": platform.platform(),
        "cpu": cpu_model(),
        "flash_attn": version,
        "flash_attn_path": os.path.dirname(module.__file__ or ""),
        "build": {k: info.get(k) for k in ("group", "archs", "sass", "ptx_arch", "cuda_version", "torch_version",
                                           "cxx11_abi", "kernel_set", "deltas", "fatbin_compression", "compilers")},
    }  # fmt: skip
    if ctx["driver"]:
        ctx["driver"] = ctx["driver"].splitlines()[device_index % len(ctx["driver"].splitlines())]
    if wheel is not None:
        ctx["wheel"] = wheel_record(Path(wheel))
    return ctx


def wheel_record(wheel: Path) -> dict:
    """The wheel a report is of, as the release checks it (release.ship.reports): its file name, its
    sha256 and its label (the local part of the version in its file name, the label of docs/release.md)."""
    try:
        h = hashlib.sha256(wheel.read_bytes()).hexdigest()
    except OSError as e:
        h = f"unreadable: {e}"
    version = wheel.name.split("-")[1] if wheel.name.count("-") >= 2 else ""
    return {"file": wheel.name, "sha256": h, "label": version.partition("+")[2]}


# -- report --------------------------------------------------------------------------------------


def _fmt(x, spec=".2e"):
    if x is None:
        return ""
    if isinstance(x, float):
        if math.isnan(x) or math.isinf(x):
            return str(x)
        return format(x, spec)
    return str(x)


SECTIONS = ("accuracy", "shapes", "backward", "edges", "latency")
# The schema the reports follow (src/release/ship/schemas/validation-report.v1.json, checked by nox -s release).
REPORT_SCHEMA = "validation-report/1"


def count(report: dict) -> dict:
    counts = {"passed": 0, "FAILED": 0, "not built": 0}
    for section in SECTIONS:  # latency rows count as FAILED when our kernel raised while timed
        for r in report.get(section, []):
            counts[r["status"]] = counts.get(r["status"], 0) + 1
    return counts


def render_markdown(report: dict) -> str:
    ctx, c = report["context"], count(report)
    lines = [f"# flash_attn {ctx.get('flash_attn')} validation on {ctx.get('gpu')} (sm_{ctx.get('sm')})", ""]
    verdict = "PASSED" if c["FAILED"] == 0 and c["passed"] > 0 else "FAILED"
    lines += [
        f"**{verdict}**: {c['passed']} passed, {c['FAILED']} failed, {c['not built']} not built "
        "(left out of the kernel set; not counted as passed).",
        "",
    ]
    if report.get("error"):
        lines += [f"**The suite could not run**: {report['error']}", ""]
    lines += ["## Context", "", "| | |", "|---|---|"]
    for key in ("date_utc", "gpu", "compute_capability", "gpu_memory_gib", "gpu_count", "driver", "cuda_runtime",
                "torch", "python", "os", "cpu", "flash_attn", "flash_attn_path"):  # fmt: skip
        lines.append(f"| {key} | {ctx.get(key)} |")
    for key, value in (ctx.get("build") or {}).items():
        lines.append(f"| build: {key} | {json.dumps(value) if isinstance(value, dict | list) else value} |")
    if ctx.get("wheel"):
        lines.append(f"| wheel | {ctx['wheel']['file']} (sha256 {ctx['wheel']['sha256']}) |")
    lines += ["", f"API under test: `{report.get('api')}`", ""]
    lines += [
        "Gates, vs torch SDPA in fp32 on the same inputs: forward fp16 rel_Linf <= "
        f"{GATES['fp16']:g}, bf16 <= {GATES['bf16']:g}, cosine >= {COSINE_MIN}; backward: finite, rel_Linf <= "
        f"{BWD_GATES['fp16']:g} (fp16) / {BWD_GATES['bf16']:g} (bf16), cosine >= {BWD_COSINE_MIN} per gradient.",
        "",
    ]
    titles = {
        "accuracy": "Accuracy: 8 cases (B=2, S=1024, H=8)",
        "shapes": "Accuracy: 10 shapes",
        "backward": "Backward (dq, dk, dv; worst of the three)",
        "edges": "Edge probes",
    }
    for section, title in titles.items():
        lines += [
            f"## {title}",
            "",
            "| case | dtype | causal | rel_Linf | cosine | status | detail |",
            "|---|---|---|---|---|---|---|",
        ]  # noqa: E501
        for r in report.get(section, []):
            lines.append(
                f"| {r['name']} | {r.get('dtype', '')} | {r.get('causal', '')} | {_fmt(r.get('rel_linf'))} | "
                f"{_fmt(r.get('cosine'), '.6f')} | {r['status']} | {r.get('detail', '')} |"
            )
        lines.append("")
    lines += [
        f"## Latency ({report.get('warmup', WARMUP)} warm-up + {report.get('timed', TIMED)} timed, CUDA events, "
        "median)",
        "",
        "FLOPs: forward 4·B·H·S²·D, halved for causal; fwd+bwd 3.5 × forward (upstream's benchmark convention; "
        "bench/latency.py defaults to 2.5 ×, see docs/benchmarks.md).",
        "",
        "| case | fwd ms | fwd TFLOP/s | fwd+bwd ms | fwd+bwd TFLOP/s | SDPA flash fwd ms | status |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in report.get("latency", []):
        lines.append(
            f"| {r['name']} | {_fmt(r.get('fwd_ms'), '.3f')} | {_fmt(r.get('fwd_tflops'), '.1f')} | "
            f"{_fmt(r.get('fwd_bwd_ms'), '.3f')} | {_fmt(r.get('fwd_bwd_tflops'), '.1f')} | "
            f"{_fmt(r.get('sdpa_flash_fwd_ms'), '.3f')} | {r['status']} {r.get('detail', '')} |"
        )
    lines.append("")
    return "\n".join(lines)


def report_stem(ctx: dict) -> str:
    sm = ctx.get("sm")
    return f"validation-{ctx.get('flash_attn') or 'unknown'}-sm{'unknown' if sm is None else sm}"


def run_suite(suite: Suite, latency: bool = True, warmup: int = WARMUP, timed: int = TIMED) -> dict:
    runs = {
        "accuracy": suite.accuracy,
        "shapes": suite.shapes,
        "backward": suite.backward,
        "edges": suite.edges,
        "latency": functools.partial(suite.latency, warmup, timed) if latency else list,
    }
    report = {}
    for section, run in runs.items():
        try:
            report[section] = run()
        except Exception as e:  # noqa: BLE001 - the sections before and after still run and are reported
            report[section] = [{"name": f"{section} (section aborted)", "status": "FAILED", "detail": error_text(e)}]
    report["warmup"], report["timed"] = warmup, timed
    return report


def strict_json(report: dict) -> str:
    """``report`` as strict JSON text (``json.loads`` with ``parse_constant`` raising accepts it).

    NaN and +/-inf become null, tuples lists, and a value json cannot write (a torch dtype, a path)
    its ``str``; a report holds plain numbers, so nothing else needs converting. The standard
    library's own round trip: written loosely (NaN tokens allowed), read back with every constant
    as None, written strictly. Raises TypeError for a dict key that is not a str, int, float, bool or
    None (the report's keys are str).
    """
    loose = json.dumps(report, default=str)
    finite = json.loads(loose, parse_constant=lambda _token: None)  # NaN, Infinity, -Infinity
    return json.dumps(finite, indent=1, allow_nan=False) + "\n"


def write_report(report: dict, out: Path) -> tuple[Path, Path]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    stem = report_stem(report["context"])
    jpath, mpath = out / f"{stem}.json", out / f"{stem}.md"
    json_text = strict_json(report)
    for path, text in ((jpath, json_text), (mpath, render_markdown(report))):
        tmp = path.with_name(f".{path.name}.partial")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    return jpath, mpath


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="tools/validate.py", description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, required=True, help="folder for validation-<version>-sm<NN>.json/.md")
    p.add_argument("--wheel", type=Path, help="the wheel file that was installed (recorded with its sha256)")
    p.add_argument("--device", type=int, default=0, help="CUDA device index")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-latency", dest="latency", action="store_false", help="skip the latency table")
    p.add_argument("--iters", type=int, nargs=2, default=(WARMUP, TIMED), metavar=("WARMUP", "TIMED"))
    args = p.parse_args(argv)
    ctx = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
        "python": platform.python_version(),
        "os": platform.platform(),
    }
    try:
        torch = _torch()
    except ImportError:
        return setup_error(args.out, ctx, "torch is not installed in this environment")
    ctx["torch"] = torch.__version__
    if not torch.cuda.is_available():
        return setup_error(args.out, ctx, "no CUDA device visible to torch; the validation suite needs a GPU")
    try:
        torch.cuda.set_device(args.device)
        module = import_installed_flash_attn()
        info = read_build_info(module)
        ctx = context(module, info, args.device, args.wheel)
        cc = torch.cuda.get_device_capability(args.device)
        ctx["sm"] = cc[0] * 10 + cc[1]
        # no library, another torch, a GPU the wheel does not cover: one setup error, not a FAILED per case
        require_ready = getattr(getattr(module, "_loader", None), "require_ready", None)
        if callable(require_ready):
            require_ready(args.device)
    except Exception as e:  # noqa: BLE001 - reported as a setup error
        return setup_error(args.out, ctx, f"cannot use the installed flash_attn: {type(e).__name__}: {e}")
    if args.wheel and ctx.get("flash_attn") and not args.wheel.name.startswith(f"flash_attn-{ctx['flash_attn']}-"):
        return setup_error(args.out, ctx, f"installed flash_attn {ctx['flash_attn']} is not {args.wheel.name}")
    suite = Suite(
        FlashAttn(module),
        built_units(info) or None,
        device=f"cuda:{args.device}",
        seed=args.seed,
        head_dims=info.get("head_dims", ()),
    )
    report = finish(run_suite(suite, args.latency, *args.iters), ctx, suite.attn.api)
    print(render_markdown(report))
    try:
        jpath, mpath = write_report(report, args.out)
    except OSError as e:
        print(f"error: cannot write the report into {args.out}: {e}", file=sys.stderr)
        return 2
    print(f"wrote {jpath}\nwrote {mpath}")
    return 0 if report["counts"]["FAILED"] == 0 and report["counts"]["passed"] > 0 else 1


def finish(report: dict, ctx: dict, api) -> dict:
    """The report as written: the sections of run_suite with the schema version, the context (the
    wheel's file, sha256 and label under ``wheel``), the API used and the counts of the rows."""
    report["report_schema"] = REPORT_SCHEMA
    report["context"], report["api"] = ctx, api
    report["counts"] = count(report)
    return report


def setup_error(out: Path, ctx: dict, message: str) -> int:
    """The suite cannot run: say why on stderr, write a report that says so too; exit status 2."""
    print(f"error: {message}", file=sys.stderr)
    report = finish({section: [] for section in SECTIONS}, ctx, None)
    report["error"] = message
    try:
        jpath, mpath = write_report(report, out)
        print(f"wrote {jpath}\nwrote {mpath}", file=sys.stderr)
    except OSError as e:
        print(f"error: cannot write the report into {out}: {e}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
