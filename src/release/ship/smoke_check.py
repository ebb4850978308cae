"""Checks run *inside* the smoke-test virtual environment (stdlib + torch + the installed wheel).

Run by release/ship/smoke.py as ``<venv python> smoke_check.py --expect-version V --group G`` from
an empty working directory (so the source checkout's flash_attn/ can never be imported instead
of the installed one). Prints one JSON object ``{"checks": [...], "build_info": {...}}`` on its
last output line; exit status 1 when a check failed.

Public beyond that script: :func:`package_build_info`, the one reader of an installed package's
build info, which tools/validate.py imports as ``release.ship.smoke_check`` (stdlib only, like the
whole module, so importing it loads nothing else of the release package).
"""

from __future__ import annotations

import argparse
import glob
import importlib.metadata
import json
import os
import sys
import traceback

RESULTS: list[dict] = []
# The operators of docs/operators.md (flash_attn/_ops.py OPERATORS; repeated here: this script
# imports nothing of the package before its own checks do).
OPERATORS = ("fwd", "varlen_fwd", "bwd", "varlen_bwd", "fwd_kvcache", "build_info")
FOUND: dict = {}


def check(name):
    """Decorator: runs the decorated function at once and records ``{"check": name, "ok", "detail"}``
    in RESULTS (detail: its return value, or the exception's type and message, never raised)."""

    def wrap(fn):
        try:
            detail = fn()
            RESULTS.append({"check": name, "ok": True, "detail": detail})
        except Exception as e:  # noqa: BLE001 - every failure is a reported result
            RESULTS.append({"check": name, "ok": False, "detail": f"{type(e).__name__}: {e}"})
            traceback.print_exc()
        return fn

    return wrap


