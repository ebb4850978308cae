"""Fault injection (issue 28): every probe of the 2026-12-02 reliability run, replayed on CPU.

Each probe damages something on purpose (a kill at a chosen point, two sessions at once, a
damaged input, a path that cannot be written, a non-ASCII root) and checks what the user is
promised (docs/release.md#what-is-guaranteed): no input is lost or changed, no output is left
corrupt (it is either absent or verifies), a refusal is one ``error:`` line, never a traceback.
No real compile runs: the "compilers" are small Python processes that behave like Ninja and nvcc
(their own process groups below the build command), and the toolchain probe is a fake.

Kills land at points picked by seeded random numbers among the filesystem writes a step makes
(copy, rename, replace, mkdir, file writes), so every run kills at the same places. The counts
of probes, lost inputs, corrupt outputs, paths written outside the output, tracebacks and internal
errors (fault_probes.py) are printed at the end of the test run (conftest.py), and must all be 0
but the first. Cost: about 20 s on 2 cores.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import pytest
from fault_probes import Probe
from release_fakes import build_info, make_wheel, validation_report
from test_release_archives import SET, make_shard

from release import checksums, locks, procs
from release.archive import archives
from release.compile import build_dirs, options, tagging, toolchain
from release.compile.toolchain import Toolchain
from release.errors import ReleaseError
from release.sessions import wheels
from release.ship import publish, smoke

SRC = Path(archives.__file__).resolve().parents[2]  # the src/ the children import release from
GOOD = Toolchain("/usr/bin/nvcc", "13.0.88", sys.executable, "2.14.1+cu130", "13.0", True, "gcc", "12.2.0", "c++")
LINUX = sys.platform.startswith("linux")


@pytest.fixture
def session_env(monkeypatch, tmp_path):
    """A wheel session's surroundings without a real toolchain or build."""
    for name in list(os.environ):
        if name.startswith("FLASH_ATTN_"):
            monkeypatch.delenv(name)
    monkeypatch.setattr(toolchain, "probe", lambda: GOOD)

    def no_build(*a, **k):
        raise AssertionError("a build was started")

    monkeypatch.setattr(wheels.builder, "run_build", no_build)
    monkeypatch.setattr(archives.builder, "run_streamed", no_build)
    return tmp_path


def shards(root: Path, names=("artifact-a", "artifact-b")) -> list[Path]:
    """Two shard archives of one split under `root`, each in a folder named `names` (as CI's artifacts
    are downloaded: shards/<artifact>/kernels-...-shardKofN)."""
    made = [make_shard(root / "made", 1, 2, SET[:1]), make_shard(root / "made", 2, 2, SET[1:])]
    out = []
    for folder, name in zip(made, names, strict=True):
        (root / name).mkdir(parents=True, exist_ok=True)
        folder.rename(root / name / folder.name)
        out.append(root / name / folder.name)
    return out


def gathered_name(inputs: list[Path], scratch: Path) -> str:
    """The folder name gather gives these shards (derived from the archive key), learnt in `scratch`."""
    return archives.gather(inputs, scratch).name


def archive_ok(path: Path) -> bool:
    """A kernels archive folder that loads and whose objects verify."""
    try:
        archives.verify_objects(archives.load(path))
    except ReleaseError:
        return False
    return True


# -- finding 1: an input is never overwritten ------------------------------------------------------


def test_gather_never_replaces_an_input_shard(tmp_path, capsys):
    name = gathered_name(shards(tmp_path / "first"), tmp_path / "scratch")
    inputs = shards(tmp_path / "dir" / name)  # the shards lie inside the folder gather would replace
    p = Probe(*inputs)
    code = archives.main(["gather", *map(str, inputs), "--out", str(tmp_path / "dir")])
    text = p.one_error(capsys.readouterr().err, code)
    assert "is or holds the input" in text and str(inputs[0]) in text


@pytest.mark.parametrize("where", ["same", "inside"])
def test_gather_refuses_an_out_that_is_or_lies_in_an_input(tmp_path, capsys, where):
    inputs = shards(tmp_path)
    p = Probe(*inputs)
    out = inputs[1] if where == "same" else inputs[1] / "objects"
    code = archives.main(["gather", *map(str, inputs), "--out", str(out)])
    assert "lies inside, the input" in p.one_error(capsys.readouterr().err, code)


