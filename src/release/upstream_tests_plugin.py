"""pytest plugin of ``nox -s upstream_tests``: upstream's test files, unmodified, narrowed to a wheel.

Loaded with ``-p release.upstream_tests_plugin`` by :mod:`release.upstream_tests`; it never edits a
test, it only chooses which collected cases run and counts what they did:

* ``--fa-head-dims 64,128``: the kernel head dims the wheel has (every unit of each, from its build
  info). A case whose ``d`` parameter dispatches to another kernel head dim is deselected: the
  kernels round ``d`` up to the next of upstream's instantiated head dims (``--fa-kernel-dims``,
  build-manifest.json kernels.head_dims; upstream's HEADDIM_SWITCH in static_switch.h), so d=40
  runs the 64 kernel and d=111 the 128 one. Cases without ``d`` (test_rotary.py) always stay.
* ``--fa-sample N --fa-seed S``: at most N of the kept cases, drawn reproducibly from S and spread
  over the test functions (round robin over the functions, each shuffled by the seed), so a sample
  smaller than the suite still reaches every function.
* ``--fa-summary FILE``: the per-function counts as JSON (also printed as a table).

Deselected cases are reported to pytest as deselected, so its own summary line shows them.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from pathlib import Path

import pytest

OUTCOMES = ("passed", "failed", "skipped", "error")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("flash_attn upstream tests")
    group.addoption("--fa-head-dims", default="", help="kernel head dims the wheel has, comma-separated")
    group.addoption("--fa-kernel-dims", default="32,64,96,128,192,256", help="upstream's kernel head dims")
    group.addoption("--fa-sample", type=int, default=0, help="run at most this many cases (0: all)")
    group.addoption("--fa-seed", type=int, default=0, help="seed of the sample")
    group.addoption("--fa-summary", default="", help="write the per-function counts to this JSON file")


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
    config.stash[_SELECTED] = len(sampled)


_COUNTS = pytest.StashKey[dict]()
_SELECTED = pytest.StashKey[int]()


@pytest.hookimpl(trylast=True)
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    config = _CONFIG.get("config")
    if config is None or _COUNTS not in config.stash:
        return
    counts = config.stash[_COUNTS][function_of(report.nodeid)]
    if report.when == "call":
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
    summary = config.getoption("fa_summary")
    if summary:
        record = {
            # under pytest-xdist the workers select, so this (controller) process does not know it
            "selected": config.stash.get(_SELECTED, None),
            "ran": sum(total.values()),
            "head_dims": _ints(config.getoption("fa_head_dims")),
            "sample": config.getoption("fa_sample"),
            "seed": config.getoption("fa_seed"),
            "functions": counts,
            "total": total,
            "exit_status": int(exitstatus),
        }
        Path(summary).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
