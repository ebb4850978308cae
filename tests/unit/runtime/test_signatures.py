"""The public API keeps upstream FlashAttention-2 2.8.3's names, signatures and defaults, and documents itself."""

from __future__ import annotations

import ast
import inspect

import pytest

import flash_attn
import flash_attn.flash_attn_interface as interface

_E = inspect.Parameter.empty
_OPTIONS = [
    ("dropout_p", 0.0),
    ("softmax_scale", None),
    ("causal", False),
    ("window_size", (-1, -1)),
    ("softcap", 0.0),
    ("alibi_slopes", None),
    ("deterministic", False),
    ("return_attn_probs", False),
]

# Upstream flash_attn/flash_attn_interface.py, 2.8.3.post2: (parameter, default) in order.
UPSTREAM = {
    "flash_attn_qkvpacked_func": [("qkv", _E), *_OPTIONS],
    "flash_attn_kvpacked_func": [("q", _E), ("kv", _E), *_OPTIONS],
    "flash_attn_func": [("q", _E), ("k", _E), ("v", _E), *_OPTIONS],
    "flash_attn_varlen_qkvpacked_func": [("qkv", _E), ("cu_seqlens", _E), ("max_seqlen", _E), *_OPTIONS],
    "flash_attn_varlen_kvpacked_func": [
        ("q", _E),
        ("kv", _E),
        ("cu_seqlens_q", _E),
        ("cu_seqlens_k", _E),
        ("max_seqlen_q", _E),
        ("max_seqlen_k", _E),
        *_OPTIONS,
    ],
    "flash_attn_varlen_func": [
        ("q", _E),
        ("k", _E),
        ("v", _E),
        ("cu_seqlens_q", _E),
        ("cu_seqlens_k", _E),
        ("max_seqlen_q", _E),
        ("max_seqlen_k", _E),
        *_OPTIONS,
        ("block_table", None),
    ],
    "flash_attn_with_kvcache": [
        ("q", _E),
        ("k_cache", _E),
        ("v_cache", _E),
        ("k", None),
        ("v", None),
        ("rotary_cos", None),
        ("rotary_sin", None),
        ("cache_seqlens", None),
        ("cache_batch_idx", None),
        ("cache_leftpad", None),
        ("block_table", None),
        ("softmax_scale", None),
        ("causal", False),
        ("window_size", (-1, -1)),
        ("softcap", 0.0),
        ("rotary_interleaved", True),
        ("alibi_slopes", None),
        ("num_splits", 0),
        ("return_softmax_lse", False),
    ],
}


@pytest.mark.parametrize("name", list(UPSTREAM))
def test_signature_matches_upstream(name):
    function = getattr(flash_attn, name)
    assert function is getattr(interface, name)
    params = [(p.name, p.default) for p in inspect.signature(function).parameters.values()]
    assert params == UPSTREAM[name]
    assert all(
        p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in inspect.signature(function).parameters.values()
    )


def test_expected_signatures_are_upstreams(upstream_tree):
    """The table above is upstream 2.8.3.post2's flash_attn_interface.py, read from the pinned sdist."""
    source = upstream_tree / "flash_attn" / "flash_attn_interface.py"
    tree = ast.parse(source.read_text(encoding="utf-8"))
    found = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in UPSTREAM:
            args = node.args.args
            defaults = [_E] * (len(args) - len(node.args.defaults)) + [ast.literal_eval(d) for d in node.args.defaults]
            found[node.name] = [(a.arg, d) for a, d in zip(args, defaults, strict=False)]
    assert found == UPSTREAM


def test_package_exports():
    for name in UPSTREAM:
        assert name in flash_attn.__all__
    assert isinstance(flash_attn.__version__, str) and flash_attn.__version__.startswith("2.8.3")


@pytest.mark.parametrize("name", list(UPSTREAM))
def test_docstrings_document_shapes_units_and_errors(name):
    doc = inspect.getdoc(getattr(flash_attn, name))
    assert doc is not None
    for fragment in (
        "FlashAttention-2",
        "Args:",
        "Returns:",
        "Raises:",
        "torch.float16",
        "torch.bfloat16",
        "softmax_scale",
        "unitless",
        "window_size",
        "tokens",
        "InputError",
        "KernelNotBuiltError",
        "LibraryNotBuiltError",
        "nox -s dev",
        "TorchMismatchError",
        "UnsupportedGPUError",
    ):
        assert fragment in doc, f"{name}: docstring lacks {fragment!r}"
    assert "(B, " in doc or "(T" in doc
    documented = {line.strip().split(":")[0] for line in doc.splitlines() if line.startswith("    ") and ":" in line}
    for parameter in inspect.signature(getattr(flash_attn, name)).parameters:
        assert parameter in documented, f"{name}: parameter {parameter} is not documented"
