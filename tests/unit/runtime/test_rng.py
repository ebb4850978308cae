"""The Philox reservation of the stable-ABI build (flash_attn/_rng.py), on CPU with a fake generator:
the increment, the int64 wrap of the seed, the once-per-process decision, the CUDA-graph refusal,
what the public functions pass to the operators, and that torch.compile reserves on every run."""

from __future__ import annotations

import mock_ops
import pytest
import torch

import flash_attn
from flash_attn import FlashAttnError, _rng

STABLE = {"torch_abi": "stable", "torch_min": "2.11"}


class FakeGenerator:
    """initial_seed / get_offset / set_offset, like torch.cuda.default_generators[i]."""

    def __init__(self, seed: int, offset: int = 0):
        self.seed, self.offset, self.calls = seed, offset, 0

    def initial_seed(self) -> int:
        return self.seed

    def get_offset(self) -> int:
        return self.offset

    def set_offset(self, offset: int) -> None:
        self.calls += 1
        self.offset = offset


def test_increment_is_batch_times_heads_times_32():
    assert _rng.philox_increment(2, 8) == 512
    assert _rng.philox_increment(3, 5) % 4 == 0  # torch rounds increments to multiples of 4: nothing to round
    g = FakeGenerator(seed=42, offset=100)
    assert _rng.reserve(g, 2, 8) == (42, 100)  # the offset *before* the advance
    assert g.offset == 612
    assert _rng.reserve(g, 1, 1) == (42, 612) and g.offset == 644


@pytest.mark.parametrize(
    ("seed", "stored"),
    [(0, 0), (42, 42), (2**63 - 1, 2**63 - 1), (2**63, -(2**63)), (2**64 - 1, -1)],
)
def test_seed_wraps_to_the_int64_with_the_same_bits(seed, stored):
    state = _rng.rng_state(FakeGenerator(seed), 1, 1)
    assert state.dtype == torch.int64 and state.shape == (2,) and state.device.type == "cpu"
    assert int(state[0]) == stored
    # the kernels read the int64 back as a uint64: the bits are the generator's seed
    assert int(state[0]) % 2**64 == seed


def test_torch_stores_large_seeds_as_uint64():
    # what as_int64 relies on: initial_seed() is the uint64, which an int64 tensor cannot take as it is
    g = torch.Generator().manual_seed(2**64 - 1)
    assert g.initial_seed() == 2**64 - 1
    with pytest.raises((RuntimeError, ValueError), match="[Oo]verflow"):
        torch.tensor([g.initial_seed()], dtype=torch.int64)
    with pytest.raises(ValueError, match="uint64"):
        _rng.as_int64(2**64)


def test_decided_once_from_the_build_info(legacy_info):
    try:
        _rng.configure(legacy_info)  # exact build info without torch_abi (an older wheel): no reservation
        assert _rng.RESERVE is False
        _rng.configure({**legacy_info, "torch_abi": "exact", "torch_min": None})
        assert _rng.RESERVE is False
        _rng.configure(None)
        assert _rng.RESERVE is False
        _rng.configure({**legacy_info, **STABLE})
        assert _rng.RESERVE is True
        assert hasattr(torch.ops.flash_attn_rng, "philox_reserve")
        assert torch.Tag.nondeterministic_seeded in torch.ops.flash_attn_rng.philox_reserve.default.tags
    finally:
        _rng.configure(None)


@pytest.fixture
def stable(emulated, monkeypatch):
    """The emulated API as a stable-ABI build, with a fake generator for the CPU 'device'."""
    generator = FakeGenerator(seed=2**64 - 5, offset=8)
    monkeypatch.setattr(_rng, "generator_for", lambda device: generator)
    monkeypatch.setattr(_rng, "capturing", lambda: False)
    _rng.configure({**emulated, **STABLE})
    yield generator
    _rng.configure(None)


def rand(*shape):
    return torch.randn(*shape).half()


