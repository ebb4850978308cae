"""Which build manifest a source checkout uses: the one definition of that rule.

``$FLASH_ATTN_MANIFEST`` when set and not empty, else ``build-manifest.json`` in the checkout's root.
Every Python reader asks :func:`path` (the release tooling through ``release.manifest.path``,
``src/kernels/kernel_set.py``, a checkout's ``flash_attn._loader``, noxfile.py; ``.ci/run`` reads its
pins through ``release.manifest``); CMake follows the same rule in
cmake/FlashAttnManifest.cmake (a ``-DFLASH_ATTN_MANIFEST=`` value first), and the tooling passes the
file it resolved to CMake as that value wherever it runs CMake.

Here, in the package the wheel ships, because the runtime of a source checkout reads the manifest
too (the arch group names, ``flash_attn._loader.checkout_group_names``); an installed wheel has no
manifest. Standard library only; importing it has no side effects.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "FLASH_ATTN_MANIFEST"  # names another copy of the manifest (tests and the release rehearsal do)
NAME = "build-manifest.json"  # the manifest in the repository root


def path(root: Path) -> Path:
    """The manifest in use for the checkout whose root folder is ``root``: ``$FLASH_ATTN_MANIFEST``
    when set and not empty (taken as given: relative to the current folder), else ``root/build-manifest.json``.
    Whether the file exists is the reader's concern."""
    return Path(os.environ.get(ENV) or Path(root) / NAME)
