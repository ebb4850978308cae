"""Upstream 2.8.3's private API and extension functions (flash_attn/_upstream_api.py, _extension.py).

Signatures are compared with the pinned sdist itself (parsed with ``ast`` / read as text, never
imported); behaviour runs on CPU over the emulated operators (mock_ops.py): results equal the public
functions', gradients land in views of a caller's buffer, the custom operators trace under
FakeTensorMode and torch.compile.
"""

from __future__ import annotations

import ast
import inspect
import re
from typing import Optional, Tuple  # noqa: UP035  # to evaluate upstream's annotations

import mock_ops
import pytest
import torch
from torch._library.custom_ops import CustomOpDef
from torch._subclasses.fake_tensor import FakeTensorMode

import flash_attn
import flash_attn_2_cuda
from flash_attn import InputError, _extension, _rng
from flash_attn import flash_attn_interface as interface

PRIVATE = ("_flash_attn_forward", "_flash_attn_varlen_forward", "_flash_attn_backward", "_flash_attn_varlen_backward")
EXTENSION = {"fwd": "mha_fwd", "varlen_fwd": "mha_varlen_fwd", "bwd": "mha_bwd", "varlen_bwd": "mha_varlen_bwd"}
EXTENSION["fwd_kvcache"] = "mha_fwd_kvcache"


def _upstream_functions(upstream_tree) -> dict[str, ast.FunctionDef]:
    source = (upstream_tree / "flash_attn" / "flash_attn_interface.py").read_text(encoding="utf-8")
    return {node.name: node for node in ast.parse(source).body if isinstance(node, ast.FunctionDef)}


def _argspec_of(node: ast.FunctionDef) -> inspect.FullArgSpec:
    """getfullargspec of an upstream function, from its source (annotations evaluated as upstream's)."""
    names = {"torch": torch, "Optional": Optional, "Tuple": Tuple}  # noqa: UP006  # upstream's objects
    args = node.args
    annotations = {a.arg: eval(ast.unparse(a.annotation), names) for a in args.args if a.annotation}
    if node.returns is not None:
        annotations["return"] = eval(ast.unparse(node.returns), names)
    defaults = tuple(ast.literal_eval(d) for d in args.defaults) or None
    return inspect.FullArgSpec([a.arg for a in args.args], None, None, defaults, [], None, annotations)


@pytest.mark.parametrize("name", PRIVATE)
def test_private_argspec_is_upstreams(upstream_tree, name):
    """ring-flash-attn and ms-swift read getfullargspec (of ``_init_fn`` for a custom op) and call by keyword."""
    node = _upstream_functions(upstream_tree)[name]
    ours = getattr(interface, name)
    assert isinstance(ours, CustomOpDef), "upstream registers it as a torch custom op"
    assert inspect.getfullargspec(ours._init_fn) == _argspec_of(node)
    decorator = node.decorator_list[0]
    assert ast.literal_eval(decorator.args[0]) == f"flash_attn::{name}"
    mutated = {kw.arg: ast.literal_eval(kw.value) for kw in decorator.keywords}["mutates_args"]
    schema = getattr(torch.ops.flash_attn, name).default._schema
    assert tuple(a.name for a in schema.arguments if a.alias_info and a.alias_info.is_write) == mutated
    assert getattr(interface, "_wrapped" + name) is getattr(torch.ops.flash_attn, name)


def test_helpers_match_upstream_signatures(upstream_tree):
    functions = _upstream_functions(upstream_tree)
    for name in ("_get_block_size_n", "maybe_contiguous", "round_multiple"):
        assert inspect.getfullargspec(getattr(interface, name)) == _argspec_of(functions[name]), name
    assert interface.round_multiple(129, 128) == 256 and interface.round_multiple(128, 128) == 128
    strided = torch.zeros(4, 2).t()
    assert interface.maybe_contiguous(strided).is_contiguous() and interface.maybe_contiguous(None) is None
    x = torch.zeros(2, 4)
    assert interface.maybe_contiguous(x) is x


