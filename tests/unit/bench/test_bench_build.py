"""bench/build.py on CPU: .ninja_log parsing, unit-name mapping, critical path and lower bound,
the measuring launcher, and the report from synthetic results (no compiler is run)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import bench_build as bb
import bench_common as bc
import measure_launcher as ml
import pytest

LOG_V5 = textwrap.dedent("""\
    # ninja log v5
    5\t300\t0\tCMakeFiles/flash_attn_native.dir/src/binding/ops.cpp.o\tccc
    0\t900\t0\tCMakeFiles/flash_attn_native.dir/kernels/units/fwd_hdim64_fp16.cu.o\tbbb
    0\t1200\t0\tCMakeFiles/flash_attn_native.dir/kernels/units/bwd_hdim128_fp16.cu.o\taaa
    1200\t1500\t0\t_C_custom.so\tddd
    """)


# -- .ninja_log --------------------------------------------------------------------------------------


def test_parse_ninja_log_one_build():
    edges = bb.last_build(LOG_V5)
    assert [e.name.rsplit("/", 1)[-1] for e in edges] == [
        "ops.cpp.o",
        "fwd_hdim64_fp16.cu.o",
        "bwd_hdim128_fp16.cu.o",
        "_C_custom.so",
    ]
    assert {e.name.rsplit("/", 1)[-1]: e.seconds for e in edges}["bwd_hdim128_fp16.cu.o"] == pytest.approx(1.2)
    assert edges[-1].start_ms == 1200 and edges[-1].end_ms == 1500


def test_parse_ninja_log_splits_builds_and_keeps_last_of_repeated_output():
    text = LOG_V5 + "0\t50\t0\ta.o\teee\n10\t70\t0\tb.o\tfff\n10\t80\t0\tb.o\tggg\n"
    builds = bb.parse_ninja_log(text)
    assert len(builds) == 2  # the end time went from 1500 back to 50: a second ninja run
    assert len(builds[0]) == 4
    second = {e.name: e for e in builds[1]}
    assert set(second) == {"a.o", "b.o"}
    assert second["b.o"].end_ms == 80 and second["b.o"].cmd_hash == "ggg"
    assert bb.last_build(text) == builds[1]


def test_parse_ninja_log_v7_joins_outputs_of_one_edge_and_skips_junk():
    text = (
        "# ninja log v7\n"
        "0\t400\t1795976285434449112\tgen.h\tfed7\n"
        "0\t400\t1795976285434449112\tgen.cpp\tfed7\n"
        "garbage line\n"
        "x\t1\t2\tbad.o\th\n"
        "400\t900\t1795976285758064930\tlib.so\t3d58\n"
    )
    edges = bb.last_build(text)
    assert len(edges) == 2
    assert set(edges[0].outputs) == {"gen.h", "gen.cpp"}
    assert edges[1].outputs == ("lib.so",)
    assert bb.parse_ninja_log("") == [] and bb.last_build("# ninja log v5\n") == []


# -- unit names -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "unit"),
    [
        ("build/temp.linux-x86_64-cpython-312/csrc/flash_attn/src/flash_fwd_hdim64_fp16_sm80.o", "fwd_hdim64_fp16"),
        ("/abs/flash_bwd_hdim128_bf16_causal_sm80.o", "bwd_hdim128_bf16_causal"),
        ("flash_fwd_split_hdim256_fp16_causal_sm80.o", "fwd_split_hdim256_fp16_causal"),
        ("flash_fwd_split_hdim32_bf16_sm90.o", "fwd_split_hdim32_bf16"),
        ("C:\\b\\flash_fwd_hdim96_bf16_sm80.obj", "fwd_hdim96_bf16"),
        ("csrc/flash_attn/flash_api.o", None),
        ("flash_fwd_hdim48_fp16_sm80.o", None),  # not a head dim upstream instantiates
        ("flash_fwd_hdim64_fp32_sm80.o", None),
    ],
)
def test_upstream_unit_of(obj, unit):
    assert bb.upstream_unit_of(obj) == unit


@pytest.mark.parametrize(
    ("obj", "unit"),
    [
        ("CMakeFiles/flash_attn_native.dir/kernels/units/fwd_hdim64_fp16.cu.o", "fwd_hdim64_fp16"),
        ("CMakeFiles/flash_attn_native.dir/kernels/units/bwd_hdim128_bf16_causal.cu.o", "bwd_hdim128_bf16_causal"),
        ("CMakeFiles/x.dir/kernels/units/fwd_split_hdim64_fp16_align.cu.o", "fwd_split_hdim64_fp16"),
        ("CMakeFiles/flash_attn_native.dir/kernels/dispatch.cu.o", None),
        ("CMakeFiles/flash_attn_native.dir/src/binding/ops.cpp.o", None),
        ("_C_custom.so", None),
        ("kernels/units/fwd_hdim100_fp16.cu.o", None),
    ],
)
def test_our_unit_of(obj, unit):
    assert bb.our_unit_of(obj) == unit


def test_every_release_unit_round_trips_through_upstream_object_names():
    ks = bc.kernel_set()
    _, units = ks.resolve("release")
    names = {bb.upstream_object_name(u.name) for u in units}
    assert len(names) == 72
    assert "flash_fwd_split_hdim64_fp16_causal_sm80.o" in names
    for u in units:
        assert bb.upstream_unit_of(bb.upstream_object_name(u.name)) == u.name


def test_upstream_object_names_match_the_sdist_sources(upstream_tree):
    tree = upstream_tree / "csrc" / "flash_attn" / "src"
    objects = {p.stem + ".o" for p in tree.glob("flash_*_sm80.cu")}
    assert len(objects) == 72
    assert {bb.upstream_unit_of(o) for o in objects} == {u.name for u in bc.kernel_set().resolve("release")[1]}


# -- arithmetic -------------------------------------------------------------------------------------


def test_lower_bound():
    assert bb.lower_bound([300, 100, 100, 100], jobs=16) == 300  # longest unit dominates
    assert bb.lower_bound([100] * 32, jobs=16) == 200  # total work / jobs dominates
    assert bb.lower_bound([10, 20], jobs=1) == 30
    assert bb.lower_bound([], jobs=4) == 0.0
    with pytest.raises(ValueError):
        bb.lower_bound([1.0], jobs=0)


def test_simulate_schedule_in_given_order():
    # Heaviest last on 2 slots: 1,1 then 4 -> 5; heaviest first: 4 | 1,1 -> 4.
    assert bb.simulate_schedule([1, 1, 4], jobs=2) == 5
    assert bb.simulate_schedule([4, 1, 1], jobs=2) == 4
    assert bb.simulate_schedule([3, 3, 3], jobs=1) == 9
    assert bb.simulate_schedule([], jobs=3) == 0.0


def test_critical_path_follows_the_longest_chain():
    durations = {"gen.h": 0.3, "a.o": 0.3, "b.o": 0.6, "lib.so": 0.2, "unrelated.o": 0.7}
    deps = {"a.o": {"gen.h"}, "b.o": {"gen.h", "not-an-edge.cu"}, "lib.so": {"a.o", "b.o"}}
    seconds, chain = bb.critical_path(durations, deps)
    assert seconds == pytest.approx(1.1)
    assert chain == ["gen.h", "b.o", "lib.so"]
    assert bb.critical_path({}, {}) == (0.0, [])
    with pytest.raises(ValueError, match="cycle"):
        bb.critical_path({"x": 1.0, "y": 1.0}, {"x": {"y"}, "y": {"x"}})


def test_fallback_deps_and_analyse():
    edges = bb.last_build(LOG_V5)
    deps = bb.fallback_deps(edges, bb.our_unit_of)
    assert deps == {"_C_custom.so": {e.name for e in edges if e.name.endswith(".o")}}
    rows = bb.edge_records(edges, Path("/b"), {}, bb.our_unit_of)
    a = bb.analyse(edges, rows, jobs=2, deps=None, unit_of=bb.our_unit_of)
    assert a["sum_compile_s"] == pytest.approx(2.4)  # 1.2 + 0.9 + 0.295, rounded to 0.1
    assert a["longest_compile_s"] == pytest.approx(1.2)
    assert a["lower_bound_s"] == pytest.approx(1.2)  # max(1.2, 2.395 / 2)
    assert a["critical_path_s"] == pytest.approx(1.5)
    assert a["critical_path"][-1] == "_C_custom.so"
    assert a["units"] == 2 and a["ninja_span_s"] == pytest.approx(1.5)
    assert bb.per_unit_seconds(rows) == {"bwd_hdim128_fp16": 1.2, "fwd_hdim64_fp16": 0.9}


def test_parse_ninja_query():
    text = textwrap.dedent("""\
        lib.so:
          input: link
            a.o
            sub/b.cu.o
            | implicit.dep
          outputs:
        a.o:
          input: cc
            a.c
            || order
          outputs:
            lib.so
        a.c:
          outputs:
            a.o
        """)
    graph = bb.parse_ninja_query(text)
    assert graph == {"lib.so": {"a.o", "sub/b.cu.o", "implicit.dep"}, "a.o": {"a.c", "order"}, "a.c": set()}


@pytest.mark.skipif(shutil.which("ninja") is None, reason="ninja not installed")
def test_real_ninja_build_log_and_dependency_graph(tmp_path):
    (tmp_path / "build.ninja").write_text(
        textwrap.dedent(f"""\
        rule cc
          command = {sys.executable} -c "import time; time.sleep(0.3)" && touch $out
        rule slow
          command = {sys.executable} -c "import time; time.sleep(0.8)" && touch $out
        build gen.h: cc
        build order: phony gen.h
        build a.o: cc a.c || order
        build sub/b_hdim.cu.o: slow b.c || order
        build lib.so: cc a.o sub/b_hdim.cu.o
        """)
    )
    (tmp_path / "a.c").touch()
    (tmp_path / "b.c").touch()
    (tmp_path / "sub").mkdir()
    subprocess.run(["ninja", "-C", str(tmp_path), "-j", "4"], check=True, capture_output=True)
    edges = bb.last_build((tmp_path / ".ninja_log").read_text())
    assert {e.name for e in edges} == {"gen.h", "a.o", "sub/b_hdim.cu.o", "lib.so"}
    deps = bb.ninja_deps(tmp_path, edges)
    assert deps["a.o"] == {"gen.h"}  # through the phony order-only target
    assert deps["lib.so"] == {"a.o", "sub/b_hdim.cu.o"}
    seconds, chain = bb.critical_path({e.name: e.seconds for e in edges}, deps)
    assert chain == ["gen.h", "sub/b_hdim.cu.o", "lib.so"]
    assert seconds >= 0.3 + 0.8 + 0.3 - 0.05


def test_build_ninja_objects(tmp_path):
    path = tmp_path / "build.ninja"
    path.write_text(
        textwrap.dedent("""\
        ninja_required_version = 1.3
        rule cuda_compile
          command = $nvcc -c $in -o $out
        build /t/csrc/flash_attn/flash_api.o: compile /s/csrc/flash_attn/flash_api.cpp
        build /t/csrc/flash_attn/src/flash_fwd_hdim64_fp16_sm80.o: cuda_compile /s/flash_fwd_hdim64_fp16_sm80.cu
        build /my$ dir/flash_bwd_hdim128_bf16_causal_sm80.o: cuda_compile /s/x.cu
        """)
    )
    objs = bb._build_ninja_objects(path)
    assert objs == [
        "/t/csrc/flash_attn/flash_api.o",
        "/t/csrc/flash_attn/src/flash_fwd_hdim64_fp16_sm80.o",
        "/my dir/flash_bwd_hdim128_bf16_causal_sm80.o",
    ]
    assert [bb.upstream_unit_of(o) for o in objs] == [None, "fwd_hdim64_fp16", "bwd_hdim128_bf16_causal"]


def test_archs_and_pin():
    assert bb.normalise_archs("90") == ["90"]
    assert bb.normalise_archs("80;90") == bb.normalise_archs("sm_80, sm_90") == ["80", "90"]
    with pytest.raises(ValueError):
        bb.normalise_archs("nine")
    assert bb.torch_arch_list(["80", "90"]) == "8.0;9.0"
    assert bb.torch_arch_list(["100a", "120"]) == "10.0a;12.0"
    version, sha = bb.upstream_pin()
    assert version == "2.8.3.post2"
    assert sha == "d0f9f0b08a986cdeadbffcf5ec8b3a8f514366c68ad1853d3ab061bc83cc340b"
    with pytest.raises(RuntimeError):
        bb.upstream_pin("nothing here")


# -- the launcher -----------------------------------------------------------------------------------


def test_launcher_argument_split_and_output():
    assert ml.split_argv(["--log", "f.jsonl", "nvcc", "-c", "x.cu"]) == ("f.jsonl", ["nvcc", "-c", "x.cu"])
    assert ml.split_argv(["--log=f", "--", "c++", "-o", "y.o"]) == ("f", ["c++", "-o", "y.o"])
    assert ml.output_of(["nvcc", "-c", "a.cu", "-o", "CMakeFiles/a.cu.o"]) == "CMakeFiles/a.cu.o"
    assert ml.output_of(["gcc", "-oout.o", "a.c"]) == "out.o"
    assert ml.output_of(["nvcc", "--output-file=z.o"]) == "z.o"
    assert ml.output_of(["cl", "/Foobj\\a.obj"]) == "obj\\a.obj"
    assert ml.output_of(["nvcc", "-c", "a.cu"]) is None


FAKE_COMPILER = textwrap.dedent("""\
    import sys
    block = bytearray(int(sys.argv[sys.argv.index("--mib") + 1]) * 1024 * 1024)  # touched: peak RSS shows it
    for i in range(0, len(block), 4096):
        block[i] = 1
    out = sys.argv[sys.argv.index("-o") + 1]
    open(out, "w").write("obj")
    print("compiled", out)
    sys.exit(int(sys.argv[sys.argv.index("--rc") + 1]))
    """)


def test_launcher_records_time_memory_and_passes_the_status_through(tmp_path):
    compiler = tmp_path / "fake_nvcc.py"
    compiler.write_text(FAKE_COMPILER)
    log = tmp_path / "units.jsonl"
    launcher = Path(bb.LAUNCHER)
    for name, rc, mib in (("a.cu.o", 0, 300), ("b.cu.o", 3, 1)):
        proc = subprocess.run(
            [
                sys.executable,
                str(launcher),
                "--log",
                str(log),
                sys.executable,
                str(compiler),
                "-o",
                name,
                "--rc",
                str(rc),
                "--mib",
                str(mib),
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
        )
        assert proc.returncode == rc
        assert f"compiled {name}" in proc.stdout  # the compiler's output is passed through
    records = bb.read_launcher_log(log)
    a, b = records[str(tmp_path / "a.cu.o")], records[str(tmp_path / "b.cu.o")]
    assert a["returncode"] == 0 and b["returncode"] == 3
    # The compile's own peak, not the launcher's (which inherits the large pytest process's peak).
    assert a["maxrss_kib"] >= 300 * 1024
    assert b["maxrss_kib"] < 100 * 1024
    assert a["seconds"] >= 0 and a["end"] >= a["start"]
    assert a["compiler"] == Path(sys.executable).name


def test_launcher_dry_mode_compiles_nothing(tmp_path, monkeypatch):
    log = tmp_path / "units.jsonl"
    env = {"PATH": "/usr/bin:/bin", ml.DRY_ENV: "1"}
    proc = subprocess.run(
        [sys.executable, str(bb.LAUNCHER), "--log", str(log), "touch", str(tmp_path / "x.o")],
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert not (tmp_path / "x.o").exists() and not log.exists()


# -- comparison and report ----------------------------------------------------------------------------


def _ours(build_s=320.0):
    rows = [
        {
            "output": "k/units/bwd_hdim128_fp16.cu.o",
            "kind": "unit",
            "unit": "bwd_hdim128_fp16",
            "seconds": 280.0,
            "start_s": 0,
            "end_s": 280,
            "peak_rss_mib": 6000.0,
            "cpu_s": 279.0,
        },
        {
            "output": "k/units/fwd_hdim64_fp16.cu.o",
            "kind": "unit",
            "unit": "fwd_hdim64_fp16",
            "seconds": 100.0,
            "start_s": 0,
            "end_s": 100,
            "peak_rss_mib": 3900.0,
            "cpu_s": 99.0,
        },
        {
            "output": "_C_custom.so",
            "kind": "other",
            "unit": None,
            "seconds": 5.0,
            "start_s": 280,
            "end_s": 285,
            "peak_rss_mib": None,
            "cpu_s": None,
        },
    ]
    return {
        "state": "done",
        "jobs": 16,
        "archs": ["90"],
        "kernel_set": "custom",
        "build_s": build_s,
        "configure_s": 10.0,
        "total_s": build_s + 10,
        "units_expected": ["bwd_hdim128_fp16", "fwd_hdim64_fp16"],
        "edges": rows,
        "unit_seconds": bb.per_unit_seconds(rows),
        "analysis": {"lower_bound_s": 280.0, "jobs": 16, "critical_path": ["a", "b"], "critical_path_s": 285},
        "build_started_epoch": 1000.0,
        "finished_epoch": 1320.0,
    }


def _upstream(mode="full", units=None):
    units = units or {"fwd_hdim64_fp16": 110.0, "bwd_hdim128_fp16": 300.0, "fwd_hdim128_fp16": 150.0}
    order = ["fwd_hdim64_fp16", "fwd_hdim128_fp16", "bwd_hdim128_fp16"]
    return {
        "mode": mode,
        "state": "done",
        "jobs": 1,
        "wall_s": 700.0,
        "unit_seconds": units,
        "start_order": [u for u in order if u in units],
        "edges": [],
        "started_epoch": 5000.0,
        "build_started_epoch": 5000.0,
        "finished_epoch": 5700.0,
    }


def test_compare_targets_and_replay_basis():
    c = bb.compare(_ours(), _upstream())
    lb = c["targets"][0]
    assert lb["value"] == pytest.approx(320 / 280, abs=1e-3) and lb["met"] is True
    assert c["common_units"] == ["bwd_hdim128_fp16", "fwd_hdim64_fp16"]
    assert c["per_unit_sum"]["ratio"] == pytest.approx(380 / 410, abs=1e-3)
    same = c["same_units"]
    assert same["upstream_s"] == pytest.approx(410.0)  # replay on upstream's 1 job: 110 + 300
    assert same["ratio"] == pytest.approx(320 / 410, abs=1e-3)
    assert same["basis"].startswith("estimate: replay")
    assert same["ours_compile_span_s"] == 280.0 and same["ratio_compile_span"] == pytest.approx(280 / 410, abs=1e-3)
    up_target = c["targets"][1]
    assert up_target["met"] is True and up_target["goal"] == 0.8
    assert c["overlapped"] is False
    assert c["full_builds"]["upstream_units"] == 3


def test_compare_misses_targets_and_sees_overlap():
    ours = _ours(build_s=400.0)
    up = _upstream()
    up["build_started_epoch"] = 1100.0  # upstream started while ours was still building
    c = bb.compare(ours, up)
    assert c["targets"][0]["met"] is False  # 400 / 280 > 1.15
    assert c["targets"][1]["met"] is False  # 400 / 410 > 0.8
    assert c["overlapped"] is True
    assert c["warnings"] == ["upstream was built with jobs 1, ours with 16"]


def test_compare_with_partial_upstream_log_gives_per_unit_only():
    c = bb.compare(_ours(), _upstream(units={"fwd_hdim64_fp16": 110.0}))
    assert c["common_units"] == ["fwd_hdim64_fp16"]
    assert "ratio" not in c["same_units"] and "per-unit seconds only" in c["same_units"]["basis"]
    assert len(c["targets"]) == 1
    assert bb.compare(_ours(), None)["upstream"] == "not measured"


def test_compare_units_mode_uses_the_measured_wall():
    up = _upstream(mode="units")
    up["wall_s"] = 350.0
    c = bb.compare(_ours(), up)
    assert c["same_units"]["upstream_s"] == 350.0 and c["same_units"]["basis"].startswith("measured")


def test_render_markdown_lists_units_and_targets():
    ours = _ours()
    up = _upstream()
    up["edges"] = [{"unit": "fwd_hdim64_fp16", "peak_rss_mib": 4096.0}]
    record = {
        "machine": {"gpu_name": None, "notes": []},
        "ours": ours,
        "upstream": up,
        "comparison": bb.compare(ours, up),
    }
    md = bb.render_markdown(record)
    assert "| bwd_hdim128_fp16 | unit | 280.0 | 5.86 |" in md
    assert "| fwd_hdim64_fp16 | unit | 100.0 | 3.81 | 99.0 | 110.0 | 4.00 | 0.91x |" in md
    assert "build wall <= 1.15 x lower bound" in md and "| yes |" in md
    assert "estimate: replay" in md


def test_collect_and_report_from_synthetic_dirs(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "build.json").write_text(json.dumps({"ours": _ours()}))
    updir = tmp_path / "up"
    temp = updir / "src" / "flash_attn-2.8.3.post2" / "build" / "temp.linux-x86_64-cpython-312"
    temp.mkdir(parents=True)
    (temp / ".ninja_log").write_text(
        "# ninja log v5\n"
        f"0\t30000\t0\t{temp}/csrc/flash_attn/flash_api.o\th4\n"
        f"0\t110000\t0\t{temp}/csrc/flash_attn/src/flash_fwd_hdim64_fp16_sm80.o\th1\n"
        f"0\t150000\t0\t{temp}/csrc/flash_attn/src/flash_fwd_hdim128_fp16_sm80.o\th2\n"
        f"110000\t410000\t0\t{temp}/csrc/flash_attn/src/flash_bwd_hdim128_fp16_sm80.o\th3\n"
    )
    (updir / "units.jsonl").write_text(
        json.dumps(
            {
                "output": f"{temp}/csrc/flash_attn/src/flash_fwd_hdim64_fp16_sm80.o",
                "cwd": str(temp),
                "maxrss_kib": 4 * 1024 * 1024,
                "user_s": 100.0,
                "sys_s": 2.0,
            }
        )
        + "\n"
    )
    (updir / "status.json").write_text(
        json.dumps(
            {
                "state": "done",
                "mode": "full",
                "jobs": 2,
                "wall_s": 450.0,
                "build_started_epoch": 9000.0,
                "finished_epoch": 9450.0,
            }
        )
    )
    up = bb.collect_upstream(updir)
    assert up["unit_seconds"] == {"fwd_hdim64_fp16": 110.0, "fwd_hdim128_fp16": 150.0, "bwd_hdim128_fp16": 300.0}
    assert up["start_order"][-1] == "bwd_hdim128_fp16"
    fwd = next(r for r in up["edges"] if r["unit"] == "fwd_hdim64_fp16")
    assert fwd["peak_rss_mib"] == 4096.0 and fwd["cpu_s"] == 102.0
    rc = bb.main(["--out", str(out), "--reuse-ours", "--collect", str(updir)])
    assert rc == 0
    record = json.loads((out / "build.json").read_text())
    # replay of the 2 common units in upstream's start order on its 2 slots: both start at 0 -> 300
    # (upstream started bwd128 at 110 s only because fwd128, not one of ours, held the other slot)
    assert record["comparison"]["same_units"]["upstream_s"] == pytest.approx(300.0)
    assert record["comparison"]["same_units"]["ratio"] == pytest.approx(320 / 300, abs=1e-3)
    assert "machine" in record and (out / "build.md").is_file()


# -- upstream's setup.py end to end, with fake compilers ------------------------------------------------

FAKE_TOOL = """#!/bin/sh
# Fake compiler/linker for the CPU test: real c++ for version queries, else writes -o and the depfile.
case "$1" in -v|--version|-V|-dumpversion|-dumpfullversion) exec c++ "$@";; esac
out=""; dep=""; prev=""
for a in "$@"; do
  case "$prev" in -o) out="$a";; -MF|--dependency-output) dep="$a";; esac
  prev="$a"
