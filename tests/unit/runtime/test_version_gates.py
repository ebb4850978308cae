"""Version gates written for the official flash-attn wheel accept this project's versions.

Every wheel version this checkout can produce (``flash_attn/_version.py`` plus each local label of
:func:`flash_attn_wheel_names.label.local_label`: exact and stable ABI, each arch group of build-manifest.json,
release and non-release kernel sets) is held to the gates consumers apply to ``flash_attn.__version__``
or to the distribution's version, as their current releases spell them:

* xformers 0.0.35, xformers/ops/fmha/flash.py: ``parse_version`` (torch._vendor.packaging's
  ``parse``) of ``flash_attn.__version__`` must lie in ``[2.7.1, 2.8.4]``, bounds included;
* requirement pins of the pinned upstream release (``flash-attn==<upstream version>`` and the
  like; PEP 440 ignores the candidate's local label for a specifier without one), with
  ``packaging.specifiers`` as pip evaluates them;
* yunchang 0.6.4, yunchang/kernels/attention.py: the plain string comparison
  ``flash_attn.__version__ < '2.6.3'`` must be False;
* transformers 5.24 ``is_flash_attn_2_available`` (``>= 2.3.3``) and diffusers 0.42.1
  (``_REQUIRED_FLASH_VERSION = "2.6.3"``, ``>=``).

``==2.8.3`` cannot match a post-release such as 2.8.3.post2 under PEP 440 (a post-release is a
later version than its base); the test states that as a fact rather than a goal.
"""

from __future__ import annotations

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version
from torch._vendor.packaging.version import parse as torch_parse_version

from flash_attn import _version
from flash_attn_wheel_names import label as _label
from release import manifest

UPSTREAM_VERSION = manifest.upstream_pin()[0]


def _versions() -> list[str]:
    public = _version.__version__
    labels = []
    for group in manifest.arch_groups():
        for kernel_set in (_label.RELEASE_KERNEL_SET, "ci"):
            labels.append(_label.local_label("13.0", "2.14.1+cu130", True, group, kernel_set))
            labels.append(
                _label.local_label("13.2", None, True, group, kernel_set, torch_abi="stable", torch_min="2.11")
            )
    return [public] + [f"{public}+{label}" for label in labels]


VERSIONS = _versions()


def test_the_public_version_is_upstreams():
    """The public part is the pinned upstream release (build-manifest.json upstream.version)."""
    assert _label.public_version(_version.__version__) == UPSTREAM_VERSION
    assert Version(_version.__version__) == Version(UPSTREAM_VERSION)


@pytest.mark.parametrize("version", VERSIONS)
def test_xformers_gate(version):
    parsed = torch_parse_version(version)
    assert torch_parse_version("2.7.1") <= parsed <= torch_parse_version("2.8.4"), version


@pytest.mark.parametrize(
    "pin",
    [f"=={UPSTREAM_VERSION}", f">={UPSTREAM_VERSION}", "==2.8.3.*", "==2.8.*", ">=2.8.3,<2.9", "~=2.8.3", "<=2.8.4"],
)
def test_requirement_pins_of_the_upstream_release(pin):
    for version in VERSIONS:
        assert SpecifierSet(pin).contains(version), (pin, version)


def test_an_exact_pin_of_the_base_release_cannot_match_a_post_release():
    assert all(not SpecifierSet("==2.8.3").contains(version) for version in VERSIONS)


@pytest.mark.parametrize("version", VERSIONS)
def test_other_consumers_gates(version):
    assert not version < "2.6.3", "yunchang compares the strings"
    assert Version(version) >= Version("2.3.3") and Version(version) >= Version("2.6.3")
