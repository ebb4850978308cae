"""What would have stopped the release workflow's first real run (issue 25), one test per fix.

Each test fails on the workflow and code before the fix; docs/ci.md ("The first real run") says
what each finding was and where its GitHub or torch fact comes from.
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path

import pytest

from release.plan import matrix
from release.ship import gates
from release.workflow import gha, rehearsal

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def release_yml():
    return rehearsal.load_workflow(ROOT / ".github" / "workflows" / "release.yml")


# 1. torch reports the C++11 ABI flag as set on every platform --------------------------------------------


def test_every_os_label_carries_the_abi_flag_torch_reports():
    torch = pytest.importorskip("torch")
    source = inspect.getsource(torch.compiled_with_cxx11_abi)
    if not source.rstrip().endswith("return True"):
        pytest.skip("this torch computes compiled_with_cxx11_abi(): the fact below was read from torch 2.14.1")
    for name, info in matrix.OSES.items():
        assert info.cxx11_abi is True, f"{name}: torch's flag is True on every OS; the label must say cxx11abitrue"
    win = matrix.entry("windows-2022", "legacy", "13.0", "2.14.1", torch_abi="exact")
    assert "cxx11abitrue" in win["label"] and win["wheel"].endswith("win_amd64.whl")


def test_ci_windows_checks_torch_against_true():
    ci = (ROOT / ".github" / "workflows" / "ci.yml").read_text(encoding="utf-8")
    assert "--cxx11-abi false" not in ci


# 2. Only torch comes from the PyTorch index -------------------------------------------------------------


def test_no_nox_step_points_pip_at_the_pytorch_index(release_yml):
    for job_id, job in release_yml["jobs"].items():
        for step in job.get("steps") or []:
            env = step.get("env") or {}
            if "nox " in str(step.get("run", "")):
                for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "UV_INDEX_URL"):
                    assert var not in env, f"{job_id}: {step.get('name')}: nox's pins would come from {var}"


def test_the_newest_torch_smoke_test_takes_torch_alone_from_the_index(release_yml):
    step = next(s for s in release_yml["jobs"]["link"]["steps"] if "torch_newest" in str(s.get("name", "")))
    assert '--torch-index "$TORCH_INDEX"' in step["run"] and step["env"]["TORCH_INDEX"] == "${{ matrix.torch_index }}"


def test_smoke_installs_torch_from_the_index_it_is_given(tmp_path, monkeypatch):
    from release.ship import smoke

    calls = []

    class Proc:
        returncode, stdout, stderr = 0, "2.14.1+cu130\n", ""

    def fake_run(cmd, **kw):
        calls.append(cmd)
        return Proc()

    monkeypatch.setattr(smoke.subprocess, "run", fake_run)
    smoke._match_torch(tmp_path / "python", {}, tmp_path, "2.15.0", "https://download.pytorch.org/whl/cu130")
    install = calls[-1]
    assert install[-3:] == ["--index-url", "https://download.pytorch.org/whl/cu130", "torch==2.15.0"]


# 5. download-artifact extracts a single matching artifact straight into path ----------------------------


def _gather_script(release_yml) -> str:
    return next(s["run"] for s in release_yml["jobs"]["gather"]["steps"] if "archive_gather" in str(s.get("run", "")))


@pytest.mark.parametrize("shards", [1, 2])
@pytest.mark.skipif(os.name == "nt", reason="runs the step's bash script, not on Windows")
def test_gather_finds_its_shards_in_either_layout(release_yml, tmp_path, shards):
    import subprocess

    store = tmp_path / "store"
    for k in range(1, shards + 1):
        archive = store / f"kernels-legacy-cu130-linux-shard{k}of{shards}" / f"kernels-abc-shard{k}of{shards}"
        archive.mkdir(parents=True)
        (archive / "kernels-manifest.json").write_text("{}")
    work = tmp_path / "work"
    gha.download_artifact(store, work / "shards", pattern="kernels-legacy-cu130-linux-shard*")
    (tmp_path / "bin").mkdir()
    for tool in ("python", "nox"):  # the script's installs and the gather itself: record, do nothing
        (tmp_path / "bin" / tool).write_text(
            f'#!/bin/sh\necho "{tool} $*" >> "{tmp_path}/calls"\nmkdir -p kernels-gathered\n'
        )
        (tmp_path / "bin" / tool).chmod(0o755)
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "SHARDS": str(shards)}
    proc = subprocess.run([*rehearsal.BASH, "-c", _gather_script(release_yml)], cwd=work, env=env, text=True,
                          capture_output=True)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    gather = [c for c in (tmp_path / "calls").read_text().splitlines() if "archive_gather" in c][0]
    assert gather.count("kernels-abc-shard") == shards


# 6. from_run: the publish job must not carry the implicit success() ------------------------------------


def test_publish_runs_after_a_from_run_assemble(release_yml):
    jobs = release_yml["jobs"]
    results = {"matrix": "success", "shard": "skipped", "gather": "skipped", "link": "skipped", "assemble": "success"}
    ctx = {
        "needs": {n: {"result": results[n], "outputs": {"publish": "true"}} for n in ("matrix", "assemble")},
        "inputs": {"from_run": "123"},
    }
    ancestors = {"matrix", "shard", "gather", "link", "assemble"}
    status = {"success": all(results[a] == "success" for a in ancestors), "failure": False}
    assert gha.condition(jobs["publish"]["if"], ctx, status), "publish is skipped after a from_run assemble"
    failed = ctx | {"needs": ctx["needs"] | {"assemble": {"result": "failure", "outputs": {}}}}
    assert not gha.condition(jobs["publish"]["if"], failed, {"success": False, "failure": True})


# 8. assemble takes exactly the matrix's wheel artifacts -----------------------------------------------


def _entries(n: int) -> dict:
    return {"include": [{"name": f"w{k}", "wheel": f"flash_attn-1+w{k}-cp310-abi3-linux_x86_64.whl"} for k in range(n)]}


def _artifact(folder: Path, entry: dict, extra: str = "") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for f in sorted(gates.artifact_files(entry)) + ([extra] if extra else []):
        (folder / f).write_text(f)


@pytest.mark.parametrize("n", [1, 2])
def test_assemble_copies_exactly_the_matrix_artifacts(tmp_path, n):
    doc = _entries(n)
    store = tmp_path / "store"
    for e in doc["include"]:
        _artifact(store / f"wheel-{e['name']}", e)
    gha.download_artifact(store, tmp_path / "artifacts", pattern="wheel-*")
    copied = gates.check_artifacts(tmp_path / "artifacts", doc, tmp_path / "wheels")
    assert sorted(copied) == sorted(f for e in doc["include"] for f in gates.artifact_files(e))


def test_assemble_refuses_an_artifact_the_matrix_does_not_name(tmp_path):
    doc = _entries(1)
    _artifact(tmp_path / "artifacts" / "wheel-w0", doc["include"][0])
    _artifact(tmp_path / "artifacts" / "wheel-evil", {"name": "evil", "wheel": doc["include"][0]["wheel"]})
    with pytest.raises(gates.ReleaseError, match="wheel-evil is not one of the matrix"):
        gates.check_artifacts(tmp_path / "artifacts", doc, tmp_path / "wheels")
    with pytest.raises(gates.ReleaseError, match="missing artifact wheel-w1"):
        gates.check_artifacts(tmp_path / "artifacts", _entries(2), tmp_path / "wheels")


def test_assemble_refuses_a_file_an_artifact_should_not_hold(tmp_path):
    doc = _entries(2)
    _artifact(tmp_path / "artifacts" / "wheel-w0", doc["include"][0], extra=doc["include"][1]["wheel"])
    _artifact(tmp_path / "artifacts" / "wheel-w1", doc["include"][1])
    with pytest.raises(gates.ReleaseError, match="artifact wheel-w0 holds"):
        gates.check_artifacts(tmp_path / "artifacts", doc, tmp_path / "wheels")


def test_assemble_downloads_unmerged_and_gates_the_names(release_yml):
    steps = release_yml["jobs"]["assemble"]["steps"]
    downloads = [s for s in steps if str(s.get("uses", "")).startswith("actions/download-artifact@")]
    assert downloads and all("merge-multiple" not in s["with"] for s in downloads)
    gate = [i for i, s in enumerate(steps) if "release.ship.gates artifacts" in str(s.get("run", ""))]
    release = [i for i, s in enumerate(steps) if "nox -s release" in str(s.get("run", ""))]
    assert gate and release and gate[0] < release[0] and "--wheels wheels" in steps[release[0]]["run"]


# 7. the kernels key survives a runner-image rollout in the middle of a release --------------------------


def test_the_kernels_key_holds_the_host_compilers_major_version_and_no_path():
    cmake = (ROOT / "cmake" / "FlashAttnKernels.cmake").read_text(encoding="utf-8")
    (line,) = [x for x in cmake.splitlines() if x.strip().startswith("host_compiler ")]
    assert "CMAKE_CUDA_HOST_COMPILER" not in line and "CMAKE_CXX_COMPILER_VERSION" not in line
    assert line.split() == ["host_compiler", '"${CMAKE_CXX_COMPILER_ID}', '${host_major}"']


# 11. CUDA 13.3's redistributable names CCCL "cccl" -------------------------------------------------------


def test_windows_cuda_takes_cccl_under_its_new_name(tmp_path):
    from test_workflow_scripts import COMPONENTS, run_windows_cuda_step

    renamed = {("cccl" if k == "cuda_cccl" else k): v for k, v in COMPONENTS.items()}
    proc, root = run_windows_cuda_step(tmp_path, renamed)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (root / "include/cccl/cuda/std/version").is_file() and "\ncccl " in proc.stdout
    proc, _ = run_windows_cuda_step(tmp_path / "b", {k: v for k, v in COMPONENTS.items() if k != "cuda_cccl"})
    assert proc.returncode != 0 and "no windows-x86_64 cuda_cccl or cccl" in proc.stderr
