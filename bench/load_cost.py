"""Load cost: time from a fresh process to the first finished forward call, and library size (needs a GPU).

    python bench/load_cost.py --out DIR --build none=BUILD_DIR_1 --build size=BUILD_DIR_2 [--reps 7]

Meant for builds that differ only in ``FLASH_ATTN_FATBIN_COMPRESSION`` (none vs size), given as
LABEL=PATH (a CMake build directory, a ``_C_<group>.so``, an install folder or a wheel; see
bench/bench_common.py). For every repetition, and every build in turn (the order rotates per
repetition), the parent starts a fresh ``python load_cost.py --child`` and measures the time
until the child reports that its first ``flash_attn_func`` call finished (``ready_s``: process
start, interpreter, imports, library load, CUDA context, first launch with its lazy module load).
The child reports its own breakdown: ``import_torch_s``, ``import_flash_attn_s`` (finding,
checking and ``dlopen`` of the library, operator registration), ``cuda_init_s`` (CUDA context and
the random inputs), ``first_call_s`` (first forward + synchronize), ``second_call_s`` (the same
call again, for contrast). ``--warmup-runs`` (1) runs per build come first and are not counted, so
the medians are warm page cache figures; the first counted repetition is reported on its own too.

Sizes: the library file and its ``.nv_fatbin`` ELF section (the device code nvcc compressed or not).
Writes DIR/load_cost.json and DIR/load_cost.md. About 1-1.5 minutes on an H200 for two builds.
"""

from __future__ import annotations

import argparse
import json
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import bench_common as bc
import machine

MARK = "LOADCOST "  # the child's record (after the second call)
READY = "LOADCOST-READY"  # printed right after the first call finished
CHILD_METRICS = ("import_torch_s", "import_flash_attn_s", "cuda_init_s", "first_call_s", "second_call_s")


# -- ELF section sizes (stdlib only) -------------------------------------------------------------


def elf_section_sizes(path: Path) -> dict[str, int]:
    """{section name: size in bytes} of an ELF file (32/64-bit, either byte order); {} if not ELF."""
    with open(path, "rb") as fh:
        ident = fh.read(16)
        if len(ident) < 16 or ident[:4] != b"\x7fELF":
            return {}
        is64 = ident[4] == 2
        end = "<" if ident[5] == 1 else ">"
        if is64:
            hdr = fh.read(48)
            (shoff,) = struct.unpack_from(end + "Q", hdr, 24)
            shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", hdr, 42)
        else:
            hdr = fh.read(36)
            (shoff,) = struct.unpack_from(end + "I", hdr, 16)
            shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", hdr, 30)
        if shoff == 0 or shnum == 0:
            return {}
        fh.seek(shoff)
        table = fh.read(shentsize * shnum)
        sections = []
        for i in range(shnum):
            off = i * shentsize
            if is64:
                name, _type, _flags, _addr, offset, size = struct.unpack_from(end + "IIQQQQ", table, off)
            else:
                name, _type, _flags, _addr, offset, size = struct.unpack_from(end + "IIIIII", table, off)
            sections.append((name, offset, size))
        _, str_off, str_size = sections[shstrndx]
        fh.seek(str_off)
        strtab = fh.read(str_size)
    sizes = {}
    for name_off, _offset, size in sections:
        name = strtab[name_off : strtab.find(b"\0", name_off)].decode("ascii", errors="replace")
        if name:
            sizes[name] = sizes.get(name, 0) + size
    return sizes


# -- child ---------------------------------------------------------------------------------------


