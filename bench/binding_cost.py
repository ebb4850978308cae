"""What the binding's torch calls cost per operator call, on a GPU: each torch API alone, and whole builds side by side.

Two measurements, each printing nanoseconds or microseconds per call (it checks no target):

``api``: compiles two small extensions against the running torch (``torch.utils.cpp_extension``:
a host compiler, Ninja and the CUDA toolkit are needed) that time, in C++ with
``std::chrono::steady_clock`` over ``--n`` iterations, each torch call the binding makes per operator
call (src/binding/tensor_api_*.h): the metadata reads (dtype, device, sizes and strides,
contiguity, data pointer), the device guard, the current stream, and the allocations (the
dispatcher's ``empty``/``empty_like`` and the direct ones the binding uses), once over ATen and
c10 as the exact build calls them and once over torch's stable ABI (``TORCH_TARGET_VERSION`` 2.11)
as the stable build does. The tensor is a CUDA fp16 (1, 256, 8, 64) q; allocations are freed
within the iteration (the caching allocator then serves the same block).

``compare LABEL=SITE ...``: the raw forward operator (``torch.ops.flash_attn.fwd.default``, fp16
B1 H8 S256 D64, not causal: the one unit of the ``ci`` kernel set) of several installed builds
(each an install folder, e.g. ``pip install --target SITE wheel``), each in its own process (two
builds cannot register ``flash_attn`` in one), beside SDPA flash on the same tensors in the same
process, and ``flash_attn_func`` where the build's arch group covers the GPU. The library is
loaded without the arch-group check (``_loader.require_library``), so a build for sm_80 runs its
raw operator on a newer GPU through its PTX. Per process: ``--calls`` back-to-back calls between
two synchronizations per sample, ``--repeats`` samples, the implementations interleaved; the
processes run in rounds (every build once per round, ``--rounds``), and the figure is the median
over all samples of all rounds, in microseconds per call.

Usage::

    python3 bench/binding_cost.py api [--n 20000]
    python3 bench/binding_cost.py compare old=/tmp/site_old new=/tmp/site_new [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

_COMMON = r"""
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>
#include <cuda_runtime_api.h>

