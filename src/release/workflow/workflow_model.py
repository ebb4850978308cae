"""The release rehearsal's model-only mode: GitHub's scheduling and rules over release.yml and
index.yml, with the steps' effects declared instead of executed (seconds, no compiler).

What it runs like GitHub: jobs by ``needs:`` (release.workflow.gha.topological_order), job and step
``if:`` with the results GitHub passes (success/failure/skipped/cancelled, ``needs.<job>.result``
and outputs, the implicit ``success()``, ``cancelled()`` after a cancel), matrix legs from the job
lists the real tools compute (release.plan.matrix, release.ship.gates plan), the token of every job
(release.workflow.gha.job_permissions) against what each step needs, the artifacts each job uploads and
downloads (a download whose producer is not in the job's transitive ``needs:`` is the race GitHub
would have; an upload of a name an earlier attempt left, without ``overwrite``, is GitHub's 409),
"Re-run failed jobs" (release.workflow.gha.rerun_selection), environments (``github-pages`` deploys
from the default branch only: the rule GitHub creates with Pages by Actions), containers (Linux
runners only; the manylinux image has bash and python, no pwsh), the shells of each OS, and every
Windows step's entry point calls through their own argparse parsers (release.workflow.pwsh_args).

What a step does is declared: steps with an ``id`` output the values the real tools give
(``Declared.outputs``); GITHUB_ENV values the later steps read are ``Declared.env``; ``gh release
create/upload/edit`` and ``gh workflow run`` act on a fake GitHub (:class:`FakeGitHub`);
``actions/attest-build-provenance`` records its subject paths, and a published file no attestation
covers fails the run. :func:`check` returns the problems of the scenarios of :func:`scenarios`.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
from dataclasses import dataclass, field

from release.workflow import gha, pwsh_args

DEFAULT_BRANCH = "main"
REPOSITORY = "rehearsal/flash-attn"
# Environments GitHub creates or the docs ask for, and the refs they accept (docs/ci.md):
# github-pages is created with Pages by Actions and accepts the default branch only.
ENVIRONMENTS = {"github-pages": lambda ref: ref == f"refs/heads/{DEFAULT_BRANCH}", "release": lambda ref: True}
IMAGE_PATHS = re.compile(r"/opt/python/|/usr/local/cuda-")  # what only the manylinux image holds
LINUX_SHELLS = {"bash", "sh", "pwsh", "python"}
WINDOWS_SHELLS = {"bash", "pwsh", "powershell", "cmd", "python"}
CONTAINER_SHELLS = {"bash", "sh", "python"}  # PyTorch's manylinux image: no PowerShell


@dataclass
class Declared:
    """The effects of steps the model does not execute: step outputs by name (any step with an id
    offers them), GITHUB_ENV values, and the files each wheel job puts in the release."""

    outputs: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    assets: list[str] = field(default_factory=list)


@dataclass
class Release:
    tag: str
    draft: bool = True
    assets: set[str] = field(default_factory=set)


class FakeGitHub:
    """Releases (draft/published, assets), workflow dispatches, attestations and Pages deploys."""

    def __init__(self) -> None:
        self.releases: dict[str, Release] = {}
        self.dispatches: list[tuple[str, str, dict]] = []  # (workflow file, ref, inputs)
        self.deploys: list[dict] = []  # {"ref", "releases": [published tags at deploy time]}

    def gh(self, argv: list[str], tag_default: str) -> str | None:
        """Apply one ``gh`` command; returns an error line or None."""
        if argv[:2] == ["release", "create"]:
            tag = argv[2]
            if tag in self.releases:
                return f"gh release create {tag}: a release with this tag already exists"
            self.releases[tag] = Release(tag, draft="--draft" in argv)
        elif argv[:2] == ["release", "upload"]:
            tag, files = argv[2], [a for a in argv[3:] if not a.startswith("--")]
            rel = self.releases.get(tag)
            if rel is None:
                return f"gh release upload {tag}: release not found"
            names = {f.rsplit("/", 1)[-1] for f in files}
            if not rel.draft and "--clobber" in argv and names & rel.assets:
                return f"gh release upload --clobber replaced assets of the PUBLISHED release {tag}"
            if names & rel.assets and "--clobber" not in argv:
                return f"gh release upload {tag}: asset already exists (no --clobber)"
            rel.assets |= names
        elif argv[:2] == ["release", "edit"]:
            rel = self.releases.get(argv[2])
            if rel is None:
                return f"gh release edit {argv[2]}: release not found"
            if "--draft=false" in argv:
                rel.draft = False
        elif argv[:2] == ["workflow", "run"]:
            ref = argv[argv.index("--ref") + 1] if "--ref" in argv else ""
            inputs = dict(a.split("=", 1) for i, a in enumerate(argv) if i and argv[i - 1] in ("-f", "--field"))
            self.dispatches.append((argv[2], ref, inputs))
        return None

    def published(self) -> list[str]:
        return sorted(t for t, r in self.releases.items() if not r.draft)


@dataclass
class Run:
    """One workflow run: its id, attempt, artifacts {name: (job, attempt)}, and job results."""

    run_id: int
    workflow: str
    event: str
    ref: str
    inputs: dict
    payload: dict = field(default_factory=dict)
    attempt: int = 1
    artifacts: dict[str, tuple[str, int]] = field(default_factory=dict)
    results: dict[str, str] = field(default_factory=dict)
    legs: dict[str, list[str]] = field(default_factory=dict)  # job -> result of each leg
    outputs: dict[str, dict] = field(default_factory=dict)
    failures: dict[str, list[str]] = field(default_factory=dict)  # job -> why its steps failed
    cancelled: bool = False


@dataclass
class Scenario:
    """One thing that happens to the repository, and what must follow."""

    name: str
    workflow: str
    event: str
    ref: str
    inputs: dict = field(default_factory=dict)
    expect: dict[str, str] = field(default_factory=dict)  # job -> success | skipped | not-run | not-success
    fail: dict[str, int] = field(default_factory=dict)  # job -> leg index that fails in attempt 1
    rerun: bool = False
    cancel_after: str = ""  # the run is cancelled once this job has finished
    from_run: str = ""  # the scenario whose run `from_run` names
    expect_first: dict[str, str] = field(default_factory=dict)  # the failed attempt's (rerun scenarios)
    publish: str = ""  # a maintainer publishes this scenario's draft afterwards


class Model:
    """Runs scenarios of the workflows {file name: parsed YAML} against one FakeGitHub."""

    def __init__(self, workflows: dict[str, dict], declare, github: FakeGitHub | None = None):
        """`declare(workflow file, run)` gives the Declared effects of that run's steps."""
        self.wfs, self.declare = workflows, declare
        self.github = github or FakeGitHub()
        self.runs: dict[str, Run] = {}  # scenario name -> run
        self.next_id = 100
        self.problems: list[str] = []

    # --- a run -------------------------------------------------------------------------------------
    def scenario(self, sc: Scenario) -> None:
        run = self._new_run(sc.workflow, sc.event, sc.ref, dict(sc.inputs))
        if sc.from_run:
            run.inputs["from_run"] = str(self.runs[sc.from_run].run_id)
        self.runs[sc.name] = run
        run_jobs = self.wfs[sc.workflow]["jobs"]
        self._attempt(sc.name, run, set(run_jobs), sc.fail, sc.cancel_after)
        if sc.rerun:
            first = dict(run.results)
            for job, want in sc.expect_first.items():
                if want == "not-run" and first.get(job) not in ("skipped", "cancelled", None):
                    self.problems.append(
                        f"[{sc.name}] attempt 1: job {job} must not run after the failure; it was {first[job]}"
                    )
            todo = gha.rerun_selection(run_jobs, run.results)
            run.attempt += 1
            self._attempt(sc.name, run, todo, {}, "")
        self._expect(sc, run)
        if sc.publish:
            tag = sc.publish
            if tag not in self.github.releases:
                self.problems.append(f"[{sc.name}] no draft release {tag} to publish")
            else:
                self.github.releases[tag].draft = False
                self._release_published(sc.name, tag)

    def _new_run(self, workflow, event, ref, inputs, payload=None) -> Run:
        self.next_id += 1
        wf = self.wfs[workflow]
        if event == "workflow_dispatch":
            for key, spec in ((wf["on"] or {}).get("workflow_dispatch") or {}).get("inputs", {}).items():
                inputs.setdefault(key, (spec or {}).get("default", ""))
        return Run(self.next_id, workflow, event, ref, inputs, payload or {})

    def _release_published(self, name: str, tag: str) -> None:
        """GitHub's ``release: published`` event runs every workflow that listens for it, on the tag's ref."""
        for wf_name, wf in self.wfs.items():
            on = wf.get("on") or {}
            types = ((on.get("release") or {}) if isinstance(on, dict) else {}).get("types", [])
            if not (isinstance(on, dict) and "release" in on and (not types or "published" in types)):
                continue
            payload = {"release": {"tag_name": tag, "draft": False}}
            run = self._new_run(wf_name, "release", f"refs/tags/{tag}", {}, payload)
            self.runs[f"{name}:release"] = run
            self._attempt(f"{name}:release", run, set(wf["jobs"]), {}, "")
            self._report_failures(name, run)
        self._drain(name)

    def _drain(self, name: str) -> None:
        """Run the workflow dispatches the runs asked for (``gh workflow run``), in order."""
        while self.github.dispatches:
            wf_name, ref, inputs = self.github.dispatches.pop(0)
            wf_name = wf_name.rsplit("/", 1)[-1]
            if wf_name not in self.wfs:
                self.problems.append(f"[{name}] gh workflow run {wf_name}: no such workflow")
                continue
            if "workflow_dispatch" not in (self.wfs[wf_name].get("on") or {}):
                self.problems.append(
                    f"[{name}] gh workflow run {wf_name}: it has no workflow_dispatch trigger (HTTP 422)"
                )
                continue
            ref = ref if ref.startswith("refs/") else f"refs/heads/{ref or DEFAULT_BRANCH}"
            run = self._new_run(wf_name, "workflow_dispatch", ref, dict(inputs))
            self.runs[f"{name}:dispatch:{run.run_id}"] = run
            self._attempt(f"{name}:dispatch", run, set(self.wfs[wf_name]["jobs"]), {}, "")
            self._report_failures(name, run)

    def _report_failures(self, name: str, run: Run) -> None:
        """A run no scenario expects anything of (a release event's, a dispatch's) must fail no job."""
        for job, result in run.results.items():
            if result == "failure":
                why = "".join(f"\n    {f}" for f in run.failures.get(job, []))
                self.problems.append(
                    f"[{name}] the {run.event} run of {run.workflow} on {run.ref}: job {job} failed{why}"
                )

    def _expect(self, sc: Scenario, run: Run) -> None:
        jobs = self.wfs[sc.workflow]["jobs"]
        for job in jobs:
            got = run.results.get(job, "not-run")
            want = sc.expect.get(job, "no-failure")
            ok = {
                "success": got == "success",
                "skipped": got == "skipped",
                "not-run": got in ("skipped", "cancelled", "not-run"),
                "not-success": got != "success",
                "no-failure": got != "failure",
            }[want]
            if not ok:
                why = "".join(f"\n    {f}" for f in run.failures.get(job, []))
                self.problems.append(f"[{sc.name}] job {job} must be {want}; it was {got}{why}")

    def _attempt(self, name: str, run: Run, todo: set[str], fail: dict[str, int], cancel_after: str) -> None:
        wf = self.wfs[run.workflow]
        jobs = wf["jobs"]
        try:
            order = gha.topological_order(jobs)
        except gha.WorkflowError as e:
            self.problems.append(f"[{name}] {e}")
            return
        for job_id in order:
            if job_id not in todo:
                continue
            job = jobs[job_id]
            ancestors = gha.transitive_needs(jobs, job_id)
            status = {
                "success": not run.cancelled and all(run.results.get(a) == "success" for a in ancestors),
                "failure": any(run.results.get(a) == "failure" for a in ancestors),
                "cancelled": run.cancelled,
            }
            ctx = self._context(run) | {
                "needs": {
                    n: {"result": run.results.get(n, ""), "outputs": run.outputs.get(n, {})} for n in gha.needs_of(job)
                }
            }
            try:
                go = gha.condition(job.get("if"), ctx, status)
            except gha.ExpressionError as e:
                self.problems.append(f"[{name}] job {job_id}: {e}")
                go = False
            if not go:
                run.results[job_id] = "cancelled" if run.cancelled else "skipped"
                continue
            self._job(name, run, job_id, job, ctx, fail.get(job_id))
            if cancel_after == job_id:
                run.cancelled = True

    def _context(self, run: Run) -> dict:
        tag = run.ref.removeprefix("refs/tags/") if run.ref.startswith("refs/tags/") else ""
        github = {
            "event_name": run.event,
            "ref": run.ref,
            "ref_name": tag or run.ref.removeprefix("refs/heads/"),
            "ref_type": "tag" if tag else "branch",
            "sha": "0" * 40,
            "repository": REPOSITORY,
            "repository_owner": REPOSITORY.split("/")[0],
            "run_id": str(run.run_id),
            "run_attempt": str(run.attempt),
            "token": "model-token",
            "workflow": run.workflow,
            "event": {"repository": {"private": False, "default_branch": DEFAULT_BRANCH}} | run.payload,
        }
        return {"github": github, "inputs": run.inputs, "vars": {}, "secrets": {}, "env": {}}

    # --- a job -------------------------------------------------------------------------------------
    def _job(self, name, run, job_id, job, ctx, fail_leg) -> None:
        wf = self.wfs[run.workflow]
        strategy = (job.get("strategy") or {}).get("matrix")
        try:
            legs = gha.interpolate(strategy, ctx)["include"] if strategy is not None else [{}]
        except (gha.ExpressionError, KeyError, TypeError, ValueError) as e:
            run.failures[job_id] = [f"its matrix: {e}"]
            run.results[job_id] = "failure"
            return
        run.failures[job_id] = []
        previous = run.legs.get(job_id, [])
        results, outputs = [], {}
        for i, leg in enumerate(legs):
            if run.attempt > 1 and i < len(previous) and previous[i] == "success" and run.results.get(job_id):
                results.append("success")  # a re-run runs the failed legs of a matrix job again, not the others
                continue
            leg_ctx = ctx | {"matrix": leg}
            failures, outs = self._steps(run, job_id, job, leg_ctx, wf, fail_leg == i and run.attempt == 1)
            for f in failures:
                run.failures[job_id].append(f"{leg['name']}: {f}" if leg.get("name") else f)
            results.append("failure" if failures else "success")
            if strategy is None:
                outputs = outs
        run.legs[job_id] = results
        run.results[job_id] = "failure" if "failure" in results else "success"
        if strategy is None:
            run.outputs[job_id] = outputs

    def _steps(self, run: Run, job_id: str, job: dict, ctx: dict, wf: dict, inject: bool):
        """The steps of one leg; returns (failures, job outputs). A failure stops the later steps
        unless their ``if:`` says otherwise, as on GitHub; `inject` fails the first ``run:`` step."""
        failures: list[str] = []
        runs_on = gha.to_string(gha.interpolate(job.get("runs-on", ""), ctx))
        os_name = "Windows" if "windows" in runs_on.lower() else "Linux"
        container = gha.to_string(gha.interpolate(job.get("container", ""), ctx))
        if container and os_name == "Windows":
            return [f"runs-on {runs_on} with container {container}: containers run on Linux runners only"], {}
        env_name = job.get("environment")
        env_name = (env_name or {}).get("name") if isinstance(env_name, dict) else env_name
        if env_name:
            rule = ENVIRONMENTS.get(gha.to_string(gha.interpolate(env_name, ctx)))
            if rule is not None and not rule(run.ref):
                return [f"{run.ref} is not allowed to deploy to {env_name} due to environment protection rules"], {}
        granted = gha.job_permissions(wf, job)
        declared = self.declare(run.workflow, run)
        ctx = ctx | {"runner": {"os": os_name, "temp": "/tmp/runner"}}
        job_env = {
            k: gha.to_string(gha.interpolate(v, ctx))
            for k, v in ((wf.get("env") or {}) | (job.get("env") or {})).items()
        }
        steps_ctx: dict[str, dict] = {}
        failed = False
        default_shell = ((wf.get("defaults") or {}).get("run") or {}).get(
            "shell", "bash" if os_name == "Linux" else "pwsh"
        )
        for i, step in enumerate(job.get("steps") or []):
            sctx = ctx | {"steps": steps_ctx, "env": job_env}
            label = step.get("name") or step.get("uses") or f"step {i + 1}"
            try:
                go = gha.condition(step.get("if"), sctx, {"success": not failed, "failure": failed, "cancelled": False})
            except gha.ExpressionError as e:
                failures.append(f"step {label!r}: {e}")
                failed = True
                continue
            if not go:
                if step.get("id"):
                    steps_ctx[step["id"]] = {"outcome": "skipped", "conclusion": "skipped", "outputs": {}}
                continue
            error = self._step(
                run, job_id, job, step, sctx, granted, declared, job_env, os_name, container, default_shell
            )
            if inject and error is None and "run" in step:
                error, inject = "injected failure (the rehearsal's failed attempt)", False
            if error:
                failures.append(f"step {label!r}: {error}")
                if not step.get("continue-on-error"):
                    failed = True
            if step.get("id"):
                outcome = "failure" if error else "success"
                conclusion = "success" if not error or step.get("continue-on-error") else "failure"
                steps_ctx[step["id"]] = {
                    "outcome": outcome,
                    "conclusion": conclusion,
                    "outputs": dict(declared.outputs) | echo_outputs(step, sctx, job_env),
                }
        outputs = {}
        if not failed:
            try:
                outputs = {
                    k: gha.to_string(gha.interpolate(v, ctx | {"steps": steps_ctx}))
                    for k, v in (job.get("outputs") or {}).items()
                }
            except gha.ExpressionError as e:
                failures.append(f"outputs: {e}")
        return (failures if failed else []), outputs  # continue-on-error failures leave the job green

    def _step(self, run, job_id, job, step, ctx, granted, declared, job_env, os_name, container, default_shell):
        """One step's rules and declared effects; returns the error that fails it, or None."""
        missing = gha.missing_permissions(granted, gha.step_permissions(step, ctx))
        if missing:
            return (
                f"the job's GITHUB_TOKEN lacks {', '.join(missing)} (job {job_id}'s permissions: "
                f"{', '.join(f'{k}: {v}' for k, v in sorted(granted.items()) if v != 'none') or 'none'}); "
                "GitHub answers HTTP 403"
            )
        try:
            env = job_env | {k: gha.to_string(gha.interpolate(v, ctx)) for k, v in (step.get("env") or {}).items()}
            if "uses" in step:
                inputs = {k: gha.to_string(gha.interpolate(v, ctx)) for k, v in (step.get("with") or {}).items()}
                return self._action(run, job_id, str(step["uses"]).split("@")[0], inputs)
            script = gha.interpolate(str(step["run"]), ctx)
        except gha.ExpressionError as e:
            return str(e)
        shell = step.get("shell") or default_shell
        allowed = CONTAINER_SHELLS if container else (WINDOWS_SHELLS if os_name == "Windows" else LINUX_SHELLS)
        if shell not in allowed:
            where = f"container {container}" if container else f"a {os_name} runner"
            return f"shell {shell} does not exist in {where}"
        if os_name == "Linux" and not container and IMAGE_PATHS.search(script):
            return (
                "reads the manylinux image's paths (/opt/python, /usr/local/cuda-X.Y) on a runner without the container"
            )
        if os_name == "Windows" and IMAGE_PATHS.search(script):
            return "a Linux-only path in a step a Windows runner runs"
        runner = {"GITHUB_REPOSITORY": REPOSITORY, "GITHUB_REF": run.ref, "GITHUB_EVENT_NAME": run.event}
        full_env = runner | {"RUNNER_OS": os_name} | declared.env | env
        if shell in ("pwsh", "powershell"):
            refused = pwsh_args.check_script(script, full_env)
            if refused:
                return "; ".join(refused)
        return self._gh_lines(run, script, full_env, declared)

    def _gh_lines(self, run: Run, script: str, env: dict, declared: Declared) -> str | None:
        """The declared effects of the ``gh release`` / ``gh workflow run`` lines of a bash script."""
        for line in re.sub(r"\\\n", " ", script).splitlines():  # bash's line continuations joined
            m = re.search(r"\bgh\s+(release\s+(?:create|upload|edit)|workflow\s+run)\b(.*)", line)
            if not m:
                continue
            text = re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", lambda v: env.get(v.group(1), ""), m.group(0))
            lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            try:
                tokens = list(lexer)
            except ValueError:
                continue
            ends = [i for i, t in enumerate(tokens) if t and set(t) <= set(";&|<>()")]  # the command ends there
            argv = tokens[1 : ends[0] if ends else len(tokens)]
            if argv[:2] == ["release", "upload"]:
                files = [a for a in argv[3:] if not a.startswith("--")]
                names = []
                for f in files:
                    folder, _, pattern = f.rpartition("/")
                    names += [f"{folder}/{a}" for a in declared.assets if fnmatch.fnmatchcase(a, pattern)]
                argv = [*argv[:3], *names, *[a for a in argv[3:] if a.startswith("--")]]
                run.payload.setdefault("uploaded", {}).setdefault(argv[2], []).extend(names)
            if argv[:2] == ["release", "create"] and argv[2] in self.github.releases:
                continue  # the script's own "view first, create when absent" branch
            error = self.github.gh(argv, "")
            if error:
                return error
        return None

    def _action(self, run: Run, job_id: str, action: str, inputs: dict) -> str | None:
        jobs = self.wfs[run.workflow]["jobs"]
        needed = gha.transitive_needs(jobs, job_id)
        if action in ("actions/upload-artifact", "actions/upload-pages-artifact"):
            name = inputs.get("name") or ("github-pages" if action.endswith("pages-artifact") else "artifact")
            if name in run.artifacts:
                owner, attempt = run.artifacts[name]
                overwrite = inputs.get("overwrite", "false") == "true" and action == "actions/upload-artifact"
                if not overwrite:
                    return (
                        f"upload {name}: an artifact of that name exists in this run (job {owner}, attempt {attempt}); "
                        "GitHub answers 409 Conflict (name it per attempt or set overwrite)"
                    )
            run.artifacts[name] = (job_id, run.attempt)
            return None
        if action == "actions/download-artifact":
            source = run
            if inputs.get("run-id"):
                found = [r for r in self.runs.values() if str(r.run_id) == inputs["run-id"]]
                if not found:
                    return f"download-artifact: run {inputs['run-id']} not found"
                source, needed = found[0], set(found[0].results)
            names = (
                [inputs["name"]]
                if inputs.get("name")
                else [a for a in source.artifacts if fnmatch.fnmatchcase(a, inputs.get("pattern") or "*")]
            )
            if not names or any(n not in source.artifacts for n in names):
                what = inputs.get("name") or f"pattern {inputs.get('pattern')}"
                have = ", ".join(sorted(source.artifacts)) or "none"
                return f"download-artifact: no artifact {what} in run {source.run_id} (it has: {have})"
            racing = sorted({source.artifacts[n][0] for n in names} - needed - {job_id})
            if racing:
                return (
                    f"downloads artifacts of job(s) {', '.join(racing)}, which are not in its needs: GitHub may start "
                    "it before they upload (a race that fails intermittently)"
                )
            return None
        if action == "actions/deploy-pages":
            name = inputs.get("artifact_name") or "github-pages"
            if name not in run.artifacts:
                return f"deploy-pages: no artifact {name} in this run (it has: {', '.join(sorted(run.artifacts))})"
            if run.artifacts[name][0] not in needed:
                return f"deploy-pages: artifact {name} comes from job {run.artifacts[name][0]}, not in this job's needs"
            drafts = [t for t, r in self.github.releases.items() if r.draft]
            self.github.deploys.append({"ref": run.ref, "releases": self.github.published(), "drafts": drafts})
            return None
        if action == "actions/attest-build-provenance":
            patterns = [p.strip() for p in inputs.get("subject-path", "").splitlines() if p.strip()]
            run.payload.setdefault("attested", []).extend(patterns)
            return None
        return None

    def unattested(self) -> list[str]:
        """Files uploaded to a release that no attest-build-provenance subject-path of that run covers."""
        out = []
        for run in self.runs.values():
            patterns = run.payload.get("attested", [])
            for tag, files in run.payload.get("uploaded", {}).items():
                out += [
                    f"{tag}: {f} is published without an attestation"
                    for f in files
                    if not any(fnmatch.fnmatchcase(f, p) for p in patterns)
                ]
        return sorted(set(out))


