"""The user-facing environment variables: one registry, rendered into docs/environment.md.

Each :class:`EnvVar` says what a variable means, its default, the files that read (or set for a child
process) it, and what it affects: a ``build``, the ``runtime`` (``import flash_attn``), a
``benchmark``, ``CI`` or a ``test``. The build options of the manifest's ``options`` table are
environment variables too (CMake's ``flash_attn_option`` and ``release.compile.options`` read each);
they are not repeated here: :func:`option_names` takes them from the manifest, and the table names
them with a link to the options table of docs/release.md.

Not listed: the CMake-internal ``FLASH_ATTN_*`` variables (cache and normal variables the cmake/
modules set for each other, never read from the environment), C++ macros of the same prefix, and
the switches of the measuring scripts outside the product (docs/environment.md says where they are
listed). The product never names those scripts, so they are not among the readers either. Variables
other tools define (``CUDA_HOME``, ``XDG_CACHE_HOME``, ``GITHUB_ENV``, ...) that the code also reads
are :data:`STANDARD`, named in one line below the table.

tests/unit/release/test_environment.py scans the tracked Python, CMake, shell and workflow files:
every ``FLASH_ATTN_*`` variable they read is here or an option, every entry is read where it says.
``nox -s doc_tables`` renders :func:`table` (release.plan.doc_tables). Stdlib only.
"""

from __future__ import annotations

from dataclasses import dataclass

from flash_attn_wheel_names import manifest_file

# What a variable changes; the table's "affects" column.
AFFECTS = ("build", "runtime", "benchmark", "CI", "test")


@dataclass(frozen=True)
class EnvVar:
    """One environment variable.

    name: the variable. meaning: one sentence (Markdown). default: what holds when it is unset or
    empty, in words. readers: repository-relative files of the product, bench/, tools/ and tests/
    that read it or set it for a child process (each spells the name, and every such file outside
    tests/ is listed; a test checks). affects: the parts of :data:`AFFECTS` it changes.
    """

    name: str
    meaning: str
    default: str
    readers: tuple[str, ...]
    affects: tuple[str, ...]


REGISTRY: tuple[EnvVar, ...] = (
    EnvVar(
        "FLASH_ATTN_LIB",
        "a `_C_<group>` library file that `import flash_attn` loads instead of the ones next to the package",
        "unset: the package's own libraries",
        ("flash_attn/_loader.py", "bench/bench_common.py"),
        ("runtime", "benchmark", "test"),
    ),
    EnvVar(
        manifest_file.ENV,
        "another build manifest for every reader: CMake, the release tooling, nox, the kernel sets, the "
        "source checkout's loader, CI's pins (tests and the release rehearsal point it at a copy); every "
        "Python reader asks flash_attn_wheel_names.manifest_file",
        "`build-manifest.json` of the checkout",
        (
            "cmake/FlashAttnManifest.cmake",
            "src/flash_attn_wheel_names/manifest_file.py",
            ".ci/run",
        ),
        ("build", "runtime", "CI"),
    ),
    EnvVar(
        "FLASH_ATTN_CACHE_DIR",
        "the per-user cache folder: the pinned upstream sdist's download, this machine's measured build "
        "speed (`build_speed.json`)",
        "`%LOCALAPPDATA%/flash_attn_wheels` on Windows, else `$XDG_CACHE_HOME/flash_attn_wheels`, "
        "else `~/.cache/flash_attn_wheels`",
        (
            "cmake/FlashAttnUpstream.cmake",
            "src/release/compile/options.py",
        ),
        ("build", "benchmark"),
    ),
    EnvVar(
        "FLASH_ATTN_CACHE",
        "the compile cache in front of nvcc and the C++ compiler: `none` or `sccache` (the `--cache` flag wins)",
        "`none`",
        ("src/release/compile/options.py", "noxfile.py"),
        ("build",),
    ),
    EnvVar(
        "FLASH_ATTN_VISIBLE_SMS",
        "the SMs of this machine's GPUs for the build's prediction and the dev build's arch choice, "
        "e.g. `89` or `80,90`; `none` for no GPU",
        "unset: asks torch",
        ("src/release/compile/estimate.py",),
        ("build",),
    ),
    EnvVar(
        "FLASH_ATTN_INDEX_URL",
        "the package index URL a wheel's build info records; the wheel sessions set it (derived from "
        "`GITHUB_REPOSITORY`, replacing a value set by hand), CMake reads it",
        "empty outside a workflow",
        ("cmake/FlashAttnBuildInfo.cmake", "src/release/index_url.py"),
        ("build", "CI"),
    ),
    EnvVar(
        "FLASH_ATTN_RUNNER_UBUNTU",
        "GitHub repository variable: a larger Linux runner label for the release matrix",
        "unset: `ubuntu-24.04`",
        (".github/workflows/release.yml",),
        ("CI",),
    ),
    EnvVar(
        "FLASH_ATTN_RUNNER_WINDOWS",
        "GitHub repository variable: a larger Windows runner label for the release matrix",
        "unset: `windows-2022`",
        (".github/workflows/release.yml",),
        ("CI",),
    ),
    EnvVar(
        "CUDA_FULL",
        "the CUDA toolkit version that `python -m release.windows.cuda_redist` installs (the workflows set it)",
        "none: required",
        ("src/release/windows/cuda_redist.py",),
        ("CI",),
    ),
    EnvVar(
        "CUDA_ROOT",
        "the folder `python -m release.windows.cuda_redist` installs the CUDA toolkit into",
        "none: required",
        ("src/release/windows/cuda_redist.py",),
        ("CI",),
    ),
    EnvVar(
        "CUDA_REDIST_URL",
        "another base URL for the CUDA redistributables `release.windows.cuda_redist` downloads",
        "NVIDIA's",
        ("src/release/windows/cuda_redist.py",),
        ("CI",),
    ),
    EnvVar(
        "REHEARSAL_NETWORK",
        "JSON of the container images and web pages the offline release rehearsal serves; set by the "
        "rehearsal for the steps it runs, not by hand",
        "`{}`",
        ("src/release/workflow/rehearsal.py", "src/release/workflow/rehearsal_network.py"),
        ("CI",),
    ),
    EnvVar(
        "FLASH_ATTN_BENCH_LAUNCHER_LOG",
        "the file where `bench/measure_launcher.py` appends each compile's seconds and peak memory (`--log` wins)",
        "unset: no log",
        ("bench/measure_launcher.py",),
        ("benchmark",),
    ),
    EnvVar(
        "FLASH_ATTN_BENCH_LAUNCHER_DRY",
        "set: `bench/measure_launcher.py` compiles nothing and exits 1 (`bench/build.py` sets it to "
        "read upstream's compile commands)",
        "unset",
        ("bench/measure_launcher.py", "bench/build.py"),
        ("benchmark",),
    ),
    EnvVar(
        "FLASH_ATTN_BENCH_SHARDED_FAKE",
        "`1`: `bench/build_sharded.py` runs stubs that write what each release step would, compiling nothing",
        "unset: the real steps",
        ("bench/build_sharded.py",),
        ("benchmark",),
    ),
    EnvVar(
        "FLASH_ATTN_BENCH_SHARDED_FAKE_S",
        "seconds each stub step of `FLASH_ATTN_BENCH_SHARDED_FAKE=1` waits",
        "`0.2`",
        ("bench/build_sharded.py",),
        ("benchmark",),
    ),
    EnvVar(
        "FLASH_ATTN_GPU_QUICK",
        "`1` (not `0`): tests/gpu/test_rescale_skip.py runs sequence lengths 1000 and 2048 instead of 1000 and 8192",
        "unset: 1000 and 8192",
        ("tests/gpu/test_rescale_skip.py",),
        ("test",),
    ),
    EnvVar(
        "FLASH_ATTN_BENCH_E2E",
        "set: tests/unit/bench/test_bench_build.py also runs upstream's full build (fake compilers, a link "
        "and a wheel, about a minute more)",
        "unset: the units mode only",
        ("tests/unit/bench/test_bench_build.py",),
        ("test",),
    ),
)