done
[ -n "$out" ] && echo fake > "$out"
[ -n "$dep" ] && echo "$out:" > "$dep"
exit 0
"""


# full: 72 fake compiles, a link and a wheel, about a minute more: collected only with
# FLASH_ATTN_BENCH_E2E=1, so a default run neither pays for it nor reports a skip.
UPSTREAM_RUNNER_MODES = ["units", "full"] if os.environ.get("FLASH_ATTN_BENCH_E2E") else ["units"]


@pytest.mark.parametrize("mode", UPSTREAM_RUNNER_MODES)
def test_upstream_runner_with_fake_compilers(tmp_path, monkeypatch, mode, upstream_sdist):
    """Runs upstream's real setup.py (pip wheel of the pinned sdist) with a fake nvcc and c++."""
    sdist = upstream_sdist
    cuda_home = bb.cuda_home_for(bb.find_nvcc(None) or "/usr/local/cuda/bin/nvcc")
    assert (Path(cuda_home) / "bin" / "nvcc").is_file(), (
        "setup.py asks nvcc for its version: put the CUDA toolkit on PATH"
    )
    pytest.importorskip("wheel.bdist_wheel")
    tool = tmp_path / "bin" / "nvcc"
    tool.parent.mkdir()
    tool.write_text(FAKE_TOOL)
    tool.chmod(0o755)
    monkeypatch.setenv("CXX", str(tool))  # flash_api.cpp and the link: fake too
    monkeypatch.setenv("CUDA_HOME", cuda_home)
    updir = tmp_path / "up"
    request = {
        "sdist": str(sdist),
        "archs": ["90"],
        "jobs": 2,
        "nvcc": str(tool),
        "mode": mode,
        "units": ["fwd_hdim64_fp16", "bwd_hdim128_bf16_causal"],
        "nvcc_threads": None,
        "python": sys.executable,
    }
    bb.prepare_upstream_dir(updir, request)
    status = bb.run_upstream(updir)
    assert status["state"] == "done", (status, bc.log_tail(updir / "upstream.log", 40))
    assert status["env"]["MAX_JOBS"] == "2" and status["env"]["FLASH_ATTN_CUDA_ARCHS"] == "90"
    assert status["env"]["TORCH_CUDA_ARCH_LIST"] == "9.0"
    up = bb.collect_upstream(updir)
    if mode == "units":
        assert set(up["unit_seconds"]) == {"fwd_hdim64_fp16", "bwd_hdim128_bf16_causal"}
        assert status["units_missing"] == []
    else:
        assert len(up["unit_seconds"]) == 72 and status["wheel"]["bytes"] > 0
    # the fake nvcc ran through the launcher (torch's PYTORCH_NVCC), so every unit has a memory figure
    assert all(r["peak_rss_mib"] is not None for r in up["edges"] if r["unit"])


