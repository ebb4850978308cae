"""release.plan.matrix: the table, its filters and errors, and that every entry is a real build.

"Real" means: the nox session exists in noxfile.py, the session's arguments parse with the wheel
sessions' own CLI (release.sessions.wheels) and name a valid kernel set, and the wheel name the entry
promises is a valid wheel file name whose local label is the one release.compile.tagging writes.
"""

from __future__ import annotations

import json
import runpy
import sys
import types
from pathlib import Path

import pytest

from flash_attn_wheel_names import label as wheel_label
from release._paths import package_version
from release.plan import matrix

ROOT = Path(__file__).resolve().parents[3]


def nox_sessions() -> set[str]:
    """Names noxfile.py registers with nox.session (honouring name=..., the sessions it makes per arch
    group included): the noxfile runs against a stand-in `nox` module that records them, so nox need
    not be installed."""
    noxfile = ROOT / "noxfile.py"
    if not noxfile.is_file():
        pytest.fail("noxfile.py is missing: the matrix entries name nox sessions")
    names = set()

    def session(func=None, **kwargs):
        def register(f):
            names.add(kwargs.get("name") or f.__name__)
            return f

        return register(func) if callable(func) else register

    stand_in = types.ModuleType("nox")
    stand_in.session, stand_in.options, stand_in.Session = session, types.SimpleNamespace(), object
    real = sys.modules.get("nox")
    sys.modules["nox"] = stand_in
    try:
        runpy.run_path(str(noxfile))
    finally:
        if real is None:
            del sys.modules["nox"]
        else:
            sys.modules["nox"] = real
    return names


@pytest.fixture(scope="module", params=wheel_label.TORCH_ABIS)
def full(request) -> list[dict]:
    """The whole link matrix of one --torch-abi: stable (the release's, the default) and exact."""
    return matrix.build_matrix(torch_abi=request.param)["include"]


def test_matrix_is_github_include_form(full):
    abi = "exact" if all(e["torch_abi"] == "exact" for e in full) else "stable"
    doc = matrix.build_matrix(torch_abi=abi)
    assert list(doc) == ["include"]
    assert json.loads(json.dumps(doc)) == doc  # plain JSON types only
    assert len({e["name"] for e in full}) == len(full), "job / artifact names must be unique"
    assert len({e["wheel"] for e in full}) == len(full), "two entries would build the same wheel"


def test_link_job_counts():
    # per-torch: one wheel per (OS, group, torch, CUDA build of that torch)
    n_pairs = sum(len(c) for c in matrix.TORCH.values())
    exact = matrix.build_matrix(torch_abi="exact")["include"]
    assert len(exact) == len(matrix.OSES) * len(matrix.GROUPS) * n_pairs == 36
    # stable (the default): every torch of the table is >= torch_min, so ONE wheel per (OS, CUDA, group)
    assert all(matrix.stable_serves(t) for t in matrix.TORCH)
    stable = matrix.build_matrix()["include"]
    assert stable == matrix.build_matrix(torch_abi="stable")["include"]
    assert len(stable) == len(matrix.OSES) * len(matrix.CUDA) * len(matrix.GROUPS) == 8
    assert {e["torch_abi"] for e in stable} == {"stable"}
    served = {(e["os"], e["group"], t, e["cuda"]) for e in stable for t in e["torches"]}
    assert served == {(e["os"], e["group"], e["torch"], e["cuda"]) for e in exact}, "every per-torch wheel is covered"


def test_torches_below_the_minimum_keep_their_per_torch_wheel():
    table = {"2.10.0": ("12.8", "13.0"), "2.11.0": ("13.0",), "2.12.1": ("13.0", "13.2")}  # 2.10: a fake entry
    wheels = [w for w in matrix.release_wheels("stable", table) if (w.os, w.group) == ("ubuntu-24.04", "legacy")]
    assert wheels == [
        matrix.Wheel("ubuntu-24.04", "legacy", "13.0", "2.10.0", "exact", ("2.10.0",)),
        matrix.Wheel("ubuntu-24.04", "legacy", "13.0", "2.11.0", "stable", ("2.11.0", "2.12.1")),
        matrix.Wheel("ubuntu-24.04", "legacy", "13.2", "2.12.1", "stable", ("2.12.1",)),
    ]  # a CUDA outside matrix.CUDA (12.8) is no release build
    assert len(matrix.release_wheels("exact", table)) == len(matrix.OSES) * len(matrix.GROUPS) * 5
    below = matrix.entry("ubuntu-24.04", "legacy", "13.0", "2.10.0", version="2.8.3.post2", torch_abi="exact")
    assert below["label"] == "cu130torch2.10.0cxx11abitrue.legacy.rev1"
    assert below["args"][2:4] == ["--torch-abi", "exact"]  # always said: the session's default may differ
    assert matrix.stable_serves("2.11.0") and not matrix.stable_serves("2.10.1") and matrix.stable_serves("3.0.0")


