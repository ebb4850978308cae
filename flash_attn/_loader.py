"""Finding, checking and loading the native library ``flash_attn/_C_<group>``.

What happens, once, when ``flash_attn`` is imported (:func:`initialize`):

1. Find the library: ``FLASH_ATTN_LIB`` (a path to a ``_C_<group>.so``/``.pyd``) if set,
   else the one ``_C_<group>.so``/``.pyd`` in the package folder (every folder of
   ``flash_attn.__path__``, which covers editable installs), confirmed with
   ``importlib.util.find_spec("flash_attn._C_<group>")`` (found, never imported: the library is
   not a Python module), which is what makes an editable install (``nox -s dev``) rebuild
   changed sources. None found: a source checkout that was never built; importing works and
   every kernel call raises :class:`LibraryNotBuiltError`.
2. Read ``build_info_<group>.json`` beside it.
3. Compare the running torch with the build info (:func:`flash_attn._compat.check_torch`):
   release, CUDA major and C++11 ABI for an exact build; torch >= ``torch_min`` and CUDA major
   for a stable-ABI build. On a mismatch the library is NOT loaded (so no undefined-symbol error
   can surface), a warning is issued and every kernel call raises :class:`TorchMismatchError`
   naming both versions.
4. ``torch.ops.load_library(path)``: the library registers ``torch.ops.flash_attn.*``.
5. :func:`flash_attn._ops.bind` checks the operators and registers their fake implementations;
   :func:`flash_attn._rng.configure` decides, once, whether the Python layer reserves the Philox
   state of dropout (stable-ABI builds only).

Before the first kernel runs on a device, :func:`require_ready` compares the device's compute
capability with the build's SASS/PTX (:func:`flash_attn._compat.check_device`) and raises
:class:`UnsupportedGPUError` on a mismatch; the verdict is cached per device.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from flash_attn_wheel_names import manifest_file as _manifest_file
from flash_attn_wheel_names import native as _native

from . import _build_info, _compat, _ops, _rng
from ._errors import (
    FlashAttnError,
    LibraryLoadError,
    LibraryNotBuiltError,
    TorchMismatchError,
    UnsupportedGPUError,
)
from ._tracing import constant_result

__all__ = [
    "LIBRARY_ENV",
    "LibraryState",
    "STATE",
    "library_pattern",
    "find_library",
    "initialize",
    "require_library",
    "require_ready",
    "device_verdict",
    "checkout_group_names",
    "not_built_message",
]

LIBRARY_ENV = "FLASH_ATTN_LIB"
# dlopen / LoadLibrary reasons that mean "this file is not a shared library" (not a missing dependency).
_NOT_A_LIBRARY_RE = re.compile(
    r"invalid ELF header|file too short|not an ELF|wrong ELF class|ELF load command|not a valid Win32 application"
    r"|%1 is not a valid",
    re.IGNORECASE,
)


def library_pattern() -> re.Pattern[str]:
    """Regex a native library file name matches; group ``group`` is the arch group
    (flash_attn_wheel_names.native owns the name)."""
    return _native.library_pattern()


@dataclass
class LibraryState:
    """What the loader found and did.

    Attributes:
        status: ``"not_built"`` (no library), ``"error"`` (found but unusable) or ``"ready"``.
        library: path of the native library, if found.
        build_info_path: path of its build info JSON, if found.
        build_info: the parsed build info, if readable.
        error: the error every kernel call raises; None when ready.
        kernels: the kernel set from the build info.
        dist_version: installed distribution version (local label included) for messages.
    """

    status: str = "not_built"
    library: Path | None = None
    build_info_path: Path | None = None
    build_info: dict[str, Any] | None = None
    error: FlashAttnError | None = None
    kernels: frozenset[_build_info.KernelKey] = field(default_factory=frozenset)
    dist_version: str | None = None
    binding: Any = None

    @property
    def ready(self) -> bool:
        return self.status == "ready"

    @property
    def head_dims(self) -> tuple[int, ...]:
        """Head dims the library's dispatch rounds a call's head dim up to (build info "head_dims")."""
        return tuple((self.build_info or {}).get("head_dims", ()))

    @property
    def kernel_set_name(self) -> str:
        return str((self.build_info or {}).get("kernel_set", "?"))


STATE = LibraryState()
_INITIALIZED = False
_DEVICE_VERDICTS: dict[int, _compat.DeviceVerdict] = {}


def _package_dirs() -> list[Path]:
    import flash_attn

    dirs = [Path(p) for p in getattr(flash_attn, "__path__", [])]
    here = Path(__file__).resolve().parent
    if here not in [d.resolve() for d in dirs]:
        dirs.append(here)
    return dirs


MANIFEST_ENV = _manifest_file.ENV


def checkout_group_names() -> list[str]:
    """The arch group names of the build manifest this source checkout builds with (its
    build-manifest.json, or ``$FLASH_ATTN_MANIFEST``), e.g. ``["blackwell", "legacy", "custom"]``;
    empty when there is none to read (an installed wheel ships no manifest: its build info says
    what it was built for)."""
    path = _manifest_file.path(Path(__file__).resolve().parent.parent)
    try:
        return [str(g["name"]) for g in json.loads(path.read_text(encoding="utf-8"))["arch_groups"]]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def not_built_message(dirs: Iterable[Path]) -> str:
    """Error text for a source checkout without a build (the groups it can build: the manifest's)."""
    where = ", ".join(str(d) for d in dirs) or "the flash_attn package folder"
    names = checkout_group_names()
    groups = f", group {'|'.join(names)}" if names else ""
    return (
        f"flash_attn's native library (_C_<group>.so or .pyd{groups}) is missing "
        f"from {where}: this is a source checkout that has not been built. Build it with `nox -s dev` "
        "(editable development install in .nox/dev) or `pip install .` (builds and installs a wheel; needs "
        f"the CUDA toolkit), install a released wheel, or point {LIBRARY_ENV} at a built _C_<group> library."
    )


def find_library(dirs: Iterable[Path], env_value: str | None = None) -> tuple[Path, Path, str] | None:
    """Locate the native library and its build info.

    Args:
        dirs: folders to search (the package folders), in order.
        env_value: value of ``FLASH_ATTN_LIB``; when set it wins over ``dirs``.

    Returns:
        ``(library path, build info path, group)`` or None when no library exists. The build info
        path is where the JSON must be; it may not exist.

    Raises:
        LibraryLoadError: ``FLASH_ATTN_LIB`` names no file, or one folder holds libraries of
            several arch groups (two wheels installed over each other).
    """
    if env_value:
        path = Path(env_value).expanduser()
        group = _native.library_group(path.name)
        if not path.is_file() or group is None:
            raise LibraryLoadError(
                f"{LIBRARY_ENV}={env_value} is not an existing _C_<group>.so/.pyd file; unset it or fix the path"
            )
        return path, path.with_name(_native.build_info_name(group)), group
    for folder in dirs:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        found = [(name, group) for name in names if (group := _native.library_group(name))]
        if not found:
            continue
        groups = sorted({group for _, group in found})
        if len(groups) > 1:
            raise LibraryLoadError(
                f"{folder} holds native libraries of several arch groups ({', '.join(n for n, _ in found)}); "
                "one wheel was installed over another. Uninstall flash_attn and install the one wheel for your GPU"
            )
        name, group = found[0]
        return Path(folder) / name, Path(folder) / _native.build_info_name(group), group
    return None


def _through_import_system(group: str, library: Path) -> Path:
    """Where the import system puts ``flash_attn._C_<group>`` (found, not imported), else ``library``.

    For an editable install (``nox -s dev``: scikit-build-core with ``editable.rebuild``) this
    lookup is what rebuilds the changed sources, and the answer is the freshly built library.
    """
    try:
        spec = importlib.util.find_spec(f"flash_attn._C_{group}")
    except Exception as exc:  # the editable rebuild failed
        raise LibraryLoadError(
            f"looking up flash_attn._C_{group} failed: {exc}. For an editable install (`nox -s dev`) this is the "
            "rebuild of the native library: fix the build error above and import again"
        ) from None
    if spec is not None and spec.origin and os.path.isfile(spec.origin):
        return Path(spec.origin)
    return library


def _fail(state: LibraryState, error: FlashAttnError, *, warn: bool) -> LibraryState:
    state.status = "error"
    state.error = error
    if warn:
        warnings.warn(str(error), RuntimeWarning, stacklevel=3)
    return state


def initialize(*, force: bool = False, warn: bool = True) -> LibraryState:
    """Find, check and load the native library (see the module doc); runs once unless ``force``.

    Never raises for a missing or unusable library: the error is kept in :data:`STATE` and
    raised by :func:`require_library` / :func:`require_ready` at the first kernel call.
    """
    global _INITIALIZED
    if _INITIALIZED and not force:
        return STATE
    _INITIALIZED = True
    from ._metadata import package_version

    state = STATE
    if state.binding is not None:  # re-initializing: drop the earlier fake registrations
        state.binding.close()
    state.__init__()  # reset in place: other modules hold a reference to STATE
    _rng.configure(None)
    _DEVICE_VERDICTS.clear()
    state.dist_version = package_version()
    dirs = _package_dirs()
    try:
        found = find_library(dirs, os.environ.get(LIBRARY_ENV))
    except LibraryLoadError as exc:
        return _fail(state, exc, warn=warn)
    if found is None:
        state.status = "not_built"
        state.error = LibraryNotBuiltError(not_built_message(dirs))
        return state
    state.library, state.build_info_path, group = found
    if not os.environ.get(LIBRARY_ENV):
        try:
            state.library = _through_import_system(group, state.library)
        except LibraryLoadError as exc:
            return _fail(state, exc, warn=warn)
        state.build_info_path = state.library.with_name(_native.build_info_name(group))
    if not state.build_info_path.is_file():
        return _fail(
            state,
            LibraryLoadError(
                f"found {state.library} but not its build info {state.build_info_path.name} beside it; the "
                "installation is incomplete: reinstall the wheel or rebuild (`nox -s dev` or `pip install .`)"
            ),
            warn=warn,
        )
    try:
        info = _build_info.read(state.build_info_path)
    except LibraryLoadError as exc:
        return _fail(state, exc, warn=warn)
    state.build_info = info
    state.kernels = _build_info.kernel_set(info)
    if info["group"] != group:
        return _fail(
            state,
            LibraryLoadError(
                f"{state.build_info_path} says group '{info['group']}' but the library is {state.library.name}; "
                "reinstall the wheel or rebuild"
            ),
            warn=warn,
        )

    mismatch = _compat.check_torch(
        info,
        torch.__version__,
        torch.version.cuda,
        _cxx11_abi(),
        dist_version=state.dist_version,
    )
    if mismatch is not None:
        return _fail(state, TorchMismatchError(mismatch), warn=warn)

    try:
        torch.ops.load_library(str(state.library))
    except Exception as exc:  # OSError from dlopen/LoadLibrary, or a registration error
        # torch re-raises dlopen's error as "Could not load this library"; the reason is its cause.
        reason = str(exc.__cause__ or exc)
        if _NOT_A_LIBRARY_RE.search(reason):  # the file itself is no library: keep the loader's reason
            return _fail(
                state,
                LibraryLoadError(
                    f"{state.library} is not a loadable shared library: {reason}. Point {LIBRARY_ENV} at a built "
                    "_C_<group> library, or reinstall the wheel"
                ),
                warn=warn,
            )
        needs = (
            f"a torch >= {info.get('torch_min')} (stable ABI)"
            if _build_info.is_stable(info)
            else f"torch {info['torch_version']}"
        )
        return _fail(
            state,
            LibraryLoadError(
                f"loading {state.library} failed: {reason}. The build info says it needs {needs} "
                f"with CUDA {info['torch_cuda_version']}; a missing CUDA runtime "
                "library or a torch other than that one are the usual causes. Reinstall the matching wheel "
                "or rebuild (`nox -s dev` or `pip install .`)"
            ),
            warn=warn,
        )
    try:
        state.binding = _ops.bind("flash_attn")
    except LibraryLoadError as exc:
        return _fail(state, exc, warn=warn)
    _compare_compiled_build_info(state)
    _rng.configure(state.build_info)
    state.status = "ready"
    state.error = None
    return state


def _cxx11_abi() -> bool | None:
    try:
        return bool(torch.compiled_with_cxx11_abi())
    except Exception:  # pragma: no cover - very old or unusual torch builds
        return None


def _compare_compiled_build_info(state: LibraryState) -> None:
    """Warn when the JSON beside the library disagrees with the one compiled into it."""
    try:
        compiled = _build_info.parse(_ops.build_info_json(), source="the library's compiled build info")
    except Exception:
        return
    assert state.build_info is not None
    differing = [
        key
        for key in ("group", "sass", "ptx_arch", "torch_version", "torch_abi", "torch_min", "kernel_set", "kernels")
        if compiled.get(key) != state.build_info.get(key)
    ]
    if differing:
        warnings.warn(
            f"{state.build_info_path} differs from the build info compiled into {state.library} in "
            f"{', '.join(differing)}; using the compiled one. Reinstall the wheel or rebuild to fix the file.",
            RuntimeWarning,
            stacklevel=4,
        )
        state.build_info = compiled
        state.kernels = _build_info.kernel_set(compiled)


def _raise(error: FlashAttnError) -> None:
    # A fresh instance per raise: re-raising one object would chain every earlier traceback.
    raise type(error)(str(error))


def require_library() -> LibraryState:
    """Return the state of a loaded library, or raise the error recorded by :func:`initialize`.

    Raises:
        LibraryNotBuiltError: source checkout without a build.
        TorchMismatchError: the running torch is not the one the library was built against.
        LibraryLoadError: the library or its build info is broken or failed to load.
    """
    state = STATE
    if not state.ready:
        _raise(state.error or LibraryNotBuiltError(not_built_message(_package_dirs())))
    return state


def device_verdict(device_index: int) -> _compat.DeviceVerdict:
    """Whether the loaded build runs on CUDA device ``device_index`` (cached per device)."""
    verdict = _DEVICE_VERDICTS.get(device_index)
    if verdict is None:
        state = require_library()
        assert state.build_info is not None
        capability = torch.cuda.get_device_capability(device_index)
        name = torch.cuda.get_device_name(device_index)
        verdict = _compat.check_device(
            state.build_info,
            capability,
            name,
            device_index=device_index,
            dist_version=state.dist_version,
        )
        _DEVICE_VERDICTS[device_index] = verdict
    return verdict


@constant_result
def require_ready(device_index: int) -> bool:
    """Raise unless kernels can run on CUDA device ``device_index``; return True otherwise.

    ``torch.compile`` evaluates this once while tracing (it is marked constant), so compiled
    graphs carry no check.

    Raises:
        LibraryNotBuiltError, TorchMismatchError, LibraryLoadError: see :func:`require_library`.
        UnsupportedGPUError: the GPU's compute capability is not covered by this wheel; the message
            names the GPU, its capability, this wheel's group and the wheel to install.
    """
    require_library()
    verdict = device_verdict(device_index)
    if not verdict.ok:
        raise UnsupportedGPUError(verdict.message)
    return True
