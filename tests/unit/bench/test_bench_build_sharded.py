"""bench/build_sharded.py (bench/build.py --sharded) on CPU: the layout, the commands, the cost
model's split, the parallel runner, the report from part records, and the whole flow with stub
release steps (FLASH_ATTN_BENCH_SHARDED_FAKE=1, no compiler)."""

from __future__ import annotations

import json
import sys

import bench_build as bb
import bench_common as bc
import build_sharded as bs
import pytest


def test_parse_layout():
    assert bs.parse_layout("4x4") == (4, 4)
    assert bs.parse_layout(" 2X8 ") == (2, 8)
    for bad in ("4", "0x4", "4x0", "axb", ""):
        with pytest.raises(ValueError, match="NxM"):
            bs.parse_layout(bad)


def test_commands(tmp_path):
    cmd = bs.shard_command("py", 2, 4, 3, "dev", ["90"], "/s.tar.gz", tmp_path / "r2", tmp_path / "a")
    assert cmd[:4] == ["py", "-m", "release.archive.archives", "build"]
    assert cmd[cmd.index("--shard") + 1] == "2/4" and cmd[cmd.index("--jobs") + 1] == "3"
    assert cmd[cmd.index("--cuda-archs") + 1] == "90" and cmd[cmd.index("--sdist") + 1] == "/s.tar.gz"
    link = bs.wheel_command("py", 16, "dev", ["80", "90"], None, tmp_path / "l", tmp_path / "d", tmp_path / "k")
    assert link[2] == "release.sessions.wheels" and "--no-smoke" in link
    assert link[-2:] == ["--kernels", str(tmp_path / "k")]
    assert link[link.index("--cuda-archs") + 1] == "80,90" and "--sdist" not in link
    assert "--kernels" not in bs.wheel_command("py", 16, "dev", ["90"], None, tmp_path, tmp_path)
    g = bs.gather_command("py", [tmp_path / "s1", tmp_path / "s2"], tmp_path / "g")
    assert g[2:4] == ["release.archive.archives", "gather"] and g[-2:] == ["--out", str(tmp_path / "g")]


def test_child_env_puts_src_first():
    env = bs.child_env({"PYTHONPATH": "/other"})
    assert env["PYTHONPATH"].split(":")[0] == str(bc.REPO_ROOT / "src")
    assert env["PYTHONPATH"].endswith("/other")


def test_predicted_shards_match_the_split():
    ks = bc.kernel_set()
    rows = bs.predicted_shards("dev", ["90"], 4, 4, 128.0)
    split = ks.split_shards(ks.resolve("dev")[1], 4)
    assert [r["units"] for r in rows] == [[u.name for u in s] for s in split]
    assert sorted(u for r in rows for u in r["units"]) == sorted(u.name for u in ks.resolve("dev")[1])
    assert all(r["predicted_seconds"] > 0 for r in rows)
    # two SASS targets cost more than one; a slower machine (speed factor) more again
    two = bs.predicted_shards("dev", ["80", "90"], 4, 4, 128.0)
    slow = bs.predicted_shards("dev", ["90"], 4, 4, 128.0, speed=2.0)
    assert two[0]["predicted_seconds"] > rows[0]["predicted_seconds"]
    assert slow[0]["predicted_seconds"] > rows[0]["predicted_seconds"]


def test_error_percent():
    assert bs.error_percent(110.0, 100.0) == 10.0
    assert bs.error_percent(90.0, 100.0) == -10.0
    assert bs.error_percent(None, 100.0) is None and bs.error_percent(5.0, 0) is None


