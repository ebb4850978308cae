"""The release's plan, before anything is built.

The build matrix and its job lists (:mod:`~release.plan.matrix`), the cost model of a runner's
compiles (:mod:`~release.plan.compile_model`), every job's predicted minutes
(:mod:`~release.plan.plan`), the docs' tables rendered from the manifest, and the release
workflow rehearsed on this machine (:mod:`~release.plan.rehearsal`, :mod:`~release.plan.gha`).
"""
