"""Sharded build against the unsharded one, same kernel set, same machine (``bench/build.py --sharded``).

::

    python bench/build.py --out DIR --sharded NxM [--kernel-set dev] [--archs 90] [--sdist PATH]
                          [--only sharded|unsharded|both|report]

sharded    the N shard builds run at once, each ``python -m release.archive.archives build --shard K/N
           --jobs M`` in its own build root (DIR/sharded/root-K); then ``release.archive.archives gather``,
           then ``release.sessions.wheels --kernels <gathered> --no-smoke`` links the wheel (N*M jobs).
           Recorded: each shard's wall seconds, the shard phase (the slowest shard), the gather
           and the link, and each shard's predicted seconds from the cost model
           (``kernel_set.split_shards``, ``release.compile.compile_model.compile_wall_seconds`` on a share of the
           machine: M cores, 1/N of its memory) beside the measured ones (the model's error).
           The wheel is copied to DIR/wheel/ and its path printed.
unsharded  one ``release.sessions.wheels --no-smoke`` build of the same set with N*M jobs in DIR/unsharded/.
report     nothing is built.

Each part writes DIR/<part>.json when it ends (done or failed); DIR/build_sharded.json and .md are
then rewritten from whatever parts exist, so the device session can run the sharded part first
(its wheel is tested on the GPU) and the unsharded part later.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import bench_common as bc
import machine

from release.compile import compile_model

REPO = bc.REPO_ROOT
PARTS = ("sharded", "unsharded")
REPORT_NAME = "build_sharded"
WHEEL_DIR = "wheel"  # DIR/wheel/<the sharded part's wheel>
FAKE_ENV = "FLASH_ATTN_BENCH_SHARDED_FAKE"  # "1": every step is a stub that writes what the real one would


def parse_layout(text: str) -> tuple[int, int]:
    """``NxM`` (shards x jobs per shard, e.g. ``4x4``) -> (N, M); ValueError naming the input otherwise."""
    m = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", text or "")
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
        raise ValueError(f"'{text}' is not NxM with N, M >= 1 (shards x jobs per shard, e.g. 4x4)")
    return int(m.group(1)), int(m.group(2))


# -- commands ------------------------------------------------------------------------------------


def _common(kernel_set: str, archs: list[str], sdist: str | None) -> list[str]:
    args = ["--arch-group", "custom", "--cuda-archs", ",".join(archs), "--kernel-set", kernel_set]
    return args + (["--sdist", str(sdist)] if sdist else [])


def shard_command(python: str, k: int, n: int, jobs: int, kernel_set: str, archs, sdist, root: Path, out: Path):
    """The command of shard k of n: ``python -m release.archive.archives build --shard k/n --jobs M``."""
    return [python, "-m", "release.archive.archives", "build", *_common(kernel_set, archs, sdist),
            "--shard", f"{k}/{n}", "--jobs", str(jobs), "--build-root", str(root), "--out", str(out)]  # fmt: skip


def gather_command(python: str, shards: list[Path], out: Path) -> list[str]:
    """``python -m release.archive.archives gather SHARD... --out OUT``."""
    return [python, "-m", "release.archive.archives", "gather", *map(str, shards), "--out", str(out)]


def wheel_command(python: str, jobs: int, kernel_set: str, archs, sdist, root: Path, out: Path, kernels=None):
    """``python -m release.sessions.wheels ... --no-smoke`` (with ``--kernels`` only the binding compiles)."""
    cmd = [python, "-m", "release.sessions.wheels", *_common(kernel_set, archs, sdist), "--jobs", str(jobs),
           "--build-root", str(root), "--out", str(out), "--no-smoke"]  # fmt: skip
    return cmd + (["--kernels", str(kernels)] if kernels else [])


def child_env(env: dict | None = None) -> dict:
    """The environment of the release steps: this checkout's src/ first on PYTHONPATH."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "src"), env.get("PYTHONPATH", "")) if p)
    return env


def fake(cmd: list[str]) -> list[str]:
    """The stub of a release step (FAKE_ENV=1): writes the folder or wheel the real step would."""
    return [sys.executable, str(Path(__file__).resolve()), "--fake-step", json.dumps(cmd[2:])]


def _fake_step(argv: list[str]) -> int:
    """Stub of `python -m release.archive.archives build|gather` / `release.sessions.wheels`: the outputs, no
    compiler."""
    out = Path(argv[argv.index("--out") + 1])
    time.sleep(float(os.environ.get("FLASH_ATTN_BENCH_SHARDED_FAKE_S", "0.2")))
    if argv[0] == "release.archive.archives" and argv[1] == "build":
        k, n = argv[argv.index("--shard") + 1].split("/")
        (out / f"kernels-custom-fake-000000000000-shard{k}of{n}").mkdir(parents=True, exist_ok=True)
    elif argv[0] == "release.archive.archives":
        (out / "kernels-custom-fake-000000000000").mkdir(parents=True, exist_ok=True)
    else:
        out.mkdir(parents=True, exist_ok=True)
        (out / "flash_attn-2.8.3.post2+fake-cp39-abi3-linux_x86_64.whl").write_bytes(b"fake")
    print(f"fake {' '.join(argv)}")
    return 0