_ECHO = re.compile(r"""^\s*echo\s+"?([A-Za-z_][A-Za-z0-9_-]*)=([^">]*)"?\s*>>\s*"?\$\{?GITHUB_OUTPUT\}?"?\s*$""")


def echo_outputs(step: dict, ctx: dict, job_env: dict) -> dict[str, str]:
    """The outputs a bash step writes with plain ``echo "name=value" >> "$GITHUB_OUTPUT"`` lines (the
    model runs no script; these lines it can read), ``$VAR`` taken from the step's env."""
    if "run" not in step:
        return {}
    try:
        env = job_env | {k: gha.to_string(gha.interpolate(v, ctx)) for k, v in (step.get("env") or {}).items()}
        script = gha.interpolate(str(step["run"]), ctx)
    except gha.ExpressionError:
        return {}
    out = {}
    for line in script.splitlines():
        m = _ECHO.match(line)
        if m:
            out[m.group(1)] = re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", lambda v: env.get(v.group(1), ""), m.group(2))
    return out


# --- the scenarios of the release, with what the real tools declare ----------------------------------
_DECLARED: dict[str, dict] = {}
PREVIOUS_TAG = "v0.0.1-rev1"  # a release rehearsed (and published) before this one


def declare_release(version: str):
    """A `declare` for Model: release.yml's step outputs from release.ship.gates plan and
    release.plan.matrix (the build-manifest.json the model reads), the release's files from the link
    matrix. Cached per (event, ref, kernel set, from_run)."""
    from release.plan import matrix
    from release.ship import gates

    cache = _DECLARED.setdefault(version, {})  # the tools' answers depend on the manifest, not the workflow

    def declare(workflow: str, run: Run) -> Declared:
        kernel_set = run.inputs.get("kernel_set") or "release"
        key = (workflow, run.event, run.ref, kernel_set, run.inputs.get("from_run", ""))
        if key in cache:
            return cache[key]
        env = {"BUILD_ROOT": "C:\\b", "KERNELS_DIR": "kernels/kernels-x", "CUDA_HOME": "/usr/local/cuda"}
        if workflow != "release.yml":
            cache[key] = Declared({}, env, [])
            return cache[key]
        plan = gates.plan(run.event, run.ref, version, kernel_set, {}, run.inputs.get("from_run", ""))
        stages = {s: matrix.build_matrix(stage=s, kernel_set=kernel_set) for s in ("link", "shards", "gather")}
        outputs = {
            "publish": "true" if plan.publish else "false",
            "tag": plan.tag,
            "matrix": gha.to_string(stages["link"]),
            "shards": gha.to_string(stages["shards"]),
            "gathers": gha.to_string(stages["gather"]),
        }
        links = stages["link"]["include"]
        assets = ["SHA256SUMS", *(e["wheel"] for e in links), *(f"build-summary-{e['name']}.json" for e in links)]
        cache[key] = Declared(outputs, env, assets)
        return cache[key]

    return declare


