"""The release workflow modelled and rehearsed on this machine.

GitHub's rules over the workflows (:mod:`~release.workflow.gha`,
:mod:`~release.workflow.workflow_model`), PowerShell argument passing with the entry points'
own parsers (:mod:`~release.workflow.pwsh_args`), and the job chain rehearsed against a fake GitHub
and network (:mod:`~release.workflow.rehearsal`, :mod:`~release.workflow.fake_github`,
:mod:`~release.workflow.rehearsal_network`). Layer: top (docs/design.md "Layers"): it runs every
entry point, so it may import every other package and none imports it.
"""