def test_stable_build_passes_the_reserved_state_and_backward_gets_it(stable):
    q, k, v = (rand(2, 16, 4, 64).requires_grad_() for _ in range(3))
    out = flash_attn.flash_attn_func(q, k, v, dropout_p=0.1)
    out.sum().backward()
    (_, fwd), (_, bwd) = mock_ops.CALLS
    assert fwd[11].tolist() == [-5, 8]  # seed 2**64 - 5 as int64, the offset before the call
    assert bwd[14].tolist() == [-5, 8]  # the state the forward returned
    assert stable.offset == 8 + 2 * 4 * 32


def test_stable_varlen_counts_sequences_and_query_heads(stable):
    q, k = rand(30, 6, 64), rand(40, 2, 64)
    cu_q = torch.tensor([0, 10, 30], dtype=torch.int32)
    cu_k = torch.tensor([0, 15, 40], dtype=torch.int32)
    flash_attn.flash_attn_varlen_func(q, k, k, cu_q, cu_k, 20, 25, dropout_p=0.2)
    ((_, args),) = mock_ops.CALLS
    assert args[19].tolist() == [-5, 8]
    assert stable.offset == 8 + 2 * 6 * 32  # B = len(cu_seqlens_q) - 1, H = query heads


def test_nothing_is_reserved_without_dropout_or_in_the_exact_build(stable, legacy_info):
    q = rand(1, 8, 2, 64)
    flash_attn.flash_attn_func(q, q, q)
    assert mock_ops.CALLS[-1][1][11] is None and stable.calls == 0
    _rng.configure(legacy_info)  # exact: the C++ operator draws from torch's generator itself
    flash_attn.flash_attn_func(q, q, q, dropout_p=0.5)
    assert mock_ops.CALLS[-1][1][11] is None and stable.calls == 0


def test_capture_with_dropout_is_refused(stable, monkeypatch):
    monkeypatch.setattr(_rng, "capturing", lambda: True)
    q = rand(1, 8, 2, 64)
    with pytest.raises(FlashAttnError, match="CUDA-graph capture") as error:
        flash_attn.flash_attn_func(q, q, q, dropout_p=0.1)
    message = str(error.value)
    assert "graph-safe Philox state" in message and "per-torch" in message and "dropout_p=0" in message
    assert stable.calls == 0 and not mock_ops.CALLS  # nothing reserved, no operator ran
    flash_attn.flash_attn_func(q, q, q)  # without dropout capture is fine
    assert stable.calls == 0


def test_compiled_graph_reserves_on_every_run(stable):
    q, k, v = (rand(2, 16, 4, 64).requires_grad_() for _ in range(3))

    @torch.compile(fullgraph=True, backend="aot_eager")
    def step(q, k, v):
        return flash_attn.flash_attn_func(q, k, v, dropout_p=0.1)

    step(q, k, v).sum().backward()
    first = [call[1][11].tolist() for call in mock_ops.CALLS if call[0] == "fwd"][-1]
    step(q, k, v).sum().backward()
    second = [call[1][11].tolist() for call in mock_ops.CALLS if call[0] == "fwd"][-1]
    assert first == [-5, 8] and second == [-5, 8 + 256], "a compiled graph must not reuse one Philox offset"
    bwd_states = [call[1][14].tolist() for call in mock_ops.CALLS if call[0] == "bwd"]
    assert bwd_states[-2:] == [first, second]


def test_make_fx_on_fake_inputs_records_the_reservation_in_the_graph(stable):
    from torch.fx.experimental.proxy_tensor import make_fx

    q = rand(2, 16, 4, 64)

    def step(q):
        return flash_attn.flash_attn_func(q, q, q, dropout_p=0.1)

    graph = make_fx(step, tracing_mode="fake")(q)
    assert "flash_attn_rng.philox_reserve" in graph.code
    assert stable.calls == 0, "tracing must not read the generator (it would bake one offset into the graph)"
    graph(q)
    graph(q)
    assert stable.calls == 2 and stable.offset == 8 + 2 * 2 * 4 * 32  # every run of the graph reserves


def test_eager_tensor_path_reads_the_generator_directly(stable):
    assert not _rng._tracing(torch.empty(1))
    # a tensor subclass goes through the operator: still one reservation per call, only slower
    assert _rng._tracing(torch.nn.Parameter(torch.empty(1)))