# -- the cost model ------------------------------------------------------------------------------


def predicted_shards(kernel_set: str, archs: list[str], n: int, jobs: int, memory_gib: float, speed: float = 1.0):
    """Predicted wall seconds of each of n shards (list of {shard, units, predicted_seconds}).

    The split is ``kernel_set.split_shards`` (what the shard builds compile); each shard's time is
    ``release.compile.compile_model.compile_wall_seconds`` of its units (``Unit.seconds`` x SASS targets x `speed`,
    1.0 = the reference host) plus, in shard 1, the dispatch (``release_plan.dispatch_seconds`` per
    SASS target, reference-host seconds like the units'), on a share
    of the machine: `jobs` cores and `memory_gib` / n.
    """
    ks = bc.kernel_set()
    units = ks.resolve(kernel_set)[1]
    sass = len(archs)
    share = compile_model.Runner(jobs, memory_gib / n, speed)
    dispatch = compile_model.dispatch_cpu_seconds(sass, share)
    rows = []
    for i, shard in enumerate(ks.split_shards(units, n), start=1):
        cpu = [compile_model.unit_cpu_seconds(u, sass, share) for u in shard]
        seconds = compile_model.compile_wall_seconds(cpu, [dispatch] if i == 1 else [], share, sass + 1)
        rows.append({"shard": i, "units": [u.name for u in shard], "predicted_seconds": round(seconds, 1)})
    return rows


def error_percent(predicted: float | None, measured: float | None) -> float | None:
    """100 x (predicted - measured) / measured; None when either is missing or measured is 0."""
    if predicted is None or not measured:
        return None
    return round(100.0 * (predicted - measured) / measured, 1)


# -- running -------------------------------------------------------------------------------------


def run_parallel(commands: dict[str, list[str]], logs: Path, env: dict) -> dict[str, dict]:
    """Start every command at once (stdout+stderr to logs/<name>.log); wait for all.

    Returns {name: {"rc", "seconds" (wall from the common start to its exit), "log"}}.
    """
    logs.mkdir(parents=True, exist_ok=True)
    procs = {}
    start = time.monotonic()
    for name, cmd in commands.items():
        log = logs / f"{name}.log"
        with open(log, "w", encoding="utf-8") as f:
            f.write("$ " + " ".join(cmd) + "\n")
            f.flush()
            procs[name] = (subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=REPO), log)
    results: dict[str, dict] = {}
    while len(results) < len(procs):
        for name, (p, log) in procs.items():
            if name not in results and p.poll() is not None:
                results[name] = {"rc": p.returncode, "seconds": round(time.monotonic() - start, 1), "log": str(log)}
                print(f"build_sharded: {name} exited {p.returncode} after {results[name]['seconds']} s", flush=True)
        time.sleep(0.05)
    return results


def run_one(name: str, cmd: list[str], logs: Path, env: dict) -> dict:
    """run_parallel of one command."""
    return run_parallel({name: cmd}, logs, env)[name]


def _summary(root: Path) -> dict | None:
    """The release build summary (flash_attn_build_summary.json) of the one build folder under root."""
    found = sorted(root.glob("*/flash_attn_build_summary.json"))
    if not found:
        return None
    s = json.loads(found[0].read_text(encoding="utf-8"))
    return {k: s.get(k) for k in ("wall_seconds", "units_compiled", "unit_cpu_seconds", "peak_rss_bytes")}


def _one_dir(parent: Path, pattern: str) -> Path | None:
    found = sorted(p for p in parent.glob(pattern) if p.is_dir() and not p.name.startswith("."))
    return found[-1] if found else None


