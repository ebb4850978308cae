"""pytest plugin of ``nox -s upstream_tests``: upstream's test files, unmodified, narrowed to a wheel.

Loaded with ``-p release.ship.upstream_tests_plugin`` by :mod:`release.ship.upstream_tests`; it never edits a
test, it only chooses which collected cases run and counts what they did:

* ``--fa-head-dims 64,128``: the kernel head dims the wheel has (every unit of each, from its build
  info). A case whose ``d`` parameter dispatches to another kernel head dim is deselected: the
  kernels round ``d`` up to the next of upstream's instantiated head dims (``--fa-kernel-dims``,
  build-manifest.json kernels.head_dims; upstream's HEADDIM_SWITCH in static_switch.h), so d=40
  runs the 64 kernel and d=111 the 128 one. Cases without ``d`` (test_rotary.py) always stay.
* ``--fa-sample N --fa-seed S``: at most N of the kept cases, drawn reproducibly from S and spread
  over the test functions (round robin over the functions, each shuffled by the seed), so a sample
  smaller than the suite still reaches every function.
* ``--fa-summary FILE``: the per-function counts as JSON (also printed as a table), and the same
  counts per kernel head dim (``kernel_head_dims``: which of the wheel's kernels the cases ran;
  cases without ``d`` count under ``none``), so a run shows that every head dim was exercised.
* :data:`KNOWN_FAILURES`: cases that fail with upstream's own Python modules alone on the running
  torch or Triton (measured without this project's wheel, docs/upstream-python.md) are marked as
  expected failures, with the environment fact as the reason, only where that fact holds. They
  still run, and a failure with another exception counts as failed; a strict entry that passes
  counts as failed too (its fact is stale), a non-strict one (whose cases fail only sometimes)
  counts as xpassed.

Deselected cases are reported to pytest as deselected, so its own summary line shows them.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

OUTCOMES = ("passed", "failed", "skipped", "xfailed", "xpassed", "error")
# The schema of the summary (src/release/ship/schemas/upstream-tests.v1.json, checked by nox -s release)
# and the facts of the wheel under test it records (file name, sha256, label; release.ship.upstream_tests).
REPORT_SCHEMA = "upstream-tests/1"
WHEEL_KEYS = ("file", "sha256", "label")


def _torch_dynamo_rotary_qkv() -> str | None:
    """torch 2.11 (measured on the H200, docs/upstream-python.md): Dynamo's autograd.Function tracing
    asserts in ``overwrite_tensor_vt_proxy`` on upstream's ``ApplyRotaryEmbQKV_``, whose forward
    returns its input rotated in place. Upstream's own modules, with no wheel of ours, fail 19 to 21
    of the 24 ``compiled=True, rotary_fraction=1.0`` cases; which compiled cases fail depends on what
    the process compiled before (a sampled run also failed two ``rotary_fraction=0.5`` cases)."""
    try:
        import torch
    except ImportError:  # no torch, no Dynamo: the fact cannot hold (and upstream's test files need torch anyway)
        return None
    minor = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    if minor in ("2.11",):
        return (
            f"torch {torch.__version__}: Dynamo asserts tracing upstream's ApplyRotaryEmbQKV_ "
            "(fails the same without this wheel)"
        )
    return None


def _triton_without_cache_hook() -> str | None:
    """Triton releases with ``triton.knobs`` call ``knobs.runtime.jit_cache_hook`` on compilation and
    have no ``JITFunction.cache_hook``, the attribute upstream's test reads and sets."""
    try:
        import triton
        from triton.runtime.jit import JITFunction
    except ImportError:
        return None
    if hasattr(JITFunction, "cache_hook"):
        return None
    return (
        f"Triton {triton.__version__} has no JITFunction.cache_hook (its hook is triton.knobs.runtime.jit_cache_hook)"
    )


@dataclass(frozen=True)
class KnownFailure:
    """Cases of one upstream test function that fail where ``reason()`` returns a text.

    ``params``: parameter values that select the cases (all must match; empty: every case).
    ``raises``: the exception the failure must raise to count as the known one.
    """

    function: str
    raises: type[BaseException]
    reason: Callable[[], str | None]
    params: dict = field(default_factory=dict)
    strict: bool = True

    def matches(self, item) -> bool:
        values = getattr(getattr(item, "callspec", None), "params", {})
        return function_of(item.nodeid) == self.function and all(
            k in values and values[k] == v for k, v in self.params.items()
        )