def _cpp_parameters(source: str, function: str) -> list[str]:
    """Parameter names of ``function`` in flash_api.cpp, without the trailing underscore of optionals."""
    body = re.search(rf"\n{function}\((.*?)\)\s*\{{", source, re.S).group(1)
    body = re.sub(r"//[^\n]*", "", body)
    return [re.search(r"(\w+)\s*$", part.strip()).group(1).rstrip("_") for part in body.split(",")]


def test_extension_functions_follow_flash_api_cpp(upstream_tree):
    source = (upstream_tree / "csrc" / "flash_attn" / "flash_api.cpp").read_text(encoding="utf-8")
    bound = dict(re.findall(r'm\.def\("(\w+)", &FLASH_NAMESPACE::(\w+)', source))
    assert bound == EXTENSION
    for name, cpp in EXTENSION.items():
        parameters = inspect.signature(getattr(_extension, name)).parameters.values()
        assert [p.name for p in parameters] == _cpp_parameters(source, cpp), name
        assert all(p.kind is inspect.Parameter.POSITIONAL_ONLY and p.default is p.empty for p in parameters)
        assert getattr(flash_attn_2_cuda, name) is getattr(_extension, name)
    assert interface.flash_attn_gpu is interface.flash_attn_cuda is _extension


PRIVATE_OPS = dict(zip(PRIVATE, ("fwd", "varlen_fwd", "bwd", "varlen_bwd"), strict=True))


@pytest.mark.parametrize("name", [*EXTENSION, *PRIVATE])
def test_every_operator_argument_comes_from_a_parameter(name):
    """call() takes the operator's arguments by schema name (a missing one would silently be None)."""
    if name in EXTENSION:
        op, function = name, getattr(_extension, name)
        names = _extension._KVCACHE_NAMES if op == "fwd_kvcache" else _extension._SCHEMA_NAMES
    else:
        op, function, names = PRIVATE_OPS[name], getattr(interface, name)._init_fn, {"causal": "is_causal"}
    given = {names.get(p, p) for p in inspect.signature(function).parameters}
    assert set(_extension.PARAMETERS[op]) - given <= {"rng_state"}


# --- behaviour over the emulated operators ------------------------------------------------------


def rand(*shape, dtype=torch.float16):
    return torch.randn(*shape).to(dtype)


FULL = (-1, -1, 0.0)  # window_size_left, window_size_right, softcap: no window, no soft-capping


def test_private_forward_and_backward_by_keyword_write_into_views(emulated):
    b, s, h, d = 2, 24, 4, 64
    qkv = rand(b, s, 3, h, d).requires_grad_()
    q, k, v = (t.detach() for t in qkv.unbind(2))
    options = dict(dropout_p=0.0, softmax_scale=0.2, causal=True, window_size_left=5, window_size_right=0, softcap=0.0)
    result = interface._flash_attn_forward(q=q, k=k, v=v, alibi_slopes=None, return_softmax=False, **options)
    assert isinstance(result, tuple) and len(result) == 4
    out, lse, s_dmask, rng_state = result
    public = flash_attn.flash_attn_qkvpacked_func(qkv, softmax_scale=0.2, causal=True, window_size=(5, 0))
    torch.testing.assert_close(out, public)
    assert lse.shape == (b, h, s) and s_dmask.shape == (0,) and rng_state.dtype == torch.int64
    dout = rand(b, s, h, d)
    public.backward(dout)
    buffer = torch.full((b, s, 3, h, d), 7.0, dtype=torch.float16)  # one buffer, three strided views
    views = buffer.unbind(2)
    softmax_d = interface._flash_attn_backward(
        dout, q, k, v, out, lse, *views, alibi_slopes=None, deterministic=False, **options
    )
    torch.testing.assert_close(buffer, qkv.grad)
    assert softmax_d.shape == (b, h, 128) and softmax_d.dtype == torch.float32
    # dq/dk/dv None: computed and dropped (upstream allocates them itself)
    assert interface._flash_attn_backward(
        dout, q, k, v, out, lse, None, None, None, alibi_slopes=None, deterministic=True, **options
    ).shape == (b, h, 128)