# -- our build's plumbing, with a fake cmake ------------------------------------------------------------

FAKE_CMAKE = '''#!{python}
"""Fake cmake: configure records the launcher; --build "compiles" three objects through it."""
import json, os, subprocess, sys, time
args = sys.argv[1:]
if args[0] == "--build":
    d = args[1]
    cfg = json.load(open(os.path.join(d, "fake.json")))
    launcher = cfg["CMAKE_CUDA_COMPILER_LAUNCHER"].split(";")
    objs = ["CMakeFiles/flash_attn_native.dir/kernels/units/bwd_hdim128_fp16.cu.o",
            "CMakeFiles/flash_attn_native.dir/kernels/units/fwd_hdim64_fp16.cu.o",
            "CMakeFiles/flash_attn_native.dir/src/binding/ops.cpp.o"]
    lines, t0 = ["# ninja log v5"], time.time()
    for i, o in enumerate(objs):
        os.makedirs(os.path.join(d, os.path.dirname(o)), exist_ok=True)
        s = time.time()
        subprocess.check_call(launcher + [sys.executable, "-c", "import sys; open(sys.argv[2], 'w').write('o')",
                                          "-o", o], cwd=d)
        lines.append(f"{{int((s - t0) * 1000)}}\\t{{int((time.time() - t0) * 1000) + 100 * i}}\\t0\\t{{o}}\\th{{i}}")
    end = int((time.time() - t0) * 1000) + 400
    lines.append(f"{{end}}\\t{{end + 50}}\\t0\\t_C_custom.so\\thl")
    open(os.path.join(d, ".ninja_log"), "w").write("\\n".join(lines) + "\\n")
    open(os.path.join(d, "_C_custom.so"), "wb").write(b"x" * 1000)
    json.dump({{"group": "custom", "kernel_set": "custom", "kernels": [1, 2]}},
              open(os.path.join(d, "build_info_custom.json"), "w"))
    print("[3/3] Linking _C_custom.so")
else:
    d = args[args.index("-B") + 1]
    cfg = dict(a[2:].split("=", 1) for a in args if a.startswith("-D"))
    os.makedirs(d, exist_ok=True)
    json.dump(cfg, open(os.path.join(d, "fake.json"), "w"))
    print("-- flash_attn: configured (fake)")
'''


