"""Build info parsing and the helpers that read kernels, targets and labels out of it."""

from __future__ import annotations

import json

import pytest
import torch

from flash_attn import LibraryLoadError
from flash_attn import _build_info as bi


def test_parse_accepts_the_documented_example(legacy_info):
    info = bi.parse(json.dumps(legacy_info), source="example.json")
    assert info["group"] == "legacy"
    assert bi.parse(legacy_info) == info


@pytest.mark.parametrize("key", bi.REQUIRED_KEYS)
def test_parse_names_a_missing_key(legacy_info, key):
    del legacy_info[key]
    with pytest.raises(LibraryLoadError, match=key) as info:
        bi.parse(legacy_info, source="build_info_legacy.json")
    assert "build_info_legacy.json" in str(info.value)


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("sass", ["80"], "sm_<major><minor>"),
        ("sass", "sm_80", "list of strings"),
        ("ptx_arch", "90", "ptx_arch"),
        ("kernels", [{"kind": "fwd", "dtype": "fp32", "head_dim": 64, "causal": False}], "kernels"),
        ("kernels", {}, "kernels"),
        ("torch_version", 2.14, "torch_version"),
        ("arch_groups", {"legacy": ["80"]}, "arch_groups"),
        ("arch_groups", ["sm_80"], "arch_groups"),
        ("head_dims", [64, "128"], "head_dims"),
    ],
)
def test_parse_rejects_malformed_values(legacy_info, key, value, fragment):
    legacy_info[key] = value
    with pytest.raises(LibraryLoadError, match="malformed") as info:
        bi.parse(legacy_info)
    assert fragment in str(info.value)


def test_parse_rejects_non_json():
    with pytest.raises(LibraryLoadError, match="not valid JSON"):
        bi.parse("{not json", source="x.json")
    with pytest.raises(LibraryLoadError, match="JSON object"):
        bi.parse("[1, 2]")


def test_read(tmp_path, legacy_info):
    path = tmp_path / "build_info_legacy.json"
    path.write_text(json.dumps(legacy_info), encoding="utf-8")
    assert bi.read(path)["sass"] == ["sm_80", "sm_89", "sm_90"]
    with pytest.raises(LibraryLoadError, match="cannot read"):
        bi.read(tmp_path / "missing.json")


@pytest.mark.parametrize(
    ("head_dim", "kernel"),
    [
        (1, 32),
        (8, 32),
        (32, 32),
        (33, 64),
        (64, 64),
        (72, 96),
        (96, 96),
        (112, 128),
        (128, 128),
        (136, 192),
        (160, 192),
        (192, 192),
        (200, 256),
        (224, 256),
        (256, 256),
        (257, 0),
        (0, 0),
    ],
)
def test_kernel_head_dim(head_dim, kernel):
    assert bi.kernel_head_dim(head_dim, (32, 64, 96, 128, 192, 256)) == kernel


def test_dtype_names():
    assert bi.dtype_name(torch.float16) == "fp16"
    assert bi.dtype_name(torch.bfloat16) == "bf16"
    assert bi.dtype_name(torch.float32) is None


def test_kernel_set_and_description(legacy_info):
    keys = bi.kernel_set(legacy_info)
    assert len(keys) == len(legacy_info["kernels"])
    assert ("fwd", "fp16", 64, True) in keys  # plain tuples match the named tuples
    assert ("bwd", "bf16", 256, False) not in keys
    text = bi.describe_kernels(keys)
    assert "fwd fp16 hd32,64,96,128,192 (causal+non-causal)" in text
    assert bi.describe_kernels([]) == "no kernels"
    only_causal = [bi.KernelKey("bwd", "bf16", 128, True)]
    assert bi.describe_kernels(only_causal) == "bwd bf16 hd128 (causal only)"


def test_targets(legacy_info, blackwell_info):
    assert bi.sass_targets(legacy_info) == [(8, 0, ""), (8, 9, ""), (9, 0, "")]
    assert bi.sass_targets(blackwell_info) == [(10, 0, ""), (12, 0, ""), (12, 1, "")]
    assert [str(t) for t in bi.sass_targets({"sass": ["sm_100f", "sm_90a"]})] == ["sm_100f", "sm_90a"]
    assert bi.ptx_capability(legacy_info) == (9, 0)
    assert bi.ptx_capability(blackwell_info) == (12, 1)
    assert bi.ptx_capability({"ptx_arch": None}) is None


def test_versions_and_labels(legacy_info):
    assert bi.public_version("2.14.1+cu130") == "2.14.1"
    assert bi.cuda_major("13.0.88") == 13
    assert bi.cuda_major(None) is None
    assert bi.cuda_tag("12.8") == "cu128"
    assert bi.cuda_tag("13.0.88") == "cu130"
    assert bi.cuda_tag("x") is None
    # the fixture is a dev-set build: its label (and the other group's) carries the set, as tagging writes it
    assert legacy_info["kernel_set"] == "dev"
    assert bi.local_label(legacy_info) == "cu130torch2.14.1cxx11abitrue.legacy.rev1.dev"
    assert bi.local_label(legacy_info, "blackwell") == "cu130torch2.14.1cxx11abitrue.blackwell.rev1.dev"
    release = {**legacy_info, "kernel_set": "release"}
    assert bi.local_label(release, "blackwell") == "cu130torch2.14.1cxx11abitrue.blackwell.rev1"


def test_the_runtime_and_the_release_tagging_spell_one_label(legacy_info):
    """release.compile.tagging.local_label and _build_info.local_label adapt a build info through one function."""
    from release.compile import tagging

    for info in (
        legacy_info,
        {**legacy_info, "kernel_set": "release", "cxx11_abi": False},
        {**legacy_info, "torch_abi": "stable", "torch_min": "2.11"},
    ):
        assert tagging.local_label(info) == bi.local_label(info)
    assert bi.local_label({**legacy_info, "cuda_version": None, "torch_cuda_version": None}).startswith("cutorch")


def test_stable_abi_fields_and_labels(legacy_info):
    # a build info without torch_abi (every wheel before the stable build) is exact
    assert bi.torch_abi(legacy_info) == "exact" and not bi.is_stable(legacy_info)
    assert bi.torch_abi({**legacy_info, "torch_abi": None, "torch_min": None}) == "exact"
    stable = bi.parse({**legacy_info, "torch_abi": "stable", "torch_min": "2.11", "kernel_set": "release"})
    assert bi.is_stable(stable)
    assert bi.local_label(stable) == "cu130torchstable2.11.legacy.rev1"
    assert bi.local_label(stable, "blackwell") == "cu130torchstable2.11.blackwell.rev1"
    assert bi.local_label({**stable, "kernel_set": "dev"}) == "cu130torchstable2.11.legacy.rev1.dev"


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"torch_abi": "stabel"}, "'torch_abi' must be one of exact, stable"),
        ({"torch_abi": "stable"}, "'torch_min' of a stable-ABI build"),
        ({"torch_abi": "stable", "torch_min": 2.11}, "'torch_min' of a stable-ABI build"),
        ({"torch_abi": "stable", "torch_min": "2.11.0"}, "'torch_min' of a stable-ABI build"),
    ],
)
def test_bad_stable_abi_fields_are_refused(legacy_info, fields, problem):
    with pytest.raises(LibraryLoadError, match="malformed") as error:
        bi.parse({**legacy_info, **fields})
    assert problem in str(error.value)
