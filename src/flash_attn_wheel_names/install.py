"""Which package index serves a flash_attn wheel for a given GPU and torch: the one definition.

The release publishes one PEP 503 index per variant (``release.ship.index``), under the site URL
``package_index.url`` of build-manifest.json, which every build info carries as
``install.index_url`` with ``install.stable_torch_min`` (``stable_abi.torch_min``)::

    <site>/cu<CUDA major>/<arch group>/stable/simple          stable-ABI wheels, every torch >= the minimum
    <site>/cu<CUDA major>/<arch group>/torch<release>/simple  the exact wheel of one torch release

``python -m flash_attn`` prints :func:`install_line` when the installed wheel cannot run here;
``release.ship.index`` writes the indexes at the same paths. Standard library only, as
:mod:`flash_attn_wheel_names.label`.
"""

from __future__ import annotations

PROJECT = "flash-attn"


def _release(version: str) -> tuple[int, ...]:
    out = []
    for part in version.split("+", 1)[0].split("."):
        digits = "".join(c for c in part if c.isdigit()) if part[:1].isdigit() else ""
        if not digits:
            break
        out.append(int(digits))
    return tuple(out)


def variant(cuda_major: int, group: str, torch_version: str | None, stable_torch_min: str | None) -> str:
    """``cu13/legacy/stable`` when ``torch_version`` >= ``stable_torch_min`` (or ``torch_version`` is
    None: a stable-ABI wheel), else ``cu13/legacy/torch2.10.1`` (the exact wheel of that release)."""
    if torch_version is None or (stable_torch_min and _release(torch_version) >= _release(stable_torch_min)):
        abi = "stable"
    else:
        abi = "torch" + ".".join(map(str, _release(torch_version)))
    return f"cu{int(cuda_major)}/{group}/{abi}"


def install_line(index_url: str, variant_path: str) -> str:
    """``pip install flash-attn --index-url <site>/<variant>/simple``: the line for one variant."""
    return f"pip install {PROJECT} --index-url {index_url.rstrip('/')}/{variant_path}/simple"
