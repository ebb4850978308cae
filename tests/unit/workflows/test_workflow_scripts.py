"""Run scripts of release.yml here, against local fakes (the workflow itself cannot run here).

- the Windows CUDA step (``python -m release.windows.cuda_redist``, the same in release.yml and ci.yml):
  NVIDIA's redistributable manifest and archives are replaced by a file:// folder
  (CUDA_REDIST_URL); checks the sha256 check, the merge into one root, the nvvm check, what it
  writes to GITHUB_PATH / GITHUB_ENV, and the retries of a download;
- the step that checks the wheel name and collects the build summary (bash);
- the shard job's check of its kernels archive, and the link job's step that finds the gathered
  archive and sizes the nvcc jobs (bash).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from _workflows import ROOT, load_workflow

WINDOWS_CUDA_STEP = "CUDA toolkit ${{ matrix.cuda_full }} (Windows, NVIDIA redistributable archives)"
CHECK_STEP = "Check the wheel name and collect the build summary"


def step(name: str, job: str = "link") -> dict:
    (found,) = [s for s in load_workflow("release.yml")["jobs"][job]["steps"] if s.get("name") == name]
    return found


def fake_archive(component: str, files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        top = f"{component}-windows-x86_64-13.0.88-archive"
        zf.writestr(f"{top}/LICENSE", component)
        for name, text in files.items():
            zf.writestr(f"{top}/{name}", text)
    return buf.getvalue()


def fake_redist(tmp: Path, version: str, components: dict[str, dict[str, str]], corrupt: str = "") -> str:
    manifest = {"release_label": version}
    for comp, files in components.items():
        data = fake_archive(comp, files)
        rel = f"{comp}/windows-x86_64/{comp}-windows-x86_64-13.0.88-archive.zip"
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / rel).write_bytes(data + (b"x" if comp == corrupt else b""))
        manifest[comp] = {
            "version": "13.0.88",
            "windows-x86_64": {"relative_path": rel, "sha256": hashlib.sha256(data).hexdigest()},
        }
    (tmp / f"redistrib_{version}.json").write_text(json.dumps(manifest), encoding="utf-8")
    return tmp.as_uri() + "/"


def run_windows_cuda_step(
    tmp_path: Path, components: dict, corrupt: str = ""
) -> tuple[subprocess.CompletedProcess, Path]:
    s = step(WINDOWS_CUDA_STEP)
    assert s["if"] == "runner.os == 'Windows'" and s["run"] == "python -m release.windows.cuda_redist"
    assert s["env"]["PYTHONPATH"] == "src" and s["env"]["CUDA_FULL"] == "${{ matrix.cuda_full }}"
    redist = tmp_path / "redist"
    redist.mkdir(parents=True)
    root = tmp_path / "cuda"
    env = dict(
        os.environ,
        CUDA_FULL="13.0.2",
        CUDA_ROOT=str(root),
        CUDA_REDIST_URL=fake_redist(redist, "13.0.2", components, corrupt),
        GITHUB_PATH=str(tmp_path / "github_path"),
        GITHUB_ENV=str(tmp_path / "github_env"),
    )
    env["PYTHONPATH"] = str(ROOT / s["env"]["PYTHONPATH"])
    cmd = [sys.executable, *s["run"].split()[1:]]  # python -m release.windows.cuda_redist
    return subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp_path), root


COMPONENTS = {
    "cuda_nvcc": {"bin/nvcc.exe": "nvcc", "include/crt/host_config.h": "crt"},
    "libnvvm": {"nvvm/bin/cicc.exe": "cicc"},
    "cuda_cudart": {"include/cuda_runtime.h": "rt", "lib/x64/cudart.lib": "lib"},
    "cuda_cccl": {"include/cccl/cuda/std/version": "cccl"},
}


def test_windows_cuda_step_installs_checked_archives_into_one_root(tmp_path):
    proc, root = run_windows_cuda_step(tmp_path, COMPONENTS)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for files in COMPONENTS.values():
        for name in files:
            assert (root / name).is_file(), name
    assert "cuda_crt: not in redistrib_13.0.2.json, skipped" in proc.stdout  # optional components may be absent
    assert (tmp_path / "github_path").read_text().splitlines() == [str(root / "bin")]
    env = (tmp_path / "github_env").read_text().splitlines()
    assert f"CUDA_PATH={root}" in env and f"CUDACXX={root / 'bin' / 'nvcc.exe'}" in env


def test_windows_cuda_step_refuses_a_corrupt_archive(tmp_path):
    proc, _ = run_windows_cuda_step(tmp_path, COMPONENTS, corrupt="cuda_cudart")
    assert proc.returncode != 0 and "cuda_cudart: sha256" in proc.stderr


def test_windows_cuda_step_needs_the_required_components_and_nvvm(tmp_path):
    proc, _ = run_windows_cuda_step(tmp_path, {k: v for k, v in COMPONENTS.items() if k != "cuda_cccl"})
    assert proc.returncode != 0 and "no windows-x86_64 cuda_cccl" in proc.stderr  # or its new name, cccl
    proc, _ = run_windows_cuda_step(tmp_path / "b", {k: v for k, v in COMPONENTS.items() if k != "libnvvm"})
    assert proc.returncode != 0 and "no nvvm/bin" in proc.stderr


def test_ci_windows_job_installs_cuda_with_the_same_module():
    (job_step,) = [
        st
        for st in load_workflow("ci.yml")["jobs"]["wheel-ci-windows"]["steps"]
        if st.get("run") == "python -m release.windows.cuda_redist"
    ]
    assert job_step["env"]["PYTHONPATH"] == "src"
    assert job_step["env"]["CUDA_FULL"] == "${{ matrix.cuda_full }}"  # each Windows CUDA of the release matrix


def test_cuda_redist_without_its_variables_says_which_and_help_works(monkeypatch, capsys):
    from release.windows import cuda_redist

    for name in cuda_redist.REQUIRED_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CUDA_FULL", "13.0.2")
    assert cuda_redist.main([]) == 2
    err = capsys.readouterr().err
    assert "set CUDA_ROOT, GITHUB_PATH, GITHUB_ENV in the environment" in err and "internal error" not in err
    with pytest.raises(SystemExit) as exit_:
        cuda_redist.main(["--help"])
    assert exit_.value.code == 0 and "CUDA_FULL (e.g. 13.0.2)" in capsys.readouterr().out


def test_a_download_is_retried_then_fails(tmp_path):
    from release.windows import cuda_redist

    waits = []
    missing = (tmp_path / "nothing.json").as_uri()
    with pytest.raises(OSError):
        cuda_redist.fetch(missing, timeout=1, sleep=waits.append)
    assert waits == list(cuda_redist.RETRY_DELAYS)
    (tmp_path / "ok.json").write_text("{}")
    assert cuda_redist.fetch((tmp_path / "ok.json").as_uri(), timeout=1, sleep=waits.append) == b"{}"


@pytest.fixture
def bash() -> str:
    if os.name == "nt":
        pytest.skip("the step runs under bash on Linux runners: not on Windows")
    found = shutil.which("bash")
    assert found, "bash is not on PATH (the workflow steps run under bash)"
    return found


def run_check_step(bash: str, tmp_path: Path, wheel: str, summaries: int) -> subprocess.CompletedProcess:
    s = step(CHECK_STEP)
    (tmp_path / "wheelhouse").mkdir(parents=True)
    (tmp_path / "wheelhouse" / wheel).write_bytes(b"wheel")
    (tmp_path / "wheelhouse" / f"{wheel}.sha256").write_text("x")
    for i in range(summaries):
        (tmp_path / "b" / f"key{i}").mkdir(parents=True)
        (tmp_path / "b" / f"key{i}" / "flash_attn_build_summary.json").write_text("{}")
    fake_bin = tmp_path / "fakebin"
    fake_bin.mkdir()
    (fake_bin / "sccache").write_text("#!/bin/sh\necho sccache stats\n")
    (fake_bin / "sccache").chmod(0o755)
    expected = "flash_attn-2.8.3.post2+cu130torch2.14.1cxx11abitrue.legacy.rev1-cp310-abi3-linux_x86_64.whl"
    env = dict(
        os.environ,
        EXPECTED=expected,
        NAME="legacy-cu130-torch2.14.1-linux",
        BUILD_ROOT=str(tmp_path / "b"),
        PATH=f"{fake_bin}{os.pathsep}{os.environ['PATH']}",
    )
    # the runner's default: bash --noprofile --norc -eo pipefail {0}
    return subprocess.run(
        [bash, "--noprofile", "--norc", "-eo", "pipefail", "-c", s["run"]],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )


def test_check_step_collects_the_summary(bash, tmp_path):
    wheel = "flash_attn-2.8.3.post2+cu130torch2.14.1cxx11abitrue.legacy.rev1-cp310-abi3-linux_x86_64.whl"
    proc = run_check_step(bash, tmp_path, wheel, summaries=1)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "wheelhouse" / "build-summary-legacy-cu130-torch2.14.1-linux.json").is_file()


def test_check_step_fails_on_another_wheel_name_or_no_summary(bash, tmp_path):
    proc = run_check_step(bash, tmp_path / "a", "flash_attn-2.8.3.post2-cp310-abi3-linux_x86_64.whl", summaries=1)
    assert proc.returncode != 0 and "::error::expected wheelhouse/" in proc.stdout
    wheel = "flash_attn-2.8.3.post2+cu130torch2.14.1cxx11abitrue.legacy.rev1-cp310-abi3-linux_x86_64.whl"
    proc = run_check_step(bash, tmp_path / "b", wheel, summaries=0)
    assert proc.returncode != 0 and "::error::expected one build summary" in proc.stdout


def job_step(job: str, pred) -> dict:
    (found,) = [s for s in load_workflow("release.yml")["jobs"][job]["steps"] if pred(s)]
    return found


def run_bash_step(bash: str, script: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [bash, "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        cwd=cwd,
        env=dict(os.environ, **env),
        capture_output=True,
        text=True,
    )


@pytest.mark.parametrize(
    "event, ref, publish",
    [("push", "TAG", "true"), ("workflow_dispatch", "TAG", "false"), ("push", "refs/heads/main", "false")],
)
def test_gate_step_of_the_workflow(bash, tmp_path, event, ref, publish):
    from release._paths import package_version
    from release.ship.gates import expected_tag

    s = job_step("matrix", lambda st: st.get("id") == "gate")
    tag = expected_tag(package_version())
    out = tmp_path / "out"
    env = {k: "" for k in s["env"]} | {"EVENT": event, "REF": f"refs/tags/{tag}" if ref == "TAG" else ref}
    proc = run_bash_step(bash, s["run"], ROOT, env | {"GITHUB_OUTPUT": str(out), "GITHUB_STEP_SUMMARY": ""})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert out.read_text().splitlines()[0] == f"publish={publish}"


def test_gate_step_stops_a_tag_that_is_not_the_version(bash, tmp_path):
    s = job_step("matrix", lambda st: st.get("id") == "gate")
    env = {k: "" for k in s["env"]} | {"EVENT": "push", "REF": "refs/tags/v0.0.1", "GITHUB_OUTPUT": str(tmp_path / "o")}
    proc = run_bash_step(bash, s["run"], ROOT, env)
    assert proc.returncode != 0 and "tag 'v0.0.1' does not match flash_attn/_version.py" in proc.stderr


@pytest.mark.parametrize("drop", [0, 1])
def test_publish_verify_step_needs_every_wheel_of_the_release(bash, tmp_path, drop):
    from release import checksums
    from release.plan import matrix
    from release.ship import gates

    s = job_step("publish", lambda st: "release.ship.gates sums" in st.get("run", ""))
    work = tmp_path / "w"
    shutil.copytree(ROOT / "src", work / "src")
    shutil.copytree(ROOT / "flash_attn", work / "flash_attn", ignore=shutil.ignore_patterns("*.so", "*.pyd"))
    shutil.copy2(ROOT / "build-manifest.json", work / "build-manifest.json")  # the publish job checks out the repo
    folder = work / "dist" / "release"
    folder.mkdir(parents=True)
    names = gates.expected_wheels(matrix.build_matrix())
    for n in names[drop:]:
        (folder / n).write_bytes(n.encode())
    checksums.write_sha256sums(list(folder.iterdir()), folder / "SHA256SUMS")
    proc = run_bash_step(bash, s["run"], work, {})
    if drop:
        assert proc.returncode != 0 and f"covers {len(names) - 1} of the {len(names)} wheels" in proc.stderr
    else:
        assert proc.returncode == 0, proc.stdout + proc.stderr


SHARD_CHECK_STEP = "Check the shard archive and collect the compile timeline"
LINK_KERNELS_STEP = "The kernels archive, parallel jobs and the build root"


def run_shard_check(bash: str, tmp_path: Path, archives: int, manifest: bool = True) -> subprocess.CompletedProcess:
    s = step(SHARD_CHECK_STEP, job="shard")
    assert s["env"] == {"NAME": "${{ matrix.name }}"}
    for i in range(archives):
        folder = tmp_path / "kernels" / f"kernels-legacy-release-0123456789a{i}-shard{i + 1}of8"
        folder.mkdir(parents=True)
        if manifest:
            (folder / "kernels-manifest.json").write_text("{}")
    (tmp_path / "b" / "key").mkdir(parents=True)
    (tmp_path / "b" / "key" / "flash_attn_build_trace.json").write_text('{"traceEvents": []}')
    fake_bin = tmp_path / "fakebin"
    fake_bin.mkdir()
    (fake_bin / "sccache").write_text("#!/bin/sh\necho sccache stats\n")
    (fake_bin / "sccache").chmod(0o755)
    env = {"NAME": "kernels-legacy-cu130-linux-1of8", "BUILD_ROOT": str(tmp_path / "b")}
    env["PATH"] = f"{fake_bin}{os.pathsep}{os.environ['PATH']}"
    return run_bash_step(bash, s["run"], tmp_path, env)


def test_shard_check_keeps_the_archive_and_the_trace(bash, tmp_path):
    proc = run_shard_check(bash, tmp_path, archives=1)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "kernels" / "build-trace-kernels-legacy-cu130-linux-1of8.json").is_file()


@pytest.mark.parametrize("archives, manifest", [(0, True), (2, True), (1, False)])
def test_shard_check_fails_without_exactly_one_archive_with_a_manifest(bash, tmp_path, archives, manifest):
    proc = run_shard_check(bash, tmp_path, archives=archives, manifest=manifest)
    assert proc.returncode != 0 and "::error::expected one kernels archive" in proc.stdout


@pytest.mark.parametrize("archives", [1, 0])
def test_link_step_finds_the_gathered_archive_and_sizes_the_jobs(bash, tmp_path, archives):
    s = step(LINK_KERNELS_STEP)
    assert s["env"] == {"PYTHONPATH": "src"}
    for i in range(archives):
        (tmp_path / "kernels" / f"kernels-legacy-release-0123456789a{i}").mkdir(parents=True)
    github_env = tmp_path / "github_env"
    env = {"GITHUB_ENV": str(github_env), "RUNNER_OS": "Linux", "RUNNER_TEMP": str(tmp_path / "t")}
    env["PYTHONPATH"] = str(ROOT / "src")
    proc = run_bash_step(bash, s["run"], tmp_path, env)
    if not archives:
        assert proc.returncode != 0 and "::error::expected one gathered kernels archive" in proc.stdout
        return
    assert proc.returncode == 0, proc.stdout + proc.stderr
    from release.plan import plan

    lines = github_env.read_text().splitlines()
    assert lines == [
        "KERNELS_DIR=kernels/kernels-legacy-release-0123456789a0",
        f"FLASH_ATTN_JOBS={plan.jobs_here()}",
        f"BUILD_ROOT={tmp_path / 't' / 'b'}",
    ]
