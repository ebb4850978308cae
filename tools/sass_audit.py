#!/usr/bin/env python3
"""SASS audit of the kernel deltas: which arch gets packed FMA (FFMA2) in the forward kernel.

Compiles one forward instantiation unit (hdim64, fp16, non-causal: every forward kernel variant
that run_mha_fwd_hdim64 launches) with nvcc directly, once per (arch, FLASH_ATTN_PACKED_FMA)
configuration, on a private copy of the upstream kernel sources with our deltas applied
(src/kernels/apply_deltas.py).  Then `cuobjdump --dump-sass` and counting, per forward kernel
function, of FFMA2 (packed fp32 FMA), scalar FFMA and MUFU.EX2.  Prints a Markdown table and
writes JSON.

    PYTHONPATH=src:src/kernels python tools/sass_audit.py [--tree <upstream root>] \
        [--configs sm_100:1,sm_100:0,sm_120:1,sm_120:0,sm_80:1] [--workdir build/sass_audit] \
        [--json build/sass_audit/sass_audit.json] [--markdown build/sass_audit/sass_audit.md]

Each compile takes minutes (about 4 on 2 cores) and up to ~4 GB; they run one at a time.  Object
files are cached in the work dir by a hash of sources + flags, so a re-run only prints.
cuobjdump/nvdisasm: from PATH, CUDA_HOME/bin, or the PyPI packages nvidia-cuda-cuobjdump and
nvidia-cuda-nvdisasm (`pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import apply_deltas  # src/kernels/: run as PYTHONPATH=src:src/kernels python tools/sass_audit.py

from release import manifest
from release.compile import upstream

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CONFIGS = "sm_100:1,sm_100:0,sm_120:1,sm_120:0,sm_80:1"

# The defines the build adds beyond flash_attn_host_flags(): FLASH_NAMESPACE (CMakeLists.txt, the
# upstream kernels' namespace macro) and NDEBUG (CMake's Release flags).
UNIT_DEFINES = ["-DFLASH_NAMESPACE=flash", "-DNDEBUG"]
NVCC = os.environ.get("NVCC") or shutil.which("nvcc") or "nvcc"

# Drives cmake/FlashAttnHostFlags.cmake so the audit compiles with the build's own nvcc flags.
HOST_FLAGS_SCRIPT = """\
cmake_minimum_required(VERSION 3.25)
include("{module}")
flash_attn_host_flags(COMPILER_ID GNU COMPILER_VERSION "${{COMPILER_VERSION}}" CUDA_VERSION "${{CUDA_VERSION}}"
  TORCH_VERSION "${{TORCH_VERSION}}" OUT_CXX_FLAGS cxx OUT_CUDA_FLAGS cuda OUT_CXX_STANDARD std)
message(STATUS "RESULT OUT_CUDA_FLAGS=${{cuda}}")
"""


def _version_of(cmd: list[str], pattern: str) -> str:
    """The first `pattern` group in the output of `cmd`; SystemExit naming the command when absent."""
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout
    except OSError as e:
        raise SystemExit(f"[sass_audit] cannot run {cmd[0]}: {e}") from None
    m = re.search(pattern, out)
    if not m:
        raise SystemExit(f"[sass_audit] no version in the output of {' '.join(cmd)}: {out.strip()[:200]}")
    return m.group(1)


def nvcc_flags(work: Path, nvcc: str) -> list[str]:
    """The nvcc flags of the build for this nvcc, torch and host g++ (cmake/FlashAttnHostFlags.cmake,
    run with ``cmake -P``), plus UNIT_DEFINES. SystemExit when cmake, nvcc or g++ is missing."""
    import torch

    cmake = shutil.which("cmake")
    if cmake is None:
        raise SystemExit(
            "[sass_audit] cmake is not on PATH; install it (the sessions' pin: tool_pins in build-manifest.json)"
        )
    script = work / "host_flags.cmake"
    script.write_text(HOST_FLAGS_SCRIPT.format(module=(REPO / "cmake" / "FlashAttnHostFlags.cmake").as_posix()))
    cuda = _version_of([nvcc, "--version"], r"release (\d+\.\d+)")
    gxx = _version_of([os.environ.get("CUDAHOSTCXX") or "g++", "-dumpfullversion"], r"(\d+(?:\.\d+)*)")
    cmd = [cmake, f"-DCOMPILER_VERSION={gxx}", f"-DCUDA_VERSION={cuda}", f"-DTORCH_VERSION={torch.__version__}"]
    proc = subprocess.run([*cmd, "-P", str(script)], capture_output=True, text=True, timeout=60)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("-- RESULT OUT_CUDA_FLAGS=")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"[sass_audit] flash_attn_host_flags failed:\n{proc.stderr or proc.stdout}")
    return lines[0].split("=", 1)[1].split(";") + UNIT_DEFINES


# Our own instantiation unit: the fp16, hdim64, non-causal forward entry point.
UNIT_SOURCE = """\
// Written by tools/sass_audit.py: one forward instantiation unit for the SASS audit.
#include "namespace_config.h"
#include "flash_fwd_launch_template.h"