def test_every_entry_is_a_supported_combination(full):
    for e in full:
        assert e["os"] in matrix.OSES and e["group"] in matrix.GROUPS
        assert e["cuda"] in matrix.TORCH[e["torch"]], f"torch {e['torch']} ships no cu{e['cuda']} build"
        assert e["cuda_full"].startswith(e["cuda"] + ".")
        assert e["torch_index"] == f"https://download.pytorch.org/whl/{e['cu']}"
        assert e["runner"] == e["os"]
        assert e["torch"] == e["torches"][0]  # built against the oldest torch it serves
        for torch in e["torches"]:
            assert e["cuda"] in matrix.TORCH[torch]
            if e["torch_abi"] == "stable":
                assert matrix.stable_serves(torch) and e["torch_min"] == matrix.TORCH_MIN


def test_torch_cuda_facts():
    """The facts the manifest's torch_source cites: 2.11 has no cu132; 2.12 to 2.15 have cu130 and cu132
    (2.15.0's cu132 from its PyPI metadata, its cu130 assumed from 2.14)."""
    assert matrix.TORCH["2.11.0"] == ("13.0",)
    for v in ("2.12.1", "2.13.0", "2.14.1", "2.15.0"):
        assert matrix.TORCH[v] == ("13.0", "13.2")
    assert set(matrix.CUDA) == {"13.0", "13.2"}


def test_sessions_exist_in_noxfile(full):
    sessions = nox_sessions()
    for e in full:
        assert e["session"] in sessions, f"{e['name']}: no nox session {e['session']} in noxfile.py"
    # the workflows also call these
    assert {"matrix", "tests", "release", "wheel_legacy", "wheel_blackwell"} <= sessions


def test_entry_arguments_parse_with_the_wheel_sessions_cli(full, tmp_path):
    from release.sessions import wheels

    for e in full:
        assert all(a and not any(c.isspace() for c in a) for a in e["args"]), "the workflow splits args on spaces"
        assert e["command"] == " ".join(["nox", "-s", e["session"], "--", *e["args"]])
        group = e["session"].removeprefix("wheel_")
        # what the session passes, what the entry adds, what release.yml appends
        argv = ["--arch-group", group, *e["args"], "--out", str(tmp_path / "wh"), "--build-root", str(tmp_path / "b")]
        opts = wheels.parse(argv)
        assert (opts.group, opts.torch_version, opts.kernel_set) == (e["group"], e["torch"], e["kernel_set"])
        assert opts.torch_abi() == e["torch_abi"]
        set_name, units = opts.validate(check_out=False)
        assert set_name == "release" and units


def test_wheel_names_are_valid_and_carry_the_tagging_label(full):
    from packaging.utils import parse_wheel_filename
    from packaging.version import Version

    from release.compile import tagging

    version = package_version()
    for e in full:
        # the label release.compile.tagging computes from the build info such a build writes
        info = {
            "cuda_version": e["cuda_full"],  # nvcc's version, e.g. 13.0.2 -> cu130
            "torch_version": f"{e['torch']}+{e['cu']}",
            "cxx11_abi": e["cxx11_abi"],
            "group": e["group"],
            "kernel_set": e["kernel_set"],
            "torch_abi": e["torch_abi"],
            "torch_min": e["torch_min"],
        }
        assert tagging.local_label(info) == e["label"]
        name, ver, build, tags = parse_wheel_filename(e["wheel"])
        assert name == "flash-attn" and build == ()
        assert str(ver) == tagging.tagged_version(version, e["label"]) == e["wheel"].split("-")[1]
        assert ver == Version(f"{version}+{e['label']}")
        platform = matrix.OSES[e["os"]].platform_tag
        assert {str(t) for t in tags} == {f"cp310-abi3-{platform}"}


