"""Input validation: one owner per check.

The C++ operators validate their inputs (src/binding/checks.h, the validate blocks of fwd.cpp,
bwd.cpp, kvcache.cpp and set_alibi in params.cpp). Without a GPU their messages can only be read
from the sources, so :data:`REJECTED` names, for every input that is rejected, the check the
operator calls and the words its message carries (what was found, what is allowed, what to do).
The Python layer keeps what C++ cannot know (the device admission, the Python-only argument
forms) and gives the operators' messages the API's error classes; those run here on the
emulated library (tests/unit/runtime/mock_ops.py).
"""

from __future__ import annotations

import re
from pathlib import Path

import mock_ops
import pytest
import torch

import flash_attn
from flash_attn import InputError, KernelNotBuiltError, _checks, _loader

F16 = torch.float16
BINDING = Path(__file__).resolve().parents[3] / "src" / "binding"

_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|//[^\n]*|/\*.*?\*/', re.S)
_LITERAL_RUN = re.compile(r'"(?:[^"\\]|\\.)*"(?:\s*"(?:[^"\\]|\\.)*")*')


def _code(name: str) -> str:
    """A binding source without comments, white space folded."""
    text = (BINDING / name).read_text(encoding="utf-8")
    # comments go, string literals (which may hold "//") stay
    text = _TOKEN.sub(lambda m: m.group(0) if m.group(0).startswith(('"', "'")) else " ", text)
    return re.sub(r"\s+", " ", text)


def _messages(name: str) -> list[str]:
    """Every run of adjacent string literals of a source, joined as the compiler joins them."""
    runs = []
    for run in _LITERAL_RUN.findall(_code(name)):
        runs.append("".join(re.findall(r'"((?:[^"\\]|\\.)*)"', run)).replace('\\"', '"').replace("\\'", "'"))
    return runs


def qkv(b=2, sq=16, sk=16, h=4, hk=4, d=64, dtype=F16, device="cpu"):
    return (
        torch.randn(b, sq, h, d, device=device).to(dtype),
        torch.randn(b, sk, hk, d, device=device).to(dtype),
        torch.randn(b, sk, hk, d, device=device).to(dtype),
    )


# --- what the operators reject (read from the C++ sources) -----------------------------------------