KNOWN_FAILURES = (
    KnownFailure(
        "test_rotary.py::test_rotary_emb_qkv",
        AssertionError,
        _torch_dynamo_rotary_qkv,
        {"compiled": True},
        strict=False,  # which compiled cases fail varies from run to run (see the reason's docstring)
    ),
    KnownFailure("test_rotary.py::test_compilation_count", AttributeError, _triton_without_cache_hook),
)


def mark_known_failures(items: list, known: tuple = KNOWN_FAILURES) -> int:
    """Mark the items a :class:`KnownFailure` applies to (here and now) as xfail; returns how many."""
    reasons = {id(k): k.reason() for k in known}
    marked = 0
    for item in items:
        for k in known:
            if reasons[id(k)] and k.matches(item):
                item.add_marker(pytest.mark.xfail(reason=reasons[id(k)], raises=k.raises, strict=k.strict))
                marked += 1
                break
    return marked


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("flash_attn upstream tests")
    group.addoption("--fa-head-dims", default="", help="kernel head dims the wheel has, comma-separated")
    group.addoption("--fa-kernel-dims", default="32,64,96,128,192,256", help="upstream's kernel head dims")
    group.addoption("--fa-sample", type=int, default=0, help="run at most this many cases (0: all)")
    group.addoption("--fa-seed", type=int, default=0, help="seed of the sample")
    group.addoption("--fa-summary", default="", help="write the per-function counts to this JSON file")
    for key in WHEEL_KEYS:
        group.addoption(f"--fa-wheel-{key}", default="", help=f"the summary's wheel.{key} (the wheel under test)")


def _ints(text: str) -> list[int]:
    return sorted(int(x) for x in text.split(",") if x.strip())


def kernel_head_dim(d: int, kernel_dims: list[int]) -> int | None:
    """The kernel head dim a head dim ``d`` dispatches to (the smallest >= d), None above the largest."""
    return next((k for k in kernel_dims if k >= d), None)


def function_of(nodeid: str) -> str:
    """``tests/test_flash_attn.py::test_flash_attn_output[...]`` -> ``test_flash_attn.py::test_flash_attn_output``."""
    path, _, name = nodeid.partition("::")
    return f"{Path(path).name}::{name.split('[', 1)[0]}"


def spread_sample(items: list, count: int, seed: int) -> list:
    """At most ``count`` items, drawn reproducibly: each function's cases shuffled with ``seed``,
    then taken round robin over the functions (in collection order) until ``count`` are taken."""
    if count <= 0 or count >= len(items):
        return list(items)
    rng = random.Random(seed)
    by_function: dict[str, list] = {}
    for item in items:
        by_function.setdefault(function_of(item.nodeid), []).append(item)
    queues = []
    for cases in by_function.values():
        cases = list(cases)
        rng.shuffle(cases)
        queues.append(cases)
    chosen: list = []
    while len(chosen) < count:
        for queue in queues:
            if queue and len(chosen) < count:
                chosen.append(queue.pop())
    keep = {id(item) for item in chosen}
    return [item for item in items if id(item) in keep]  # collection order, for readable output


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    head_dims = set(_ints(config.getoption("fa_head_dims")))
    kernel_dims = _ints(config.getoption("fa_kernel_dims"))
    kept, dropped = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        d = params.get("d")
        if d is None or kernel_head_dim(int(d), kernel_dims) in head_dims:
            kept.append(item)
        else:
            dropped.append(item)
    sampled = spread_sample(kept, config.getoption("fa_sample"), config.getoption("fa_seed"))
    chosen = {id(item) for item in sampled}
    dropped += [item for item in kept if id(item) not in chosen]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = sampled
    for item in sampled:  # travels with each report, also from pytest-xdist workers to the controller
        d = getattr(getattr(item, "callspec", None), "params", {}).get("d")
        item.user_properties.append((KERNEL_DIM_PROPERTY, None if d is None else kernel_head_dim(int(d), kernel_dims)))
    mark_known_failures(items)
    config.stash[_SELECTED] = len(sampled)