template <class F>
double ns_per(int64_t n, F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < n; ++i) f();
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(n);
}
static volatile int64_t sink = 0;
"""

# (name, ATen statement, stable statement); q is the (1, 256, 8, 64) fp16 CUDA tensor, idx its device.
_CASES = [
    ("scalar_type()", "sink += (int)q.scalar_type();", "sink += (int)q.scalar_type();"),
    ("device()", "sink += q.device().index();", "sink += q.device().index();"),
    (
        "dim, 4 sizes, 4 strides",
        "sink += q.dim(); for (int i = 0; i < 4; ++i) sink += q.size(i) + q.stride(i);",
        "sink += q.dim(); for (int i = 0; i < 4; ++i) sink += q.size(i) + q.stride(i);",
    ),
    ("is_contiguous()", "sink += q.is_contiguous();", "sink += q.is_contiguous();"),
    ("data_ptr()", "sink += (intptr_t)q.data_ptr();", "sink += (intptr_t)q.data_ptr();"),
    ("tensor handle copy", "at::Tensor c = q; sink += c.dim();", "torch::stable::Tensor c = q; sink += c.dim();"),
    ("device guard", "c10::cuda::CUDAGuard g(q.device());", "torch::stable::accelerator::DeviceGuard g(idx);"),
    (
        "current stream",
        "sink += (intptr_t)c10::cuda::getCurrentCUDAStream(idx).stream();",
        "void* s = nullptr; aoti_torch_get_current_cuda_stream(idx, &s); sink += (intptr_t)s;",
    ),
    ("cudaGetDevice", "int d = 0; cudaGetDevice(&d); sink += d;", "int d = 0; cudaGetDevice(&d); sink += d;"),
    (
        "empty (8, 256) f32, dispatcher",
        "at::Tensor t = at::empty({8, 256}, q.options().dtype(at::kFloat));",
        "torch::stable::Tensor t = torch::stable::empty({8, 256}, torch::headeronly::ScalarType::Float, "
        "std::nullopt, q.device());",
    ),
    (
        "empty (8, 256) f32, direct",
        "at::Tensor t = at::detail::empty_cuda({8, 256}, at::kFloat, q.device(), std::nullopt);",
        "int64_t sz[2] = {8, 256}, st[2] = {256, 1}; AtenTensorHandle h = nullptr; "
        "aoti_torch_empty_strided(2, sz, st, aoti_torch_dtype_float32(), aoti_torch_device_type_cuda(), idx, &h); "
        "aoti_torch_delete_tensor_object(h);",
    ),
    (
        "empty_like(q), dispatcher",
        "at::Tensor t = at::empty_like(q);",
        "torch::stable::Tensor t = torch::stable::empty_like(q);",
    ),
    (
        "empty_like(q), direct",
        "at::Tensor t = at::detail::empty_strided_cuda(q.sizes(), q.strides(), q.scalar_type(), q.device());",
        "AtenTensorHandle h = nullptr; aoti_torch_empty_strided(4, q.sizes().data(), q.strides().data(), "
        "aoti_torch_dtype_float16(), aoti_torch_device_type_cuda(), idx, &h); aoti_torch_delete_tensor_object(h);",
    ),
]

_ATEN = (
    "#include <ATen/ATen.h>\n#include <ATen/cuda/EmptyTensor.h>\n#include <c10/cuda/CUDAGuard.h>\n"
    "#include <c10/cuda/CUDAStream.h>\n#include <torch/library.h>\n"
    + _COMMON
    + "at::Tensor costs(const at::Tensor& q, int64_t n) {\n  const int idx = q.device().index();\n"
    "  std::vector<double> r;\n"
    + "".join(f"  r.push_back(ns_per(n, [&] {{ {aten} }}));\n" for _, aten, _ in _CASES)
    + "  at::Tensor out = at::empty({(int64_t)r.size()}, at::kDouble);\n"
    "  std::memcpy(out.data_ptr(), r.data(), r.size() * sizeof(double));\n  return out;\n}\n"
    'TORCH_LIBRARY(fa_cost_aten, m) { m.def("costs(Tensor q, int n) -> Tensor"); }\n'
    'TORCH_LIBRARY_IMPL(fa_cost_aten, CUDA, m) { m.impl("costs", &costs); }\n'
)

_STABLE = (
    "#include <optional>\n#include <torch/csrc/inductor/aoti_torch/c/shim.h>\n"
    "#include <torch/csrc/stable/accelerator.h>\n#include <torch/csrc/stable/library.h>\n"
    "#include <torch/csrc/stable/ops.h>\n#include <torch/csrc/stable/tensor.h>\n"
    + _COMMON
    + "torch::stable::Tensor costs(const torch::stable::Tensor& q, int64_t n) {\n"
    "  const int32_t idx = q.device().index();\n  std::vector<double> r;\n"
    + "".join(f"  r.push_back(ns_per(n, [&] {{ {stable} }}));\n" for _, _, stable in _CASES)
    + "  torch::stable::Tensor out = torch::stable::empty({(int64_t)r.size()}, "
    "torch::headeronly::ScalarType::Double, std::nullopt, torch::stable::Device(torch::headeronly::DeviceType::CPU));\n"
    "  std::memcpy(out.data_ptr(), r.data(), r.size() * sizeof(double));\n  return out;\n}\n"
    'STABLE_TORCH_LIBRARY(fa_cost_stable, m) { m.def("costs(Tensor q, int n) -> Tensor"); }\n'
    'STABLE_TORCH_LIBRARY_IMPL(fa_cost_stable, CUDA, m) { m.impl("costs", TORCH_BOX(&costs)); }\n'
)


def api(n: int) -> int:
    """Build both extensions, run each case ``n`` times per backend, print ns per call.

    Returns 0, or 1 without a CUDA device. Raises torch's build error when an extension does not
    compile (a host compiler, Ninja and the CUDA toolkit are needed).
    """
    import torch
    from torch.utils.cpp_extension import load

    if not torch.cuda.is_available():
        print("binding_cost api: needs a CUDA device", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in (("fa_cost_aten", _ATEN), ("fa_cost_stable", _STABLE)):
            with open(os.path.join(tmp, f"{name}.cpp"), "w", encoding="utf-8") as f:
                f.write(text)
        flags = ["-O2", "-DUSE_CUDA=1"]
        load("fa_cost_aten", [os.path.join(tmp, "fa_cost_aten.cpp")], extra_cflags=flags, with_cuda=True,
             is_python_module=False, build_directory=tmp)  # fmt: skip
        load("fa_cost_stable", [os.path.join(tmp, "fa_cost_stable.cpp")], with_cuda=True, is_python_module=False,
             extra_cflags=[*flags, "-DTORCH_TARGET_VERSION=0x020b000000000000"], build_directory=tmp)  # fmt: skip
    q = torch.randn(1, 256, 8, 64, device="cuda", dtype=torch.float16)
    for op in (torch.ops.fa_cost_aten.costs, torch.ops.fa_cost_stable.costs):
        op(q, 1000)  # warm-up: first allocations, lazy initialisation
    aten = [torch.ops.fa_cost_aten.costs(q, n).tolist() for _ in range(3)]
    stable = [torch.ops.fa_cost_stable.costs(q, n).tolist() for _ in range(3)]
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}; ns per call, median of 3 x {n}")
    print(f"{'call':34s} {'ATen (exact)':>13s} {'stable ABI':>11s}")
    for i, (name, _, _) in enumerate(_CASES):
        a = statistics.median(r[i] for r in aten)
        s = statistics.median(r[i] for r in stable)
        print(f"{name:34s} {a:13.1f} {s:11.1f}")
    return 0


_WORKER = r"""
import json, statistics, sys, time, torch
import flash_attn
from flash_attn import _loader
from torch.nn.attention import SDPBackend, sdpa_kernel
_loader.require_library()  # registers the operators; an sm_80 build on a newer GPU runs its PTX
calls, repeats = int(sys.argv[1]), int(sys.argv[2])
q, k, v = (torch.randn(1, 256, 8, 64, device="cuda", dtype=torch.float16) for _ in range(3))
op = torch.ops.flash_attn.fwd.default
args = (q, k, v, None, 0.0, 0.125, False, -1, -1, 0.0, False, None)
views = [x.transpose(1, 2) for x in (q, k, v)]
sdpa = torch.nn.functional.scaled_dot_product_attention
def sample(fn):
    torch.cuda.synchronize(); t0 = time.perf_counter()
    for _ in range(calls): fn()
    torch.cuda.synchronize(); return (time.perf_counter() - t0) / calls * 1e6