def test_an_existing_folder_that_is_not_an_archive_of_that_kind_is_never_replaced(tmp_path, capsys):
    inputs = shards(tmp_path / "in")
    name = gathered_name(inputs, tmp_path / "scratch")
    user = tmp_path / "out" / name
    user.mkdir(parents=True)
    (user / "notes.txt").write_text("mine\n")
    p = Probe(*inputs, user)
    code = archives.main(["gather", *map(str, inputs), "--out", str(tmp_path / "out")])
    assert "is not an earlier kernels archive" in p.one_error(capsys.readouterr().err, code)
    # this tool's own earlier archive of the same kind is replaced, and the message says so
    user.rename(tmp_path / "moved")
    assert archives.main(["gather", *map(str, inputs), "--out", str(tmp_path / "out")]) == 0
    assert archives.main(["gather", *map(str, inputs), "--out", str(tmp_path / "out")]) == 0
    assert "replaced the earlier kernels archive" in capsys.readouterr().out
    p.output_ok(archive_ok(tmp_path / "out" / name), "gathered archive")


# -- kills at seeded points: no input lost, the output absent or whole, a rerun works ---------------

_RUNNER = textwrap.dedent(
    """
    import os, shutil, signal, sys, pathlib
    kill_at, count_file = int(sys.argv[1]), sys.argv[2]
    n = [0]
    def counted(fn):
        def wrapper(*a, **k):
            n[0] += 1
            if n[0] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return fn(*a, **k)
        return wrapper
    for mod, name in ((shutil, "copyfile"), (os, "replace"), (os, "rename"), (os, "mkdir"), (os, "chmod"),
                      (pathlib.Path, "write_text"), (pathlib.Path, "rename")):
        setattr(mod, name, counted(getattr(mod, name)))
    from release.archive import archives
    from release.ship import publish
    module = {"archives": archives, "publish": publish}[sys.argv[3]]
    code = module.main(sys.argv[4:])
    pathlib.Path(count_file).write_text(str(n[0]))
    sys.exit(code)
    """
)


def run_killed(tmp_path: Path, kill_at: int, module: str, *args: str) -> tuple[subprocess.CompletedProcess, int]:
    """Run release.<module>.main(args) in a child that SIGKILLs itself at its `kill_at`-th write (0: never)."""
    count = tmp_path / f"count-{kill_at}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-c", _RUNNER, str(kill_at), str(count), module, *args],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    return proc, int(count.read_text()) if count.exists() else -1


def kill_points(tmp_path: Path, module: str, args: list[str], seed: int, n: int = 4) -> list[int]:
    """`n` write numbers, picked with `seed` among the writes of one clean run (in a scratch copy)."""
    proc, total = run_killed(tmp_path, 0, module, *args)
    assert proc.returncode == 0 and total > 0, proc.stderr
    return sorted(random.Random(seed).sample(range(1, total + 1), min(n, total)))


@pytest.mark.parametrize("seed", [0, 1])
def test_gather_killed_at_seeded_points(tmp_path, seed):
    inputs = shards(tmp_path / "in")
    out = tmp_path / "out"
    scratch = tmp_path / "scratch"
    points = kill_points(tmp_path, "archives", ["gather", *map(str, inputs), "--out", str(scratch)], seed)
    final = out / gathered_name(inputs, tmp_path / "names")
    for point in points:
        p = Probe(*inputs)
        proc, _ = run_killed(tmp_path, point, "archives", "gather", *map(str, inputs), "--out", str(out))
        assert proc.returncode == -signal.SIGKILL, (point, proc.stderr)
        p.inputs_kept()
        p.output_ok(not final.exists() or archive_ok(final), f"{final} after a kill at write {point}")
    rerun, _ = run_killed(tmp_path, 0, "archives", "gather", *map(str, inputs), "--out", str(out))
    assert rerun.returncode == 0, rerun.stderr
    assert archive_ok(final)
    left = [q.name for q in out.iterdir() if q.is_dir() and q.name.startswith(f".{final.name}.")]
    p.output_ok(not left, f"temporary folders of killed gathers left beside {final}: {left}")  # issue 34


def release_inputs(tmp_path: Path) -> tuple[Path, Path]:
    house, reports = tmp_path / "wheelhouse", tmp_path / "reports"
    wheel = tagging.retag(make_wheel(tmp_path / "raw", group="legacy", info=build_info("legacy")), house)
    checksums.write_sidecar(wheel)
    reports.mkdir()
    validation_report(reports, wheel)  # tools/validate.py's writer: a report the release's schema accepts
    return house, reports