def test_private_varlen_defaults_and_views(emulated):
    lengths = [5, 11, 8]
    cu = torch.tensor([0, 5, 16, 24], dtype=torch.int32)
    q, k, v = (rand(24, 4, 32).requires_grad_() for _ in range(3))
    out, lse, _, _ = interface._flash_attn_varlen_forward(
        q.detach(), k.detach(), v.detach(), cu, cu, max(lengths), max(lengths), 0.0, 0.3, True
    )
    public = flash_attn.flash_attn_varlen_func(
        q, k, v, cu, cu, max(lengths), max(lengths), softmax_scale=0.3, causal=True
    )
    torch.testing.assert_close(out, public)
    assert lse.shape == (4, 24)
    dout = rand(24, 4, 32)
    public.backward(dout)
    grads = torch.zeros(3, 24, 4, 32, dtype=torch.float16)
    softmax_d = interface._flash_attn_varlen_backward(
        dout=dout,
        q=q.detach(),
        k=k.detach(),
        v=v.detach(),
        out=out,
        softmax_lse=lse,
        dq=grads[0],
        dk=grads[1],
        dv=grads[2],
        cu_seqlens_q=cu,
        cu_seqlens_k=cu,
        max_seqlen_q=11,
        max_seqlen_k=11,
        dropout_p=0.0,
        softmax_scale=0.3,
        causal=True,
        window_size_left=-1,
        window_size_right=-1,
        softcap=0.0,
        alibi_slopes=None,
        deterministic=False,
    )
    for got, want in zip(grads, (q.grad, k.grad, v.grad), strict=True):
        torch.testing.assert_close(got, want)
    assert softmax_d.shape == (4, 24 + 128 * 3)
    name, args = mock_ops.CALLS[-1]
    assert name == "varlen_bwd" and args[-1].shape == (0,), "rng_state=None reaches the operator as an empty state"


def test_private_functions_refuse_what_the_operators_refuse(emulated):
    q = rand(1, 8, 2, 64, dtype=torch.float32)
    with pytest.raises(InputError, match="dtype"):
        interface._flash_attn_forward(q, q, q, 0.0, 0.125, False, -1, -1, 0.0, None, False)


def test_extension_writes_out_and_gradients_in_place(emulated):
    q, k, v = (rand(2, 16, 4, 64) for _ in range(3))
    out = torch.empty(2, 16, 4, 64, dtype=torch.float16)
    result = flash_attn_2_cuda.fwd(q, k, v, out, None, 0.0, 0.125, False, -1, -1, 0.0, False, None)
    assert isinstance(result, list) and len(result) == 4 and result[0] is out
    torch.testing.assert_close(out, flash_attn.flash_attn_func(q, k, v))
    grads = torch.zeros(2, 16, 3, 4, 64, dtype=torch.float16)
    dout, lse, rng_state = rand(2, 16, 4, 64), result[1], result[3]
    views = grads.unbind(2)
    dq, dk, dv, _ = flash_attn_2_cuda.bwd(
        dout, q, k, v, out, lse, *views, None, 0.0, 0.125, False, *FULL, False, None, rng_state
    )
    assert dq.data_ptr() == grads.data_ptr() and grads.abs().sum() > 0
    with pytest.raises(TypeError):
        flash_attn_2_cuda.fwd(q=q, k=k, v=v)  # positional only, as the compiled module


def test_extension_varlen_functions_in_place(emulated):
    cu = torch.tensor([0, 5, 16], dtype=torch.int32)
    q, k, v = (rand(16, 4, 64) for _ in range(3))
    buffer = torch.zeros(2, 16, 4, 64, dtype=torch.float16)
    result = flash_attn_2_cuda.varlen_fwd(
        q, k, v, buffer[1], cu, cu, None, None, None, None, 11, 11, 0.0, 0.125, False, True, -1, -1, 0.0, False, None
    )
    assert result[0].data_ptr() == buffer[1].data_ptr() and buffer[0].abs().sum() == 0
    torch.testing.assert_close(buffer[1], flash_attn.flash_attn_varlen_func(q, k, v, cu, cu, 11, 11, 0.0, 0.125, True))
    grads = torch.zeros(16, 3, 4, 64, dtype=torch.float16)
    dout = rand(16, 4, 64)
    out, lse, _, rng_state = result
    tensors = (dout, q, k, v, out, lse)
    flash_attn_2_cuda.varlen_bwd(
        *tensors, *grads.unbind(1), cu, cu, None, 11, 11, 0.0, 0.125, False, True, *FULL, False, None, rng_state
    )
    want = torch.zeros(3, 16, 4, 64, dtype=torch.float16)
    interface._flash_attn_varlen_backward(*tensors, *want, cu, cu, 11, 11, 0.0, 0.125, True, *FULL, None, False)
    torch.testing.assert_close(grads, want.transpose(0, 1))


