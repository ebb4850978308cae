"""The release rehearsal's harness (release.workflow.rehearsal) on small workflows: job chain, if: rules,
outputs, artifacts, and the static checks of the Windows steps. The real rehearsal (it compiles)
is tests/real_builds/test_release_rehearsal.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from release import manifest
from release.workflow import rehearsal

ROOT = Path(__file__).resolve().parents[3]
import yaml  # noqa: E402  (tool_pins.test)

pytestmark = pytest.mark.skipif(os.name == "nt", reason="the rehearsal runs bash steps, not on Windows")

CHAIN = """
on: {workflow_dispatch: {inputs: {from_run: {default: ""}}}}
defaults: {run: {shell: bash}}
jobs:
  plan:
    runs-on: ubuntu-24.04
    outputs: {publish: "${{ steps.g.outputs.publish }}", list: "${{ steps.g.outputs.list }}"}
    steps:
      - id: g
        run: |
          echo publish=true >> "$GITHUB_OUTPUT"
          echo 'list={"include": [{"n": "a"}, {"n": "b"}]}' >> "$GITHUB_OUTPUT"
  build:
    needs: plan
    if: ${{ !inputs.from_run }}
    runs-on: ubuntu-24.04
    strategy: {matrix: "${{ fromJSON(needs.plan.outputs.list) }}"}
    steps:
      - run: mkdir out && echo "${{ matrix.n }}" > "out/${{ matrix.n }}.txt"
      - uses: actions/upload-artifact@x # v7
        with: {name: "part-${{ matrix.n }}", path: out/, if-no-files-found: error}
  collect:
    needs: [plan, build]
    if: ${{ always() && (needs.build.result == 'success' || inputs.from_run != '') }}
    runs-on: ubuntu-24.04
    permissions: {actions: read}  # download-artifact from another run (run-id)
    steps:
      - uses: actions/download-artifact@x # v8
        with: {pattern: "part-*", path: parts, run-id: "${{ inputs.from_run }}"}
      - run: ls parts/part-a/a.txt parts/part-b/b.txt
  publish:
    needs: [plan, collect]
    if: PUBLISH_IF
    runs-on: ubuntu-24.04
    steps:
      - run: echo published
"""


def _rehearse(
    tmp_path, publish_if: str, from_run: str = "", collect_permissions: str = "{actions: read}"
) -> tuple[list[str], list[str]]:
    wf = yaml.safe_load(CHAIN.replace("PUBLISH_IF", publish_if).replace("{actions: read}", collect_permissions))
    wf["on"] = wf.pop(True)
    log: list[str] = []
    reh = rehearsal.Rehearsal(tmp_path / "r", wf, repo=ROOT, log=log.append)
    reh._checkout = lambda: None  # the steps need no copy of the repository
    runs = [("1", {}, ("plan", "build", "collect", "publish"), ())]
    if from_run:
        runs.append(("2", {"from_run": "1"}, ("plan", "collect", "publish"), ("build",)))
    problems = []
    for run_id, inputs, run, skip in runs:
        sc = rehearsal.Scenario(f"run{run_id}", "workflow_dispatch", "refs/heads/main", inputs, {}, run, skip)
        problems += reh.run(sc, run_id, tmp_path / "manifest.json")
    return problems, log


def test_a_chain_runs_with_outputs_matrix_and_nested_artifacts(tmp_path):
    problems, log = _rehearse(tmp_path, "${{ always() && needs.collect.result == 'success' }}")
    assert problems == [], "\n".join(log + problems)
    assert "[run1] job publish: success" in log


def test_an_if_without_a_status_function_skips_after_skipped_ancestors(tmp_path):
    """actions/runner#2205: the implicit success() is false when a job of the chain was skipped."""
    problems, log = _rehearse(tmp_path, "needs.plan.outputs.publish == 'true'", from_run="1")
    assert "[run2] job build: skipped" in log and "[run2] job collect: success" in log
    assert problems == ["[run2] job publish must end success; it was skipped"]
    fixed, _ = _rehearse(tmp_path / "b", "${{ always() && needs.collect.result == 'success' }}", from_run="1")
    assert fixed == []


def test_release_yml_windows_steps_pass_the_static_checks():
    assert rehearsal.windows_findings(rehearsal.load_workflow(ROOT / ".github" / "workflows" / "release.yml")) == []


