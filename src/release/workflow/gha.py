"""The parts of GitHub Actions' workflow semantics the release rehearsal reproduces (release.workflow.rehearsal).

Expressions (``${{ }}`` and ``if:``), the implicit ``success()`` of an ``if:`` without a status
function, the files a step writes (``GITHUB_OUTPUT``, ``GITHUB_ENV``, ``GITHUB_PATH``) and the
folder layout of ``actions/upload-artifact`` / ``actions/download-artifact`` v4 and later. Each rule
cites its source in docs/ci.md ("The release rehearsal"). Only what release.yml uses is implemented;
anything else raises :class:`ExpressionError` so a new construct is noticed, not guessed.
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
import shutil
from pathlib import Path

from release.errors import ReleaseError


class ExpressionError(ReleaseError, ValueError):
    """An expression the rehearsal does not understand (a construct release.yml did not use before)."""


_TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>-?\d+(?:\.\d+)?)|(?P<op>==|!=|<=|>=|&&|\|\||[!<>(),])"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_\-]*(?:\.[A-Za-z_*][A-Za-z0-9_\-]*)*))"
)
STATUS_FUNCTIONS = ("success", "failure", "always", "cancelled")


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ExpressionError(f"cannot parse the expression {text!r} at {text[pos:]!r}")
        kind = m.lastgroup
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


def _number(v) -> float:
    """GitHub's coercion to a number (null 0, bool 0/1, '' 0, other strings parsed or NaN)."""
    if v is None:
        return 0.0
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v.strip() or 0)
        except ValueError:
            return math.nan
    return math.nan


def truthy(v) -> bool:
    """Falsy: false, 0, '', null, NaN; everything else (objects, arrays) is truthy."""
    if v is None or v is False or v == "":
        return False
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return not (v == 0 or math.isnan(v))
    return True


def _equal(a, b) -> bool:
    """GitHub's loose ==: strings compare case-insensitively; other types mixed compare as numbers."""
    if isinstance(a, str) and isinstance(b, str):
        return a.lower() == b.lower()
    if type(a) is type(b) and not isinstance(a, (int, float)):
        return a == b
    x, y = _number(a), _number(b)
    return not (math.isnan(x) or math.isnan(y)) and x == y


