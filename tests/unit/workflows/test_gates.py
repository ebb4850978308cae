"""release.ship.gates: which run publishes, the tag/version check, the torch and CUDA checks, SHA256SUMS coverage."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from release import checksums
from release._paths import package_version
from release.errors import ReleaseError
from release.plan import matrix
from release.ship import gates

ROOT = Path(__file__).resolve().parents[3]
VERSION = "2.8.3.post2"
TAG_NAME = f"v{VERSION}-rev1"  # src/flash_attn_wheel_names/label.py REVISION
TAG = f"refs/tags/{TAG_NAME}"
NO_FILTERS = {"os": "", "group": "", "cuda": "", "torch": ""}


def test_a_tag_push_publishes():
    got = gates.plan("push", TAG, VERSION)
    assert got.publish and got.tag == TAG_NAME


@pytest.mark.parametrize(
    "kernel_set, filters",
    [
        ("release", NO_FILTERS),  # even the full release set: a dispatch build never publishes
        ("", NO_FILTERS),
        ("ci", NO_FILTERS),
        ("release", dict(NO_FILTERS, os="windows-2022")),
        ("dev", dict(NO_FILTERS, torch="2.14")),
    ],
)
def test_a_dispatch_on_a_tag_cannot_publish(kernel_set, filters):
    got = gates.plan("workflow_dispatch", TAG, VERSION, kernel_set, filters)
    assert not got.publish and "never publishes" in got.reason


@pytest.mark.parametrize("event", ["push", "workflow_dispatch"])
def test_a_branch_never_publishes(event):
    assert not gates.plan(event, "refs/heads/main", VERSION, "ci").publish


def test_a_push_with_inputs_does_not_publish():
    assert not gates.plan("push", TAG, VERSION, "ci").publish
    assert not gates.plan("push", TAG, VERSION, "", dict(NO_FILTERS, group="legacy")).publish


@pytest.mark.parametrize("tag", ["v2.9.2", "v2.8.3.post2", "2.8.3.post2-rev1", "v2.8.3.post2-rev2", "v2.8.3.post2-rc1"])
@pytest.mark.parametrize("event", ["push", "workflow_dispatch"])
def test_the_tag_must_be_v_version(tag, event):
    with pytest.raises(ReleaseError, match=rf"tag '{tag}' does not match .*a release is tagged v2\.8\.3\.post2-rev1"):
        gates.plan(event, f"refs/tags/{tag}", VERSION)


def test_from_run_assembles_on_a_tag_only_and_takes_no_other_input():
    assert gates.plan("workflow_dispatch", TAG, VERSION, from_run="123456").publish
    assert not gates.plan("workflow_dispatch", "refs/heads/main", VERSION, from_run="123456").publish
    with pytest.raises(ReleaseError, match="not a run id"):
        gates.plan("workflow_dispatch", TAG, VERSION, from_run="https://github.com/o/r/actions/runs/1")
    with pytest.raises(ReleaseError, match="leave the other inputs empty"):
        gates.plan("workflow_dispatch", TAG, VERSION, "ci", from_run="123456")
    with pytest.raises(ReleaseError, match=r"given: os"):
        gates.plan("workflow_dispatch", TAG, VERSION, "", dict(NO_FILTERS, os="windows-2022"), "123456")
    # on a branch the inputs say which wheels the earlier (dry) run built: assembled, never published
    dry = gates.plan("workflow_dispatch", "refs/heads/main", VERSION, "ci", dict(NO_FILTERS, os="windows-2022"), "7")
    assert not dry.publish


def source_run(**overrides) -> dict:
    run = {
        "id": 42,
        "event": "push",
        "head_branch": TAG_NAME,
        "head_sha": "a" * 40,
        "path": ".github/workflows/release.yml",
        "status": "completed",
        "conclusion": "failure",  # e.g. its publish job failed: the wheels are still there
    }
    run.update(overrides)
    return run


def test_source_run_is_the_tag_push_run_of_release_yml():
    gates.check_source_run(source_run(), TAG_NAME, "a" * 40)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"event": "workflow_dispatch"}, "not a tag push"),
        ({"head_branch": "main"}, "not the tag"),
        ({"head_sha": "b" * 40}, "it built commit bbbb"),
        ({"path": ".github/workflows/ci.yml"}, "not .github/workflows/release.yml"),
        ({"status": "in_progress"}, "wait until it has completed"),
    ],
)
def test_source_run_mismatches_are_refused(overrides, message):
    with pytest.raises(ReleaseError, match=message):
        gates.check_source_run(source_run(**overrides), TAG_NAME, "a" * 40)


def test_cuda_patch_version_is_checked(tmp_path):
    (tmp_path / "version.json").write_text(json.dumps({"cuda": {"name": "CUDA SDK", "version": "13.0.1"}}))
    found = gates.read_cuda_version(tmp_path)
    assert found == "13.0.1"
    gates.check_cuda(found, "13.0.1")
    with pytest.raises(ReleaseError, match="toolkit is 13.0.1 but the matrix builds with 13.0.2"):
        gates.check_cuda(found, "13.0.2")
    with pytest.raises(ReleaseError, match="cannot read the CUDA toolkit version"):
        gates.read_cuda_version(tmp_path / "nothing")


@pytest.mark.parametrize(
    "found, message",
    [
        ({"version": "2.14.1+cu130", "cuda": "13.0", "abi": False}, "_GLIBCXX_USE_CXX11_ABI False"),
        ({"version": "2.14.1+cu132", "cuda": "13.2", "abi": True}, r"CUDA 13\.2 \(expected 13\.0"),
        ({"version": "2.14.0+cu130", "cuda": "13.0", "abi": True}, r"version 2\.14\.0\+cu130 \(expected 2\.14\.1\)"),
        ({"version": "2.14.1+cpu", "cuda": None, "abi": True}, "CUDA None"),
        (None, "not importable"),
    ],
)
def test_torch_must_be_the_entry_torch(found, message):
    gates.check_torch({"version": "2.14.1+cu130", "cuda": "13.0", "abi": True}, "2.14.1", "13.0", True)
    with pytest.raises(ReleaseError, match=message):
        gates.check_torch(found, "2.14.1", "13.0", True)


@pytest.fixture
def fake_python(tmp_path):
    """An executable that answers toolchain's torch query with a Windows torch's facts (torch 2.14.1 on
    Windows reports _GLIBCXX_USE_CXX11_ABI True, as on Linux)."""
    if os.name == "nt":
        pytest.skip("the fake interpreter is a POSIX shell script: not on Windows")
    exe = tmp_path / "python"
    exe.write_text('#!/bin/sh\necho \'{"version": "2.14.1+cu130", "cuda": "13.0", "abi": true}\'\n')
    exe.chmod(0o755)
    return str(exe)


def test_torch_command_against_the_entries_of_both_oses(fake_python, capsys):
    win = matrix.entry("windows-2022", "legacy", "13.0", "2.14.1", torch_abi="exact")
    args = ["torch", "--python", fake_python, "--torch", win["torch"], "--cuda", win["cuda"]]
    assert gates.main([*args, "--cxx11-abi", str(win["cxx11_abi"]).lower()]) == 0
    linux = matrix.entry("ubuntu-24.04", "legacy", "13.0", "2.14.1", torch_abi="exact")
    assert gates.main([*args, "--cxx11-abi", str(linux["cxx11_abi"]).lower()]) == 0
    assert gates.main([*args, "--cxx11-abi", "false"]) == 2
    assert "cxx11abifalse" in capsys.readouterr().err


def release_folder(folder: Path, names: list[str]) -> Path:
    folder.mkdir(parents=True)
    for n in names:
        (folder / n).write_bytes(n.encode())
    return checksums.write_sha256sums(list(folder.iterdir()), folder / "SHA256SUMS")


def test_sha256sums_covering_the_whole_matrix_passes(tmp_path):
    expected = gates.expected_wheels(matrix.build_matrix())
    assert len(expected) == 8  # 2 OS x 2 groups x 2 CUDA: one stable-ABI wheel each serves torch 2.11.0 to 2.15.0
    sums = release_folder(tmp_path / "r", [*expected, "validation-x.json"])
    assert len(gates.check_sums(sums, expected)) == 9


def test_an_incomplete_sha256sums_fails(tmp_path):
    expected = gates.expected_wheels(matrix.build_matrix())
    sums = release_folder(tmp_path / "r", expected[:-1])
    with pytest.raises(ReleaseError, match=r"covers 7 of the 8 wheels.*\n  missing \(1\): " + re.escape(expected[-1])):
        gates.check_sums(sums, expected)


def test_sha256sums_with_a_ci_wheel_or_a_bad_hash_fails(tmp_path):
    expected = gates.expected_wheels(matrix.build_matrix())
    ci = matrix.build_matrix(kernel_set="ci")["include"][0]["wheel"]
    sums = release_folder(tmp_path / "a", [*expected, ci])
    with pytest.raises(ReleaseError, match="not in the matrix: " + re.escape(ci)):
        gates.check_sums(sums, expected)
    sums = release_folder(tmp_path / "b", expected)
    (tmp_path / "b" / expected[0]).write_bytes(b"changed")
    with pytest.raises(ReleaseError, match="checksum mismatch"):
        gates.check_sums(sums, expected)


def test_sums_command_with_the_run_matrix_or_the_full_release(tmp_path, capsys):
    doc = matrix.build_matrix(oses=["windows-2022"], groups=["legacy"])
    (tmp_path / "m.json").write_text(json.dumps(doc))
    sums = release_folder(tmp_path / "r", gates.expected_wheels(doc))
    assert gates.main(["sums", "--sums", str(sums), "--matrix", str(tmp_path / "m.json")]) == 0
    assert gates.main(["sums", "--sums", str(sums), "--full-release"]) == 2
    assert "covers 2 of the 8 wheels" in capsys.readouterr().err


def test_plan_command_writes_the_job_outputs(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary"))
    out = tmp_path / "out"
    tag = f"refs/tags/{gates.expected_tag(package_version())}"
    assert gates.main(["plan", "--event", "push", "--ref", tag, "--github-output", str(out)]) == 0
    assert out.read_text().splitlines() == ["publish=true", f"tag={gates.expected_tag(package_version())}"]
    assert "release gate: PUBLISH" in (tmp_path / "summary").read_text()
    out.unlink()
    args = ["plan", "--event", "workflow_dispatch", "--ref", tag, "--kernel-set", "ci", "--github-output", str(out)]
    assert gates.main(args) == 0
    assert out.read_text().splitlines()[0] == "publish=false"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    capsys.readouterr()
    assert gates.main(["plan", "--event", "push", "--ref", "refs/tags/v0.0.1"]) == 2
    assert capsys.readouterr().out.startswith("::error title=release gate plan::")  # the run's summary names it


def test_gates_need_only_the_standard_library():
    """The workflow runs them with the runner's python3 before anything is installed."""
    code = (
        "import sys, release.ship.gates; "
        "bad = [m for m in ('packaging', 'wheel', 'yaml', 'rich') if m in sys.modules]; "
        "sys.exit(f'imported {bad}' if bad else 0)"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(ROOT / "src")  # as the workflow runs it: PYTHONPATH=src python3 -m release.ship.gates
    proc = subprocess.run([sys.executable, "-s", "-c", code], cwd=ROOT, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