def scenarios(tag: str) -> list[Scenario]:
    """The runs of a release, in order: a kernel_set=ci dry run, the tag push (its draft), a from_run
    dispatch (the same draft), a tag push whose first attempt fails in one shard and is re-run, a tag
    push cancelled once link finished, a maintainer publishing the draft (index.yml: the release event
    dispatches a run on the default branch, which deploys), and index.yml dispatched on another branch."""
    build = ("shard", "gather", "link")
    green = {j: "success" for j in ("matrix", *build, "assemble", "publish")}
    return [
        Scenario("dispatch-ci", "release.yml", "workflow_dispatch", f"refs/heads/{DEFAULT_BRANCH}",
                 {"kernel_set": "ci"}, green | {"publish": "skipped"}),
        Scenario("tag-push", "release.yml", "push", f"refs/tags/{tag}", {}, green),
        Scenario("from-run", "release.yml", "workflow_dispatch", f"refs/tags/{tag}", {},
                 green | dict.fromkeys(build, "skipped"), from_run="tag-push"),
        Scenario("re-run", "release.yml", "push", f"refs/tags/{tag}", {}, green, fail={"shard": 0}, rerun=True,
                 expect_first={"gather": "not-run", "link": "not-run", "assemble": "not-run", "publish": "not-run"}),
        Scenario("cancelled", "release.yml", "push", f"refs/tags/{tag}", {},
                 {"matrix": "success", "assemble": "not-run", "publish": "not-run"}, cancel_after="link"),
        Scenario("index-on-a-branch", "index.yml", "workflow_dispatch", "refs/heads/feature", {},
                 {}, publish=""),
    ]  # fmt: skip


