"""The torch-free kernel objects' archives (``nox -s archive_<group>``, ``nox -s archive_gather``).

:mod:`~release.archive.archives` builds the kernel objects of a group (whole or one shard), packs
them with their key, loads an archive for a link, and gathers shard archives into one;
:mod:`~release.archive.integrity` owns the rule every reader checks (manifest shape, object paths,
the content-addressed key and folder name, each object's SASS read by :mod:`~release.archive.fatbin`);
:mod:`~release.archive.torch_independence` shows that the objects do not depend on torch. Layer:
engine beside :mod:`release.ship`, which it does not import; it drives :mod:`release.compile`
(docs/design.md "Layers").
"""