_COUNTS = pytest.StashKey[dict]()
_DIM_COUNTS = pytest.StashKey[dict]()
KERNEL_DIM_PROPERTY = "fa_kernel_head_dim"
_SELECTED = pytest.StashKey[int]()


@pytest.hookimpl(trylast=True)
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    config = _CONFIG.get("config")
    if config is None or _COUNTS not in config.stash:
        return
    dim = dict(report.user_properties).get(KERNEL_DIM_PROPERTY)
    for counts in (config.stash[_COUNTS][function_of(report.nodeid)], config.stash[_DIM_COUNTS][str(dim).lower()]):
        _count(counts, report)


def _count(counts: dict, report: pytest.TestReport) -> None:
    """Add one report's outcome to ``counts`` (OUTCOMES -> int): the call phase's outcome, a setup
    that did not pass (skipped or error) or a failed teardown (error)."""
    if report.when == "call":
        if hasattr(report, "wasxfail") and report.skipped:
            counts["xfailed"] += 1
        elif hasattr(report, "wasxfail") and report.passed:
            counts["xpassed"] += 1
        else:
            counts["skipped" if report.skipped else report.outcome] += 1
    elif report.when == "setup" and not report.passed:
        counts["skipped" if report.skipped else "error"] += 1
    elif report.when == "teardown" and report.failed:
        counts["error"] += 1


_CONFIG: dict[str, pytest.Config] = {}


def pytest_configure(config: pytest.Config) -> None:
    # Counted where the reports arrive: this process, or the controller of pytest-xdist workers.
    _CONFIG["config"] = config
    config.stash[_COUNTS] = defaultdict(lambda: dict.fromkeys(OUTCOMES, 0))
    config.stash[_DIM_COUNTS] = defaultdict(lambda: dict.fromkeys(OUTCOMES, 0))


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    counts = dict(sorted(config.stash.get(_COUNTS, {}).items()))
    total = dict.fromkeys(OUTCOMES, 0)
    width = max([len(name) for name in counts] + [8])
    terminalreporter.write_sep("=", "upstream tests per function")
    terminalreporter.write_line(f"{'function':<{width}}  " + "  ".join(f"{o:>7}" for o in OUTCOMES))
    for name, row in counts.items():
        terminalreporter.write_line(f"{name:<{width}}  " + "  ".join(f"{row[o]:>7}" for o in OUTCOMES))
        for o in OUTCOMES:
            total[o] += row[o]
    terminalreporter.write_line(f"{'total':<{width}}  " + "  ".join(f"{total[o]:>7}" for o in OUTCOMES))
    for dim, row in sorted(config.stash.get(_DIM_COUNTS, {}).items()):
        terminalreporter.write_line(
            f"{'kernel head dim ' + dim:<{width}}  " + "  ".join(f"{row[o]:>7}" for o in OUTCOMES)
        )
    summary = config.getoption("fa_summary")
    if summary:
        record = summary_record(
            counts,
            int(exitstatus),
            # under pytest-xdist the workers select, so this (controller) process does not know it
            selected=config.stash.get(_SELECTED, None),
            head_dims=_ints(config.getoption("fa_head_dims")),
            sample=config.getoption("fa_sample"),
            seed=config.getoption("fa_seed"),
            kernel_head_dims=dict(sorted(config.stash.get(_DIM_COUNTS, {}).items())),
            wheel={key: config.getoption(f"fa_wheel_{key}") for key in WHEEL_KEYS},
        )
        tmp = Path(summary).with_name(f".{Path(summary).name}.partial")  # never a half-written summary
        tmp.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        tmp.replace(summary)


def summary_record(counts: dict, exit_status: int, **facts) -> dict:
    """The summary written to ``--fa-summary``: the schema version, `facts` (selected, head_dims,
    sample, seed, kernel_head_dims: the counts per kernel head dim, wheel: ``{file, sha256,
    label}``), ``ran`` (every outcome counted), the
    per-function `counts` ({function: {outcome: n}}), their ``total`` and pytest's exit status."""
    total = {o: sum(row[o] for row in counts.values()) for o in OUTCOMES}
    return {
        "report_schema": REPORT_SCHEMA,
        **facts,
        "ran": sum(total.values()),
        "functions": counts,
        "total": total,
        "exit_status": exit_status,
    }
