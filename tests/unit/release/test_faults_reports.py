"""Fault injection (issue 34): the GPU reports a release rests on, malformed, empty, failing or hostile.

`nox -s release` (release.ship.publish) must refuse a release whose validation report or
upstream-tests summary does not validate against its schema (release.ship.reports) or names
another wheel, with one ``error:`` line and exit 2, no release folder, and its inputs unchanged.
The reports accepted here are written by the real writers (tools/validate.py's finish and
write_report; the upstream-tests pytest plugin). Hypothesis generates hostile reports and report
bytes (bounded, derandomized, so CI is reproducible); every example is a probe counted in the
fault-injection summary line (fault_probes.COUNTS, printed by conftest.py). Cost: about 15 s.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from fault_probes import Probe
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from release_fakes import build_info, make_wheel, validation_report

from release import checksums
from release.compile import tagging
from release.errors import ReleaseError
from release.ship import publish, reports

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],  # tmp_path, capsys: each example uses its own folder
)


@pytest.fixture
def house(tmp_path) -> Path:
    """A wheelhouse of one tagged legacy wheel with its .sha256."""
    wheel = tagging.retag(make_wheel(tmp_path / "raw", group="legacy", info=build_info("legacy")), tmp_path / "wh")
    checksums.write_sidecar(wheel)
    return wheel.parent


def the_wheel(house: Path) -> Path:
    return next(house.glob("*.whl"))


def good_report(house: Path, folder: Path) -> Path:
    return validation_report(folder, the_wheel(house))


def release(house: Path, folder: Path, out: Path, capsys, *extra: str) -> tuple[int, str]:
    """publish.main on `house` and the reports `folder` as one probe: (exit status, stderr)."""
    p = Probe(house, folder)
    code = publish.main(["--wheels", str(house), "--reports", str(folder), "--out", str(out), *extra])
    err = capsys.readouterr().err
    if code != 0:
        err = p.one_error(err, code)
        p.output_ok(not out.exists(), f"{out} was created by a refused release")
    p.inputs_kept()
    return code, err


def edit(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


# -- the writers' own reports validate ----------------------------------------------------------------


def test_a_report_of_the_real_writer_validates_and_ships(tmp_path, house, capsys):
    jpath = good_report(house, tmp_path / "reports")
    data = reports.read(jpath)
    assert data["report_schema"] == reports.VALIDATION and reports.problems(data, reports.VALIDATION) == []
    assert data["context"]["wheel"]["label"] == "cu130torch2.14.1cxx11abitrue.legacy.rev1"
    code, err = release(house, tmp_path / "reports", tmp_path / "rel", capsys)
    assert code == 0, err
    assert (tmp_path / "rel" / jpath.name).is_file() and (tmp_path / "rel" / jpath.with_suffix(".md").name).is_file()


def test_a_report_of_the_gpu_suite_in_lab_evidence_validates_once_it_names_the_wheel(house):
    """The shape tools/validate.py writes on a GPU (an H200 run, before this schema): with the schema
    version and the wheel's label added, nothing else in it is refused (latency rows count as measured)."""
    evidence = Path(__file__).resolve().parents[3] / "lab" / "evidence" / "h200-2026-12-01"
    report = reports.read(evidence / "validation-2.9.2.post1-sm90.json")
    assert report["counts"]["measured"] and "report_schema" not in report
    assert "'report_schema' is a required property" in reports.problems(report, reports.VALIDATION)
    report["report_schema"] = reports.VALIDATION
    report["context"]["wheel"]["label"] = "cu130torch2.14.1cxx11abitrue.legacy.rev1"
    assert reports.problems(report, reports.VALIDATION) == []


def upstream_summary(tmp_path: Path, wheel: Path, fail: bool = False) -> Path:
    """upstream_tests.json as the plugin writes it, for a pytest run of two cases (one fails when `fail`)."""
    from release.ship import upstream_tests

    tests = tmp_path / "case" / "test_shape.py"
    tests.parent.mkdir(parents=True, exist_ok=True)
    tests.write_text(
        textwrap.dedent(
            f"""
            import pytest

            @pytest.mark.parametrize("d", [64, 128])
            def test_attention(d):
                assert not ({fail} and d == 128)
            """
        )
    )
    summary = tmp_path / "reports" / "upstream_tests.json"
    summary.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pytest", "-p", "release.ship.upstream_tests_plugin", str(tests), "-q"]
    cmd += ["-p", "no:cacheprovider", "--fa-head-dims=64,128", f"--fa-summary={summary}"]
    cmd += [f"--fa-wheel-{k}={v}" for k, v in upstream_tests.wheel_facts(wheel).items()]
    proc = subprocess.run(cmd, cwd=tests.parent, capture_output=True, text=True)
    assert proc.returncode == (1 if fail else 0), proc.stdout + proc.stderr
    return summary