def test_extension_kvcache_out(emulated):
    q = rand(2, 1, 4, 64)
    caches = [torch.zeros(2, 32, 2, 64, dtype=torch.float16) for _ in range(2)]
    k_new, v_new = rand(2, 1, 2, 64), rand(2, 1, 2, 64)
    seqlens = torch.tensor([3, 7], dtype=torch.int32)
    out = torch.empty_like(q)
    got, lse = flash_attn_2_cuda.fwd_kvcache(
        q, *caches, k_new, v_new, seqlens, None, None, None, None, None, None, out, 0.125, True, -1, -1, 0.0, True, 0
    )
    assert got is out and lse.shape == (2, 4, 1)
    torch.testing.assert_close(caches[0][1, 7], k_new[1, 0])


class FakeGenerator:
    def __init__(self, seed: int, offset: int) -> None:
        self.seed, self.offset = seed, offset

    def initial_seed(self) -> int:
        return self.seed

    def get_offset(self) -> int:
        return self.offset

    def set_offset(self, offset: int) -> None:
        self.offset = offset


def test_extension_reserves_dropout_on_the_given_generator(emulated, monkeypatch):
    monkeypatch.setattr(_rng, "capturing", lambda: False)
    q = rand(2, 16, 4, 64)
    gen = FakeGenerator(seed=11, offset=40)
    *_, rng_state = flash_attn_2_cuda.fwd(q, q, q, None, None, 0.1, 0.125, False, -1, -1, 0.0, False, gen)
    assert rng_state.tolist() == [11, 40] and gen.offset == 40 + 2 * 4 * 32
    monkeypatch.setattr(_rng, "capturing", lambda: True)
    with pytest.raises(flash_attn.FlashAttnError, match="graph"):
        flash_attn_2_cuda.fwd(q, q, q, None, None, 0.1, 0.125, False, -1, -1, 0.0, False, gen)


def test_backward_without_rng_state_draws_one_with_dropout(emulated, monkeypatch):
    default = FakeGenerator(seed=3, offset=0)
    monkeypatch.setattr(_rng, "generator_for", lambda device: default)
    monkeypatch.setattr(_rng, "capturing", lambda: False)
    q = rand(1, 8, 2, 64)
    out, lse, _, _ = interface._flash_attn_forward(q, q, q, 0.0, 0.125, False, -1, -1, 0.0, None, False)
    interface._flash_attn_backward(q, q, q, q, out, lse, None, None, None, 0.1, 0.125, False, -1, -1, 0.0, None, False)
    assert mock_ops.CALLS[-1][1][-1].tolist() == [3, 0] and default.offset == 64
    monkeypatch.setattr(_rng, "capturing", lambda: True)
    with pytest.raises(flash_attn.FlashAttnError, match="rng_state"):
        interface._flash_attn_backward(
            q, q, q, q, out, lse, None, None, None, 0.1, 0.125, False, -1, -1, 0.0, None, False
        )