def to_string(v) -> str:
    """How a value is interpolated into text: null '', booleans true/false, objects as JSON."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, (dict, list)):
        return json.dumps(v)
    return str(v)


class Evaluator:
    """Evaluates one expression against `context` ({"github": ..., "matrix": ...}) with `status` the
    values of the status functions ({"success": bool, "failure": bool})."""

    def __init__(self, context: dict, status: dict[str, bool]):
        self.context, self.status = context, status

    def evaluate(self, text: str):
        self.toks, self.i = _tokens(text), 0
        value = self._or()
        if self.i != len(self.toks):
            raise ExpressionError(f"unexpected {self.toks[self.i][1]!r} in {text!r}")
        return value

    def _peek(self) -> str | None:
        return self.toks[self.i][1] if self.i < len(self.toks) else None

    def _take(self, expect: str | None = None) -> tuple[str, str]:
        if self.i >= len(self.toks):
            raise ExpressionError("expression ends early")
        tok = self.toks[self.i]
        if expect is not None and tok[1] != expect:
            raise ExpressionError(f"expected {expect!r}, got {tok[1]!r}")
        self.i += 1
        return tok

    def _or(self):
        left = self._and()
        while self._peek() == "||":
            self._take()
            right = self._and()
            left = left if truthy(left) else right
        return left

    def _and(self):
        left = self._cmp()
        while self._peek() == "&&":
            self._take()
            right = self._cmp()
            left = right if truthy(left) else left
        return left

    def _cmp(self):
        left = self._unary()
        while self._peek() in ("==", "!=", "<", ">", "<=", ">="):
            op = self._take()[1]
            right = self._unary()
            if op in ("==", "!="):
                left = _equal(left, right) == (op == "==")
            else:
                x, y = _number(left), _number(right)
                left = {"<": x < y, ">": x > y, "<=": x <= y, ">=": x >= y}[op]
        return left

    def _unary(self):
        if self._peek() == "!":
            self._take()
            return not truthy(self._unary())
        return self._primary()

    def _primary(self):
        kind, text = self._take()
        if text == "(" and kind == "op":
            value = self._or()
            self._take(")")
            return value
        if kind == "str":
            return text[1:-1].replace("''", "'")
        if kind == "num":
            return float(text)
        if kind != "name":
            raise ExpressionError(f"unexpected {text!r}")
        if text in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[text]
        if self._peek() == "(":
            self._take("(")
            args = []
            while self._peek() != ")":
                args.append(self._or())
                if self._peek() == ",":
                    self._take()
            self._take(")")
            return self._call(text, args)
        value = self.context
        for part in text.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        return value

    def _call(self, name: str, args: list):
        if name in STATUS_FUNCTIONS:
            # cancelled() is true once the run was cancelled; always() whatever happened.
            return True if name == "always" else bool(self.status.get(name, False))
        if name == "fromJSON":
            return json.loads(to_string(args[0]))
        if name == "toJSON":
            return json.dumps(args[0])
        if name == "join":
            items = args[0] if isinstance(args[0], list) else [args[0]]
            return (to_string(args[1]) if len(args) > 1 else ",").join(to_string(x) for x in items)
        if name == "contains":
            if isinstance(args[0], list):
                return any(_equal(x, args[1]) for x in args[0])
            return to_string(args[1]).lower() in to_string(args[0]).lower()
        if name == "startsWith":
            return to_string(args[0]).lower().startswith(to_string(args[1]).lower())
        if name == "endsWith":
            return to_string(args[0]).lower().endswith(to_string(args[1]).lower())
        if name == "format":  # format('{0}/{1}', a, b); '{{' and '}}' are literal braces
            text = re.sub(r"\{(\d+)\}", lambda m: to_string(args[1 + int(m.group(1))]), to_string(args[0]))
            return text.replace("{{", "{").replace("}}", "}")
        raise ExpressionError(f"the rehearsal does not implement the function {name}()")


_INTERP = re.compile(r"\$\{\{(.*?)\}\}", re.S)


def interpolate(text, context: dict, status: dict[str, bool] | None = None):
    """`text` with every ``${{ expr }}`` replaced; a text that is exactly one expression keeps its type
    (``matrix: ${{ fromJSON(...) }}`` is an object)."""
    if not isinstance(text, str):
        return text
    ev = Evaluator(context, status or {})
    whole = _INTERP.fullmatch(text.strip())
    if whole:
        return ev.evaluate(whole.group(1))
    return _INTERP.sub(lambda m: to_string(ev.evaluate(m.group(1))), text)


def uses_status_function(expr: str) -> bool:
    """True when `expr` calls success(), failure(), always() or cancelled()."""
    return any(name == "name" and val in STATUS_FUNCTIONS for name, val in _tokens(expr))


def condition(expr, context: dict, status: dict[str, bool]) -> bool:
    """An ``if:`` (job or step): absent means success(); without a status function GitHub evaluates
    ``success() && (expr)`` (docs: "A default status check of success() is applied unless you include
    one of these functions")."""
    if expr is None or expr == "":
        return status["success"]
    if isinstance(expr, bool):
        return expr and status["success"]
    text = str(expr).strip()
    m = _INTERP.fullmatch(text)
    text = m.group(1).strip() if m else text
    value = truthy(Evaluator(context, status).evaluate(text))
    return value if uses_status_function(text) else status["success"] and value


def read_step_file(path: Path) -> dict[str, str]:
    """NAME=value lines and NAME<<DELIM heredocs of GITHUB_OUTPUT / GITHUB_ENV."""
    out: dict[str, str] = {}
    if not path.is_file():
        return out
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delim = line.split("<<", 1)
            body = []
            i += 1
            while i < len(lines) and lines[i] != delim:
                body.append(lines[i])
                i += 1
            out[name] = "\n".join(body)
        elif "=" in line:
            name, value = line.split("=", 1)
            out[name] = value
        i += 1
    return out


def upload_artifact(store: Path, name: str, path: Path, overwrite: bool, if_no_files_found: str) -> int:
    """actions/upload-artifact v4+: the files under one folder `path` (its contents, relative to it;
    hidden files left out, the v4.4+ default) become artifact `name` of this run; a name that exists
    is an error unless `overwrite`. Returns the number of files."""
    files = [
        p for p in path.rglob("*") if p.is_file() and not any(x.startswith(".") for x in p.relative_to(path).parts)
    ]
    if not files:
        if if_no_files_found == "error":
            raise ReleaseError(f"upload-artifact {name}: no files found under {path}")
        return 0
    target = store / name
    if target.exists():
        if not overwrite:
            raise ReleaseError(f"upload-artifact: an artifact named {name} already exists in this run")
        shutil.rmtree(target)
    for f in files:
        dest = target / f.relative_to(path)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, dest)
    return len(files)


