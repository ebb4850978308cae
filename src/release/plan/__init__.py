"""The release's plan, before anything is built.

The build matrix and its job lists (:mod:`~release.plan.matrix`), every job's predicted minutes
(:mod:`~release.plan.plan`, from the cost model :mod:`release.compile.compile_model`), the matrix
job's preflight (:mod:`~release.plan.preflight`) and the docs' tables rendered from the manifest
(:mod:`~release.plan.doc_tables`). The release workflow rehearsed on this machine is
:mod:`release.workflow`. Layer: below :mod:`release.ship` (whose gates read the matrix), above
:mod:`release.compile` and :mod:`release.windows` (docs/design.md "Layers").
"""

from release import _moved  # the folder of its deprecated aliases (release.deprecated), for one release

__path__.append(_moved.alias_folder("plan"))  # release.plan.<old module> -> release/deprecated/old_plan/