def release_ok(folder: Path) -> bool:
    try:
        publish.verify_release(folder)
    except ReleaseError:
        return False
    return True


def test_release_killed_at_seeded_points(tmp_path):
    house, reports = release_inputs(tmp_path)
    args = ["--wheels", str(house), "--reports", str(reports)]
    points = kill_points(tmp_path, "publish", [*args, "--out", str(tmp_path / "scratch")], seed=2)
    out = tmp_path / "dist" / "release"
    for point in points:
        p = Probe(house, reports)
        proc, _ = run_killed(tmp_path, point, "publish", *args, "--out", str(out))
        assert proc.returncode == -signal.SIGKILL, (point, proc.stderr)
        p.inputs_kept()
        p.output_ok(not out.exists() or release_ok(out), f"{out} after a kill at write {point}")
    rerun, _ = run_killed(tmp_path, 0, "publish", *args, "--out", str(out))
    assert rerun.returncode == 0 and release_ok(out), rerun.stderr


# -- finding 2: one session per build folder and per release folder --------------------------------

_HOLDER = textwrap.dedent(
    """
    import sys, pathlib, time
    from release import locks
    how, target, ready = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
    with (locks.hold_build_folder(target) if how == "build" else locks.hold_output(target)):
        ready.write_text("held")
        sys.stdin.read()  # until the test closes stdin
    """
)


def wait_for(path: Path, proc: subprocess.Popen | None = None) -> None:
    """Wait until `path` exists (a child's signal that it is ready); fails if the child ended first."""
    deadline = time.monotonic() + 60
    while not path.exists():
        assert proc is None or proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def start_holder(tmp_path: Path, how: str, target: Path) -> subprocess.Popen:
    ready = tmp_path / f"ready-{how}"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, how, str(target), str(ready)], stdin=subprocess.PIPE,
                            env=env, text=True)  # fmt: skip
    wait_for(ready, proc)
    return proc


def test_a_second_session_in_a_build_folder_is_refused_with_the_holder(session_env, capsys):
    archive = archives.gather(shards(session_env / "in"), session_env / "k")
    folder = build_dirs.build_dir(session_env / "b", "legacy", "ci", GOOD, [], None)  # the wheel session's folder
    holder = start_holder(session_env, "build", folder)
    try:
        p = Probe(archive)
        argv = ["--arch-group", "legacy", "--kernel-set", "ci", "--build-root", str(session_env / "b")]
        code = wheels.main([*argv, "--kernels", str(archive), "--out", str(session_env / "w")])
        text = p.one_error(capsys.readouterr().err, code)
        assert f"build folder {folder} is in use by another session: PID {holder.pid}" in text
        assert "-c" in text and "--build-root" in text  # the holder's command, and what to do
    finally:
        holder.communicate("")
    with locks.hold_build_folder(folder):  # free again once the holder ended
        pass


def test_two_release_sessions_into_one_out_never_collide(tmp_path, capsys):
    house, reports = release_inputs(tmp_path)
    out = tmp_path / "dist" / "release-x"
    holder = start_holder(tmp_path, "output", out)
    try:
        p = Probe(house, reports)
        code = publish.main(["--wheels", str(house), "--reports", str(reports), "--out", str(out)])
        text = p.one_error(capsys.readouterr().err, code)
        assert f"PID {holder.pid}" in text and "in use by another session" in text
        assert not out.exists()
    finally:
        holder.communicate("")
    assert publish.main(["--wheels", str(house), "--reports", str(reports), "--out", str(out)]) == 0
    assert release_ok(out)


# -- finding 3: compiles end with their session ------------------------------------------------------

