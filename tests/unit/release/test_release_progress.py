"""Ninja progress parsing, ETA, .ninja_log analysis and the summary (release.compile.progress)."""

from __future__ import annotations

import pytest

from kernels import kernel_set as ks
from release.compile import progress

OBJ = "CMakeFiles/flash_attn_native.dir/kernels/units/{}.cu.o"
SAMPLE_OUTPUT = """\
-- flash_attn: 1 parallel compile jobs (set by FLASH_ATTN_JOBS)
-- Build files have been written to: /b
[1/6] Building CUDA object CMakeFiles/flash_attn_native.dir/kernels/units/bwd_hdim128_fp16.cu.o
/b/upstream/csrc/cutlass/include/cute/arch/mma_sm90.hpp(42): warning #1234-D: deprecated
[2/6] Building CUDA object CMakeFiles/flash_attn_native.dir/kernels/units/fwd_hdim64_fp16.cu.o
[3/6] Building CXX object CMakeFiles/flash_attn_native.dir/src/binding/params.cpp.o
[4/6] Building CUDA object CMakeFiles/flash_attn_native.dir/kernels/dispatch.cu.o
[5/6] Building CUDA object CMakeFiles/flash_attn_native.dir/kernels/units/fwd_hdim128_fp16.cu.o
[6/6] Linking CUDA shared module _C_legacy.so
"""


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def test_parses_ninja_lines_and_units():
    clock = Clock()
    p = progress.BuildProgress(units=["bwd_hdim128_fp16", "fwd_hdim128_fp16", "fwd_hdim64_fp16"], clock=clock)
    fed = [p.feed(line) for line in SAMPLE_OUTPUT.splitlines()]
    assert fed == [False, False, True, False, True, True, True, True, True]
    assert (p.edges_done, p.edges_total) == (6, 6)
    assert p.units_done == ["bwd_hdim128_fp16", "fwd_hdim64_fp16", "fwd_hdim128_fp16"]
    assert p.other_edges_done == 3
    assert p.units_total == 3


def test_eta_is_cost_weighted():
    clock = Clock()
    units = ["bwd_hdim128_fp16", "fwd_hdim64_fp16", "fwd_hdim64_bf16"]
    p = progress.BuildProgress(units=units, clock=clock)
    assert p.eta() is None and "estimating" in p.status()
    clock.t += 100.0
    p.feed("[1/5] Building CUDA object " + OBJ.format("fwd_hdim64_fp16"))
    # seconds per cost unit from the one finished fwd hdim64 unit; left: bwd hdim128 + fwd hdim64
    # + 2 other edges (OTHER_EDGE_COST each)
    cost = {u: ks.parse_unit(u).cost for u in units}
    per_cost = 100.0 / cost["fwd_hdim64_fp16"]
    expected = per_cost * (cost["bwd_hdim128_fp16"] + cost["fwd_hdim64_bf16"] + 2 * progress.OTHER_EDGE_COST)
    assert cost["bwd_hdim128_fp16"] > cost["fwd_hdim64_fp16"]  # weighted, not a plain unit count
    assert p.eta() == pytest.approx(expected)
    status = p.status()
    assert status.startswith("kernel units 1/3, edges 1/5, elapsed 1:40, ETA ")
    assert status.endswith("| fwd_hdim64_fp16")


def test_eta_on_incremental_build_uses_ninja_total():
    clock = Clock()
    p = progress.BuildProgress(units=["fwd_hdim64_fp16", "fwd_hdim64_bf16", "fwd_hdim128_fp16"], clock=clock)
    clock.t += 10.0
    p.feed("[1/2] Building CUDA object " + OBJ.format("fwd_hdim64_fp16"))
    # only one edge left: at most one unit remains (the mean of the two left), not two
    cost = {u: ks.parse_unit(u).cost for u in ("fwd_hdim64_fp16", "fwd_hdim64_bf16", "fwd_hdim128_fp16")}
    avg = (cost["fwd_hdim64_bf16"] + cost["fwd_hdim128_fp16"]) / 2
    assert p.eta() == pytest.approx(10.0 / cost["fwd_hdim64_fp16"] * avg)


def test_eta_before_the_first_unit_uses_the_other_edges():
    clock = Clock()
    p = progress.BuildProgress(units=["fwd_hdim64_fp16"], clock=clock)
    clock.t += 30.0
    p.feed("[1/3] Building CXX object CMakeFiles/flash_attn_native.dir/src/binding/fwd.cpp.o")
    # 30 s for one other edge; left: one unit and one other edge
    unit_cost = ks.parse_unit("fwd_hdim64_fp16").cost
    assert p.eta() == pytest.approx(30.0 * (unit_cost + progress.OTHER_EDGE_COST) / progress.OTHER_EDGE_COST)


def test_verbose_command_lines_are_recognised():
    p = progress.BuildProgress(units=[])
    p.feed("[1/3] /usr/local/cuda/bin/nvcc -c /b/kernels/units/fwd_split_hdim96_bf16_causal.cu -o x.o")
    assert p.units_done == ["fwd_split_hdim96_bf16_causal"]


def test_units_of_build_dir(tmp_path):
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "units.txt").write_text(
        "/b/kernels/units/bwd_hdim64_fp16.cu\n/b/kernels/units/fwd_split_hdim64_fp16_align.cu\n"
    )
    assert progress.units_of_build_dir(tmp_path) == ["bwd_hdim64_fp16", "fwd_split_hdim64_fp16_align"]
    assert progress.units_of_build_dir(tmp_path / "none") == []
    assert progress.unit_cost("fwd_split_hdim64_fp16_align") == progress.unit_cost("fwd_split_hdim64_fp16")