def test_fakes_trace_without_running_kernels():
    """FakeTensorMode runs the registered fakes only: shapes of upstream's results, no operator call."""
    mock_ops.CALLS.clear()
    with FakeTensorMode():
        q, k, v = (torch.empty(2, 100, 4, 64, dtype=torch.float16) for _ in range(3))
        out, lse, s_dmask, rng = interface._wrapped_flash_attn_forward(
            q, k, v, 0.1, 0.125, True, -1, -1, 0.0, None, True
        )
        assert out.shape == q.shape and lse.shape == (2, 4, 100) and s_dmask.shape == (2, 4, 128, 128)
        assert rng.shape == (2,)
        buffer = torch.empty(2, 100, 3, 4, 64, dtype=torch.float16)
        views = buffer.unbind(2)
        softmax_d = interface._wrapped_flash_attn_backward(
            q, q, k, v, out, lse, *views, 0.1, 0.125, True, *FULL, None, False, rng
        )
        assert softmax_d.shape == (2, 4, 128)
        cu = torch.empty(4, dtype=torch.int32)
        q = torch.empty(30, 4, 64, dtype=torch.float16)
        out, lse, _, _ = interface._wrapped_flash_attn_varlen_forward(q, q, q, cu, cu, 12, 12, 0.0, 0.125, False)
        assert out.shape == q.shape and lse.shape == (4, 30)
        softmax_d = interface._wrapped_flash_attn_varlen_backward(
            q, q, q, q, out, lse, None, None, None, cu, cu, 12, 12, 0.0, 0.125, False, -1, -1, 0.0, None, False
        )
        assert softmax_d.shape == (4, 30 + 128 * 3)
    assert mock_ops.CALLS == []


def test_compiled_consumer_step_matches_eager(emulated):
    """A ring-attention-like step (forward, then backward into slices of one buffer) under torch.compile."""

    def step(q, k, v, dout):
        out, lse, _, rng = interface._flash_attn_forward(q, k, v, 0.0, 0.125, True, -1, -1, 0.0, None, False)
        grads = torch.zeros((3, *q.shape), dtype=q.dtype)
        interface._flash_attn_backward(dout, q, k, v, out, lse, *grads, 0.0, 0.125, True, *FULL, None, False, rng)
        return out, grads

    inputs = [rand(2, 16, 4, 64) for _ in range(4)]
    eager = step(*inputs)
    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")(*inputs)
    for got, want in zip(compiled, eager, strict=True):
        torch.testing.assert_close(got, want)


# --- _get_block_size_n -----------------------------------------------------------------------------


def _upstream_block_size_n(upstream_tree):
    """Upstream's own _get_block_size_n, compiled from the sdist's source (no import of upstream)."""
    node = _upstream_functions(upstream_tree)["_get_block_size_n"]
    namespace = {"torch": torch}
    exec(compile(ast.Module(body=[node], type_ignores=[]), "upstream", "exec"), namespace)
    return namespace["_get_block_size_n"]


@pytest.mark.parametrize("capability", [(8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (12, 0)])
def test_block_size_n_is_upstreams(upstream_tree, monkeypatch, capability, emulated):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    theirs = _upstream_block_size_n(upstream_tree)
    for head_dim in range(1, 257):
        for is_dropout in (False, True):
            for is_causal in (False, True):
                want = theirs(0, head_dim, is_dropout, is_causal)
                assert interface._get_block_size_n(0, head_dim, is_dropout, is_causal) == want, (head_dim, is_dropout)
    with pytest.raises(InputError, match="head_dim"):
        interface._get_block_size_n(0, 257, False, False)


def test_block_size_n_table_is_the_launch_templates(upstream_tree):
    """Every N the table gives for a head dim is one the forward launcher of that head dim instantiates."""
    from flash_attn import _upstream_api

    source = (upstream_tree / "csrc/flash_attn/src/flash_fwd_launch_template.h").read_text(encoding="utf-8")
    found = {}
    for head_dim, body in re.findall(r"void run_mha_fwd_hdim(\d+)\(.*?\{(.*?)\n\}", source, re.S):
        live = "\n".join(line for line in body.splitlines() if not line.strip().startswith("//"))
        found[int(head_dim)] = {int(n) for n in re.findall(r"Flash_fwd_kernel_traits<Headdim, \d+, (\d+),", live)}
    ours = {dim: set(sizes) for dim, sizes in _upstream_api._BLOCK_N.items()}
    ours[128] |= set(_upstream_api._BLOCK_N_SM8X_HDIM128)
    assert ours == found
