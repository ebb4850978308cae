# Single source of the package version: pyproject.toml reads it (scikit-build-core regex
# provider) and flash_attn.__version__ falls back to it when no installed metadata is found.
#
# It is the version of the upstream FlashAttention release whose kernels and Python API the wheel
# carries (build-manifest.json upstream.version; tests/unit/test_version_scheme.py holds the two
# equal), so version gates written for the official wheel accept this one (xformers:
# 2.7.1 <= v <= 2.8.4; pins flash-attn==2.8.3.post2). This project's own revision of that release
# is a segment of the local label (REVISION in src/flash_attn_wheel_names/label.py): README "Versions".
__version__ = "2.8.3.post2"
