"""The compile timeline: .ninja_log entries as a Chrome trace (release.compile.progress.chrome_trace / write_trace)."""

from __future__ import annotations

import json
import os

import pytest
from test_release_flow import fake_python  # noqa: F401  (a fixture)

from release.compile import builder, progress

UNIT = "CMakeFiles/flash_attn_kernels.dir/kernels/units/{}.cu.o"


def entry(start_s: float, end_s: float, output: str) -> progress.LogEntry:
    return progress.LogEntry(int(start_s * 1000), int(end_s * 1000), output)


def slices(trace: dict) -> list[dict]:
    return [e for e in trace["traceEvents"] if e["ph"] == "X"]


def test_one_complete_event_per_edge_in_microseconds():
    entries = [entry(0, 224, UNIT.format("fwd_hdim64_fp16")), entry(224, 225.5, "_C_legacy.so")]
    trace = progress.chrome_trace(entries)
    got = slices(trace)
    assert [(s["name"], s["cat"], s["ts"], s["dur"]) for s in got] == [
        ("fwd_hdim64_fp16", "unit", 0, 224_000_000),
        ("_C_legacy.so", "edge", 224_000_000, 1_500_000),
    ]
    assert got[0]["args"] == {"output": UNIT.format("fwd_hdim64_fp16"), "seconds": 224.0}
    assert trace["displayTimeUnit"] == "ms"


def test_concurrent_compiles_get_lanes_that_never_overlap():
    entries = [
        entry(0, 300, UNIT.format("bwd_hdim128_fp16")),
        entry(0, 100, UNIT.format("fwd_hdim64_fp16")),
        entry(100, 200, UNIT.format("fwd_hdim64_bf16")),  # reuses the lane the first forward freed
        entry(150, 250, "CMakeFiles/flash_attn_native.dir/src/binding/fwd.cpp.o"),  # needs a third lane
        entry(300, 301, "_C_legacy.so"),
    ]
    got = slices(progress.chrome_trace(entries))
    by_lane: dict[int, list[dict]] = {}
    for s in got:
        by_lane.setdefault(s["tid"], []).append(s)
    for lane in by_lane.values():
        lane.sort(key=lambda s: s["ts"])
        for a, b in zip(lane, lane[1:], strict=False):
            assert a["ts"] + a["dur"] <= b["ts"], f"{a['name']} and {b['name']} overlap in lane {a['tid']}"
    assert len(by_lane) == 3  # the peak parallelism of these edges
    lanes = {s["name"]: s["tid"] for s in got}
    assert lanes["fwd_hdim64_bf16"] == lanes["fwd_hdim64_fp16"]
    assert lanes["fwd.cpp.o"] not in (lanes["bwd_hdim128_fp16"], lanes["fwd_hdim64_bf16"])


def test_an_empty_build_gives_a_trace_without_slices(tmp_path):
    path = progress.write_trace(tmp_path, [])
    doc = json.loads(path.read_text())
    assert path.name == progress.TRACE_NAME and slices(doc) == [] and doc["otherData"]["lanes"] == 0


@pytest.mark.skipif(os.name == "nt", reason="uses a POSIX shell script as the fake interpreter")
def test_run_build_writes_the_trace_beside_the_log(tmp_path, fake_python):  # noqa: F811 (the imported fixture)
    exe = fake_python  # test_release_flow's fake interpreter (a fake build that writes a .ninja_log)
    bdir = tmp_path / "build" / "key"
    builder.run_build(bdir, {"FLASH_ATTN_JOBS": "1"}, tmp_path / "raw", python=exe)
    trace = json.loads((bdir / progress.TRACE_NAME).read_text())
    assert (bdir / builder.LOG_NAME).is_file()
    assert sorted(s["name"] for s in slices(trace) if s["cat"] == "unit") == ["bwd_hdim64_fp16", "fwd_hdim64_fp16"]