def run_sharded(out: Path, n: int, m: int, kernel_set: str, archs: list[str], sdist, env: dict, wrap=None) -> dict:
    """The sharded part (module docstring); returns its record (state done or failed, with the failing step)."""
    wrap = wrap or (lambda c: c)
    py = sys.executable
    base = out / "sharded"
    shutil.rmtree(base, ignore_errors=True)
    archives, logs = base / "archives", base / "logs"
    rec: dict = {"part": "sharded", "shards": n, "jobs_per_shard": m, "kernel_set": kernel_set, "archs": archs}
    rec["machine"] = machine.collect()
    mem = _memory_gib()
    model = predicted_shards(kernel_set, archs, n, m, mem)
    cmds = {
        f"shard{k}": wrap(shard_command(py, k, n, m, kernel_set, archs, sdist, base / f"root-{k}", archives))
        for k in range(1, n + 1)
    }
    started = time.monotonic()
    res = run_parallel(cmds, logs, env)
    rec["shard_rows"] = []
    for row in model:
        r = res[f"shard{row['shard']}"]
        rec["shard_rows"].append(
            dict(
                row,
                measured_seconds=r["seconds"],
                rc=r["rc"],
                log=r["log"],
                error_percent=error_percent(row["predicted_seconds"], r["seconds"]),
                summary=_summary(base / f"root-{row['shard']}"),
            )
        )
    rec["shard_phase_seconds"] = round(time.monotonic() - started, 1)
    rec["predicted_shard_phase_seconds"] = max(r["predicted_seconds"] for r in model)
    failed = [k for k, r in res.items() if r["rc"] != 0]
    if failed:
        return dict(rec, state="failed", failed_step=failed[0], log_tail=bc.log_tail(res[failed[0]]["log"], 20))
    shard_dirs = sorted(p for p in archives.glob("kernels-*-shard*") if p.is_dir())
    g = run_one("gather", wrap(gather_command(py, shard_dirs, base / "gathered")), logs, env)
    rec["gather_seconds"] = g["seconds"]
    gathered = _one_dir(base / "gathered", "kernels-*")
    if g["rc"] != 0 or gathered is None:
        return dict(rec, state="failed", failed_step="gather", log_tail=bc.log_tail(g["log"], 20))
    link = wrap(wheel_command(py, n * m, kernel_set, archs, sdist, base / "link-root", base / "dist", gathered))
    lk = run_one("link", link, logs, env)
    rec["link_seconds"] = lk["seconds"]
    rec["link_summary"] = _summary(base / "link-root")
    wheels = sorted((base / "dist").glob("flash_attn-*.whl"))
    if lk["rc"] != 0 or not wheels:
        return dict(rec, state="failed", failed_step="link", log_tail=bc.log_tail(lk["log"], 20))
    dest = out / WHEEL_DIR
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    wheel = dest / wheels[0].name
    shutil.copyfile(wheels[0], wheel)
    rec["wheel"] = str(wheel)
    rec["wall_seconds"] = round(rec["shard_phase_seconds"] + rec["gather_seconds"] + rec["link_seconds"], 1)
    print(f"build_sharded: wheel {wheel}", flush=True)
    return dict(rec, state="done")


def run_unsharded(out: Path, n: int, m: int, kernel_set: str, archs: list[str], sdist, env: dict, wrap=None) -> dict:
    """The unsharded part: one release.sessions.wheels build of the set with n*m jobs in DIR/unsharded/."""
    wrap = wrap or (lambda c: c)
    base = out / "unsharded"
    shutil.rmtree(base, ignore_errors=True)
    cmd = wrap(wheel_command(sys.executable, n * m, kernel_set, archs, sdist, base / "root", base / "dist"))
    r = run_one("unsharded", cmd, base / "logs", env)
    share = compile_model.Runner(n * m, _memory_gib(), 1.0)
    units = bc.kernel_set().resolve(kernel_set)[1]
    sass = len(archs)
    other = [compile_model.DISPATCH_SECONDS * sass / compile_model.default_runner().speed_factor]
    predicted = compile_model.compile_wall_seconds(
        [compile_model.unit_cpu_seconds(u, sass, share) for u in units], other, share, sass + 1
    )
    rec = {"part": "unsharded", "jobs": n * m, "kernel_set": kernel_set, "archs": archs}
    rec.update(wall_seconds=r["seconds"], predicted_kernels_seconds=round(predicted, 1), log=r["log"])
    rec["kernels_summary"] = _summary(base / "root")
    if r["rc"] != 0 or not list((base / "dist").glob("flash_attn-*.whl")):
        return dict(rec, state="failed", failed_step="unsharded", log_tail=bc.log_tail(r["log"], 20))
    return dict(rec, state="done")


def _memory_gib() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        return 16.0


# -- the report ----------------------------------------------------------------------------------


def load_parts(out: Path) -> dict[str, dict]:
    """The part records present in `out` (DIR/sharded.json, DIR/unsharded.json)."""
    parts = {}
    for name in PARTS:
        f = out / f"{name}.json"
        if f.is_file():
            parts[name] = json.loads(f.read_text(encoding="utf-8"))
    return parts