NINJA_LOG = """# ninja log v7
0\t224000\t1\tCMakeFiles/flash_attn_native.dir/kernels/units/fwd_hdim64_fp16.cu.o\taa
10\t317000\t1\tCMakeFiles/flash_attn_native.dir/kernels/units/bwd_hdim256_bf16.cu.o\tbb
20\t31000\t1\tCMakeFiles/flash_attn_native.dir/src/binding/fwd.cpp.o\tcc
317000\t318500\t1\t_C_legacy.so\tdd
"""


def test_read_ninja_log_and_summary(tmp_path):
    log = tmp_path / ".ninja_log"
    log.write_text(NINJA_LOG)
    entries = progress.read_ninja_log(log)
    assert len(entries) == 4
    s = progress.summary(entries, 330.0, 4 * 2**30, {"total .so": 3 * 2**20}, slowest=1)
    assert s["units_compiled"] == 2
    assert s["slowest_units"] == [{"unit": "bwd_hdim256_bf16", "seconds": 317.0}]
    assert s["unit_cpu_seconds"] == 541.0
    text = progress.render_summary(s)
    assert "kernel units compiled" in text and "bwd_hdim256_bf16" in text and "4096.0 MiB" in text
    assert "5:30" in text and "3.0 MiB" in text


def test_parse_ninja_log_lines_keeps_order_and_repeats_and_skips_junk():
    text = NINJA_LOG + "garbage\nx\t1\t2\tbad.o\th\n\n0\t5000\t2\t_C_legacy.so\tee \n"
    entries = progress.parse_ninja_log_lines(text)
    assert [e.output.rsplit("/", 1)[-1] for e in entries] == [
        "fwd_hdim64_fp16.cu.o", "bwd_hdim256_bf16.cu.o", "fwd.cpp.o", "_C_legacy.so", "_C_legacy.so"
    ]  # fmt: skip
    assert (entries[-1].start_ms, entries[-1].end_ms, entries[-1].cmd_hash) == (0, 5000, "ee")
    seen = frozenset(NINJA_LOG.splitlines())
    assert [e.end_ms for e in progress.parse_ninja_log_lines(text, seen)] == [5000]


def test_read_ninja_log_after_snapshot_keeps_last_entry(tmp_path):
    log = tmp_path / ".ninja_log"
    log.write_text(NINJA_LOG)
    before = progress.ninja_log_lines(tmp_path)
    with open(log, "a") as f:  # a second build: only the binding recompiled, twice (last wins)
        f.write("0\t5000\t2\tCMakeFiles/flash_attn_native.dir/src/binding/fwd.cpp.o\tee\n")
        f.write("0\t6000\t3\tCMakeFiles/flash_attn_native.dir/src/binding/fwd.cpp.o\tff\n")
    entries = progress.read_ninja_log(log, before)
    assert [(e.output, e.seconds) for e in entries] == [("CMakeFiles/flash_attn_native.dir/src/binding/fwd.cpp.o", 6.0)]
    s = progress.summary(entries, 12.0)
    assert s["units_compiled"] == 0
    assert "0 (nothing to do)" in progress.render_summary(s)
    assert progress.read_ninja_log(tmp_path / "missing") == []


def test_recompacted_log_with_no_work_reports_nothing_compiled(tmp_path):
    # Ninja rewrote the log (last line per output, header again, shorter file) and had no work:
    # the previous build's unit must not be reported as compiled now.
    log = tmp_path / ".ninja_log"
    log.write_text(NINJA_LOG + "5\t9000\t4\tCMakeFiles/flash_attn_native.dir/src/binding/fwd.cpp.o\tzz\n")
    before = progress.ninja_log_lines(tmp_path)
    compacted = [ln for ln in NINJA_LOG.splitlines() if "binding/fwd" not in ln]
    compacted.append("5\t9000\t4\tCMakeFiles/flash_attn_native.dir/src/binding/fwd.cpp.o\tzz")
    log.write_text("\n".join(compacted) + "\n")
    assert log.stat().st_size < len(NINJA_LOG) + 60  # shorter than before: an offset would be wrong
    s = progress.summary(progress.read_ninja_log(log, before), 28.0)
    assert s["units_compiled"] == 0 and s["edges_run"] == 0
    assert "0 (nothing to do)" in progress.render_summary(s)


def test_group_by_arch():
    files = [("_C_legacy.1.sm_80.cubin", 100), ("_C_legacy.2.sm_80.cubin", 50), ("_C_legacy.3.sm_90.cubin", 70),
             ("_C_legacy.4.sm_90.ptx", 30), ("_C_blackwell.1.sm_100f.cubin", 5)]  # fmt: skip
    assert progress.group_by_arch(files) == {
        "compute_90 (PTX)": 30,
        "sm_100f": 5,
        "sm_80": 150,
        "sm_90": 70,
    }


def test_arch_sizes_without_cuobjdump(tmp_path, monkeypatch):
    lib = tmp_path / "_C_legacy.so"
    lib.write_bytes(b"x" * 1234)
    monkeypatch.setattr(progress, "find_cuobjdump", lambda nvcc=None: None)
    assert progress.arch_sizes(lib) == {"total .so": 1234}


@pytest.mark.parametrize(("s", "text"), [(5, "0:05"), (65, "1:05"), (3725, "1:02:05"), (None, "?")])
def test_format_seconds(s, text):
    assert progress.format_seconds(s) == text


def test_status_names_what_finished():
    p = progress.BuildProgress(units=[])
    p.feed("[0/2] Re-checking globbed directories...")
    assert p.status().endswith("| Re-checking globbed directories...")
    p.feed("[1/2] Building CXX object CMakeFiles/flash_attn_native.dir/src/binding/params.cpp.o")
    assert p.status().endswith("| params.cpp.o")