def test_cxx11_abi_label_per_os(full):
    for e in full:
        linux = e["os"].startswith("ubuntu")
        assert e["cxx11_abi"] is True  # torch reports the flag as set on every OS (Windows too)
        if e["torch_abi"] == "stable":  # no C++11 ABI flag: no libstdc++ type crosses the stable ABI
            assert e["label"] == f"{e['cu']}torchstable{matrix.TORCH_MIN}.{e['group']}.rev1"
        else:
            assert e["label"] == f"{e['cu']}torch{e['torch']}cxx11abitrue.{e['group']}.rev1"
        assert e["wheel"].endswith("manylinux_2_28_x86_64.whl" if linux else "win_amd64.whl")
        assert e["container"] == (f"pytorch/manylinux2_28-builder:cuda{e['cuda']}" if linux else "")
        assert e["manylinux"] == ("manylinux_2_28" if linux else "")


@pytest.mark.parametrize("kernel_set", ["ci", "dev"])
def test_a_non_release_kernel_set_never_carries_a_release_name(full, kernel_set):
    """A dry run (kernel_set=ci) builds wheels whose names differ from every release wheel's."""
    release_names = {e["wheel"] for e in full}
    other = matrix.build_matrix(kernel_set=kernel_set, torch_abi=full[0]["torch_abi"])["include"]
    assert len(other) == len(full)
    for e in other:
        assert e["label"].endswith(f".{e['group']}.rev1.{kernel_set}")
        assert e["wheel"] not in release_names


def test_example_of_the_design_document():
    e = matrix.entry("ubuntu-24.04", "legacy", "13.0", "2.14.1", version="2.8.3.post2", torch_abi="exact")
    assert e["wheel"] == (
        "flash_attn-2.8.3.post2+cu130torch2.14.1cxx11abitrue.legacy.rev1-cp310-abi3-manylinux_2_28_x86_64.whl"
    )
    assert e["command"] == "nox -s wheel_legacy -- --torch-version 2.14.1 --torch-abi exact --kernel-set release"
    e = matrix.entry(
        "ubuntu-24.04", "legacy", "13.0", "2.11.0", version="2.8.3.post2", torch_abi="stable", torches=["2.11.0"]
    )
    assert e["wheel"] == "flash_attn-2.8.3.post2+cu130torchstable2.11.legacy.rev1-cp310-abi3-manylinux_2_28_x86_64.whl"
    assert e["command"] == "nox -s wheel_legacy -- --torch-version 2.11.0 --torch-abi stable --kernel-set release"
    assert e["name"] == "legacy-cu130-torchstable2.11-linux"


@pytest.mark.parametrize(
    "filters, expect",
    [
        (
            dict(oses=["windows-2022"], groups=["legacy"]),
            lambda e: e["os"] == "windows-2022" and e["group"] == "legacy",
        ),
        (dict(cudas=["13.2"]), lambda e: e["cuda"] == "13.2"),
        (dict(torches=["2.14"]), lambda e: "2.14.1" in e["torches"]),  # stable: the wheel that serves it
        (dict(torches=["2.11.0,2.12"]), lambda e: {"2.11.0", "2.12.1"} & set(e["torches"])),
        (dict(oses=[""], groups=[""], cudas=[""], torches=[""]), lambda e: True),  # empty inputs mean all
    ],
)
def test_filters(full, filters, expect):
    got = matrix.build_matrix(**filters, torch_abi=full[0]["torch_abi"])["include"]
    assert got == [e for e in full if expect(e)]
    assert got


def test_os_and_group_filter_selects_the_windows_legacy_builds():
    got = matrix.build_matrix(oses=["windows-2022"], groups=["legacy"], torch_abi="exact")["include"]
    assert len(got) == sum(len(c) for c in matrix.TORCH.values())
    assert {e["session"] for e in got} == {"wheel_legacy"}
    got = matrix.build_matrix(oses=["windows-2022"], groups=["legacy"])["include"]
    assert [e["name"] for e in got] == ["legacy-cu130-torchstable2.11-windows", "legacy-cu132-torchstable2.11-windows"]


