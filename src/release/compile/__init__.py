"""Compiling one wheel or a dev install on this machine: the engine the sessions drive.

From the options (:mod:`~release.compile.options`, :mod:`~release.compile.arch_rules`) and the
toolchain probe (:mod:`~release.compile.toolchain`), through the one prepare step
(:mod:`~release.compile.prepare`), to the build folder (:mod:`~release.compile.build_dirs`), the
Ninja run with its progress, prediction (:mod:`~release.compile.compile_model`, the stdlib cost
model the release plan reuses) and compile cache, and the built wheel's name and local version
label (:mod:`~release.compile.tagging`, which shipping reuses). The entry points that drive it are
:mod:`release.sessions`; the kernel objects' archives are :mod:`release.archive`; what happens to a
built wheel is :mod:`release.ship`. Layer: engine (docs/design.md "Layers"): imports only the
top-level modules of :mod:`release`.
"""