# A build command shaped like `cmake --build` -> Ninja -> nvcc: it starts a "compiler" in a process
# group of its own (as Ninja does), which writes its PID and then runs until stopped.
_FAKE_BUILD = textwrap.dedent(
    """
    import os, subprocess, sys, time, pathlib
    pid_file = pathlib.Path(sys.argv[1])
    code = "import os, pathlib, sys, time; pathlib.Path(sys.argv[1]).write_text(str(os.getpid())); time.sleep(600)"
    child = subprocess.Popen([sys.executable, "-c", code, str(pid_file)], preexec_fn=lambda: os.setpgid(0, 0))
    print("[1/2] compiling fwd_hdim64_fp16", flush=True)
    child.wait()
    """
)
_SESSION = textwrap.dedent(
    """
    import sys, pathlib
    from release import errors, locks
    from release.compile import builder
    folder, fake, pid_file = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    def body():
        with locks.hold_build_folder(folder):
            builder.run_streamed([sys.executable, fake, pid_file], folder, what="the fake build")
    sys.exit(errors.run_main(body, prog="fake-session"))
    """
)


def start_session(tmp_path: Path, folder: Path) -> tuple[subprocess.Popen, int]:
    """A session running the fake build in `folder`; returns it and its compiler's PID once that runs."""
    fake = tmp_path / "fake_build.py"
    fake.write_text(_FAKE_BUILD)
    pid_file = tmp_path / "compiler.pid"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.Popen([sys.executable, "-c", _SESSION, str(folder), str(fake), str(pid_file)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    wait_for(pid_file, proc)
    while not pid_file.read_text():
        time.sleep(0.05)
    return proc, int(pid_file.read_text())


@pytest.mark.skipif(not LINUX, reason="finds the compilers by session id in /proc (Linux)")
def test_sigterm_stops_the_compiles_of_the_session(tmp_path):
    p = Probe()
    session, compiler = start_session(tmp_path, tmp_path / "b")
    assert procs.alive(compiler)
    session.send_signal(signal.SIGTERM)
    _, err = session.communicate(timeout=60)
    assert session.returncode == 143 and "terminated (SIGTERM)" in err and "Traceback" not in err, err
    p.output_ok(not procs.alive(compiler), "a compiler outlived its session")


@pytest.mark.skipif(not LINUX, reason="finds the compilers by session id in /proc (Linux)")
def test_after_a_sigkill_the_next_session_stops_the_compilers_left_running(tmp_path, capsys):
    folder = tmp_path / "b"
    p = Probe()
    session, compiler = start_session(tmp_path, folder)
    session.kill()
    session.communicate()
    try:
        assert procs.alive(compiler)  # SIGKILL cannot be caught: the compiler runs on, parent gone
        with locks.hold_build_folder(folder):
            err = capsys.readouterr().err
            assert f"taking over the lock of build folder {folder} from PID {session.pid}" in err, err
            assert "stopped 2 process(es) of its build" in err, err  # the fake Ninja and its compiler
            p.output_ok(not procs.alive(compiler), "a compiler of the killed session still runs")
    finally:
        if procs.alive(compiler):
            os.kill(compiler, signal.SIGKILL)


# -- findings 4, 5: options in their real ranges ----------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kernel-set", ""], "--kernel-set was given an empty value"),
        (["--kernel-set", " "], "--kernel-set was given an empty value"),
        (["--rescale-threshold", "100"], "number from 0 to below 16"),
        (["--rescale-threshold", "16"], "number from 0 to below 16"),
        (["--rescale-threshold", ""], "--rescale-threshold was given an empty value"),
    ],
)
def test_options_outside_their_range_are_refused(session_env, capsys, args, message):
    p = Probe()
    code = wheels.main(["--arch-group", "legacy", "--build-root", str(session_env / "b"), *args])
    assert message in p.one_error(capsys.readouterr().err, code)
    assert not (session_env / "b").exists()


# -- finding 6: non-ASCII and space roots -------------------------------------------------------------


def test_non_ascii_roots_gather_and_lock(tmp_path):
    inputs = shards(tmp_path / "ïn pütß")
    p = Probe(*inputs)
    out = archives.gather(inputs, tmp_path / "b röt ü" / "kernels")
    p.output_ok(archive_ok(out), "archive under a non-ASCII root")
    with locks.hold_build_folder(tmp_path / "b röt ü" / "kernels-legacy-ci"):
        pass
    options.check_build_root(tmp_path / "b röt ü")  # accepted on Linux (refused up front on Windows)
    p.inputs_kept()


# -- findings 7, 8: unwritable paths and damaged inputs are one error: line ---------------------------


def _a_file(tmp_path: Path) -> Path:
    f = tmp_path / "a-file"
    f.write_text("not a folder\n")
    return f