@pytest.mark.parametrize(
    "kwargs, flag, valid",
    [
        (dict(oses=["macos-14"]), "--os", "ubuntu-24.04, windows-2022"),
        (dict(groups=["hopper"]), "--group", "blackwell, legacy"),
        (dict(cudas=["12.8"]), "--cuda", "13.0, 13.2"),
        (dict(torches=["2.10"]), "--torch", "2.11.0, 2.12.1, 2.13.0, 2.14.1, 2.15.0"),
        (dict(stage="wheels"), "--stage", "link, shards, gather"),
        (dict(torch_abi="abi3"), "--torch-abi", ", ".join(wheel_label.TORCH_ABIS)),
        (dict(kernel_set="full"), "--kernel-set", "release, dev, ci"),
        (dict(runners=["macos-14=big"]), "--runner OS", "ubuntu-24.04, windows-2022"),
    ],
)
def test_unknown_values_are_errors_that_list_the_valid_ones(kwargs, flag, valid):
    with pytest.raises(matrix.MatrixError) as err:
        matrix.build_matrix(**kwargs)
    assert f"unknown {flag}" in str(err.value) and f"Valid values: {valid}." in str(err.value)


def test_filters_without_a_combination_say_which_exist():
    with pytest.raises(matrix.MatrixError, match=r"torch 2\.11\.0: CUDA 13\.0;"):
        matrix.build_matrix(cudas=["13.2"], torches=["2.11"])


def test_runner_override_and_kernel_set():
    got = matrix.build_matrix(runners=["ubuntu-24.04=linux-16-core"], kernel_set="ci", groups=["legacy"])["include"]
    for e in got:
        assert e["runner"] == ("linux-16-core" if e["os"] == "ubuntu-24.04" else e["os"])
        assert e["args"][-2:] == ["--kernel-set", "ci"]
    with pytest.raises(matrix.MatrixError, match="OS=LABEL"):
        matrix.build_matrix(runners=["linux-16-core"])