fns = {"raw": lambda: op(*args), "sdpa_flash": lambda: sdpa(*views)}
try:
    _loader.require_ready(torch.cuda.current_device())
    fns["api"] = lambda: flash_attn.flash_attn_func(q, k, v)
except flash_attn.UnsupportedGPUError:
    pass  # an arch group that does not cover this GPU: its raw operator only
with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
    for fn in fns.values():
        for _ in range(20): fn()
    out = {name: [] for name in fns}
    for r in range(repeats):
        items = list(fns.items())
        for name, fn in items[r % len(items):] + items[:r % len(items)]:  # who goes first rotates
            out[name].append(sample(fn))
print(json.dumps({"flash_attn": flash_attn.__version__, **out}))
"""


def compare(sites: list[str], rounds: int, calls: int, repeats: int) -> int:
    """Time the raw forward of each ``LABEL=SITE`` build in its own process, in rounds; print us per call.

    Returns 0, 1 when a worker failed (its stderr is printed) or 2 for a spec that is not
    ``LABEL=FOLDER``.
    """
    builds = []
    for spec in sites:
        label, sep, site = spec.partition("=")
        if not sep or not os.path.isdir(site):
            print(f"binding_cost compare: {spec!r} is not LABEL=FOLDER (an install folder)", file=sys.stderr)
            return 2
        builds.append((label, os.path.abspath(site)))
    samples: dict[str, dict[str, list[float]]] = {
        label: {"raw": [], "api": [], "sdpa_flash": []} for label, _ in builds
    }
    versions: dict[str, str] = {}
    for r in range(rounds):
        order = builds[r % len(builds) :] + builds[: r % len(builds)]
        for label, site in order:
            inherited = os.environ.get("PYTHONPATH")
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([site, inherited]) if inherited else site)
            proc = subprocess.run(
                [sys.executable, "-c", _WORKER, str(calls), str(repeats)],
                env=env, capture_output=True, text=True, cwd=tempfile.gettempdir(), check=False,
            )  # fmt: skip
            if proc.returncode != 0:
                print(f"binding_cost compare: {label} failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
                return 1
            lines = proc.stdout.strip().splitlines()
            if not lines:
                print(f"binding_cost compare: {label} printed no result:\n{proc.stderr[-2000:]}", file=sys.stderr)
                return 1
            record = json.loads(lines[-1])
            versions[label] = record["flash_attn"]
            for name in ("raw", "api", "sdpa_flash"):
                samples[label][name] += record.get(name, [])
    print(f"fp16 B1 H8 S256 D64, us per call: median of {rounds} x {repeats} x {calls} calls")
    columns = f"{'raw op':>8s} {'api':>8s} {'sdpa_flash':>11s} {'raw / sdpa':>11s} {'api / sdpa':>11s}"
    print(f"{'build':10s} {columns}  flash_attn")
    for label, _ in builds:
        raw, ref = (statistics.median(samples[label][name]) for name in ("raw", "sdpa_flash"))
        api = statistics.median(samples[label]["api"]) if samples[label]["api"] else None
        have_api = api is not None
        api_cells = f"{api:8.2f}" if have_api else f"{'-':>8s}", f"{api / ref:10.2f}x" if have_api else f"{'-':>11s}"
        print(f"{label:10s} {raw:8.2f} {api_cells[0]} {ref:11.2f} {raw / ref:10.2f}x {api_cells[1]}  {versions[label]}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command line (module documentation); returns the exit status of ``api`` or ``compare``, 2 for bad options."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    a = sub.add_parser("api", help="each torch call of the binding, ATen against the stable ABI")
    a.add_argument("--n", type=int, default=20000, help="iterations per call and sample (default 20000)")
    c = sub.add_parser("compare", help="the raw forward of several installed builds, in rounds of processes")
    c.add_argument("sites", nargs="+", metavar="LABEL=SITE")
    c.add_argument("--rounds", type=int, default=3)
    c.add_argument("--calls", type=int, default=300)
    c.add_argument("--repeats", type=int, default=15)
    args = p.parse_args(argv)
    if args.command == "api":
        if args.n < 1:
            p.error("--n must be at least 1")
        return api(args.n)
    if min(args.rounds, args.calls, args.repeats) < 1:
        p.error("--rounds, --calls and --repeats must be at least 1")
    return compare(args.sites, args.rounds, args.calls, args.repeats)


if __name__ == "__main__":
    start = time.perf_counter()
    status = main()
    print(f"binding_cost: {time.perf_counter() - start:.0f} s", file=sys.stderr)
    sys.exit(status)