def _child(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    started_epoch = time.time()
    record: dict = {"started_epoch": started_epoch}
    try:
        import torch

        t1 = time.perf_counter()
        import flash_attn

        t2 = time.perf_counter()
        from flash_attn import _loader

        record["library"] = str(_loader.STATE.library) if _loader.STATE.library else None
        info = flash_attn.build_info() or {}
        record["fatbin_compression"] = info.get("fatbin_compression")
        record["kernel_set"] = info.get("kernel_set")
        dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
        dims = (args.batch, args.seqlen, args.heads, args.head_dim)
        q, k, v = (torch.randn(dims, device="cuda", dtype=dtype) for _ in range(3))
        torch.cuda.synchronize()
        t3 = time.perf_counter()
        flash_attn.flash_attn_func(q, k, v, causal=args.causal)
        torch.cuda.synchronize()
        t4 = time.perf_counter()
        print(READY, flush=True)  # the parent's clock stops here
        flash_attn.flash_attn_func(q, k, v, causal=args.causal)
        torch.cuda.synchronize()
        t5 = time.perf_counter()
        record.update(
            import_torch_s=t1 - t0,
            import_flash_attn_s=t2 - t1,
            cuda_init_s=t3 - t2,
            first_call_s=t4 - t3,
            second_call_s=t5 - t4,
            in_child_s=t4 - t0,
        )
    except Exception as exc:
        record["error"] = f"{type(exc).__name__}: {exc}"
    print(MARK + json.dumps(record), flush=True)
    return 0 if "error" not in record else 1


# -- parent --------------------------------------------------------------------------------------


def run_once(target: bc.BuildTarget, child_args: list[str], timeout_s: float) -> dict:
    """One fresh child for `target`; the parent's timings plus the child's breakdown."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", *child_args]
    with tempfile.TemporaryFile(mode="w+") as err:
        spawn_epoch = time.time()
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=target.env(), stdout=subprocess.PIPE, stderr=err, text=True)
        result: dict = {}
        ready = None
        timer = threading.Timer(timeout_s, proc.kill)  # a hung child must not hang the benchmark
        timer.start()
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                if line.startswith(READY) and ready is None:
                    ready = time.perf_counter() - t0
                elif line.startswith(MARK):
                    result = json.loads(line[len(MARK) :])
            proc.wait()
        finally:
            timed_out = not timer.is_alive() and proc.returncode not in (0, 1)
            timer.cancel()
        exited = time.perf_counter() - t0
        if timed_out and ready is None:
            result["error"] = f"child killed after {timeout_s:.0f} s"
        err.seek(0)
        stderr_tail = err.read()[-2000:]
    run = {"ready_s": ready, "exit_s": exited, "returncode": proc.returncode}
    if "started_epoch" in result:
        run["python_start_s"] = max(0.0, result.pop("started_epoch") - spawn_epoch)
    run.update(result)
    if not result and "error" not in run:
        run["error"] = f"child printed no result (exit {proc.returncode})"
    elif ready is None and "error" not in run:
        run["error"] = "child never finished a first call"
    if "error" in run:
        run["stderr_tail"] = stderr_tail
    return run


def summarise_runs(runs: list[dict]) -> dict:
    """Median (and min/max) of every timing over the runs without error."""
    ok = [r for r in runs if "error" not in r and r.get("ready_s") is not None]
    out: dict = {"runs_ok": len(ok), "runs_failed": len(runs) - len(ok)}
    for key in ("ready_s", "python_start_s", *CHILD_METRICS, "exit_s"):
        values = [r[key] for r in ok if r.get(key) is not None]
        if values:
            out[key] = bc.summarize(values, digits=4)
    return out


def library_sizes(target: bc.BuildTarget) -> dict:
    if not target.library or not Path(target.library).is_file():
        return {"library": target.library, "bytes": None}
    lib = Path(target.library)
    sections = elf_section_sizes(lib)
    info = bc.read_build_info_near(str(lib)) or {}
    sizes = {
        "library": str(lib),
        "bytes": lib.stat().st_size,
        "nv_fatbin_bytes": sections.get(".nv_fatbin"),
        "fatbin_compression": info.get("fatbin_compression"),
        "kernel_set": info.get("kernel_set"),
    }
    if target.kind == "wheel" and target.source:
        sizes["wheel_bytes"] = Path(target.source).stat().st_size
    return sizes


def render_markdown(record: dict) -> str:
    parts = ["# flash_attn load cost\n\n", machine.markdown(record["machine"]), "\n"]
    s = record["shape"]
    parts.append(
        f"First call: flash_attn_func, {s['dtype']}, B={s['batch']} S={s['seqlen']} H={s['heads']} "
        f"D={s['head_dim']}, causal={s['causal']}. {record['reps']} counted repetitions per build after "
        f"{record['warmup_runs']} discarded; medians in seconds. `ready` is measured by the parent from "
        "spawning the child to the child's report after the first forward call finished.\n\n"
    )
    headers = [
        "build",
        "compression",
        ".so MiB",
        ".nv_fatbin MiB",
        "ready",
        "ready (first rep)",
        "python start",
        "import torch",
        "import flash_attn",
        "CUDA init",
        "first call",
        "second call",
    ]
    body = []
    for b in record["builds"]:
        sm = b["summary"]
        sz = b["sizes"]

        def med(key, sm=sm):
            return bc.fmt(sm[key]["median"], 3) if key in sm else "-"

        first = next((r.get("ready_s") for r in b["runs"] if "error" not in r), None)
        body.append(
            [
                b["label"],
                sz.get("fatbin_compression") or "?",
                bc.fmt(sz["bytes"] / 2**20 if sz.get("bytes") else None, 1),
                bc.fmt(sz["nv_fatbin_bytes"] / 2**20 if sz.get("nv_fatbin_bytes") else None, 1),
                med("ready_s"),
                bc.fmt(first, 3),
                med("python_start_s"),
                med("import_torch_s"),
                med("import_flash_attn_s"),
                med("cuda_init_s"),
                med("first_call_s"),
                med("second_call_s"),
            ]
        )
    parts.append(bc.md_table(headers, body, "ll" + "r" * (len(headers) - 2)))
    if len(record["builds"]) >= 2:
        base = record["builds"][0]
        parts.append(f"\nRelative to `{base['label']}`:\n\n")
        for b in record["builds"][1:]:
            items = []
            if b["sizes"].get("bytes") and base["sizes"].get("bytes"):
                items.append(f".so size {b['sizes']['bytes'] / base['sizes']['bytes']:.2f}x")
            for key in ("ready_s", "import_flash_attn_s", "first_call_s"):
                if key in b["summary"] and key in base["summary"]:
                    d = b["summary"][key]["median"] - base["summary"][key]["median"]
                    items.append(f"{key[:-2]} {d * 1000:+.0f} ms")
            parts.append(f"- `{b['label']}`: " + ", ".join(items) + "\n")
    errors = [(b["label"], r) for b in record["builds"] for r in b["runs"] + b["warmup"] if "error" in r]
    if errors:
        parts.append("\n## Errors\n\n")
        for label, r in errors[:10]:
            parts.append(f"- `{label}`: {r['error']}\n")
    parts.append(f"\nTotal run time {record['wall_s']:.0f} s.\n")
    return "".join(parts)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = bc.script_parser(__doc__)
    bc.add_out_and_builds(
        p,
        "result folder (load_cost.json, load_cost.md)",
        "a build: CMake build dir, _C_<group>.so, install folder or .whl; repeatable "
        "(e.g. none=build/none size=build/size)",
    )
    p.add_argument("--reps", type=int, default=7, help="counted repetitions per build (default 7)")
    p.add_argument("--warmup-runs", type=int, default=1, help="discarded runs per build first (default 1)")
    p.add_argument("--timeout-s", type=float, default=300)
    p.add_argument("--dtype", choices=["fp16", "bf16"], default="fp16")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seqlen", type=int, default=1024)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--causal", action="store_true")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if not args.child and args.out is None:
        p.error("--out is required")
    if args.reps < 1:
        p.error("--reps must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    if args.child:
        return _child(args)
    started = time.perf_counter()
    out = bc.result_dir(args.out)
    scratch = out / "load_cost_work" / "wheels"
    targets = bc.targets_or_not_run(args.build, scratch, out, "load_cost", "flash_attn load cost", "load_cost.py")
    if targets is None:
        return 2
    child_args = [
        "--dtype",
        args.dtype,
        "--batch",
        str(args.batch),
        "--seqlen",
        str(args.seqlen),
        "--heads",
        str(args.heads),
        "--head-dim",
        str(args.head_dim),
    ] + (["--causal"] if args.causal else [])
    by_label = {t.label: t for t in targets}
    runs: dict[str, list[dict]] = {t.label: [] for t in targets}
    warm: dict[str, list[dict]] = {t.label: [] for t in targets}
    labels = list(by_label)
    for i in range(args.warmup_runs):
        for label in bc.rotation(labels, i):
            warm[label].append(run_once(by_label[label], child_args, args.timeout_s))
    for rep in range(args.reps):
        for label in bc.rotation(labels, rep):
            r = run_once(by_label[label], child_args, args.timeout_s)
            r["rep"] = rep
            runs[label].append(r)
            print(
                f"load_cost.py: rep {rep + 1}/{args.reps} {label}: ready {bc.fmt(r.get('ready_s'), 3)} s"
                + (f" ERROR {r['error']}" if "error" in r else ""),
                file=sys.stderr,
                flush=True,
            )
    builds = [
        {
            **by_label[label].as_dict(),
            "sizes": library_sizes(by_label[label]),
            "summary": summarise_runs(runs[label]),
            "runs": runs[label],
            "warmup": warm[label],
        }
        for label in labels
    ]
    record = {
        "benchmark": "load_cost",
        "machine": machine.collect(),
        "shape": {
            "dtype": args.dtype,
            "batch": args.batch,
            "seqlen": args.seqlen,
            "heads": args.heads,
            "head_dim": args.head_dim,
            "causal": args.causal,
        },
        "reps": args.reps,
        "warmup_runs": args.warmup_runs,
        "conventions": {
            "ready_s": "parent: spawn of a fresh interpreter -> child reports its first forward call finished",
            "python_start_s": "child's first line (epoch) - parent's spawn (epoch)",
            "statistics": "median over counted repetitions; warm-up runs discarded; build order rotates per rep",
        },
        "builds": builds,
        "wall_s": round(time.perf_counter() - started, 1),
    }
    bc.write_and_announce(out, "load_cost", record, render_markdown(record), "load_cost.py")
    return 0 if all(b["summary"]["runs_failed"] == 0 for b in builds) else 1


if __name__ == "__main__":
    sys.exit(main())