def test_cli_prints_json_and_reports_errors(capsys, tmp_path):
    assert matrix.main(["--os", "windows-2022", "--group", "legacy"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == matrix.build_matrix(oses=["windows-2022"], groups=["legacy"])

    assert matrix.main(["--os", "windows-2022", "--output", str(tmp_path / "m.json")]) == 0
    assert json.loads((tmp_path / "m.json").read_text())["include"]
    assert "\n" not in (tmp_path / "m.json").read_text().strip(), "one line, for $GITHUB_OUTPUT"

    assert matrix.main(["--os", "win"]) == 2
    err = capsys.readouterr().err
    assert "unknown --os 'win'" in err and "windows-2022" in err

    assert matrix.main(["--format", "table", "--torch", "2.14"]) == 0
    assert "nox -s wheel_legacy -- --torch-version 2.11.0 --torch-abi stable" in capsys.readouterr().out
    assert matrix.main(["--format", "table", "--torch", "2.14", "--torch-abi", "exact"]) == 0
    assert "nox -s wheel_legacy -- --torch-version 2.14.1 --torch-abi exact --kernel-set" in capsys.readouterr().out


def test_retagging_a_build_of_an_entry_gives_the_promised_wheel_name(tmp_path):
    """End to end with release.compile.tagging.retag (wheel pack --local-version) on a fake wheel whose build
    info is what the entry's build writes: the tagged file is the entry's wheel (up to the platform
    tag, which the fake always writes as linux_x86_64)."""
    pytest.importorskip("wheel")
    from release_fakes import build_info, make_wheel

    from release.compile import tagging

    if tagging._wheel_version() < tagging.MIN_WHEEL:
        pytest.skip("re-tagging needs wheel >= 0.48")
    picks = [
        matrix.entry("ubuntu-24.04", "legacy", "13.0", "2.14.1", torch_abi="exact"),
        matrix.entry("windows-2022", "blackwell", "13.2", "2.12.1", torch_abi="exact"),
        matrix.entry("windows-2022", "legacy", "13.2", "2.12.1", torch_abi="stable"),
    ]
    for i, e in enumerate(picks):
        info = build_info(
            e["group"],
            cuda_version={"13.0": "13.0.88", "13.2": "13.2.78"}[e["cuda"]],  # nvcc's own version string
            torch_version=f"{e['torch']}+{e['cu']}",
            cxx11_abi=e["cxx11_abi"],
            kernel_set=e["kernel_set"],
            torch_abi=e["torch_abi"],
            torch_min=e["torch_min"],
        )
        raw = make_wheel(tmp_path / f"raw{i}", group=e["group"], info=info)
        tagged = tagging.retag(raw, tmp_path / f"out{i}")
        assert tagged.name.rsplit("-", 1)[0] == e["wheel"].rsplit("-", 1)[0]


# -- the job lists of the sharded release (--stage) ------------------------------------------------


def test_shard_and_gather_entries_cover_each_kernels_build_once(full):
    from release.compile import compile_model

    ks = _kernel_set()
    builds = {(e["os"], e["cuda"], e["group"]) for e in full}
    shards = matrix.build_matrix(stage="shards", torch_abi=full[0]["torch_abi"])["include"]
    gathers = matrix.build_matrix(stage="gather", torch_abi=full[0]["torch_abi"])["include"]
    assert len(gathers) == len(builds) == len(matrix.OSES) * len(matrix.CUDA) * len(matrix.GROUPS)
    assert len({e["name"] for e in shards}) == len(shards) and len({e["artifact"] for e in shards}) == len(shards)
    for g in gathers:
        mine = [s for s in shards if s["build"] == g["build"]]
        n = compile_model.shard_count(g["os"], g["group"], "release")
        assert g["shards"] == n == len(mine) and sorted(s["shard"] for s in mine) == sorted(
            f"{k}/{n}" for k in range(1, n + 1)
        )
        for s in mine:
            assert ks.parse_shard(s["shard"]) == (int(s["shard"].split("/")[0]), n)
            assert s["command"] == " ".join(["nox", "-s", s["session"], "--", *s["args"]])
            assert s["container"] == matrix.OSES[s["os"]].image.format(cuda=s["cuda"])
    # every link entry has the gathered kernels of its own (OS, CUDA, group)
    by_artifact = {g["artifact"]: g for g in gathers}
    for e in full:
        g = by_artifact[e["kernels_artifact"]]
        assert (g["os"], g["cuda"], g["group"], g["kernel_set"]) == (e["os"], e["cuda"], e["group"], e["kernel_set"])


def test_shard_and_gather_sessions_are_the_archive_sessions():
    """The shard and gather sessions are archive_<group> and archive_gather (noxfile.py, item 3)."""
    sessions = {e["session"] for st in ("shards", "gather") for e in matrix.build_matrix(stage=st)["include"]}
    assert sessions == {f"archive_{g}" for g in matrix.GROUPS} | {"archive_gather"}


def test_a_ci_dry_run_has_one_shard_per_build_and_filters_apply():
    shards = matrix.build_matrix(stage="shards", kernel_set="ci", oses=["windows-2022"], cudas=["13.2"])["include"]
    assert [s["name"] for s in shards] == ["kernels-blackwell-cu132-windows-1of1", "kernels-legacy-cu132-windows-1of1"]
    assert all(s["args"][:2] == ["--kernel-set", "ci"] and s["container"] == "" for s in shards)


def test_cli_stage_output(capsys):
    assert matrix.main(["--stage", "gather", "--group", "legacy", "--os", "ubuntu-24.04"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [g["name"] for g in out["include"]] == ["gather-legacy-cu130-linux", "gather-legacy-cu132-linux"]
    assert matrix.main(["--stage", "link"]) == 0
    assert json.loads(capsys.readouterr().out) == matrix.build_matrix()
    assert matrix.main(["--stage", "all"]) == 2
    assert "unknown --stage 'all'" in capsys.readouterr().err


def _kernel_set():
    from kernels import kernel_set

    return kernel_set


def test_stable_entries_name_the_newest_torch_they_serve_for_the_second_smoke_test():
    for e in matrix.build_matrix()["include"]:
        assert e["torch_newest"] == "2.15.0" and e["torch_newest"] in e["torches"]
    for e in matrix.build_matrix(torch_abi="exact")["include"]:
        assert e["torch_newest"] == e["torch"]