# A path no process can write, root included (the tests run as root in CI, where chmod does not stop
# a write): a folder under a file, and /proc, which refuses new files to everyone.
UNWRITABLE = [lambda t: _a_file(t), lambda t: _a_file(t) / "sub"]
if LINUX and Path("/proc/self").is_dir():
    UNWRITABLE.append(lambda t: Path("/proc/flash_attn_probe"))


@pytest.mark.parametrize("bad", UNWRITABLE)
def test_an_unwritable_build_root_is_one_error(session_env, capsys, bad):
    p = Probe()
    code = wheels.main(["--arch-group", "legacy", "--kernel-set", "ci", "--build-root", str(bad(session_env))])
    assert "--build-root" in p.one_error(capsys.readouterr().err, code)


@pytest.mark.parametrize("bad", UNWRITABLE)
def test_an_unwritable_kernels_out_is_refused_before_the_build(session_env, capsys, bad):
    p = Probe()
    argv = ["build", "--arch-group", "legacy", "--kernel-set", "ci", "--build-root", str(session_env / "b")]
    code = archives.main([*argv, "--out", str(bad(session_env))])
    assert "kernels output folder" in p.one_error(capsys.readouterr().err, code)


@pytest.mark.parametrize("bad", UNWRITABLE)
def test_an_unwritable_gather_out_is_one_error(tmp_path, capsys, bad):
    inputs = shards(tmp_path / "in")
    p = Probe(*inputs)
    code = archives.main(["gather", *map(str, inputs), "--out", str(bad(tmp_path))])
    assert "kernels output folder" in p.one_error(capsys.readouterr().err, code)


def test_an_unwritable_sdist_cache_is_named_as_such(session_env, capsys, monkeypatch):
    monkeypatch.setenv("FLASH_ATTN_CACHE_DIR", str(_a_file(session_env) / "cache"))
    p = Probe()
    code = wheels.main(["--arch-group", "legacy", "--kernel-set", "ci", "--build-root", str(session_env / "b")])
    text = p.one_error(capsys.readouterr().err, code)
    assert "sdist download cache" in text and "FLASH_ATTN_CACHE_DIR" in text and "offline" not in text


def rewrite_wheel(wheel: Path, drop: str | None = None, edit: tuple[str, bytes] | None = None) -> Path:
    """A copy of `wheel` without the member ending in `drop`, or with member `edit[0]`'s bytes replaced."""
    out = wheel.with_name(wheel.name.replace(".whl", "") + ".whl")
    tmp = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tmp, "w") as dst:
        for info in src.infolist():
            if drop and info.filename.endswith(drop):
                continue
            data = edit[1] if edit and info.filename.endswith(edit[0]) else src.read(info)
            dst.writestr(info, data)
    tmp.replace(out)
    return out


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ({"drop": "/METADATA"}, "has no flash_attn-"),
        ({"edit": ("/RECORD", b"flash_attn/__init__.py\n")}, "is not 'path,hash,size'"),
        ({"edit": ("/RECORD", b"flash_attn/__init__.py,sha256=x,12x\n")}, "is not 'path,hash,size'"),
    ],
)
def test_smoke_on_a_damaged_wheel_is_one_error(tmp_path, capsys, damage, message):
    wheel = tagging.retag(make_wheel(tmp_path / "raw", group="legacy", info=build_info("legacy")), tmp_path / "w")
    rewrite_wheel(wheel, **damage)
    p = Probe(wheel)
    code = smoke.main([str(wheel), "--no-deps"])
    assert message in p.one_error(capsys.readouterr().err, code)


@pytest.mark.parametrize(
    ("reports", "message"),
    [
        (lambda r: r.mkdir() or (r / "validation-x.json").write_text("[1, 2]"), "holds a JSON list"),
        (lambda r: None, "does not exist"),
        (lambda r: r.write_text("{}"), "is a file"),
    ],
)
def test_release_with_bad_reports_is_one_error(tmp_path, capsys, reports, message):
    house, _ = release_inputs(tmp_path)
    folder = tmp_path / "bad-reports"
    reports(folder)
    p = Probe(house, folder)
    code = publish.main(["--wheels", str(house), "--reports", str(folder), "--out", str(tmp_path / "rel")])
    assert message in p.one_error(capsys.readouterr().err, code)
    assert not (tmp_path / "rel").exists()


# -- finding 9: outputs get the umask's permissions ----------------------------------------------------


