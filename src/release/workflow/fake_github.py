"""The GitHub the release rehearsal's ``gh`` talks to: releases (draft or published, with assets),
workflow dispatches, and the runs ``gh api .../actions/runs/<id>`` answers with.

``python -m release.workflow.fake_github --store DIR ARGS...`` is what the rehearsal's ``gh`` stub runs
(ARGS as the workflow passed them to ``gh``). Modelled, as gh 2.x and the REST API behave:

- ``gh release create TAG [--draft] ...``: fails when TAG has a release (draft or not);
- ``gh release view TAG [--json F --jq .F]``: fails when TAG has none; ``isDraft``, ``tagName``;
- ``gh release upload TAG FILES [--clobber]``: fails without a release, or when an asset of that
  name exists and ``--clobber`` is not given. With ``--clobber`` on a PUBLISHED release it does what
  gh does (replaces the asset) and records it in ``violations.jsonl``: the rehearsal fails a run that
  changed what users download;
- ``gh release edit TAG --draft=false`` (a maintainer's publish), ``gh release list``;
- ``gh release download TAG --pattern P --dir D``: the matching assets, an error when none match;
- ``gh api [--paginate] repos/O/R/releases[?...] [--jq '.[] | {a, b}']``: every release, drafts
  included (the token of a job with write access sees them), compact JSON per line as gh prints
  when not on a terminal; ``gh api repos/O/R/actions/runs/ID``: ``runs/ID.json`` of the store;
- ``gh workflow run WORKFLOW [--ref REF] [-f k=v]``: appended to ``dispatches.jsonl``, which the
  rehearsal then runs (GitHub starts workflow_dispatch runs made with GITHUB_TOKEN: docs/ci.md).

Anything else exits 1 with "fake gh: not modelled", so a new use is noticed. The token's permissions
are the rehearsal's to check (release.workflow.gha.step_permissions) before a step runs.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shutil
import sys
from pathlib import Path


class GhError(Exception):
    """What gh prints before exiting 1."""


class Store:
    """The fake GitHub's state under one folder (module docstring)."""

    def __init__(self, root: Path):
        self.root = root
        (root / "releases").mkdir(parents=True, exist_ok=True)

    def _dir(self, tag: str) -> Path:
        if not re.fullmatch(r"[A-Za-z0-9._+-]+", tag or ""):
            raise GhError(f"invalid tag {tag!r}")
        return self.root / "releases" / tag

    def release(self, tag: str) -> dict | None:
        path = self._dir(tag) / "release.json"
        return json.loads(path.read_text()) if path.is_file() else None

    def releases(self) -> list[dict]:
        out = []
        for path in sorted((self.root / "releases").glob("*/release.json")):
            rel = json.loads(path.read_text())
            rel["assets"] = [{"name": a.name} for a in sorted((path.parent / "assets").glob("*"))]
            out.append(rel)
        return sorted(out, key=lambda r: -r["id"])  # newest first, as the API lists them

    def save(self, rel: dict) -> None:
        d = self._dir(rel["tag_name"])
        (d / "assets").mkdir(parents=True, exist_ok=True)
        (d / "release.json").write_text(json.dumps(rel))

    def create(self, tag: str, draft: bool) -> None:
        if self.release(tag) is not None:
            raise GhError(f"a release with the same tag name already exists: {tag}")
        ids = [r["id"] for r in self.releases()]
        self.save({"tag_name": tag, "draft": draft, "prerelease": False, "id": max(ids, default=0) + 1})

    def assets(self, tag: str) -> Path:
        return self._dir(tag) / "assets"

    def log(self, name: str, record: dict) -> None:
        with (self.root / name).open("a") as f:
            f.write(json.dumps(record) + "\n")

    def read_log(self, name: str) -> list[dict]:
        path = self.root / name
        return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.is_file() else []


def _option(args: list[str], *names: str) -> str | None:
    for i, a in enumerate(args):
        for n in names:
            if a == n and i + 1 < len(args):
                return args[i + 1]
            if a.startswith(n + "="):
                return a.split("=", 1)[1]
    return None


def _positional(args: list[str], with_value: tuple[str, ...]) -> list[str]:
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in with_value:
            skip = True
        elif not a.startswith("-"):
            out.append(a)
    return out