def test_the_upstream_tests_summary_of_the_real_plugin_validates_and_ships(tmp_path, house, capsys):
    good_report(house, tmp_path / "reports")
    summary = upstream_summary(tmp_path, the_wheel(house))
    assert reports.problems(reports.read(summary), reports.UPSTREAM_TESTS) == []
    code, err = release(house, tmp_path / "reports", tmp_path / "rel", capsys)
    assert code == 0, err
    assert (tmp_path / "rel" / "upstream_tests.json").is_file()


def test_a_failing_upstream_tests_summary_is_refused(tmp_path, house, capsys):
    good_report(house, tmp_path / "reports")
    upstream_summary(tmp_path, the_wheel(house), fail=True)
    code, err = release(house, tmp_path / "reports", tmp_path / "rel", capsys)
    assert code == 2 and "upstream_tests.json: at total.failed: 1 is greater than the maximum of 0" in err, err


# -- the examples: each shipped with exit 0 before the schema -----------------------------------


BAD_REPORTS = [
    # (what, change to a good report, words of the refusal)
    ("no counts", lambda r: r.pop("counts"), "'counts' is a required property"),
    ("passed: 0", lambda r: r["counts"].update(passed=0), "at counts.passed: 0 is less than the minimum of 1"),
    ("failed under another spelling", lambda r: r["counts"].update(failed=12), "'failed' was unexpected"),
    ("counts as text", lambda r: r["counts"].update(passed="30"), "at counts.passed: '30' is not of type 'integer'"),
    ("failing", lambda r: r["counts"].update(FAILED=2), "2 failed case(s)"),
    ("empty", lambda r: r.clear(), "names no wheel"),
    ("counts not the rows", lambda r: r["counts"].update(passed=300), "do not match its case rows"),
    ("no wheel recorded", lambda r: r["context"].pop("wheel"), "at context: 'wheel' is a required property"),
    ("another file", lambda r: r["context"]["wheel"].update(sha256="0" * 64), "measured on another file"),
    ("another label", lambda r: r["context"]["wheel"].update(label="cu130.x"), "names the label 'cu130.x'"),
    ("a setup error", lambda r: r.update(error="no GPU"), "holds a setup error, the suite did not run: no GPU"),
    ("old schema", lambda r: r.pop("report_schema"), "'report_schema' is a required property"),
]


@pytest.mark.parametrize(("change", "words"), [b[1:] for b in BAD_REPORTS], ids=[b[0] for b in BAD_REPORTS])
def test_a_malformed_empty_or_failing_report_is_refused(tmp_path, house, capsys, change, words):
    edit(good_report(house, tmp_path / "reports"), change)
    code, err = release(house, tmp_path / "reports", tmp_path / "rel", capsys)
    assert code == 2 and words in err, err


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('{"counts": NaN}', "NaN is not a JSON number"),
        ("[" * 100_000, "is not valid JSON"),
        (b"\xff\xfe{}", "is not valid JSON"),
        ("[1, 2]", "holds a JSON list"),
    ],
)
def test_report_bytes_that_are_no_report_are_one_error(tmp_path, house, capsys, text, words):
    folder = tmp_path / "reports"
    good_report(house, folder)
    bad = folder / "validation-x.json"
    bad.write_bytes(text if isinstance(text, bytes) else text.encode())
    code, err = release(house, folder, tmp_path / "rel", capsys)
    assert code == 2 and words in err, err


def test_allow_missing_reports_never_lets_a_bad_one_through(tmp_path, house, capsys):
    edit(good_report(house, tmp_path / "reports"), lambda r: r["counts"].update(passed=0))
    code, err = release(house, tmp_path / "reports", tmp_path / "rel", capsys, "--allow-missing-reports")
    assert code == 2 and "minimum of 1" in err, err


# -- property-based: hostile reports ----------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
PATHS = st.sampled_from(
    [
        ("counts",),
        ("counts", "passed"),
        ("counts", "FAILED"),
        ("counts", "not built"),
        ("counts", "failed"),
        ("context",),
        ("context", "flash_attn"),
        ("context", "wheel"),
        ("context", "wheel", "sha256"),
        ("context", "wheel", "label"),
        ("accuracy",),
        ("accuracy", 0),
        ("accuracy", 0, "status"),
        ("report_schema",),
        ("error",),
    ]
)