def test_build_ours_with_a_fake_cmake(tmp_path, monkeypatch):
    fake = tmp_path / "bin" / "cmake"
    fake.parent.mkdir()
    fake.write_text(FAKE_CMAKE.format(python=sys.executable))
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    sdist = tmp_path / "flash_attn-2.8.3.post2.tar.gz"
    sdist.write_bytes(b"not checked by the fake")
    out = tmp_path / "out"
    rc = bb.main(
        [
            "--out",
            str(out),
            "--sdist",
            str(sdist),
            "--kernel-set",
            "fwd_hdim64_fp16,bwd_hdim128_fp16",
            "--jobs",
            "2",
            "--archs",
            "sm_90",
            "--fatbin-compression",
            "none",
        ]
    )
    assert rc == 0
    record = json.loads((out / "build.json").read_text())
    ours = record["ours"]
    assert ours["state"] == "done"
    cfg = json.loads((out / "ours-build" / "fake.json").read_text())
    assert cfg["FLASH_ATTN_ARCH_GROUP"] == "custom" and cfg["FLASH_ATTN_CUDA_ARCHS"] == "90"
    assert cfg["FLASH_ATTN_JOBS"] == "2" and cfg["FLASH_ATTN_FATBIN_COMPRESSION"] == "none"
    assert cfg["FLASH_ATTN_SDIST"] == str(sdist) and cfg["CMAKE_BUILD_TYPE"] == "Release"
    assert cfg["CMAKE_CUDA_COMPILER_LAUNCHER"] == cfg["CMAKE_CXX_COMPILER_LAUNCHER"]
    assert set(ours["unit_seconds"]) == {"bwd_hdim128_fp16", "fwd_hdim64_fp16"}
    assert ours["units_expected"] == ["bwd_hdim128_fp16", "fwd_hdim64_fp16"]  # heaviest first, from kernel_set.py
    kinds = {r["output"].rsplit("/", 1)[-1]: r["kind"] for r in ours["edges"]}
    assert kinds == {
        "bwd_hdim128_fp16.cu.o": "unit",
        "fwd_hdim64_fp16.cu.o": "unit",
        "ops.cpp.o": "compile",
        "_C_custom.so": "other",
    }
    assert all(r["peak_rss_mib"] for r in ours["edges"] if r["kind"] != "other")  # joined with the launcher log
    assert ours["analysis"]["critical_path"][-1] == "_C_custom.so"
    assert ours["library"]["bytes"] == 1000 and "kernels" not in ours["build_info"]
    assert "Linking _C_custom.so" in (out / "ours_build.log").read_text()
    assert record["comparison"]["targets"][0]["target"] == "build wall <= 1.15 x lower bound"
    # an explicit, non-empty build directory is never deleted without --clean
    with pytest.raises(SystemExit, match="--clean"):
        bb.main(["--out", str(out), "--sdist", str(sdist), "--build-dir", str(out / "ours-build")])


def test_upstream_background_start_and_collect(tmp_path):
    """--upstream-background returns at once; the detached runner records its failure (a wrong sdist)."""
    bad = tmp_path / "flash_attn-2.8.3.post2.tar.gz"
    bad.write_bytes(b"not the pinned sdist")
    updir = tmp_path / "up"
    t0 = time.monotonic()
    rc = bb.main(["--upstream-background", str(updir), "--sdist", str(bad), "--jobs", "3", "--archs", "90"])
    assert rc == 0 and time.monotonic() - t0 < 20
    request = json.loads((updir / "request.json").read_text())
    assert request["jobs"] == 3 and request["archs"] == ["90"] and request["mode"] == "full"
    up = bb.collect_upstream(updir, wait_s=120)
    assert up["state"] == "failed" and "sha256" in up["error"]
    assert up["pid"] and up["edges"] == [] and up["ninja_log"] is None
