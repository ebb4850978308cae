"""Mutation test of the release rehearsal: realistic edits of release.yml and index.yml, each of which
would fail or mis-publish on GitHub, must each be caught by the rehearsal's model-only mode
(release.workflow.workflow_model: GitHub's scheduling, permissions, artifacts, environments, re-runs and
the Windows steps' argument parsing, in about a second per mutation, nothing compiled). The summary
line "mutations caught: N/N" is printed at the end of the pytest run (with or without -s). A
mutation whose text no longer occurs in the workflow fails here too: the list follows the workflow,
it is never silently empty.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from _workflows import WORKFLOWS

from release import _paths
from release.ship import gates
from release.workflow import workflow_model

yaml = pytest.importorskip("yaml")

COUNTS = {"caught": 0, "run": 0}


class _Summary:
    """A pytest plugin registered by this module: its line in pytest's terminal summary."""

    @staticmethod
    def pytest_terminal_summary(terminalreporter):
        if COUNTS["run"]:
            terminalreporter.write_line(f"mutations caught: {COUNTS['caught']}/{COUNTS['run']}")


@pytest.fixture(scope="module", autouse=True)
def _summary_line(request):
    """Registers _Summary (a hook added during the session still runs at its end)."""
    manager = request.config.pluginmanager
    if not manager.has_plugin("release-mutations-summary"):
        manager.register(_Summary(), "release-mutations-summary")


@dataclass(frozen=True)
class Mutation:
    name: str
    file: str
    old: str
    new: str
    github: str  # what GitHub would do with it
    reason: str  # a phrase the model's report must hold: caught for this reason, not by accident


MUTATIONS = [
    Mutation(
        "link downloads a wrong artifact name",
        "release.yml",
        "name: ${{ matrix.kernels_artifact }}",
        "name: kernels-${{ matrix.name }}",
        "download-artifact: artifact not found, every link job fails after 4-6 hours of shards",
        "no artifact kernels-",
    ),
    Mutation(
        "link needs the shards instead of gather",
        "release.yml",
        "needs: [matrix, gather]",
        "needs: [matrix, shard]",
        "link starts beside gather and races it for the gathered archive",
        "not in its needs",
    ),
    Mutation(
        "publish loses contents: write",
        "release.yml",
        "      contents: write # create the draft release",
        "      contents: read # create the draft release",
        "gh release create: HTTP 403, no release",
        "lacks contents: write",
    ),
    Mutation(
        "publish's if: loses its status function",
        "release.yml",
        "if: ${{ !cancelled() && needs.matrix.result == 'success' && needs.assemble.result == 'success'",
        "if: ${{ needs.matrix.result == 'success' && needs.assemble.result == 'success'",
        "the implicit success() skips publish after a from_run assemble (actions/runner#2205)",
        "[from-run] job publish must be success; it was skipped",
    ),
    Mutation(
        "assemble's if: uses always() instead of !cancelled()",
        "release.yml",
        "if: ${{ !cancelled() && needs.matrix.result == 'success' && (needs.link.result",
        "if: ${{ always() && needs.matrix.result == 'success' && (needs.link.result",
        "a cancelled run still assembles (and would go on to publish)",
        "[cancelled] job assemble must be not-run",
    ),
    Mutation(
        "publish's if: loses the publish gate",
        "release.yml",
        "needs.assemble.result == 'success' && needs.matrix.outputs.publish == 'true' }}",
        "needs.assemble.result == 'success' }}",
        "a kernel_set=ci dispatch on a branch tries to publish",
        "[dispatch-ci] job publish must be skipped",
    ),
    Mutation(
        "the Windows shard step passes its arguments as one string",
        "release.yml",
        "nox -s $env:SESSION -- @sessionArgs --out kernels",
        "nox -s $env:SESSION -- $env:SESSION_ARGS --out kernels",
        "argparse refuses the joined argument on every Windows shard",
        "nox -s archive_",
    ),
    Mutation(
        "the Windows link step passes its arguments as one quoted string",
        "release.yml",
        "--kernels $env:KERNELS_DIR @sessionArgs --out wheelhouse",
        '--kernels $env:KERNELS_DIR "$sessionArgs" --out wheelhouse',
        "argparse refuses the joined argument on every Windows link job",
        "nox -s wheel_",
    ),
    Mutation(
        "the Windows shard build step runs under bash",
        "release.yml",
        "        shell: pwsh\n        env:\n          SESSION: ${{ matrix.session }}",
        "        shell: bash\n        env:\n          SESSION: ${{ matrix.session }}",
        "Git bash's /usr/bin/link shadows MSVC's link.exe; the pwsh script is no bash",
        "must run under pwsh",
    ),
    Mutation(
        "a Linux shard step runs under pwsh in the manylinux container",
        "release.yml",
        "      - name: Check the shard archive and collect the compile timeline\n",
        "      - name: Check the shard archive and collect the compile timeline\n        shell: pwsh\n",
        "pwsh: command not found in PyTorch's manylinux image",
        "shell pwsh does not exist in container",
    ),
    Mutation(
        "link runs every leg on ubuntu",
        "release.yml",
        "    name: ${{ matrix.name }}\n    needs: [matrix, gather]\n    if: ${{ !inputs.from_run }}\n"
        "    runs-on: ${{ matrix.runner }}",
        "    name: ${{ matrix.name }}\n    needs: [matrix, gather]\n    if: ${{ !inputs.from_run }}\n"
        "    runs-on: ubuntu-24.04",
        "the Windows legs run on Linux without the image: /opt/python is not there",
        "on a runner without the container",
    ),
    Mutation(
        "shard runs every leg on windows",
        "release.yml",
        "    needs: matrix\n    if: ${{ !inputs.from_run }}\n    runs-on: ${{ matrix.runner }}",
        "    needs: matrix\n    if: ${{ !inputs.from_run }}\n    runs-on: windows-2022",
        "container operations are only supported on Linux runners",
        "containers run on Linux runners only",
    ),
    Mutation(
        "the attestation covers the wheels only",
        "release.yml",
        "subject-path: dist/release/*",
        "subject-path: dist/release/*.whl",
        "SHA256SUMS is published without provenance",
        "SHA256SUMS is published without an attestation",
    ),
    Mutation(
        "index.yml dispatches itself on the tag instead of the default branch",
        "index.yml",
        'gh workflow run index.yml --ref "$DEFAULT_BRANCH"',
        'gh workflow run index.yml --ref "$GITHUB_REF"',
        "the github-pages environment refuses the tag's ref: no index",
        "not allowed to deploy to github-pages",
    ),
    Mutation(
        "index.yml's dispatch job loses actions: write",
        "index.yml",
        "      actions: write",
        "      actions: read",
        "gh workflow run: HTTP 403, the index is never rebuilt",
        "lacks actions: write",
    ),
    Mutation(
        "index.yml deploys on the release event, from the tag",
        "index.yml",
        "    if: github.event_name == 'workflow_dispatch'",
        "    if: github.event_name == 'release'",
        "the github-pages environment refuses the tag's ref",
        "not allowed to deploy to github-pages",
    ),
    Mutation(
        "index.yml's deploy loses the per-attempt artifact name",
        "index.yml",
        "          artifact_name: ${{ needs.build.outputs.artifact }}",
        "          artifact_name: github-pages",
        "deploy-pages finds no artifact named github-pages",
        "deploy-pages: no artifact github-pages",
    ),
    Mutation(
        "index.yml's deploy loses pages: write",
        "index.yml",
        "      pages: write",
        "      pages: read",
        "deploy-pages: HTTP 403",
        "lacks pages: write",
    ),
]


