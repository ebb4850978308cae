"""Release tooling for the flash_attn wheels, used by ``noxfile.py``.

Each module is importable and tested on its own (tests/unit/release); the nox sessions only
install pinned tools and call these modules' ``main`` functions:

- :mod:`release.options`   the build options (CLI flags, environment variables, CMake defines)
- :mod:`release.toolchain` probe of nvcc, torch and the host C++ compiler
- :mod:`release.build_key` keyed build directories
- :mod:`release.builder`   runs ``python -m build`` with Ninja progress and a summary
- :mod:`release.progress`  Ninja progress parsing, ``.ninja_log`` analysis, summary table
- :mod:`release.estimate`  a build's predicted wall time and memory on this machine, its measured speed
- :mod:`release.tagging`   local version label and wheel re-tagging
- :mod:`release.checksums` ``SHA256SUMS`` writing and verification
- :mod:`release.smoke`     smoke test of one wheel in a fresh virtual environment
- :mod:`release.smoke_check` the checks run inside that environment, and the build-info reader
  that tools/validate.py uses too
- :mod:`release.wheels`    the ``wheel_*`` sessions: build, tag, checksum, smoke test
- :mod:`release.dev`       the ``dev`` session: editable install that rebuilds on import
- :mod:`release.publish`   the ``release`` session: gather, checksum and verify a release
- :mod:`release.index`     the release's static PEP 503 package indexes (one per wheel variant)
"""