def deploying_jobs(wf: dict) -> list[str]:
    """The jobs of `wf` that deploy Pages (use actions/deploy-pages)."""
    return [
        j
        for j, job in wf["jobs"].items()
        if any(str(s.get("uses", "")).startswith("actions/deploy-pages") for s in job.get("steps") or [])
    ]


def check(workflows: dict[str, dict], version: str, tag: str) -> list[str]:
    """Every problem the model finds in `workflows` ({"release.yml": ..., "index.yml": ...}): the
    scenarios of :func:`scenarios` (the tag push's draft is published by a maintainer afterwards), the
    static Windows checks, unattested published files, and where the index goes live."""
    gh = FakeGitHub()
    gh.releases[PREVIOUS_TAG] = Release(PREVIOUS_TAG, draft=False, assets={"SHA256SUMS"})
    model = Model(workflows, declare_release(version), gh)
    problems = [f"windows (static): {w}" for w in windows_findings(workflows["release.yml"])]
    for sc in scenarios(tag):
        if sc.workflow not in workflows:
            problems.append(f"[{sc.name}] no workflow {sc.workflow}")
            continue
        if sc.workflow == "index.yml":
            sc.expect = dict.fromkeys(deploying_jobs(workflows["index.yml"]), "not-success")
        model.scenario(sc)
        if sc.name == "tag-push":
            rel = gh.releases.get(tag)
            if rel is None or not rel.draft:
                problems.append(f"[tag-push] the release {tag} must exist as a draft after the run; it is {rel}")
            if gh.deploys:
                problems.append(f"[tag-push] Pages deployed while {tag} is a draft: {gh.deploys}")
    before = len(gh.deploys)
    if tag in gh.releases:
        gh.releases[tag].draft = False
        model._release_published("maintainer-publishes", tag)
    deploys = gh.deploys[before:]
    live = [d for d in deploys if d["ref"] == f"refs/heads/{DEFAULT_BRANCH}"]
    if not live:
        problems.append(f"[maintainer-publishes] publishing {tag} deployed no index from {DEFAULT_BRANCH}: {deploys}")
    for d in live:
        if not {tag, PREVIOUS_TAG} <= set(d["releases"]):
            problems.append(f"[maintainer-publishes] the index must list {tag} and {PREVIOUS_TAG}: {d['releases']}")
    problems += model.problems + model.unattested()
    return problems


