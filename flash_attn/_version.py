# Single source of the package version: pyproject.toml reads it (scikit-build-core regex
# provider) and flash_attn.__version__ falls back to it when no installed metadata is found.
__version__ = "2.9.2.post1"