def _jq(values, expr: str | None) -> list[str]:
    """The two --jq forms the workflows use: ``.[] | {a, b}`` and ``.field``; compact JSON lines."""
    if expr is None:
        return [json.dumps(values)]
    m = re.fullmatch(r"\s*\.\[\]\s*\|\s*\{([\w\s,]+)\}\s*", expr)
    if m:
        keys = [k.strip() for k in m.group(1).split(",")]
        return [json.dumps({k: v.get(k) for k in keys}, separators=(",", ":")) for v in values]
    m = re.fullmatch(r"\s*\.(\w+)\s*", expr)
    if m:
        v = values.get(m.group(1)) if isinstance(values, dict) else None
        return [v if isinstance(v, str) else json.dumps(v)]
    raise GhError(f"fake gh: --jq {expr!r} not modelled")


def gh(store: Store, args: list[str]) -> list[str]:
    """Run one gh command against `store`; returns its stdout lines, GhError for gh's failures."""
    cmd = args[:2]
    rest = args[2:]
    if args[:1] == ["api"]:
        (path,) = _positional(args[1:], ("--jq", "-q", "--method", "-X", "-H", "--header"))
        jq = _option(args, "--jq", "-q")
        if re.search(r"/actions/runs/\d+$", path):
            run = store.root / "runs" / f"{path.rsplit('/', 1)[1]}.json"
            if not run.is_file():
                raise GhError("HTTP 404: Not Found")
            return _jq(json.loads(run.read_text()), jq)
        if re.fullmatch(r"repos/[^/]+/[^/]+/releases(\?.*)?", path):
            return _jq(store.releases(), jq)
        raise GhError(f"fake gh: api {path} not modelled")
    if cmd == ["release", "create"]:
        store.create(rest[0], "--draft" in rest)
        return [f"https://github.com/releases/tag/{rest[0]}"]
    if cmd == ["release", "view"]:
        rel = store.release(rest[0])
        if rel is None:
            raise GhError("release not found")
        if _option(rest, "--json"):
            view = {"isDraft": rel["draft"], "tagName": rel["tag_name"], "id": rel["id"]}
            return _jq(view, _option(rest, "--jq", "-q"))
        return [f"title:\t{rel['tag_name']}", f"draft:\t{str(rel['draft']).lower()}"]
    if cmd == ["release", "upload"]:
        tag, files = rest[0], [a for a in rest[1:] if not a.startswith("-")]
        rel = store.release(tag)
        if rel is None:
            raise GhError("release not found")
        target = store.assets(tag)
        for f in map(Path, files):
            if (target / f.name).exists():
                if "--clobber" not in rest:
                    raise GhError(f"asset under the same name already exists: [{f.name}]")
                if not rel["draft"]:
                    store.log(
                        "violations.jsonl", {"tag": tag, "asset": f.name, "what": "replaced on a published release"}
                    )
            shutil.copyfile(f, target / f.name)
        return []
    if cmd == ["release", "edit"]:
        rel = store.release(rest[0])
        if rel is None:
            raise GhError("release not found")
        if "--draft=false" in rest:
            rel["draft"] = False
        store.save(rel)
        return []
    if cmd == ["release", "list"]:
        return [f"{r['tag_name']}\t{'Draft' if r['draft'] else 'Published'}" for r in store.releases()]
    if cmd == ["release", "download"]:
        tag = rest[0]
        if store.release(tag) is None:
            raise GhError("release not found")
        pattern, folder = _option(rest, "--pattern", "-p") or "*", Path(_option(rest, "--dir", "-D") or ".")
        found = [a for a in sorted(store.assets(tag).glob("*")) if fnmatch.fnmatchcase(a.name, pattern)]
        if not found:
            raise GhError("no assets match the file pattern")
        folder.mkdir(parents=True, exist_ok=True)
        for a in found:
            shutil.copyfile(a, folder / a.name)
        return []
    if cmd == ["workflow", "run"]:
        inputs = dict(x.split("=", 1) for x in [_option(rest[i:], "-f", "--raw-field") for i in range(len(rest))] if x)
        store.log(
            "dispatches.jsonl", {"workflow": rest[0], "ref": _option(rest, "--ref", "-r") or "", "inputs": inputs}
        )
        return []
    raise GhError(f"fake gh: {' '.join(args[:2])} not modelled")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2 or argv[0] != "--store":
        print("usage: python -m release.workflow.fake_github --store DIR GH-ARGS...", file=sys.stderr)
        return 2
    store = Store(Path(argv[1]))
    store.log("calls.jsonl", {"args": argv[2:]})
    try:
        for line in gh(store, argv[2:]):
            print(line)
    except GhError as e:
        print(str(e), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