namespace FLASH_NAMESPACE {
template <>
void run_mha_fwd_<cutlass::half_t, 64, /*Is_causal=*/false>(Flash_fwd_params &params, cudaStream_t stream) {
    run_mha_fwd_hdim64<cutlass::half_t, /*Is_causal=*/false>(params, stream);
}
}  // namespace FLASH_NAMESPACE
"""

# one SASS instruction line: /*0a40*/  [@!P0]  OPCODE.MODS operands ;
INSN = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)")
FUNC = re.compile(r"^\s*Function\s*:\s*(\S+)")


def find_tool(name: str) -> str | None:
    """A CUDA binary tool from PATH, CUDA_HOME/bin or a pip nvidia-cuda-* package."""
    found = shutil.which(name)
    if found:
        return found
    roots = [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"]
    try:
        import nvidia  # namespace package of the nvidia-* wheels

        roots += [
            str(Path(p) / sub) for p in nvidia.__path__ for sub in ("cu13", "cu12", "cuda_cuobjdump", "cuda_nvdisasm")
        ]
    except ImportError:
        pass
    for root in roots:
        if root and (Path(root) / "bin" / name).is_file():
            return str(Path(root) / "bin" / name)
    return None


def torch_includes() -> list[str]:
    import torch

    base = Path(torch.__file__).resolve().parent / "include"
    return [str(base), str(base / "torch" / "csrc" / "api" / "include")]


def prepare_tree(tree: Path, work: Path) -> Path:
    """Copy csrc/flash_attn/src into work/tree and apply our deltas there (the user's tree is untouched)."""
    src = tree / apply_deltas.KERNEL_DIR
    dst = work / "tree" / apply_deltas.KERNEL_DIR
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    for line in apply_deltas.apply(work / "tree"):
        print(f"[sass_audit] {line}", flush=True)
    (work / "unit_fwd_hdim64_fp16.cu").write_text(UNIT_SOURCE)
    return work / "tree"


def config_key(sources: Path, cutlass: Path, arch: str, packed: int, flags: list[str]) -> str:
    h = hashlib.sha256()
    for p in sorted((sources / apply_deltas.KERNEL_DIR).glob("*.h")):
        h.update(p.name.encode() + p.read_bytes())
    h.update(UNIT_SOURCE.encode())
    h.update(" ".join([*flags, arch, str(packed), str(cutlass)]).encode())
    return h.hexdigest()[:16]


def float_literal(value: str) -> str:
    """A threshold as the C++ float literal the build defines ("8" and "8.0" -> "8.0f"; "8.0f" stays),
    as flash_attn_delta_definitions (cmake/FlashAttnDeltas.cmake) writes it."""
    value = value.removesuffix("f")
    return (value if "." in value else value + ".0") + "f"


def compile_unit(
    work: Path, tree: Path, cutlass: Path, arch: str, packed: int, threshold: str, flags: list[str]
) -> tuple[Path, float]:
    """Compile the unit for `arch` with the build's nvcc `flags` (nvcc_flags) and the delta switches."""
    sm = arch.split("_")[1]
    extra = [f"-DFLASH_ATTN_PACKED_FMA={packed}", f"-DFLASH_ATTN_RESCALE_THRESHOLD={threshold}"]
    key = config_key(tree, cutlass, arch, packed, flags + extra)
    obj = work / f"fwd_hdim64_fp16_{arch}_packed{packed}_{key}.o"
    if obj.is_file():
        print(f"[sass_audit] {arch} packed={packed}: cached {obj.name}", flush=True)
        return obj, 0.0
    cmd = [
        NVCC,
        "-c",
        str(work / "unit_fwd_hdim64_fp16.cu"),
        "-o",
        str(obj) + ".tmp",
        f"-gencode=arch=compute_{sm},code=sm_{sm}",
        "-I",
        str(tree / apply_deltas.KERNEL_DIR),
        "-I",
        str(cutlass),
    ]
    for inc in torch_includes():
        cmd += ["-isystem", inc]
    cmd += flags + extra
    print(f"[sass_audit] {arch} packed={packed}: compiling ({' '.join(cmd)})", flush=True)
    t0 = time.time()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    dt = time.time() - t0
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-20000:])
        raise SystemExit(f"[sass_audit] nvcc failed for {arch} packed={packed} (exit {proc.returncode})")
    os.replace(str(obj) + ".tmp", obj)
    print(f"[sass_audit] {arch} packed={packed}: compiled in {dt:.0f} s", flush=True)
    return obj, dt