def comparison(parts: dict[str, dict]) -> dict:
    """Sharded wall / unsharded wall, when both parts are done (None otherwise)."""
    s, u = parts.get("sharded", {}), parts.get("unsharded", {})
    ok = s.get("state") == "done" and u.get("state") == "done" and u.get("wall_seconds")
    return {
        "sharded_wall_seconds": s.get("wall_seconds"),
        "unsharded_wall_seconds": u.get("wall_seconds"),
        "ratio": round(s["wall_seconds"] / u["wall_seconds"], 3) if ok else None,
    }


def render_markdown(parts: dict[str, dict]) -> str:
    """The report: the two walls side by side, then the shard table with the model's error."""
    s, u = parts.get("sharded"), parts.get("unsharded")
    c = comparison(parts)
    lines = ["# Sharded against unsharded build", ""]
    ref = s or u or {}
    if ref:
        lines.append(f"Kernel set `{ref.get('kernel_set')}`, sm {', '.join(ref.get('archs') or [])}, one machine.")
        lines.append("")
    lines += ["| build | state | wall s |", "|---|---|---:|"]
    if s:
        lay = f"{s['shards']} shards x {s['jobs_per_shard']} jobs, gather, link"
        lines.append(f"| sharded ({lay}) | {s['state']} | {s.get('wall_seconds', '-')} |")
    if u:
        lines.append(f"| unsharded ({u['jobs']} jobs) | {u['state']} | {u.get('wall_seconds', '-')} |")
    lines.append("")
    lines.append(f"Ratio sharded / unsharded: {c['ratio'] if c['ratio'] is not None else 'n/a (a part is missing)'}")
    if s:
        lines += ["", "## Shards (cost model against measurement)", ""]
        lines += ["| shard | units | predicted s | measured s | error % | rc |", "|---:|---:|---:|---:|---:|---:|"]
        for r in s.get("shard_rows", []):
            err = "-" if r.get("error_percent") is None else r["error_percent"]
            lines.append(
                f"| {r['shard']} | {len(r['units'])} | {r['predicted_seconds']} | {r['measured_seconds']} | {err} | "
                f"{r['rc']} |"
            )
        phase = s.get("shard_phase_seconds")
        lines += [
            "",
            f"- shard phase (the slowest shard): {phase} s, predicted {s.get('predicted_shard_phase_seconds')} s "
            f"(error {error_percent(s.get('predicted_shard_phase_seconds'), phase)} %)",
            f"- gather: {s.get('gather_seconds', '-')} s; link (binding only, `--kernels`): "
            f"{s.get('link_seconds', '-')} s",
            f"- wheel: `{s.get('wheel', '-')}`",
        ]
    if u:
        lines.append(
            f"- unsharded: predicted kernels compile {u.get('predicted_kernels_seconds')} s (model, no binding)"
        )
    for p in (s, u):
        if p and p.get("state") != "done":
            lines += ["", f"{p['part']} failed at {p.get('failed_step')}:", "", "```", p.get("log_tail", ""), "```"]
    return "\n".join(lines) + "\n"


def write_report(out: Path) -> dict:
    """(Re)write DIR/build_sharded.json and .md from the parts present; returns the record."""
    parts = load_parts(out)
    record = {"parts": parts, "comparison": comparison(parts)}
    (out / f"{REPORT_NAME}.json").write_text(json.dumps(bc.json_safe(record), indent=1) + "\n", encoding="utf-8")
    (out / f"{REPORT_NAME}.md").write_text(render_markdown(parts), encoding="utf-8")
    return record


def main(out: Path, layout: str, only: str, kernel_set: str, archs: list[str], sdist) -> int:
    """Run the parts `only` asks for (sharded, unsharded, both, report), then rewrite the report.
    Returns 0 when every part run is done, 1 when one failed, 2 for a bad layout."""
    try:
        n, m = parse_layout(layout)
    except ValueError as e:
        print(f"build.py: --sharded: {e}", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    env = child_env()
    wrap = fake if os.environ.get(FAKE_ENV) == "1" else None
    todo = {"both": PARTS, "report": ()}.get(only, (only,))
    rc = 0
    for part in todo:
        run = run_sharded if part == "sharded" else run_unsharded
        rec = run(out, n, m, kernel_set, archs, sdist, env, wrap)
        (out / f"{part}.json").write_text(json.dumps(bc.json_safe(rec), indent=1) + "\n", encoding="utf-8")
        if rec["state"] != "done":
            print(
                f"build.py: the {part} part failed at {rec.get('failed_step')}; see {out / part}/logs", file=sys.stderr
            )
            rc = 1
    record = write_report(out)
    print(f"build.py: wrote {out / (REPORT_NAME + '.md')}; ratio {record['comparison']['ratio']}", flush=True)
    return rc


if __name__ == "__main__" and sys.argv[1:2] == ["--fake-step"]:
    sys.exit(_fake_step(json.loads(sys.argv[2])))
