"""The rehearsal's GitHub rules on small inputs: scheduling by needs:, the token's permissions, "Re-run
failed jobs", PowerShell's argument passing into the entry points' parsers, and the model-only
mode's scenarios (release.workflow.gha, release.workflow.pwsh_args, release.workflow.workflow_model)."""

from __future__ import annotations

import pytest

from release.workflow import gha, pwsh_args, workflow_model

JOBS = {
    "publish": {"needs": ["assemble"]},
    "matrix": {},
    "assemble": {"needs": ["link"]},
    "link": {"needs": ["matrix", "gather"]},
    "gather": {"needs": "shard"},
    "shard": {"needs": "matrix"},
}


def test_jobs_run_by_needs_not_file_order():
    assert gha.topological_order(JOBS) == ["matrix", "shard", "gather", "link", "assemble", "publish"]
    assert gha.transitive_needs(JOBS, "link") == {"matrix", "shard", "gather"}


@pytest.mark.parametrize(
    "jobs, message",
    [({"a": {"needs": "b"}}, "not a job"), ({"a": {"needs": "b"}, "b": {"needs": "a"}}, "a cycle")],
)
def test_an_unknown_need_or_a_cycle_is_refused(jobs, message):
    with pytest.raises(gha.WorkflowError, match=message):
        gha.topological_order(jobs)


def test_a_job_permissions_block_replaces_the_workflows():
    wf = {"permissions": {"contents": "write", "actions": "read"}}
    job = gha.job_permissions(wf, {"permissions": {"pages": "write"}})
    assert job["pages"] == "write" and job["contents"] == "none" and job["actions"] == "none"
    assert gha.job_permissions(wf, {})["contents"] == "write"
    assert gha.job_permissions({}, {})["contents"] == "read"  # the restricted default
    assert gha.job_permissions({}, {"permissions": "write-all"})["id-token"] == "write"


@pytest.mark.parametrize(
    "step, needed",
    [
        ({"run": 'gh release upload "$TAG" dist/* --clobber'}, {"contents": "write"}),
        ({"run": "gh workflow run index.yml --ref main"}, {"actions": "write"}),
        ({"run": 'gh api "repos/$R/actions/runs/$ID"'}, {"actions": "read"}),
        ({"uses": "actions/deploy-pages@x"}, {"pages": "write", "id-token": "write"}),
        ({"uses": "actions/attest-build-provenance@x"}, {"id-token": "write", "attestations": "write"}),
        ({"uses": "actions/download-artifact@x", "with": {"run-id": "1"}}, {"actions": "read"}),
        ({"uses": "actions/download-artifact@x", "with": {"name": "a"}}, {}),
    ],
)
def test_what_a_step_needs_of_the_token(step, needed):
    assert gha.step_permissions(step) == needed


def test_write_implies_read_and_none_is_missing():
    assert gha.missing_permissions({"contents": "write"}, {"contents": "read"}) == []
    assert gha.missing_permissions({"contents": "read"}, {"contents": "write"}) == ["contents: write"]


def test_rerun_failed_jobs_takes_their_dependents_and_keeps_the_rest():
    results = {"matrix": "success", "shard": "failure", "gather": "skipped", "link": "skipped"}
    results |= {"assemble": "skipped", "publish": "skipped"}
    assert gha.rerun_selection(JOBS, results) == {"shard", "gather", "link", "assemble", "publish"}


def test_cancelled_is_a_status_function_of_its_own():
    assert gha.condition("${{ !cancelled() }}", {}, {"success": False, "failure": False, "cancelled": True}) is False
    assert gha.condition("${{ always() }}", {}, {"success": False, "failure": False, "cancelled": True}) is True


@pytest.mark.parametrize(
    "line, expected",
    [
        ("nox -s $env:S -- @a --out k", ["nox", "-s", "archive_legacy", "--", "--x", "1", "--out", "k"]),
        ("nox -s $env:S -- $a", ["nox", "-s", "archive_legacy", "--", "--x", "1"]),  # an array: one per element
        ("nox -s $env:S -- $env:ARGS", ["nox", "-s", "archive_legacy", "--", "--x 1"]),  # a string: ONE argument
        ('nox -s $env:S -- "$a"', ["nox", "-s", "archive_legacy", "--", "--x 1"]),  # quoted array: joined
        ("nox -s 'it''s' `\n  -- x # comment", ["nox", "-s", "it's", "--", "x"]),
    ],
)
def test_pwsh_passes_arguments_as_powershell_7_does(line, expected):
    script = "$a = $env:ARGS -split ' '\n" + line
    assert pwsh_args.native_calls(script, {"S": "archive_legacy", "ARGS": "--x 1"}) == [expected]


def test_an_entry_point_refuses_arguments_joined_into_one():
    env = {"SESSION": "archive_legacy", "SESSION_ARGS": "--kernel-set ci --shard 1/2"}
    good = "$s = $env:SESSION_ARGS -split ' '\nnox -s $env:SESSION -- @s --out kernels"
    assert pwsh_args.check_script(good, env) == []
    joined = pwsh_args.check_script(good.replace("@s", "$env:SESSION_ARGS"), env)
    assert len(joined) == 1 and "unrecognized arguments: --kernel-set ci --shard 1/2" in joined[0]


def test_the_model_passes_a_clean_chain_and_reports_a_race():
    wf = {
        "on": {"push": {}},
        "jobs": {
            "a": {"runs-on": "ubuntu-24.04", "steps": [{"uses": "actions/upload-artifact@x", "with": {"name": "k"}}]},
            "b": {
                "needs": "a",
                "runs-on": "ubuntu-24.04",
                "steps": [{"uses": "actions/download-artifact@x", "with": {"name": "k"}}],
            },
        },
    }
    model = workflow_model.Model({"w.yml": wf}, lambda w, r: workflow_model.Declared())
    model.scenario(workflow_model.Scenario("ok", "w.yml", "push", "refs/heads/main", expect={"b": "success"}))
    assert model.problems == []
    wf["jobs"]["b"]["needs"] = []
    model.scenario(workflow_model.Scenario("race", "w.yml", "push", "refs/heads/main", expect={"b": "success"}))
    assert len(model.problems) == 1 and "not in its needs" in model.problems[0]


def test_an_upload_an_earlier_attempt_left_conflicts_unless_named_per_attempt():
    up = {"uses": "actions/upload-pages-artifact@x", "with": {"name": "NAME", "path": "site"}}
    fail = {"run": "exit 1"}
    for name, conflicts in (("github-pages", True), ("github-pages-${{ github.run_attempt }}", False)):
        step = up | {"with": {"name": name, "path": "site"}}
        wf = {"on": {"push": {}}, "jobs": {"j": {"runs-on": "ubuntu-24.04", "steps": [step, fail]}}}
        model = workflow_model.Model({"w.yml": wf}, lambda w, r: workflow_model.Declared())
        sc = workflow_model.Scenario("r", "w.yml", "push", "refs/heads/main", fail={"j": 0}, rerun=True)
        model.scenario(sc)
        assert any("409" in p for p in model.problems) == conflicts, model.problems
