"""Every relative link of the repository's Markdown files leads to a file or folder that exists.

Moves of folders (docs/evidence/ to lab/evidence/, tools/ scripts to lab/) break links silently;
this reads every tracked ``*.md`` (README.md, docs/, tools/, lab/ and the evidence pages) and
follows each ``[text](target)`` that is not a URL or an anchor of the same page. Code blocks are
left out (their brackets are code). Anchors after ``#`` are not checked.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"```.*?```", re.S)


def broken_links(md: Path, text: str) -> list[str]:
    """The relative link targets in ``text`` (the file ``md``) that do not exist on disk."""
    broken = []
    for target in LINK.findall(FENCE.sub("", text)):
        path = target.split("#", 1)[0]
        if not path or re.match(r"[A-Za-z][\w+.-]*:", target):  # an anchor, or a URL (https:, mailto:)
            continue
        if not (md.parent / path).exists():
            broken.append(target)
    return broken


def test_the_check_sees_a_broken_link(tmp_path):
    md = tmp_path / "a.md"
    (tmp_path / "there.md").write_text("x")
    text = "[ok](there.md) [anchor](#x) [web](https://example.org) [gone](missing/README.md#y)\n```\n[c](nope)\n```"
    assert broken_links(md, text) == ["missing/README.md#y"]


def test_every_relative_link_resolves():
    out = subprocess.run(["git", "ls-files", "-z", "*.md"], cwd=REPO, capture_output=True, check=True).stdout
    names = [n for n in out.decode().split("\0") if n]
    assert "README.md" in names and "lab/README.md" in names
    found = []
    for name in names:
        md = REPO / name
        found += [f"{name}: {t}" for t in broken_links(md, md.read_text(encoding="utf-8"))]
    assert not found, "broken links: " + "; ".join(found)