def test_run_parallel_runs_at_once(tmp_path):
    # each child marks itself started and waits for the other: run one after the other, both fail
    def waiter(me, other):
        code = (
            "import pathlib, sys, time; d = pathlib.Path(sys.argv[1]); (d / sys.argv[2]).touch(); "
            "t = time.monotonic() + 60\n"
            "while not (d / sys.argv[3]).exists() and time.monotonic() < t: time.sleep(0.05)\n"
            "sys.exit(0 if (d / sys.argv[3]).exists() else 1)"
        )
        return [sys.executable, "-c", code, str(tmp_path), me, other]

    fail = [sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"]
    res = bs.run_parallel({"a": waiter("a", "b"), "b": waiter("b", "a"), "c": fail}, tmp_path / "logs", bs.child_env())
    assert res["a"]["rc"] == 0 and res["b"]["rc"] == 0 and res["c"]["rc"] == 3
    assert "boom" in (tmp_path / "logs" / "c.log").read_text()
    assert res["a"]["seconds"] >= 0 and res["a"]["log"].endswith("a.log")


def _part(name, state, wall, **kw):
    return {"part": name, "state": state, "wall_seconds": wall, "kernel_set": "dev", "archs": ["90"], **kw}


def test_report_from_parts(tmp_path):
    rows = [{"shard": 1, "units": ["a"], "predicted_seconds": 110.0, "measured_seconds": 100.0, "rc": 0,
             "error_percent": 10.0}]  # fmt: skip
    s = _part("sharded", "done", 300.0, shards=4, jobs_per_shard=4, shard_rows=rows, shard_phase_seconds=100.0)
    s.update(predicted_shard_phase_seconds=110.0, gather_seconds=5.0, link_seconds=195.0, wheel="/w/x.whl")
    (tmp_path / "sharded.json").write_text(json.dumps(s))
    rec = bs.write_report(tmp_path)
    assert rec["comparison"]["ratio"] is None
    assert "n/a" in (tmp_path / "build_sharded.md").read_text()
    (tmp_path / "unsharded.json").write_text(json.dumps(_part("unsharded", "done", 600.0, jobs=16)))
    rec = bs.write_report(tmp_path)
    assert rec["comparison"] == {"sharded_wall_seconds": 300.0, "unsharded_wall_seconds": 600.0, "ratio": 0.5}
    md = (tmp_path / "build_sharded.md").read_text()
    assert "Ratio sharded / unsharded: 0.5" in md and "| 1 | 1 | 110.0 | 100.0 | 10.0 | 0 |" in md
    assert json.loads((tmp_path / "build_sharded.json").read_text())["comparison"]["ratio"] == 0.5


def test_report_names_a_failed_part(tmp_path):
    u = _part("unsharded", "failed", 12.0, jobs=16, failed_step="unsharded", log_tail="nvcc fatal")
    (tmp_path / "unsharded.json").write_text(json.dumps(u))
    md = bs.render_markdown(bs.load_parts(tmp_path))
    assert "unsharded failed at unsharded" in md and "nvcc fatal" in md
    assert bs.comparison(bs.load_parts(tmp_path))["ratio"] is None


def test_whole_flow_with_stub_steps(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(bs.FAKE_ENV, "1")
    monkeypatch.setenv("FLASH_ATTN_BENCH_SHARDED_FAKE_S", "0")
    assert bb.main(["--out", str(tmp_path), "--sharded", "2x1", "--kernel-set", "ci", "--only", "sharded"]) == 0
    s = json.loads((tmp_path / "sharded.json").read_text())
    assert s["state"] == "done" and [r["shard"] for r in s["shard_rows"]] == [1, 2]
    assert (tmp_path / bs.WHEEL_DIR / "flash_attn-2.8.3.post2+fake-cp39-abi3-linux_x86_64.whl").is_file()
    assert not (tmp_path / "unsharded.json").exists()
    assert bb.main(["--out", str(tmp_path), "--sharded", "2x1", "--kernel-set", "ci", "--only", "unsharded"]) == 0
    rec = json.loads((tmp_path / "build_sharded.json").read_text())
    assert set(rec["parts"]) == {"sharded", "unsharded"} and rec["comparison"]["ratio"] is not None
    assert bb.main(["--out", str(tmp_path), "--sharded", "2x1", "--only", "report"]) == 0


def test_a_failing_shard_stops_before_gather(tmp_path, monkeypatch):
    def wrap(cmd):
        if "--shard" in cmd and cmd[cmd.index("--shard") + 1] == "2/2":
            return [sys.executable, "-c", "import sys; print('shard two broke'); sys.exit(1)"]
        return bs.fake(cmd)

    monkeypatch.setenv("FLASH_ATTN_BENCH_SHARDED_FAKE_S", "0")
    rec = bs.run_sharded(tmp_path, 2, 1, "ci", ["80"], None, bs.child_env(), wrap)
    assert rec["state"] == "failed" and rec["failed_step"] == "shard2" and "shard two broke" in rec["log_tail"]
    assert "gather_seconds" not in rec and not (tmp_path / bs.WHEEL_DIR).exists()


def test_bad_layout_is_refused(tmp_path, capsys):
    assert bb.main(["--out", str(tmp_path), "--sharded", "4", "--only", "report"]) == 2
    assert "NxM" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bb.main(["--out", str(tmp_path), "--only", "unsharded"])
    assert "--only needs --sharded" in capsys.readouterr().err