# Variables other tools define that the code also reads (for the same meaning those tools give them).
STANDARD: tuple[str, ...] = (
    "CUDACXX",
    "CUDAHOSTCXX",
    "CUDA_HOME",
    "CUDA_PATH",
    "CXX",
    "GITHUB_ACTIONS",
    "GITHUB_ENV",
    "GITHUB_PATH",
    "GITHUB_REPOSITORY",
    "GITHUB_STEP_SUMMARY",
    "HOME",
    "LOCALAPPDATA",
    "NVCC",
    "NVCC_THREADS",
    "PATH",
    "PYTHONPATH",
    "SOURCE_DATE_EPOCH",
    "XDG_CACHE_HOME",
)


def option_names(data: dict) -> list[str]:
    """The build options of manifest `data` (its ``options`` keys, in order): each is also an
    environment variable, read by cmake/FlashAttnOptions.cmake and src/release/compile/options.py."""
    return list(data["options"])


def names(data: dict) -> set[str]:
    """Every variable the registry covers: :data:`REGISTRY`'s names and manifest `data`'s options."""
    return {v.name for v in REGISTRY} | set(option_names(data))


def table(data: dict) -> str:
    """docs/environment.md's block: one row per :data:`REGISTRY` entry (variable, affects, default,
    meaning, read by), then a line naming the build options of manifest `data` and one naming
    :data:`STANDARD`. Markdown text ending in a newline."""
    lines = ["| variable | affects | default | meaning | read by |", "|---|---|---|---|---|"]
    for v in REGISTRY:
        readers = ", ".join(f"`{r}`" for r in v.readers)
        lines.append(f"| `{v.name}` | {', '.join(v.affects)} | {v.default} | {v.meaning} | {readers} |")
    options = ", ".join(f"`{name}`" for name in option_names(data))
    standard = ", ".join(f"`{name}`" for name in STANDARD)
    lines += [
        "",
        f"The build options are environment variables too (build): {options}. A flag wins over the variable, "
        "the variable over the manifest's default (the arch group's exception: [reference.md](reference.md#options)); "
        "flags and defaults are in the [options table](release.md#options-of-the-wheel-sessions). Read by "
        "`cmake/FlashAttnOptions.cmake` and `src/release/compile/options.py`.",
        "",
        f"Also read, with the meaning their own tools give them: {standard}.",
    ]
    return "\n".join(lines) + "\n"