@pytest.mark.skipif(os.name == "nt", reason="POSIX permission bits")
def test_outputs_get_the_umask_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        p = Probe()
        archive = archives.gather(shards(tmp_path / "in"), tmp_path / "k")
        house, reports = release_inputs(tmp_path)
        rel = publish.assemble([house], reports, tmp_path / "rel")
        wheel, sidecar = wheels.publish(next(house.glob("*.whl")), tmp_path / "wh")
        modes = {p: p.stat().st_mode & 0o777 for p in (archive, rel, wheel, sidecar)}
        p.output_ok(modes == {archive: 0o755, rel: 0o755, wheel: 0o644, sidecar: 0o644}, f"modes {modes}")
    finally:
        os.umask(old)


# -- finding 10: messages ------------------------------------------------------------------------------


def edited(folder: Path, **changes) -> Path:
    manifest = json.loads((folder / archives.MANIFEST_NAME).read_text())
    for name, value in changes.items():
        if name == "field":
            manifest["fields"]["definitions"] = value
        else:
            manifest[name] = value
    (folder / archives.MANIFEST_NAME).write_text(json.dumps(manifest))
    return folder


@pytest.mark.parametrize("change", [{"key": "0" * 64}, {"field": "FLASH_ATTN_RESCALE_THRESHOLD=100.0f"}])
def test_gather_refuses_an_edited_manifest_by_name(tmp_path, capsys, change):
    inputs = shards(tmp_path / "in")
    edited(inputs[1], **change)
    p = Probe(*inputs)
    code = archives.main(["gather", *map(str, inputs), "--out", str(tmp_path / "out")])
    text = p.one_error(capsys.readouterr().err, code)
    assert str(inputs[1]) in text and "was edited or damaged" in text
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_linking_an_edited_archive_is_refused_before_the_build(session_env, capsys):
    archive = archives.gather(shards(session_env / "in"), session_env / "k")
    edited(archive, key="f" * 64)
    p = Probe(archive)
    argv = ["--arch-group", "legacy", "--kernel-set", "ci", "--build-root", str(session_env / "b")]
    code = wheels.main([*argv, "--kernels", str(archive), "--out", str(session_env / "w")])
    assert "was edited or damaged" in p.one_error(capsys.readouterr().err, code)


def test_an_unexpected_error_is_one_line_without_traceback_unless_verbose(capsys):
    from release.errors import EXIT_INTERNAL, run_main

    def bug():
        raise KeyError("x")

    p = Probe()
    code = run_main(bug, argv=[])
    assert "internal error" in p.one_error(capsys.readouterr().err, code, EXIT_INTERNAL)
    assert run_main(bug, argv=["-v"]) == EXIT_INTERNAL and "Traceback" in capsys.readouterr().err


def test_an_os_error_a_step_did_not_foresee_is_one_error_with_its_path(capsys):
    from release.errors import run_main

    def step():
        raise PermissionError(13, "Permission denied", "/some/out")

    p = Probe()
    code = run_main(step, argv=[])
    assert "Permission denied ('/some/out')" in p.one_error(capsys.readouterr().err, code)


@pytest.mark.parametrize("session", ["archive_gather", "kernels_gather"])
def test_a_failed_nox_session_exits_1_with_the_step_s_status_and_one_error_line(tmp_path, session):
    # nox exits 1 for any failed session (nox/tasks.py final_reduce) and prints the step's own status
    # in "Command ... failed with exit code N"; docs/release.md#exit-status says both. The deprecated
    # name (kernels_gather) runs the same thing after one line that names the new one.
    nox = shutil.which("nox")
    assert nox, "nox runs these tests (nox -s tests); put it on PATH"
    p = Probe()
    root = Path(archives.__file__).resolve().parents[3]
    proc = subprocess.run([nox, "-f", str(root / "noxfile.py"), "-s", session, "--", str(tmp_path / "none")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)  # fmt: skip
    text = p.one_error(proc.stdout + proc.stderr, proc.returncode, 1)
    assert "failed with exit code 2" in text and "does not exist" in text
    notice = "nox -s kernels_gather is renamed nox -s archive_gather; this alias goes in the next release"
    assert (proc.stdout + proc.stderr).count(notice) == (session == "kernels_gather")
    readme = " ".join((root / "README.md").read_text(encoding="utf-8").split())
    assert "a failed `nox -s` session exits 1" in readme  # what the README promises is what nox does
