"""Release tooling for the flash_attn wheels, used by ``noxfile.py``.

Each module is importable and tested on its own (tests/unit/release); the nox sessions only
install pinned tools and call these modules' ``main`` functions. Every module, one line each
(tests/unit/test_imports.py keeps the list complete):

- :mod:`release._paths`        paths of this checkout; flash_attn/_label.py and _install.py loaded by file
- :mod:`release.arch_rules`    the arch rules of build-manifest.json, applied before a build
- :mod:`release.archives`      kernels archives: build, pack, load and gather the torch-free kernel objects
- :mod:`release.build_dirs`    build directory names (group, kernel set, torch, CUDA, compiler)
- :mod:`release.builder`       runs ``python -m build`` with Ninja progress and a summary
- :mod:`release.checksums`     ``SHA256SUMS`` writing and verification
- :mod:`release.compile_cache` sccache in front of nvcc and the host compiler
- :mod:`release.compile_model` a runner's nvcc jobs, a build's predicted wall time, job minutes, shard counts
- :mod:`release.cuda_redist`   a CUDA toolkit on Windows from NVIDIA's redistributable archives
- :mod:`release.dev`           the ``dev`` session: editable install that rebuilds on import
- :mod:`release.doc_tables`    the docs' tables rendered from the build manifest
- :mod:`release.errors`        the exception types and the one ``main`` wrapper
- :mod:`release.estimate`      a build's predicted wall time and memory on this machine, its measured speed
- :mod:`release.gates`         the release workflow's gates: who may publish, early checks
- :mod:`release.gha`           the GitHub Actions semantics the release rehearsal reproduces
- :mod:`release.index`         the release's static PEP 503 package indexes (one per wheel variant)
- :mod:`release.locks`         one session at a time per build folder and per output
- :mod:`release.manifest`      build-manifest.json as the release tooling reads it
- :mod:`release.manylinux`     the ``auditwheel`` gate and re-tag of a Linux wheel
- :mod:`release.matrix`        the release build matrix and its job lists (link, shards, gather)
- :mod:`release.msvc_env`      the MSVC developer environment in a GitHub Actions job
- :mod:`release.options`       the build options (CLI flags, environment variables, CMake defines)
- :mod:`release.outputs`       outputs written atomically, never over an input
- :mod:`release.pins`          pinned versions of the tools the sessions install
- :mod:`release.plan`          the release plan: every job's predicted minutes, the CPU-hours
- :mod:`release.prepare`       the one prepare step: check the options, probe the toolchain, expected build info
- :mod:`release.procs`         the processes of a build, in one group that ends with the session
- :mod:`release.progress`      Ninja progress parsing, ``.ninja_log`` analysis, summary table
- :mod:`release.publish`       the ``release`` session: gather, checksum and verify a release
- :mod:`release.rehearsal`     the release workflow's job chain rehearsed on this machine
- :mod:`release.smoke`         smoke test of one wheel in a fresh virtual environment
- :mod:`release.smoke_check`   the checks run inside that environment, and the build-info reader tools/validate.py uses
- :mod:`release.tagging`       local version label and wheel re-tagging
- :mod:`release.toolchain`     probe of nvcc, torch and the host C++ compiler
- :mod:`release.torch_independence` evidence that the kernel objects do not depend on torch
- :mod:`release.upstream`      the pinned upstream sdist, obtained as the build obtains it
- :mod:`release.upstream_tests` ``nox -s upstream_tests``: upstream's test suite against a wheel
- :mod:`release.upstream_tests_plugin` the pytest plugin of ``nox -s upstream_tests``
- :mod:`release.wheels`        the ``wheel_*`` sessions: build, tag, checksum, smoke test
"""