def dump_sass(obj: Path) -> str:
    cuobjdump = find_tool("cuobjdump")
    nvdisasm = find_tool("nvdisasm")
    if not cuobjdump or not nvdisasm:
        raise SystemExit(
            "[sass_audit] cuobjdump/nvdisasm not found: pip install nvidia-cuda-cuobjdump "
            "nvidia-cuda-nvdisasm (or put the CUDA toolkit's bin on PATH)"
        )
    env = dict(os.environ, PATH=str(Path(nvdisasm).parent) + os.pathsep + os.environ.get("PATH", ""))
    proc = subprocess.run([cuobjdump, "--dump-sass", str(obj)], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"[sass_audit] cuobjdump failed: {proc.stderr.strip()}")
    return proc.stdout


def count_sass(sass: str, function_filter: str = "flash_fwd_kernel") -> dict:
    """Per forward-kernel function counts of FFMA2, scalar FFMA and MUFU.EX2 (+ totals)."""
    per_func: dict[str, Counter] = {}
    current = None
    for line in sass.splitlines():
        m = FUNC.match(line)
        if m:
            current = m.group(1) if function_filter in m.group(1) else None
            if current is not None:
                per_func[current] = Counter()
            continue
        if current is None:
            continue
        m = INSN.match(line)
        if not m:
            continue
        op = m.group(1)
        base = op.split(".")[0]
        c = per_func[current]
        c["instructions"] += 1
        if base == "FFMA2":
            c["FFMA2"] += 1
        elif base == "FFMA":
            c["FFMA"] += 1
        elif op.startswith("MUFU.EX2"):
            c["MUFU.EX2"] += 1
        elif base in ("FMUL2", "FADD2"):
            c[base] += 1
    total = Counter()
    for c in per_func.values():
        total.update(c)
    keys = ["FFMA2", "FFMA", "MUFU.EX2", "FMUL2", "FADD2", "instructions"]
    return {
        "kernels": len(per_func),
        "total": {k: int(total.get(k, 0)) for k in keys},
        "per_kernel": {name: {k: int(c.get(k, 0)) for k in keys} for name, c in sorted(per_func.items())},
    }


