"""Every entry point's defaults follow the manifest: change a default there, and each parser follows.

A copy of build-manifest.json with other defaults (a local build's torch ABI and kernel set:
``options.FLASH_ATTN_TORCH_ABI/KERNEL_SET.default``; the release's: ``release_matrix.torch_abi`` and
``.kernel_set``) is named by ``$FLASH_ATTN_MANIFEST`` for a fresh interpreter (the modules read the
manifest once, at import). There every module of src/release with a ``main`` that builds an argparse
parser is imported and its ``main([])`` run up to its parse, where the parser is captured (parse_args
patched); the defaults of the flags of those options are reported back and compared:

- release.plan.* (the release plan and matrix): the release's defaults, release_matrix.*;
- every other entry point: ``None`` or ``""`` ("not given": release.compile.options then takes the
  option's manifest default, checked on a parsed wheel build) or the option's manifest default.
- a flag listed in DELIBERATE keeps the literal recorded there, with its reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Flags whose literal default is a deliberate choice of that entry point, not the manifest's default,
# each with its reason. Every other literal default fails; a listed one must keep its recorded value.
DELIBERATE = {
    ("release.archive.torch_independence", "--kernel-set"): (
        "ci",
        "the evidence builds one wheel per torch twice over: the smallest set shows the same binding",
    ),
}

# Runs in the fresh interpreter: prints {"module": {"--flag": default}} and the resolved wheel options.
_PROBE = r"""
import argparse, inspect, json, sys
from pathlib import Path

class Captured(BaseException):  # not an Exception: run_main must not swallow it
    def __init__(self, parser):
        self.parser = parser

def capture(self, *args, **kwargs):
    raise Captured(self)

original = argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args
argparse.ArgumentParser.parse_args = capture
argparse.ArgumentParser.parse_known_args = capture
flags = set(sys.argv[2].split(","))
src = Path(sys.argv[1])
report, missed = {}, []

def walk(parser, out):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                walk(sub, out)
        for flag in action.option_strings:
            if flag in flags:
                out[flag] = action.default

for path in sorted((src / "release").rglob("*.py")):
    text = path.read_text(encoding="utf-8")
    if "def main(" not in text or "ArgumentParser(" not in text:
        continue
    name = ".".join(path.relative_to(src).with_suffix("").parts)
    module = __import__(name, fromlist=["main"])
    try:
        # smoke_check's main() reads sys.argv itself (it runs as a script in the smoke venv)
        module.main(*([[]] if inspect.signature(module.main).parameters else []))
    except Captured as c:
        walk(c.parser, report.setdefault(name, {}))
    else:
        missed.append(name)

argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args = original
from release.build import wheels
built = wheels.parse(["--arch-group", "legacy"], env={})
print(json.dumps({"parsers": report, "missed": missed,
                  "wheel": {"torch_abi": built.torch_abi(), "kernel_set": built.kernel_set}}))
"""


def _changed_manifest() -> dict:
    """A manifest copy whose local-build and release defaults all differ from the checkout's."""
    data = json.loads((ROOT / "build-manifest.json").read_text(encoding="utf-8"))
    options, release = data["options"], data["release_matrix"]
    other = {"exact": "stable", "stable": "exact"}
    options["FLASH_ATTN_TORCH_ABI"]["default"] = other[options["FLASH_ATTN_TORCH_ABI"]["default"]]
    options["FLASH_ATTN_KERNEL_SET"]["default"] = (
        "dev" if options["FLASH_ATTN_KERNEL_SET"]["default"] != "dev" else "ci"
    )
    release["torch_abi"] = other[release["torch_abi"]]
    release["kernel_set"] = "ci" if release["kernel_set"] != "ci" else "dev"
    return data


def _probe(manifest: Path, flags: list[str]) -> dict:
    env = {**os.environ, "FLASH_ATTN_MANIFEST": str(manifest), "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, str(ROOT / "src"), ",".join(flags)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_entry_point_takes_its_defaults_from_the_manifest(tmp_path):
    data = _changed_manifest()
    copy = tmp_path / "build-manifest.json"
    copy.write_text(json.dumps(data), encoding="utf-8")
    options, release = data["options"], data["release_matrix"]
    followed = {"FLASH_ATTN_TORCH_ABI": "torch_abi", "FLASH_ATTN_KERNEL_SET": "kernel_set"}
    flag_of = {options[name]["flag"]: name for name in followed}
    got = _probe(copy, sorted(flag_of))

    assert got["missed"] == [], f"entry points whose main never reached a parser: {got['missed']}"
    # the scan must reach the entry points this test is about, or it proves nothing
    assert {"release.plan.matrix", "release.plan.plan", "release.sessions.wheels"} <= set(got["parsers"])
    wrong = []
    for module, defaults in got["parsers"].items():
        for flag, default in defaults.items():
            name = flag_of[flag]
            if (module, flag) in DELIBERATE:
                expected = {DELIBERATE[module, flag][0]}
            elif module.startswith("release.plan."):
                expected = {release[followed[name]]}
            else:
                expected = {None, "", options[name]["default"]}
            if default not in expected:
                wrong.append(f"{module} {flag}: default {default!r}, the manifest says {sorted(map(str, expected))}")
    assert wrong == [], "\n".join(wrong)
    # "not given" resolves to the manifest's default in the wheel sessions
    assert got["wheel"] == {
        "torch_abi": options["FLASH_ATTN_TORCH_ABI"]["default"],
        "kernel_set": options["FLASH_ATTN_KERNEL_SET"]["default"],
    }