def download_artifact(
    store: Path, dest: Path, name: str = "", pattern: str = "", merge_multiple: bool = False
) -> list[str]:
    """actions/download-artifact v8: by `name` (exactly that artifact, extracted into `dest`), else
    every artifact matching `pattern` (all when empty). The artifacts land straight in `dest` when
    downloaded by name, with `merge_multiple`, or when exactly ONE artifact matched; otherwise each
    in ``dest/<artifact name>/`` (src/download-artifact.ts of v8: ``isSingleArtifactDownload ||
    inputs.mergeMultiple || artifacts.length === 1``). Returns the artifact names."""
    available = sorted(p.name for p in store.iterdir()) if store.is_dir() else []
    if name:
        if name not in available:
            raise ReleaseError(f"download-artifact: no artifact named {name} (this run has: {', '.join(available)})")
        names = [name]
    else:
        names = [a for a in available if not pattern or fnmatch.fnmatchcase(a, pattern)]
    flat = bool(name) or merge_multiple or len(names) == 1
    for a in names:
        target = dest if flat else dest / a
        shutil.copytree(store / a, target, dirs_exist_ok=True)
    dest.mkdir(parents=True, exist_ok=True)
    return names


# --- Scheduling, permissions and re-runs (the rules the rehearsal enforces; sources in docs/ci.md) -----------
class WorkflowError(ReleaseError, ValueError):
    """A workflow GitHub would refuse or run differently from what it says (a cycle, an unknown job)."""


def needs_of(job: dict) -> list[str]:
    """The job ids of a job's ``needs:`` (a string or a list)."""
    needs = job.get("needs") or []
    return [needs] if isinstance(needs, str) else list(needs)


def transitive_needs(jobs: dict, job_id: str) -> set[str]:
    """Every job `job_id` waits for, directly or through another (what GitHub guarantees has finished)."""
    out: set[str] = set()
    todo = needs_of(jobs[job_id])
    while todo:
        n = todo.pop()
        if n not in out:
            out.add(n)
            todo += needs_of(jobs.get(n) or {})
    return out


def topological_order(jobs: dict) -> list[str]:
    """The jobs in an order GitHub may run them: each after every job of its ``needs:``; among ready
    jobs, file order (GitHub starts them together). Raises WorkflowError for an unknown job in
    ``needs:`` or a cycle (GitHub rejects the workflow file)."""
    for job_id, job in jobs.items():
        for n in needs_of(job):
            if n not in jobs:
                raise WorkflowError(f"job {job_id} needs {n!r}, which is not a job of this workflow")
    order: list[str] = []
    while len(order) < len(jobs):
        ready = [j for j in jobs if j not in order and all(n in order for n in needs_of(jobs[j]))]
        if not ready:
            raise WorkflowError(f"a cycle in needs: among {', '.join(j for j in jobs if j not in order)}")
        order.append(ready[0])
    return order


LEVELS = {"none": 0, "read": 1, "write": 2}
# The GITHUB_TOKEN of a job that states no permissions (neither does its workflow): the restricted
# default of a repository created after February 2023 (GitHub docs, "Permissions for the GITHUB_TOKEN").
DEFAULT_PERMISSIONS = {"contents": "read", "packages": "read", "metadata": "read"}
SCOPES = (
    "actions", "attestations", "checks", "contents", "deployments", "id-token", "issues", "discussions",
    "packages", "pages", "pull-requests", "repository-projects", "security-events", "statuses", "metadata",
)  # fmt: skip