def markdown(rows: list[dict]) -> str:
    out = [
        "| arch | FLASH_ATTN_PACKED_FMA | fwd kernels | FFMA2 (packed) | FFMA (scalar) | MUFU.EX2 | FFMA2 / MUFU.EX2 |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        t = r["counts"]["total"]
        ratio = t["FFMA2"] / t["MUFU.EX2"] if t["MUFU.EX2"] else 0.0
        out.append(
            f"| {r['arch']} | {r['packed']} | {r['counts']['kernels']} | {t['FFMA2']} | {t['FFMA']} | "
            f"{t['MUFU.EX2']} | {ratio:.2f} |"
        )
    return "\n".join(out)


def locate_tree(arg: str | None, work: Path) -> Path:
    """--tree, else $FLASH_ATTN_SOURCE_DIR, else the pinned sdist (as the build gets it) extracted into work/."""
    given = arg or os.environ.get("FLASH_ATTN_SOURCE_DIR")
    if given:
        if not (Path(given) / apply_deltas.KERNEL_DIR / "softmax.h").is_file():
            raise SystemExit(f"[sass_audit] {given} has no csrc/flash_attn/src/softmax.h: pass an upstream root")
        return Path(given)
    extracted = work / "upstream"
    found = sorted(extracted.glob("flash_attn-*/csrc/flash_attn/src/softmax.h"))
    if found:
        return found[0].parents[3]
    return upstream.extract_sdist(upstream.pinned_sdist(), extracted)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--tree",
        help="upstream root (csrc/flash_attn/src, csrc/cutlass); default $FLASH_ATTN_SOURCE_DIR, else the pinned sdist",
    )
    ap.add_argument("--cutlass", help="CUTLASS include dir (default <tree>/csrc/cutlass/include)")
    ap.add_argument("--configs", default=DEFAULT_CONFIGS, help=f"arch:packed list (default {DEFAULT_CONFIGS})")
    threshold = manifest.option_default("FLASH_ATTN_RESCALE_THRESHOLD")
    ap.add_argument(
        "--threshold",
        default=threshold,
        help=f"FLASH_ATTN_RESCALE_THRESHOLD for the build (default {threshold}, the manifest's)",
    )
    ap.add_argument("--workdir", default=str(REPO / "build" / "sass_audit"))
    ap.add_argument("--json", help="result JSON (default <workdir>/sass_audit.json)")
    ap.add_argument("--markdown", help="also write the table here")
    ap.add_argument("--keep-sass", action="store_true", help="write the full SASS dump next to each object")
    args = ap.parse_args(argv)
    args.threshold = float_literal(args.threshold)

    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    tree = locate_tree(args.tree, work)
    cutlass = Path(args.cutlass) if args.cutlass else tree / "csrc" / "cutlass" / "include"
    patched = prepare_tree(tree, work)
    json_path = Path(args.json) if args.json else work / "sass_audit.json"
    flags = nvcc_flags(work, NVCC)

    rows = []
    for item in args.configs.split(","):
        arch, packed = item.strip().split(":")
        obj, seconds = compile_unit(work, patched, cutlass, arch, int(packed), args.threshold, flags)
        sass = dump_sass(obj)
        if args.keep_sass:
            obj.with_suffix(".sass").write_text(sass)
        counts = count_sass(sass)
        if counts["kernels"] == 0:
            raise SystemExit(f"[sass_audit] no flash_fwd_kernel function in the SASS of {obj.name}")
        rows.append(
            {
                "arch": arch,
                "packed": int(packed),
                "threshold": args.threshold,
                "compile_seconds": round(seconds, 1),
                "object": obj.name,
                "counts": counts,
            }
        )
        # write after every config so a long run leaves partial results behind
        json_path.write_text(
            json.dumps({"unit": "fwd hdim64 fp16 non-causal", "nvcc_flags": flags, "results": rows}, indent=2)
        )
        print(f"[sass_audit] {arch} packed={packed}: {counts['total']}", flush=True)

    table = markdown(rows)
    print(table)
    if args.markdown:
        Path(args.markdown).write_text(table + "\n")
    print(f"[sass_audit] wrote {json_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
