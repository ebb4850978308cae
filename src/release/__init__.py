"""Release tooling for the flash_attn wheels, used by ``noxfile.py``.

Each module is importable and tested on its own (tests/unit/release); the nox sessions only
install pinned tools and call these modules' ``main`` functions. The modules live in sub-packages by
what they do (each sub-package's docstring says what it holds), in layers that import only
downwards (docs/design.md "Layers"; pyproject.toml's import-linter contract enforces them): core,
then compile and windows, plan, archive and ship, sessions, workflow. Every module, one line each,
grouped by sub-package (tests/unit/test_imports.py keeps the list complete):

Core, the lowest layer (this folder): paths, errors, the manifest, pins, outputs, checksums, locks, processes:

- :mod:`release._moved`     the warning of a deprecated module path (the aliases at the end of this list)
- :mod:`release._paths`     paths of this checkout and the package version
- :mod:`release.checksums`  ``SHA256SUMS`` writing and verification
- :mod:`release.confine`    one confinement rule for every path read from an artifact
- :mod:`release.environment` the user-facing environment variables: one registry, rendered into the docs
- :mod:`release.errors`     the exception types and the one ``main`` wrapper
- :mod:`release.index_url`  the package index URL, derived from the repository a workflow runs in
- :mod:`release.locks`      one session at a time per build folder and per output
- :mod:`release.manifest`   build-manifest.json as the release tooling reads it
- :mod:`release.outputs`    outputs written atomically, never over an input
- :mod:`release.pins`       pinned versions of the tools the sessions install
- :mod:`release.procs`      the processes of a build, in one group that ends with the session

compile/: one wheel or a dev install compiled, from the options to the Ninja run, and the wheel's name:

- :mod:`release.compile.arch_rules`     the arch rules of build-manifest.json, applied before a build
- :mod:`release.compile.build_dirs`     build directory names (group, kernel set, torch, CUDA, compiler)
- :mod:`release.compile.builder`        runs ``python -m build`` with Ninja progress and a summary
- :mod:`release.compile.compile_cache`  sccache in front of nvcc and the host compiler
- :mod:`release.compile.compile_model`  a runner's nvcc jobs, a build's predicted wall time, job minutes, shard counts
- :mod:`release.compile.editable`       the CMake and ninja an editable install rebuilds with on import
- :mod:`release.compile.estimate`       a build's predicted wall time and memory on this machine, its measured speed
- :mod:`release.compile.machine`        this machine's speed (calibration), its load, the builds running on it
- :mod:`release.compile.options`        the build options (CLI flags, environment variables, CMake defines)
- :mod:`release.compile.prepare`        one prepare step: check the options, probe the toolchain, expected build info
- :mod:`release.compile.progress`       Ninja progress parsing, ``.ninja_log`` analysis, summary table
- :mod:`release.compile.tagging`        local version label and wheel re-tagging
- :mod:`release.compile.toolchain`      probe of nvcc, torch and the host C++ compiler
- :mod:`release.compile.upstream`       the pinned upstream sdist, obtained as the build obtains it

windows/: Windows build hosts:

- :mod:`release.windows.cuda_redist`  a CUDA toolkit on Windows from NVIDIA's redistributable archives
- :mod:`release.windows.msvc_env`     the MSVC developer environment in a GitHub Actions job

plan/: the release's plan, its matrix and its docs tables:

- :mod:`release.plan.doc_tables`  the docs' tables rendered from the build manifest
- :mod:`release.plan.matrix`      the release build matrix and its job lists (link, shards, gather)
- :mod:`release.plan.plan`        the release plan: every job's predicted minutes, the CPU-hours
- :mod:`release.plan.preflight`   the matrix job's check that every torch wheel, image and archive exists

archive/: the torch-free kernel objects' archives:

- :mod:`release.archive.archives`            kernels archives: build, pack, load and gather the torch-free objects
- :mod:`release.archive.fatbin`              the SASS and PTX targets of an nvcc object, read from its fatbin headers
- :mod:`release.archive.integrity`           archives' integrity rule: manifest shape, content-addressed key, name
- :mod:`release.archive.torch_independence`  evidence that the kernel objects do not depend on torch

ship/: what happens to a built wheel before and when it is released:

- :mod:`release.ship.gates`                  the release workflow's gates: who may publish, early checks
- :mod:`release.ship.index`                  the release's static PEP 503 package indexes (one per wheel variant)
- :mod:`release.ship.manylinux`              the ``auditwheel`` gate and re-tag of a Linux wheel
- :mod:`release.ship.publish`                the ``release`` session: gather, checksum and verify a release
- :mod:`release.ship.reports`                the GPU reports (validation, upstream tests) checked against their schemas
- :mod:`release.ship.smoke`                  smoke test of one wheel in a fresh virtual environment
- :mod:`release.ship.smoke_check`            the checks run in that venv; the build-info reader of tools/validate.py
- :mod:`release.ship.upstream_tests`         ``nox -s upstream_tests``: upstream's test suite against a wheel
- :mod:`release.ship.upstream_tests_plugin`  the pytest plugin of ``nox -s upstream_tests``

sessions/: the entry points that combine the engines into one build:

- :mod:`release.sessions.dev`     the ``dev`` session: editable install that rebuilds on import
- :mod:`release.sessions.wheels`  the ``wheel_*`` sessions: build, tag, checksum, smoke test

workflow/: the release workflow modelled and rehearsed on this machine:

- :mod:`release.workflow.fake_github`        the rehearsal's GitHub: releases (draft, published), assets, dispatches
- :mod:`release.workflow.gha`                the GitHub Actions semantics the release rehearsal reproduces
- :mod:`release.workflow.pwsh_args`          PowerShell argument passing, and the entry points' parsers on the result
- :mod:`release.workflow.rehearsal`          the release workflow's job chain rehearsed on this machine
- :mod:`release.workflow.rehearsal_network`  the network the rehearsal's steps see (the preflight's answers)
- :mod:`release.workflow.workflow_model`     the model-only rehearsal: GitHub's rules over the workflows, in seconds

Deprecated aliases at the old paths of moved modules, kept for one release (``python -m`` at the
old path warns and runs the module; docs/design.md "Layers"); the alias files live in
:mod:`release.deprecated`, found through the old packages' ``__path__``:

- :mod:`release.build`   the old package path (release.compile, release.sessions); ``__path__``: the aliases

- :mod:`release.build.dev`                 deprecated alias of :mod:`release.sessions.dev` (one release)
- :mod:`release.build.toolchain`           deprecated alias of :mod:`release.compile.toolchain` (one release)
- :mod:`release.build.torch_independence`  deprecated alias of :mod:`release.archive.torch_independence` (one release)
- :mod:`release.build.wheels`              deprecated alias of :mod:`release.sessions.wheels` (one release)
- :mod:`release.plan.fake_github`          deprecated alias of :mod:`release.workflow.fake_github` (one release)
- :mod:`release.plan.rehearsal`            deprecated alias of :mod:`release.workflow.rehearsal` (one release)
- :mod:`release.ship.checksums`            deprecated alias of :mod:`release.checksums` (one release)
"""