def package_build_info(pkg) -> tuple[dict, str]:
    """The build info of an imported flash_attn package ``pkg`` and where it came from.

    Returns (info, source): the first non-empty dict among ``pkg.build_info`` /
    ``get_build_info`` / ``BUILD_INFO`` (called when callable, parsed when a JSON str), source
    ``"flash_attn.<attr>"``; else the one ``build_info_*.json`` beside the package, source its
    file name. Raises RuntimeError when there is none or several such files.
    """
    for attr in ("build_info", "get_build_info", "BUILD_INFO"):
        value = getattr(pkg, attr, None)
        if callable(value):
            value = value()
        if isinstance(value, str):
            value = json.loads(value)
        if isinstance(value, dict) and value:
            return value, f"flash_attn.{attr}"
    files = glob.glob(os.path.join(os.path.dirname(pkg.__file__), "build_info_*.json"))
    if len(files) != 1:
        raise RuntimeError(f"expected one build_info_*.json beside the package, found {files}")
    with open(files[0], encoding="utf-8") as f:
        return json.load(f), os.path.basename(files[0])


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--expect-version", required=True)
    p.add_argument("--group", required=True)
    args = p.parse_args()

    @check("pip metadata reports the full version")
    def _():
        found = importlib.metadata.version("flash_attn")
        assert found == args.expect_version, f"importlib.metadata says {found}, expected {args.expect_version}"
        return found

    @check("import flash_attn (the installed package)")
    def _():
        import flash_attn as pkg

        if getattr(pkg, "__file__", None) is None:
            where = list(pkg.__path__)
            raise RuntimeError(f"flash_attn is a namespace package ({where}): the wheel has no __init__.py")
        here = os.path.realpath(os.path.dirname(pkg.__file__))
        prefix = os.path.realpath(sys.prefix)
        assert here.startswith(prefix), f"imported {here}, not from the virtual environment {prefix}"
        FOUND["pkg"] = pkg
        return here

    pkg = FOUND.get("pkg")
    if pkg is None:  # nothing else can be checked
        print(json.dumps({"checks": RESULTS, "build_info": None}))
        return 1

    @check("flash_attn.__version__")
    def _():
        version = getattr(pkg, "__version__", None)
        public = args.expect_version.split("+")[0]
        assert version in (args.expect_version, public), f"__version__ is {version!r}"
        return version

    @check("build info of the arch group")
    def _():
        info, source = package_build_info(pkg)
        FOUND["build_info"] = info
        assert info.get("group") == args.group, f"build info group {info.get('group')!r}, expected {args.group!r}"
        assert info.get("version") == args.expect_version.split("+")[0], f"build info version {info.get('version')}"
        return source

    @check("only this group's shared object is installed")
    def _():
        from flash_attn_wheel_names import native  # shipped beside flash_attn: the library name's rule

        here = os.path.dirname(pkg.__file__)
        libs = sorted(name for name in os.listdir(here) if native.library_group(name))
        assert len(libs) == 1 and native.library_group(libs[0]) == args.group, f"found {libs}"
        FOUND["library"] = os.path.join(here, libs[0])
        return libs[0]

    @check("native library loads and reports the same build info")
    def _():
        import torch

        ops = torch.ops.flash_attn
        if not hasattr(ops, "build_info"):
            torch.ops.load_library(FOUND["library"])
        compiled = json.loads(torch.ops.flash_attn.build_info())
        assert compiled == FOUND.get("build_info"), "torch.ops.flash_attn.build_info() differs from the build info file"
        return f"torch {torch.__version__}, CUDA available: {torch.cuda.is_available()}"

    @check("the operators are registered, with their fakes")
    def _():
        import torch

        from flash_attn import _loader

        _loader.require_library()  # loads the library (if not yet) and registers the fakes
        names = [name for name in OPERATORS if hasattr(torch.ops.flash_attn, name)]
        assert names == list(OPERATORS), f"missing: {sorted(set(OPERATORS) - set(names))}"
        return ", ".join(str(getattr(torch.ops.flash_attn, n).default._schema).split("(")[0] for n in names)

    @check("fake-tensor tracing of fwd and bwd (FakeTensorMode, CUDA fakes, no GPU needed)")
    def _():
        import torch
        from torch._subclasses.fake_tensor import FakeTensorMode

        ops = torch.ops.flash_attn
        with FakeTensorMode():
            q = torch.empty(2, 100, 8, 64, dtype=torch.float16, device="cuda")
            k = torch.empty(2, 300, 2, 64, dtype=torch.float16, device="cuda")
            out, lse, _, rng = ops.fwd.default(q, k, k, None, 0.1, 0.125, True, -1, -1, 0.0, False, None)
            dq, dk, dv, _ = ops.bwd.default(out, q, k, k, out, lse, None, 0.1, 0.125, True, -1, 0, 0.0, False, rng)
        assert out.shape == q.shape and lse.shape == (2, 8, 100) and tuple(rng.shape) == (2,)
        assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == k.shape
        return f"out {tuple(out.shape)}, lse {tuple(lse.shape)}, dk {tuple(dk.shape)}"

    @check("torch.compile(fullgraph=True) over the operators on meta inputs")
    def _():
        import torch

        def attend(q, k, v):
            return torch.ops.flash_attn.fwd.default(q, k, v, None, 0.0, 0.125, True, -1, -1, 0.0, False, None)[0]

        q = torch.empty(2, 100, 8, 64, dtype=torch.bfloat16, device="meta")
        k = torch.empty(2, 300, 2, 64, dtype=torch.bfloat16, device="meta")
        out = torch.compile(attend, backend="eager", fullgraph=True)(q, k, k)
        assert out.shape == q.shape and out.device.type == "meta"
        return f"out {tuple(out.shape)} on meta"

    @check("upstream's private API and flash_attn_2_cuda (fake-tensor trace, no GPU needed)")
    def _():
        import torch
        from torch._subclasses.fake_tensor import FakeTensorMode

        import flash_attn_2_cuda as extension
        from flash_attn import flash_attn_interface as api

        here = os.path.realpath(extension.__file__)
        assert here.startswith(os.path.realpath(sys.prefix)), f"imported {here}, not from the virtual environment"
        assert extension.fwd is api.flash_attn_gpu.fwd is api.flash_attn_cuda.fwd
        with FakeTensorMode():
            q = torch.empty(2, 100, 8, 64, dtype=torch.float16, device="cuda")
            out, lse, _, rng = api._wrapped_flash_attn_forward(q, q, q, 0.0, 0.125, True, -1, -1, 0.0, None, False)
            grads = torch.empty(3, 2, 100, 8, 64, dtype=torch.float16, device="cuda")
            d = api._wrapped_flash_attn_backward(out, q, q, q, out, lse, *grads, 0.0, 0.125, True, -1, -1, 0.0, None,
                                                 False, rng)  # fmt: skip
        assert out.shape == q.shape and d.shape == (2, 8, 128)
        return here

    print(json.dumps({"checks": RESULTS, "build_info": FOUND.get("build_info")}))
    return 0 if all(r["ok"] for r in RESULTS) else 1


if __name__ == "__main__":
    sys.exit(main())