# (rejected input, source that calls the check, the call, source of the message, words of the message)
REJECTED = [
    (
        "cpu-q",
        "fwd.cpp",
        "chk.query(q);",
        "checks.h",
        "FlashAttention-2 kernels run on CUDA devices only: move the inputs",
    ),
    ("other-device", "fwd.cpp", 'chk.like_query(k, "k", q);', "checks.h", "; put all inputs on one CUDA device"),
    (
        "fp32",
        "fwd.cpp",
        "chk.query(q);",
        "checks.h",
        "take torch.float16 or torch.bfloat16 only (fp32 is not supported): cast",
    ),
    ("mixed-dtypes", "fwd.cpp", 'chk.like_query(v, "v", q);', "checks.h", "; q, k and v must share one dtype"),
    ("strided-out", "bwd.cpp", 'chk.like_query(out, "out", q);', "checks.h", " must be contiguous in its last dim"),
    ("q-not-4d", "fwd.cpp", 'chk.rank(q, "q", 4, "(B, Sq, H, D)");', "checks.h", "-D tensor "),
    ("k-v-shapes", "fwd.cpp", 'chk.shape(v, "v", "(B, Sk, Hk, D)", {B, Sk, Hk, D});', "checks.h", " must have shape "),
    (
        "batch-mismatch",
        "fwd.cpp",
        'chk.shape(k, "k", "(B, Sk, Hk, D)", {B, Sk, Hk, D});',
        "checks.h",
        " must have shape ",
    ),
    (
        "heads-not-multiple",
        "fwd.cpp",
        "chk.heads(H, Hk);",
        "checks.h",
        "(MQA/GQA: query head h attends key/value head h // (H // Hk))",
    ),
    (
        "head-dim-over-256",
        "fwd.cpp",
        'chk.head_dim(D, "q");',
        "checks.h",
        " is larger than 256, the largest head dim FlashAttention-2 kernels support; split the heads",
    ),
    (
        "head-dim-not-multiple-of-8",
        "fwd.cpp",
        'chk.head_dim(D, "q");',
        "checks.h",
        " must be a multiple of 8 in [8, 256], got ",
    ),
    ("batch-0", "fwd.cpp", "chk.batch(B);", "checks.h", "the batch size B must be >= 1, got "),
    (
        "dropout-1",
        "fwd.cpp",
        "chk.dropout(dropout_p, softcap);",
        "checks.h",
        "dropout_p must be a probability in [0, 1), got ",
    ),
    (
        "softcap-with-dropout",
        "fwd.cpp",
        "chk.dropout(dropout_p, softcap);",
        "checks.h",
        "softcap > 0 cannot be combined with dropout_p > 0",
    ),
    (
        "window-below-minus-1",
        "fwd.cpp",
        "chk.window(window_size_left, window_size_right);",
        "checks.h",
        "window_size entries must be ints >= -1 (tokens; -1 = unbounded)",
    ),
    (
        "probabilities-without-dropout",
        "fwd.cpp",
        "check_return_softmax(return_softmax, dropout_p, chk);",
        "fwd.cpp",
        "return_softmax=True needs dropout_p > 0",
    ),
    ("alibi-dtype", "params.cpp", 'chk.dtype(s, "alibi_slopes", kFloat);', "checks.h", " must have dtype "),
    (
        "alibi-shape",
        "params.cpp",
        'chk.shape(s, "alibi_slopes", "(B, H)", {b, h});',
        "params.cpp",
        "alibi_slopes must have shape (H,) or (B, H), got ",
    ),
    (
        "alibi-strided",
        "params.cpp",
        'chk.last_dim_contiguous(s, "alibi_slopes");',
        "checks.h",
        "; call .contiguous() first",
    ),
    ("cu-seqlens-dtype", "checks.h", "dtype(*t, name, kInt);", "checks.h", " must have dtype "),
    ("cu-seqlens-strided", "checks.h", "contiguous(*t, name);", "checks.h", ".contiguous()"),
    (
        "cu-seqlens-lengths",
        "checks.h",
        'shape(cu_k, "cu_seqlens_k", "(B+1,)", {b + 1});',
        "checks.h",
        " must have shape ",
    ),
    ("cu-seqlens-empty-batch", "checks.h", "batch(b);", "checks.h", "the batch size B must be >= 1"),
    ("varlen-q-not-3d", "fwd.cpp", 'chk.rank(q, "q", 3, "(Tq, H, D)");', "checks.h", "-D tensor "),
    (
        "max-seqlen-negative",
        "fwd.cpp",
        'chk.fits_int(max_seqlen_k, "max_seqlen_k");',
        "checks.h",
        " must be an int in [0, 2^31 - 1], got ",
    ),
    ("paged-kv-not-4d", "fwd.cpp", 'chk.rank(k, "k", paged ? 4 : 3, kv_dims);', "checks.h", "-D tensor "),
    ("page-size-128", "fwd.cpp", "page_block_size % 256 == 0", "fwd.cpp", "must be a positive multiple of 256"),
    ("block-table-dtype", "fwd.cpp", 'chk.dtype(bt, "block_table", kInt);', "checks.h", " must have dtype "),
    (
        "block-table-batch",
        "fwd.cpp",
        'chk.shape(bt, "block_table", "(B, max_blocks)", {B, bt.size(1)});',
        "checks.h",
        " must have shape ",
    ),
    (
        "kvcache-k-without-v",
        "kvcache.cpp",
        "k.has_value() && v.has_value()",
        "kvcache.cpp",
        "pass both k and v (new keys and values to append to the cache) or neither",
    ),
    (
        "kvcache-k-without-seqlens",
        "kvcache.cpp",
        "cache_seqlens.has_value(),",
        "kvcache.cpp",
        "cache_seqlens is required when k and v are given: it says where to append them",
    ),
    (
        "kvcache-k-heads",
        "kvcache.cpp",
        'chk.shape(*k, "k", "(B, Sk_new, Hk, D)", {B, new_len, Hk, D});',
        "checks.h",
        " must have shape ",
    ),
    (
        "kvcache-rotary-without-k",
        "kvcache.cpp",
        "chk.expect(appending,",
        "kvcache.cpp",
        "rotary_cos/rotary_sin need k and v: the rotary embedding is applied to the new keys",
    ),
    (
        "kvcache-rotary-cos-only",
        "kvcache.cpp",
        "rotary_cos.has_value() && rotary_sin.has_value()",
        "kvcache.cpp",
        "pass both rotary_cos and rotary_sin or neither",
    ),
    (
        "kvcache-rotary-dim",
        "kvcache.cpp",
        "rotary_dim % 16 == 0",
        "kvcache.cpp",
        "must be a positive multiple of 16 and at most the head dim ",
    ),
    (
        "kvcache-seqlens-dtype",
        "kvcache.cpp",
        'chk.int32_per_batch(*cache_seqlens, "cache_seqlens", B, device);',
        "checks.h",
        " must have dtype ",
    ),
    (
        "kvcache-seqlens-shape",
        "kvcache.cpp",
        'chk.int32_per_batch(*cache_seqlens, "cache_seqlens", B, device);',
        "checks.h",
        " must have shape ",
    ),
    (
        "kvcache-batch-idx-dtype",
        "kvcache.cpp",
        'chk.int32_per_batch(*cache_batch_idx, "cache_batch_idx", B, device);',
        "checks.h",
        " must have dtype ",
    ),
    (
        "kvcache-num-splits",
        "kvcache.cpp",
        "num_splits >= 0 && num_splits <= 128",
        "kvcache.cpp",
        "num_splits must be an int in [0, 128] (0 = heuristic, 1 = no split-KV), got ",
    ),
    (
        "kvcache-window",
        "kvcache.cpp",
        "chk.window(window_size_left, window_size_right);",
        "checks.h",
        "window_size entries must be ints >= -1",
    ),
    (
        "kvcache-strided-cache",
        "kvcache.cpp",
        "stride_from_end(*t, 1) == 1",
        "kvcache.cpp",
        "): it is updated in place, so it cannot be copied; allocate the cache",
    ),
    (
        "kvcache-paged-batch-idx",
        "kvcache.cpp",
        "!cache_batch_idx.has_value()",
        "kvcache.cpp",
        "cache_batch_idx cannot be combined with block_table (paged KV cache)",
    ),
    (
        "kvcache-paged-leftpad",
        "kvcache.cpp",
        "!paged",
        "kvcache.cpp",
        "cache_leftpad cannot be combined with block_table (paged KV cache)",
    ),
    (
        "bwd-lse-shape",
        "bwd.cpp",
        'chk.shape(softmax_lse, "softmax_lse", "(B, H, Sq)", {B, H, Sq});',
        "checks.h",
        " must have shape ",
    ),
]


