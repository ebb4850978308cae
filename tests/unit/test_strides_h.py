"""src/binding/strides.h, compiled alone with the host C++ compiler, against torch's own stride rules.

The stable binding allocates with the strides these functions compute (tensor_api_stable.h), so
that its results have ``torch.empty_like``'s strides (the fake implementations use empty_like).
On every layout tried here: where ``non_overlapping_and_dense`` says yes, ``torch.empty_like``
keeps the tensor's strides (the binding then allocates with them), and where it says no,
``empty_like`` does not keep them (the binding then calls torch's empty_like itself); and
``contiguous_strides`` gives ``torch.empty(sizes).stride()``.
"""

from __future__ import annotations

import itertools
import random
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

HEADER = Path(__file__).resolve().parents[2] / "src" / "binding" / "strides.h"

HARNESS = r"""
#include <cstdio>
#include "strides.h"
using namespace flash_attn_wheels::binding;
int main() {
  size_t rank;
  while (std::scanf("%zu", &rank) == 1) {
    int64_t sizes[16], strides[16], contiguous[16];
    for (size_t i = 0; i < rank; ++i) std::scanf("%lld", reinterpret_cast<long long*>(&sizes[i]));
    for (size_t i = 0; i < rank; ++i) std::scanf("%lld", reinterpret_cast<long long*>(&strides[i]));
    std::printf("%d", non_overlapping_and_dense(sizes, strides, rank) ? 1 : 0);
    if (rank <= kMaxStridedRank) {
      contiguous_strides(sizes, rank, contiguous);
      for (size_t i = 0; i < rank; ++i) std::printf(" %lld", static_cast<long long>(contiguous[i]));
    }
    std::printf("\n");
  }
  return 0;
}
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    compiler = shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        pytest.skip("no host C++ compiler (c++ or g++) on PATH")
    folder = tmp_path_factory.mktemp("strides")
    (folder / "harness.cpp").write_text(HARNESS, encoding="utf-8")
    exe = folder / "harness"
    subprocess.run(
        [compiler, "-std=c++17", "-O1", f"-I{HEADER.parent}", str(folder / "harness.cpp"), "-o", str(exe)],
        check=True,
        capture_output=True,
    )
    return exe


def layouts() -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Dense permutations, transposes, slices, padding, expanded (0-stride) and size-0/1 dimensions."""
    rng = random.Random(14)
    out = []
    for rank in range(1, 6):
        for _ in range(60):
            sizes = tuple(rng.choice([0, 1, 1, 2, 3, 5, 8]) for _ in range(rank))
            order = list(range(rank))
            rng.shuffle(order)
            strides = [0] * rank
            running = 1
            for d in reversed(order):  # a permuted dense layout, then perturbed
                strides[d] = running
                running *= max(sizes[d], 1)
            kind = rng.choice(["dense", "pad", "expand", "odd-size-1", "swap"])
            if kind == "pad":
                strides[rng.randrange(rank)] *= 2
            elif kind == "expand":
                strides[rng.randrange(rank)] = 0
            elif kind == "odd-size-1":
                ones = [d for d in range(rank) if sizes[d] == 1]
                if ones:
                    strides[rng.choice(ones)] = rng.choice([7, 1000, 0])
            elif kind == "swap" and rank > 1:
                a, b = rng.sample(range(rank), 2)
                strides[a], strides[b] = strides[b], strides[a]
            out.append((sizes, tuple(strides)))
    # the binding's own shapes: (B, S, H, D) q, a (B, H, S, D) transpose, a packed qkv slice, Sq = 1
    out += [((2, 128, 8, 64), (65536, 512, 64, 1)), ((2, 128, 8, 64), (65536, 64, 8192, 1))]
    out += [((2, 128, 8, 64), (196608, 1536, 64, 1)), ((2, 1, 8, 64), (4096, 4096, 64, 1))]
    out += [((3,), (1,)), ((3,), (2,)), ((1,), (5,)), ((0,), (3,)), ((), ())]
    return out


def run(harness, cases):
    text = "".join(f"{len(s)} {' '.join(map(str, s))} {' '.join(map(str, st))}\n" for s, st in cases)
    result = subprocess.run([str(harness)], input=text, capture_output=True, text=True, check=True)
    return [line.split() for line in result.stdout.splitlines()]


def test_dense_and_contiguous_rules_match_torch(harness):
    cases = layouts()
    assert len(cases) > 300
    dense_seen = {True: 0, False: 0}
    for (sizes, strides), fields in zip(cases, run(harness, cases), strict=True):
        t = torch.empty_strided(sizes, strides)
        kept = torch.empty_like(t).stride() == t.stride()  # torch's answer, through what the binding mimics
        dense_seen[kept] += 1
        assert fields[0] == ("1" if kept else "0"), (sizes, strides, torch.empty_like(t).stride())
        assert tuple(int(x) for x in fields[1:]) == torch.empty(sizes).stride(), sizes
    assert min(dense_seen.values()) > 50  # both answers are exercised


def test_a_rank_above_the_limit_is_left_to_torch(harness):
    sizes = tuple([2] * 9)
    strides = torch.empty(sizes).stride()
    assert run(harness, [(sizes, strides)]) == [["0"]]  # the binding then calls torch's empty_like


def test_header_includes_no_torch():
    includes = [line for line in HEADER.read_text(encoding="utf-8").splitlines() if line.startswith("#include")]
    assert includes and all(("torch" not in line and "ATen" not in line and "c10" not in line) for line in includes)


def test_layouts_cover_permutations():
    assert len(set(itertools.chain.from_iterable(s for s, _ in layouts()))) > 3
