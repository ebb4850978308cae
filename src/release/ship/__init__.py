"""What happens to a built wheel on its way out.

Its smoke test in a fresh venv, the manylinux gate, upstream's test suite against it, the release
workflow's gates, and the release folder with its package indexes (:mod:`~release.ship.publish`,
:mod:`~release.ship.index`). The local version label and re-tag are
:mod:`release.compile.tagging` and the checksums :mod:`release.checksums` (both lower layers). Layer:
engine beside :mod:`release.archive`, which it does not import (docs/design.md "Layers").
"""

from release import _moved  # the folder of its deprecated aliases (release.deprecated), for one release

__path__.append(_moved.alias_folder("ship"))  # release.ship.<old module> -> release/deprecated/old_ship/
