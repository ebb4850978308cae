"""Per-unit compile seconds of a sharded build, from its shards' .ninja_log files, as the manifest's
``unit_costs.measured_seconds`` and as the release plan's per-shard prediction beside the measurement.

::

    python lab/unit_costs.py --ninja-log shard1.txt [--ninja-log shard2.txt ...] [--sharded sharded.json]
                             [--archs 90] [--memory-gib 128] [--json OUT.json]

Reads each log with release.compile.progress's ninja-log reader (the last line of an output wins) and
takes the kernel units' edges (``kernels/units/<unit>.cu``): one compile per unit for the build's
single arch. ``measured_seconds`` keys are the manifest's (``<kind>_hdim<D>[_causal]``, the mean of
fp16 and bf16, seconds per arch). With ``--sharded`` (bench/build_sharded.py's record of the shards'
units, predictions and measured wall seconds), each shard's predicted wall time is shown twice beside
the measurement: as the build predicted it (the manifest's unit costs then) and recalibrated, by
``bench/build_sharded.predicted_shards`` (the plan's model on that share of the machine) over a copy of
the manifest whose ``measured_seconds`` are the measured ones. Exit 2 on bad input (no unit edges, a
unit measured in one dtype only).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from flash_attn_wheel_names import manifest_file  # noqa: E402
from kernels import kernel_set as kernel_sets  # noqa: E402
from release.compile import progress  # noqa: E402


def unit_seconds(logs: list[Path]) -> dict[str, float]:
    """Unit name -> compile seconds (the unit's last edge in its log); ValueError if a unit appears
    in two logs (shards never share a unit) or no log holds a unit edge."""
    seconds: dict[str, float] = {}
    for log in logs:
        for entry in progress.read_ninja_log(log):
            unit = progress.unit_of(entry.output)
            if unit is None:
                continue
            if unit in seconds:
                raise ValueError(f"unit {unit} is in two logs ({log}): pass each shard's log once")
            seconds[unit] = entry.seconds
    if not seconds:
        raise ValueError("no kernel unit edge (kernels/units/<unit>.cu) in the logs given")
    return seconds


def cost_key(unit: str) -> str:
    """``fwd_split_hdim64_bf16_causal`` -> ``fwd_split_hdim64_causal`` (the manifest's key)."""
    u = kernel_sets.parse_unit(unit)
    return f"{u.kind}_hdim{u.head_dim}" + ("_causal" if u.causal else "")


def measured_seconds(per_unit: dict[str, float]) -> dict[str, float]:
    """The manifest's ``measured_seconds``: per key, the mean of its units (fp16 and bf16), 0.1 s."""
    groups: dict[str, list[float]] = {}
    for unit, s in per_unit.items():
        groups.setdefault(cost_key(unit), []).append(s)
    dtypes = len(kernel_sets.DTYPES)
    short = sorted(k for k, v in groups.items() if len(v) != dtypes)
    if short:
        raise ValueError(f"keys measured in fewer than {dtypes} dtypes: {', '.join(short)}")
    return {k: round(sum(v) / len(v), 1) for k, v in sorted(groups.items(), key=lambda kv: _key_order(kv[0]))}


def _key_order(key: str) -> tuple:
    kind, dim = re.fullmatch(r"(.+)_hdim(\d+)(?:_causal)?", key).groups()
    return (kind, int(dim), key.endswith("_causal"))


def predicted(manifest: Path, kernel_set: str, archs: list[str], shards: int, jobs: int, memory_gib: float) -> list:
    """bench/build_sharded.predicted_shards under ``FLASH_ATTN_MANIFEST=manifest`` (a subprocess: the
    readers load the manifest once, at import)."""
    code = (
        "import json, sys; sys.path[:0] = [sys.argv[1] + '/bench', sys.argv[1] + '/src']; import build_sharded as b; "
        "print(json.dumps(b.predicted_shards(sys.argv[2], sys.argv[3].split(','), int(sys.argv[4]), int(sys.argv[5]), "
        "float(sys.argv[6]))))"
    )
    env = {**os.environ, manifest_file.ENV: str(manifest)}
    args = [str(REPO), kernel_set, ",".join(archs), str(shards), str(jobs), str(memory_gib)]
    out = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def with_costs(manifest: dict, costs: dict[str, float], source: str) -> dict:
    """A copy of `manifest` whose unit_costs.measured_seconds take `costs` (keys not measured keep
    their value) and whose measured_source is `source`."""
    doc = json.loads(json.dumps(manifest))
    doc["unit_costs"]["measured_seconds"].update(costs)
    doc["unit_costs"]["measured_source"] = source
    return doc


def shard_table(
    record: dict, manifest_path: Path, costs: dict[str, float], archs: list[str], memory_gib: float
) -> list[dict]:
    """One row per measured shard: units, measured s, predicted s as the build predicted it and recalibrated."""
    rows_in = record["shard_rows"]
    with tempfile.TemporaryDirectory() as tmp:
        recal = Path(tmp) / "manifest.json"
        doc = with_costs(json.loads(manifest_path.read_text(encoding="utf-8")), costs, "recalibration")
        recal.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        after = predicted(
            recal, record["kernel_set"], archs, int(record["shards"]), int(record["jobs_per_shard"]), memory_gib
        )
    rows = []
    for s, a in zip(rows_in, after, strict=True):
        measured = s.get("measured_seconds")
        rows.append(
            {
                "shard": s["shard"],
                "units": len(s["units"]),
                "measured_seconds": measured,
                "predicted_before": s["predicted_seconds"],
                "predicted_after": a["predicted_seconds"],
                "error_after_percent": round(100 * (a["predicted_seconds"] - measured) / measured, 1)
                if measured
                else None,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ninja-log", action="append", type=Path, required=True, help="a shard's .ninja_log (repeat)")
    ap.add_argument("--sharded", type=Path, help="bench/build_sharded.py's sharded.json of the same build")
    ap.add_argument("--archs", default="90", help="the build's SMs, comma-separated (default 90)")
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--memory-gib", type=float, default=128.0, help="the build machine's memory (default 128)")
    args = ap.parse_args(argv)
    try:
        per_unit = unit_seconds(args.ninja_log)
        costs = measured_seconds(per_unit)
    except (ValueError, kernel_sets.KernelSetError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    archs = [a.strip() for a in args.archs.split(",") if a.strip()]
    result = {"units": dict(sorted(per_unit.items())), "measured_seconds": costs}
    print(f"{len(per_unit)} units, {sum(per_unit.values()):.0f} compile seconds in all")
    print("| key | seconds (mean of fp16, bf16) |\n|---|---:|")
    for k, v in costs.items():
        print(f"| {k} | {v} |")
    manifest_path = manifest_file.path(REPO)
    if args.sharded:
        record = json.loads(args.sharded.read_text(encoding="utf-8"))
        rows = shard_table(record, manifest_path, costs, archs, args.memory_gib)
        result["shards"] = rows
        print("\n| shard | units | measured s | predicted s (manifest before) | predicted s (recalibrated) | error % |")
        print("|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            print(
                f"| {r['shard']} | {r['units']} | {r['measured_seconds']} | {r['predicted_before']} | "
                f"{r['predicted_after']} | {r['error_after_percent']} |"
            )
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