def _permission_map(spec) -> dict[str, str]:
    if spec == "read-all":
        return {s: "read" for s in SCOPES if s != "id-token"}
    if spec == "write-all":
        return dict.fromkeys(SCOPES, "write")
    out = dict.fromkeys(SCOPES, "none")
    out["metadata"] = "read"  # always granted
    out |= {str(k): str(v) for k, v in (spec or {}).items()}
    return out


def job_permissions(workflow: dict, job: dict) -> dict[str, str]:
    """The GITHUB_TOKEN scopes of `job`: its own ``permissions:`` if it has one (it REPLACES the
    workflow's, it is not merged), else the workflow's, else DEFAULT_PERMISSIONS. A scope a stated
    ``permissions:`` does not name is ``none`` (GitHub docs: "all of those that are not specified are
    set to none")."""
    if "permissions" in job:
        return _permission_map(job["permissions"])
    if "permissions" in workflow:
        return _permission_map(workflow["permissions"])
    return _permission_map(DEFAULT_PERMISSIONS)


# What a step needs of the token: actions by their README's "permissions" section, gh commands by the
# REST endpoint they call (GitHub's REST docs list the fine-grained permission of each).
ACTION_PERMISSIONS = {
    "actions/deploy-pages": {"pages": "write", "id-token": "write"},
    "actions/attest-build-provenance": {"id-token": "write", "attestations": "write"},
}
_GH_PERMISSIONS = [
    (re.compile(r"\bgh\s+release\s+(create|upload|edit|delete)\b"), "contents", "write"),
    (re.compile(r"\bgh\s+release\s+(view|list|download)\b"), "contents", "read"),
    (re.compile(r"\bgh\s+workflow\s+run\b"), "actions", "write"),
    (re.compile(r"\bgh\s+run\s+(view|list|download)\b"), "actions", "read"),
    (re.compile(r"\bgh\s+api\s+\S*actions/runs"), "actions", "read"),
    (re.compile(r"\bgh\s+api\s+(?:--\S+\s+)*\S*/releases"), "contents", "read"),
]


def step_permissions(step: dict, ctx: dict | None = None) -> dict[str, str]:
    """{scope: level} the GITHUB_TOKEN needs for `step` (empty when it needs nothing the rehearsal knows).
    download-artifact with ``run-id`` reads another run's artifacts: ``actions: read``. With `ctx`
    (the step's expression context) an input is judged by its value (``run-id: ''`` reads this run)."""
    need: dict[str, str] = {}
    if ctx is not None and step.get("with"):
        step = step | {"with": {k: to_string(interpolate(v, ctx)) for k, v in step["with"].items()}}

    def add(scope: str, level: str) -> None:
        if LEVELS[level] > LEVELS[need.get(scope, "none")]:
            need[scope] = level

    if "uses" in step:
        action = str(step["uses"]).split("@")[0]
        for scope, level in ACTION_PERMISSIONS.get(action, {}).items():
            add(scope, level)
        if action == "actions/download-artifact" and (step.get("with") or {}).get("run-id"):
            add("actions", "read")
    for pattern, scope, level in _GH_PERMISSIONS:
        if pattern.search(str(step.get("run", ""))):
            add(scope, level)
    return need


def missing_permissions(granted: dict[str, str], needed: dict[str, str]) -> list[str]:
    """The ``scope: level`` entries of `needed` that `granted` does not reach (write implies read)."""
    return [
        f"{scope}: {level}" for scope, level in needed.items() if LEVELS[granted.get(scope, "none")] < LEVELS[level]
    ]


def rerun_selection(jobs: dict, results: dict[str, str]) -> set[str]:
    """The jobs "Re-run failed jobs" runs again: every job whose result was failure or cancelled, and
    every job that needs one of them, directly or not (GitHub docs, "Re-running workflows and jobs":
    "re-run all failed jobs and their dependents"); the others keep their result, outputs and artifacts.
    `results` maps job id (a matrix job as a whole) to its result."""
    failed = {j for j, r in results.items() if r in ("failure", "cancelled")}
    return failed | {j for j in jobs if transitive_needs(jobs, j) & failed}


def transitive_dependents(jobs: dict, job_id: str) -> list[str]:
    """The jobs that need `job_id`, directly or through another (what its failure holds back)."""
    return [j for j in jobs if job_id in transitive_needs(jobs, j)]