def _texts() -> dict[str, str]:
    return {name: (WORKFLOWS / name).read_text(encoding="utf-8") for name in ("release.yml", "index.yml")}


def _load(text: str) -> dict:
    doc = yaml.safe_load(text)
    doc["on"] = doc.pop(True, doc.get("on"))
    return doc


def _problems(texts: dict[str, str]) -> list[str]:
    version = _paths.package_version().split("+")[0]
    return workflow_model.check({k: _load(v) for k, v in texts.items()}, version, gates.expected_tag(version))


def test_the_workflows_as_they_are_pass_the_model():
    """Without this, a model that finds fault with everything would 'catch' every mutation."""
    problems = _problems(_texts())
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("mutation", MUTATIONS, ids=[m.name for m in MUTATIONS])
def test_the_model_catches_the_mutation(mutation):
    texts = _texts()
    assert mutation.old in texts[mutation.file], f"{mutation.file} no longer holds {mutation.old!r}: update the list"
    texts[mutation.file] = texts[mutation.file].replace(mutation.old, mutation.new, 1)
    COUNTS["run"] += 1
    problems = _problems(texts)
    caught = any(mutation.reason in p for p in problems)
    COUNTS["caught"] += caught
    assert caught, f"not caught: {mutation.name} (on GitHub: {mutation.github}); the model said:\n" + "\n".join(
        problems
    )


def test_the_list_has_every_kind_the_issue_names():
    kinds = " ".join(m.name for m in MUTATIONS)
    for needle in ("artifact name", "needs", "contents: write", "if:", "one string", "bash", "ubuntu", "index.yml"):
        assert needle in kinds, needle