@pytest.mark.parametrize(("case", "caller", "call", "source", "words"), REJECTED, ids=[r[0] for r in REJECTED])
def test_the_operator_rejects_it_with_an_actionable_message(case, caller, call, source, words):
    assert re.sub(r"\s+", " ", call) in _code(caller), f"{caller} no longer calls {call!r} ({case})"
    assert any(words in message for message in _messages(source)), f"{source} has no message with {words!r}"


@pytest.mark.parametrize("source", ["fwd.cpp", "bwd.cpp", "kvcache.cpp"])
def test_every_operator_checks_its_window(source):
    calls = _code(source).count("chk.window(window_size_left, window_size_right);")
    assert calls == {"fwd.cpp": 2, "bwd.cpp": 2, "kvcache.cpp": 1}[source]


@pytest.mark.parametrize(
    ("source", "tensors"),
    [("fwd.cpp", ["q", "k", "v"] * 2), ("bwd.cpp", ["dout"] * 2), ("kvcache.cpp", ["q", "*k", "*v"])],
)
def test_a_strided_last_dim_is_copied_by_the_operator(source, tensors):
    """Python no longer makes q/k/v/dout contiguous per call; the operators do it where it is free."""
    code = _code(source)
    found = re.findall(r"with_unit_last_stride\((\*?\w+)_arg\)", code)
    assert found == [t.lstrip("*") for t in tensors] or found == tensors, found


