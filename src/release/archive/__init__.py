"""The torch-free kernel objects' archives (``nox -s archive_<group>``, ``nox -s archive_gather``).

:mod:`~release.archive.archives` builds the kernel objects of a group (whole or one shard), packs
them with their key, loads an archive for a link, and gathers shard archives into one.
"""
