"""``flash_attn.__version__``: the installed distribution's version, else ``_version.py``."""

from __future__ import annotations

from importlib import metadata

from . import _version

__all__ = ["choose_version", "package_version"]

DISTRIBUTION = "flash_attn"


def choose_version(source_version: str, installed_version: str | None) -> str:
    """Pick the version to report.

    The installed metadata carries the local label (``2.8.3.post2+cu130torch2.14.1cxx11abitrue.legacy.rev1``)
    and wins when its public part equals ``source_version``; otherwise (no installed distribution,
    or one of another flash_attn, e.g. upstream's, shadowed by this source checkout) the version
    from ``flash_attn/_version.py`` is used.
    """
    if installed_version and installed_version.split("+", 1)[0] == source_version:
        return installed_version
    return source_version


def package_version() -> str:
    """The version of this flash_attn (see :func:`choose_version`)."""
    try:
        installed = metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        installed = None
    except Exception:  # broken metadata must not break the import
        installed = None
    return choose_version(_version.__version__, installed)
