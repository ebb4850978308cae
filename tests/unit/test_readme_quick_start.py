"""The README's first screen holds the quick start, and its commands are the ones CI and the docs run.

The quick start (between the ``pins-quick-start`` markers, rendered by release.plan.doc_tables) must
lie in the README's first 60 lines and say that no GPU is needed; its install line installs the pins
.ci/run installs (``tool_pins.ci_torch`` and ``tool_pins.nox`` of build-manifest.json); its test
command is the one .ci/run and the Linux CI job run; its build command is the one the CI workflow's
wheel job runs and docs/reference.md explains; every session it names exists in noxfile.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIRST_SCREEN = 60
README = (ROOT / "README.md").read_text(encoding="utf-8")
PINS = json.loads((ROOT / "build-manifest.json").read_text(encoding="utf-8"))["tool_pins"]


def quick_start() -> tuple[list[str], int]:
    """(the quick start's commands without their comments, the line number of its end marker)."""
    lines = README.splitlines()
    start = lines.index("<!-- manifest:pins-quick-start -->")
    end = lines.index("<!-- /manifest:pins-quick-start -->")
    commands = [line.split("#", 1)[0].strip() for line in lines[start + 1 : end]]
    return [c for c in commands if c], end + 1


def ci_run_commands() -> list[str]:
    """The commands .ci/run runs at the top level (no comments, no shell plumbing lines)."""
    text = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_the_quick_start_is_on_the_first_screen_and_needs_no_gpu():
    commands, end = quick_start()
    assert end <= FIRST_SCREEN, f"the quick start ends on line {end}; keep it within the first {FIRST_SCREEN}"
    head = " ".join("\n".join(README.splitlines()[:FIRST_SCREEN]).split())
    assert "## Quick start" in head and "No GPU is needed" in head.replace("**", "")
    assert "CUDA 13 toolkit with `nvcc`" in head
    assert len(commands) == 3, commands


def test_the_install_line_installs_what_ci_run_installs():
    commands, _ = quick_start()
    assert commands[0] == f'python3 -m pip install "{PINS["ci_torch"]}" "{PINS["nox"]}"'
    script = "\n".join(ci_run_commands())
    # .ci/run reads the same two pins and installs them with the same pip
    assert re.search(r'\["tool_pins"\].*\["ci_torch"\].*\["nox"\]', script), script
    assert 'python3 -m pip install --quiet --disable-pip-version-check "${pins[@]}"' in script


def test_the_test_command_is_what_ci_runs():
    commands, _ = quick_start()
    assert commands[-1] == "nox -s tests"
    assert ci_run_commands()[-1] == commands[-1]  # .ci/run ends with the README's test command
    workflow = (ROOT / ".github" / "workflows" / "ci.yml").read_text(encoding="utf-8")
    assert f"run: {commands[-1]}\n" in workflow  # the Linux test job runs it as it is


def test_the_build_command_is_what_the_ci_workflow_and_the_docs_use():
    commands, _ = quick_start()
    build = commands[1]
    assert build == "nox -s wheel_legacy -- --kernel-set ci"
    workflow = (ROOT / ".github" / "workflows" / "ci.yml").read_text(encoding="utf-8")
    assert f"run: {build} " in workflow  # the wheel-ci job (plus its output folders)
    assert f"`{build}` builds" in (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    assert build in (ROOT / "docs" / "ci.md").read_text(encoding="utf-8").replace("\n  ", " ")


def test_every_session_the_readme_names_exists():
    noxfile = (ROOT / "noxfile.py").read_text(encoding="utf-8")
    groups = [g["name"] for g in json.loads((ROOT / "build-manifest.json").read_text())["arch_groups"]]
    sessions = set(re.findall(r"^def (\w+)\(session", noxfile, re.M)) | {f"wheel_{g}" for g in groups}
    sessions |= set(re.findall(r'_with_alias\("(\w+)"', noxfile)) | {"release"}
    named = set(re.findall(r"nox -s (\w+)", README))
    assert named and named <= sessions, named - sessions