def test_dtype_names_are_the_python_spelling():
    names = dict(re.findall(r"case (k\w+): return \"(torch\.\w+)\";", _code("dtypes.h")))
    assert names["kFloat"] == "torch.float32" and names["kHalf"] == "torch.float16" and names["kInt"] == "torch.int32"


def test_python_predicts_no_dispatch_decision():
    source = (Path(flash_attn.__file__).parent / "flash_attn_interface.py").read_text(encoding="utf-8")
    autograd = (Path(flash_attn.__file__).parent / "_autograd.py").read_text(encoding="utf-8")
    for text in (source, autograd):
        for name in ("kernel_causal", "require_kernels", "fwd_kernel_keys", "split"):
            assert not re.search(rf"\b{name}\b\s*=|\b{name}\(", text), name


# --- what Python owns: the device, once per device --------------------------------------------------


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_tensors_off_cuda_are_refused(device):
    q, k, v = qkv(device=device)
    with pytest.raises(InputError, match="CUDA devices only") as info:
        flash_attn.flash_attn_func(q, k, v)
    assert f"'{device}" in str(info.value)
    cu = torch.tensor([0, 16, 32], dtype=torch.int32, device=device)
    with pytest.raises(InputError, match="CUDA"):
        flash_attn.flash_attn_varlen_func(q[0], k[0], v[0], cu, cu, 16, 16)
    with pytest.raises(InputError, match="CUDA"):
        flash_attn.flash_attn_with_kvcache(q, k, v)


def test_input_errors_are_runtime_and_value_errors():
    q, k, v = qkv()
    with pytest.raises(RuntimeError):
        flash_attn.flash_attn_func(q, k, v)
    with pytest.raises(ValueError):
        flash_attn.flash_attn_func(q, k, v)


def test_a_device_is_admitted_once(emulated, monkeypatch):
    seen = []
    monkeypatch.setattr(_loader, "require_ready", lambda index: seen.append(index) or True)
    for _ in range(3):
        flash_attn.flash_attn_func(*qkv())
    assert seen == [-1] and _checks._READY == {torch.device("cpu")}


def test_compile_admits_the_device_while_tracing(emulated):
    assert not _checks._READY
    compiled = torch.compile(flash_attn.flash_attn_func, fullgraph=True, backend="aot_eager")
    q, k, v = qkv()
    torch.testing.assert_close(compiled(q, k, v), flash_attn.flash_attn_func(q, k, v))
    assert _checks._READY == {torch.device("cpu")}


# --- what Python owns: the Python-only argument forms -----------------------------------------------


def _refused(fn, *args, match, error=InputError, **kwargs):
    with pytest.raises(error, match=match) as info:
        fn(*args, **kwargs)
    assert mock_ops.CALLS == [], "the operator must not be called"
    return str(info.value)


def test_non_tensor_is_refused(emulated):
    q, k, v = qkv()
    _refused(flash_attn.flash_attn_func, q.numpy(), k, v, match="q must be a torch.Tensor")


@pytest.mark.parametrize("window_size", [5, (1, 2, 3), None])
def test_window_size_must_be_a_pair(emulated, window_size):
    _refused(flash_attn.flash_attn_func, *qkv(), window_size=window_size, match=r"window_size must be a pair")