def test_the_static_checks_catch_each_windows_mistake():
    steps = [
        {"name": "build", "env": {"SESSION": "x"}, "run": 'nox -s "$SESSION" -- --out k'},
        {"name": "two", "shell": "pwsh", "run": "nox -s wheel_legacy\nnox -s smoke"},
        {"name": "linux", "run": "ls /opt/python"},
        {"name": "quote", "run": 'root="C:\\b"'},
        {"name": "cmd", "shell": "cmd", "run": "dir"},
        {"name": "linux only", "if": "runner.os == 'Linux'", "run": "ls /opt/python"},
    ]
    found = rehearsal.windows_findings({"jobs": {"j": {"runs-on": "${{ matrix.runner }}", "steps": steps}}})
    assert len(found) == 5, found
    for needle in ("must run under pwsh", "PSNativeCommandUseErrorActionPreference", "Linux-only path", "C:\\b", "cmd"):
        assert any(needle in f for f in found), needle


def test_the_rehearsal_manifest_is_the_release_cut_to_this_machine():
    m = rehearsal.rehearsal_manifest(
        manifest.load(),
        ("13.0", Path("/usr/local/cuda-13.0"), "13.0.88"),
        {"torch_index": "file:///idx/", "torches": ["2.14.1"], "torch_min": "2.11", "sets": {"ci": ["fwd_hdim64_fp16"]},
         "job_limit_minutes": 30},
    )  # fmt: skip
    rm = m["release_matrix"]
    assert (
        list(rm["oses"]) == ["ubuntu-24.04"]
        and rm["cuda"] == {"13.0": "13.0.88"}
        and rm["torch"] == {"2.14.1": ["13.0"]}
    )
    legacy = [g for g in m["arch_groups"] if g["released"]]
    assert [(g["name"], g["sms"]) for g in legacy] == [("legacy", [80])]
    assert m["kernels"]["sets"]["ci"]["units"] == ["fwd_hdim64_fp16"] and m["release_plan"]["job_limit_minutes"] == 30


def test_the_runs_of_a_release():
    runs = rehearsal.scenarios("2.9.2", "2.14.1")
    names = ["dispatch-ci", "tag-push", "from-run", "re-run", "published", "index", "after-publish"]
    assert [r.name for r in runs] == names
    by = {r.name: r for r in runs}
    assert by["dispatch-ci"].inputs == {"kernel_set": "ci"} and "publish" in by["dispatch-ci"].expect_skip
    assert by["tag-push"].ref == "refs/tags/v2.9.2-rev1" and by["tag-push"].manifest["torches"] == [
        "2.14.1",
        "2.14.1.0",
    ]
    assert by["from-run"].from_run == "2" and set(by["from-run"].expect_skip) == {"shard", "gather", "link"}
    assert by["re-run"].fail_job == "assemble" and "publish" in by["re-run"].expect_run
    assert by["published"].workflow == by["index"].workflow == "index.yml" and by["published"].event == "release"
    assert by["after-publish"].expect_fail == ("publish",)  # a published release is never changed


def test_a_job_without_the_permission_fails_its_step(tmp_path):
    problems, log = _rehearse(tmp_path, "${{ always() && needs.collect.result == 'success' }}", from_run="1",
                              collect_permissions="{contents: read}")  # fmt: skip
    assert any("needs actions: read; job collect's GITHUB_TOKEN lacks it" in p for p in problems), problems


def test_a_failed_attempt_is_re_run_with_its_dependents_only(tmp_path):
    wf = yaml.safe_load(CHAIN.replace("PUBLISH_IF", "${{ always() && needs.collect.result == 'success' }}"))
    wf["on"] = wf.pop(True)
    log: list[str] = []
    reh = rehearsal.Rehearsal(tmp_path / "r", wf, repo=ROOT, log=log.append)
    reh._checkout = lambda: None
    sc = rehearsal.Scenario(
        "rr", "workflow_dispatch", "refs/heads/main", {}, {}, ("plan", "build", "collect", "publish"), (),
        fail_job="collect",
    )  # fmt: skip
    assert reh.run(sc, "1", tmp_path / "manifest.json") == [], "\n".join(log)
    assert "[rr] job collect: failure" in log and "[rr] job collect: success (attempt 2)" in log
    assert "[rr] re-run failed jobs: collect, publish" in log
    assert not any(x.startswith("[rr] job build") and "attempt 2" in x for x in log)  # kept, with its artifacts


def test_a_download_of_a_job_not_in_needs_is_the_race_github_would_have(tmp_path):
    text = CHAIN.replace("PUBLISH_IF", "${{ always() }}").replace("needs: [plan, build]", "needs: [plan]")
    wf = yaml.safe_load(text.replace("(needs.build.result == 'success' || inputs.from_run != '')", "true"))
    wf["on"] = wf.pop(True)
    reh = rehearsal.Rehearsal(tmp_path / "r", wf, repo=ROOT, log=lambda _: None)
    reh._checkout = lambda: None
    sc = rehearsal.Scenario("race", "workflow_dispatch", "refs/heads/main", {}, {}, (), ())
    problems = reh.run(sc, "1", tmp_path / "manifest.json")
    assert any("downloads artifacts of build, not in collect's needs" in p for p in problems), problems