def plant(report: dict, path: tuple, value) -> None:
    """Set report[path] = value, making the dicts on the way where they are missing or not containers."""
    node = report
    for key in path[:-1]:
        if isinstance(node, list):
            child = node[key] if isinstance(key, int) and key < len(node) else None
        else:
            child = node.get(key)
        if not isinstance(child, dict | list):
            if not isinstance(node, dict):
                break
            child = node[key] = {}
        node = child
    last = path[-1]
    if isinstance(node, dict):
        node[last] = value
    elif isinstance(last, int) and last < len(node):
        node[last] = value
    else:
        node.append(value)


def acceptable(report: dict, wheel: Path) -> bool:
    """What a release may accept, written out without the schema: the oracle of the property test."""
    counts, ctx = report.get("counts"), report.get("context")
    if not isinstance(counts, dict) or set(counts) - {"measured"} != {"passed", "FAILED", "not built"}:
        return False
    if not all(type(v) is int or (type(v) is float and v.is_integer()) for v in counts.values()):
        return False
    if counts["passed"] < 1 or counts["FAILED"] != 0 or min(counts.values()) < 0 or "error" in report:
        return False
    if not isinstance(ctx, dict) or ctx.get("flash_attn") != wheel.name.split("-")[1]:
        return False
    record = ctx.get("wheel")
    return isinstance(record, dict) and record.get("sha256") == checksums.sha256_file(wheel)


@SETTINGS
@given(edits=st.lists(st.tuples(PATHS, JSON), min_size=1, max_size=3))
def test_hostile_reports_are_refused_by_one_error_line_or_are_sound(tmp_path, house, capsys, edits):
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    jpath = good_report(house, folder)
    report = json.loads(jpath.read_text())
    for path, value in edits:
        plant(report, path, copy.deepcopy(value))
    jpath.write_text(json.dumps(report))
    out = folder / "rel"
    code, err = release(house, folder, out, capsys)
    assert code in (0, 2), err
    if code == 0:  # sound: accepted only what the oracle accepts
        assert acceptable(report, the_wheel(house)), (err, report)
    shutil.rmtree(folder)


@SETTINGS
@given(data=st.binary(max_size=64) | st.text(max_size=64).map(str.encode))
def test_hostile_report_bytes_are_a_report_or_a_release_error(tmp_path, data):
    path = Path(tempfile.mkdtemp(dir=tmp_path)) / "validation-x.json"
    path.write_bytes(data)
    p = Probe(path)
    try:
        found = reports.read(path)
    except ReleaseError as e:
        assert str(e).startswith(str(path)) and "\n" not in str(e)
    else:
        assert isinstance(found, dict)
        assert isinstance(reports.problems(found, reports.VALIDATION), list)
    p.inputs_kept()


def test_a_killed_release_sessions_staging_folder_is_removed_by_the_next(tmp_path, house, capsys):
    stale = tmp_path / ".rel.partial-k1ll3d"
    stale.mkdir()
    (stale / "SHA256SUMS").write_text("half written\n")
    good_report(house, tmp_path / "reports")
    code, err = release(house, tmp_path / "reports", tmp_path / "rel", capsys)
    assert code == 0, err
    Probe().output_ok(not stale.exists(), f"{stale} outlived the next release into {tmp_path / 'rel'}")


UPSTREAM_PATHS = st.sampled_from(
    [
        ("total",),
        ("total", "passed"),
        ("total", "failed"),
        ("total", "error"),
        ("total", "fails"),
        ("functions",),
        ("functions", "test_flash_attn.py::test_flash_attn_output"),
        ("functions", "test_flash_attn.py::test_flash_attn_output", "failed"),
        ("ran",),
        ("exit_status",),
        ("wheel", "sha256"),
        ("report_schema",),
    ]
)


@SETTINGS
@given(edits=st.lists(st.tuples(UPSTREAM_PATHS, JSON), min_size=1, max_size=3))
def test_hostile_upstream_summaries_validate_only_when_sound(tmp_path, house, edits):
    from release.ship import upstream_tests, upstream_tests_plugin

    row = dict.fromkeys(upstream_tests_plugin.OUTCOMES, 0) | {"passed": 5, "skipped": 1}
    summary = upstream_tests_plugin.summary_record(
        {"test_flash_attn.py::test_flash_attn_output": row}, 0, wheel=upstream_tests.wheel_facts(the_wheel(house))
    )
    assert reports.problems(summary, reports.UPSTREAM_TESTS) == []  # the writer's own summary
    for path, value in edits:
        plant(summary, path, copy.deepcopy(value))
    Probe()  # counted in the summary line
    if reports.problems(json.loads(json.dumps(summary)), reports.UPSTREAM_TESTS) == []:  # sound when accepted
        total, functions = summary["total"], summary["functions"]
        assert total["failed"] == total["error"] == 0 and total["passed"] >= 1 and summary["exit_status"] == 0
        assert all(sum(f[o] for f in functions.values()) == total[o] for o in total)