def test_packed_layouts_are_checked(emulated):
    _refused(flash_attn.flash_attn_qkvpacked_func, torch.randn(2, 16, 2, 4, 64).half(), match=r"\(B, S, 3, H, D\)")
    q = torch.randn(2, 16, 4, 64).half()
    _refused(flash_attn.flash_attn_kvpacked_func, q, torch.randn(2, 16, 4, 64).half(), match=r"\(B, Sk, 2, Hk, D\)")
    cu = torch.tensor([0, 16], dtype=torch.int32)
    _refused(
        flash_attn.flash_attn_varlen_qkvpacked_func, torch.randn(16, 2, 4, 64).half(), cu, 16, match=r"\(T, 3, H, D\)"
    )
    _refused(
        flash_attn.flash_attn_varlen_kvpacked_func,
        q[0],
        torch.randn(16, 3, 4, 64).half(),
        cu,
        cu,
        16,
        16,
        match=r"\(Tk, 2, Hk, D\)",
    )


def test_negative_int_cache_seqlens_is_refused(emulated):
    q = torch.randn(2, 1, 4, 64).half()
    cache = torch.randn(2, 64, 4, 64).half()
    _refused(flash_attn.flash_attn_with_kvcache, q, cache, cache.clone(), cache_seqlens=-1, match="cache_seqlens must")


# --- the operators' messages keep the API's error classes -------------------------------------------


def test_an_operator_message_becomes_an_input_error(emulated):
    q = torch.randn(2, 16, 4, 64)  # fp32: the (emulated) operator refuses it
    with pytest.raises(InputError, match=r"^flash_attn::fwd: operator got dtype torch.float32"):
        flash_attn.flash_attn_func(q, q, q)
    assert [name for name, _ in mock_ops.CALLS] == ["fwd"]


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"softcap": "30"}, "softcap"),
        ({"softmax_scale": "0.1"}, "softmax_scale"),
        ({"window_size": (1.5, 2)}, "window_size_left"),
    ],
)
def test_a_wrong_python_type_gets_the_dispatchers_message(emulated, kwargs, argument):
    with pytest.raises(InputError, match=rf"Expected a value of type .* for argument '{argument}'"):
        flash_attn.flash_attn_func(*qkv(), **kwargs)


def test_other_errors_pass_unchanged():
    error = RuntimeError("CUDA error: out of memory")
    assert _checks.translate(error) is error


def test_head_dim_missing_from_the_kernel_set(emulated):
    q, k, v = qkv(d=200)  # runs the head-dim-256 kernels, left out of the test kernel set
    with pytest.raises(KernelNotBuiltError, match="built without fwd fp16 head dim 256") as info:
        flash_attn.flash_attn_func(q, k, v)
    message = str(info.value)
    assert (
        "kernel set 'dev'" in message and "[32, 64, 96, 128, 192]" in message and "install a release wheel" in message
    )


def test_dtype_missing_from_the_kernel_set(emulated, monkeypatch):
    fp16_only = frozenset(key for key in _loader.STATE.kernels if key.dtype == "fp16")
    monkeypatch.setattr(_loader.STATE, "kernels", fp16_only)
    flash_attn.flash_attn_func(*qkv())
    with pytest.raises(KernelNotBuiltError, match="bf16") as info:
        flash_attn.flash_attn_func(*qkv(dtype=torch.bfloat16))
    assert "holds head dims [32, 64, 96, 128, 192] for fp16" in str(info.value)


def test_missing_backward_kernel_is_raised_at_backward(emulated, monkeypatch):
    no_bwd = frozenset(key for key in _loader.STATE.kernels if key.kind != "bwd")
    monkeypatch.setattr(_loader.STATE, "kernels", no_bwd)
    q, k, v = (x.requires_grad_() for x in qkv())
    out = flash_attn.flash_attn_func(q, k, v, causal=True)  # the forward runs
    with pytest.raises(KernelNotBuiltError, match="bwd fp16 head dim 64"):
        out.sum().backward()