_LINUX_PATHS = re.compile(r"/opt/python|/usr/local/cuda|/usr/bin/")
_NATIVE_BUILD = re.compile(r"\bnox -s \S*(SESSION|wheel_|(?:archive|kernels)_(?!gather))")


def windows_findings(wf: dict) -> list[str]:
    """Static checks of every step a Windows job runs (no `if:` that limits it to Linux): the shell
    is bash (Git bash) or pwsh; the build (nox wheel_/archive_ sessions) runs under pwsh, where
    MSVC's link.exe is not shadowed by Git bash's /usr/bin/link; a multi-line pwsh script that runs
    native commands sets ``$PSNativeCommandUseErrorActionPreference`` (otherwise only the last
    command's exit code fails the step); no Linux-only path; a Windows path literal in a bash step
    is single-quoted."""
    out = []
    default = ((wf.get("defaults") or {}).get("run") or {}).get("shell", "bash")
    for job_id, job in wf["jobs"].items():
        if "matrix.runner" not in str(job.get("runs-on", "")):
            continue  # ubuntu-only jobs
        for step in job.get("steps") or []:
            cond = str(step.get("if", ""))
            if "Linux" in cond or "run" not in step:
                continue
            name = f"{job_id}: {step.get('name', step['run'][:40])!r}"
            shell = step.get("shell", default)
            script = str(step["run"])
            if shell not in ("bash", "pwsh"):
                out.append(f"{name}: shell {shell} (windows-2022 steps use bash or pwsh)")
            if _NATIVE_BUILD.search(script) and shell != "pwsh":
                out.append(f"{name}: builds under {shell}; on Windows the build must run under pwsh (link.exe)")
            lines = [x for x in script.splitlines() if x.strip() and not x.strip().startswith("#")]
            if shell == "pwsh" and len(lines) > 1 and "$PSNativeCommandUseErrorActionPreference = $true" not in script:
                out.append(f"{name}: multi-line pwsh without $PSNativeCommandUseErrorActionPreference = $true")
            if _LINUX_PATHS.search(script):
                out.append(f"{name}: a Linux-only path in a step Windows runs")
            if shell == "bash":
                for m in re.finditer(r"(.?)([A-Za-z]:\\[^\s'\"]*)", script):
                    if m.group(1) != "'":
                        out.append(f"{name}: Windows path {m.group(2)} not single-quoted in bash")
    return out
