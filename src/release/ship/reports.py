"""The GPU reports a release rests on, checked against their declared schemas.

Two reports back the claim "validated on a GPU": the validation report of ``tools/validate.py``
(``validation-<version>-sm<NN>.json``) and the summary of upstream's own tests
(``upstream_tests.json``, release.ship.upstream_tests_plugin). Each names its schema version in
``report_schema``; the schemas are JSON Schema (draft 2020-12) documents in ``schemas/`` beside
this module (found from the checkout: the release tooling runs from src/), checked with
jsonschema (pinned in ``tool_pins.test`` of build-manifest.json; the release session installs
it). A report a release accepts has its counts present and integers, at least one passed case, no
failed case (nor error), and names the wheel it measured: file name, sha256 and label.

What the schema cannot say is checked here too: the counts equal the case rows they summarise
(validation) or the per-function counts (upstream tests), and the recorded sha256 and label are
the released wheel's. A report is an artifact, so it is read as untrusted: size-capped, strict JSON
(no NaN), any nesting depth refused as malformed rather than crashing.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from release.errors import ReleaseError

VALIDATION = "validation-report/1"
UPSTREAM_TESTS = "upstream-tests/1"
SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"
SCHEMA_FILES = {VALIDATION: "validation-report.v1.json", UPSTREAM_TESTS: "upstream-tests.v1.json"}
SECTIONS = ("accuracy", "shapes", "backward", "edges", "latency")  # tools/validate.py SECTIONS
OUTCOMES = ("passed", "failed", "skipped", "xfailed", "xpassed", "error")  # upstream_tests_plugin.OUTCOMES
# A real report is tens of KiB (validate: ~60 rows; upstream tests: one row per test function).
MAX_BYTES = 16 * 2**20
_SHOWN = 5  # schema errors listed per report; the rest are counted
_WIDTH = 160  # characters of a value quoted in a message (reports are untrusted: keep lines short)


def _jsonschema():
    try:
        import jsonschema
        import referencing
    except ImportError:
        pin = next((p for p in _pins() if p.startswith("jsonschema==")), "jsonschema")
        raise ReleaseError(
            f"jsonschema is not installed; the reports are checked against their schemas with it: pip install {pin} "
            "(tool_pins.test of build-manifest.json; nox -s release installs it)"
        ) from None
    return jsonschema, referencing


def _pins() -> list[str]:
    from release import manifest

    return list(manifest.load()["tool_pins"]["test"])


@functools.cache
def schema(kind: str) -> dict:
    """The JSON Schema document of report kind `kind` (VALIDATION or UPSTREAM_TESTS), from schemas/."""
    return json.loads((SCHEMA_DIR / SCHEMA_FILES[kind]).read_text(encoding="utf-8"))


@functools.cache
def _validator(kind: str):
    jsonschema, referencing = _jsonschema()
    from referencing.jsonschema import DRAFT202012

    resources = [(schema(k)["$id"], DRAFT202012.create_resource(schema(k))) for k in SCHEMA_FILES]
    registry = referencing.Registry().with_resources(resources)
    cls = jsonschema.validators.validator_for(schema(kind))
    cls.check_schema(schema(kind))
    return cls(schema(kind), registry=registry)


def _short(text: str) -> str:
    return text if len(text) <= _WIDTH else text[: _WIDTH - 3] + "..."


def read(path: Path) -> dict:
    """The JSON object in report file `path`.

    ReleaseError (naming the file, saying to rerun the step that writes it or remove the file) when
    it cannot be read, is over MAX_BYTES, is not UTF-8 strict JSON (NaN/Infinity refused, as
    tools/validate.py writes null for them), nests too deep to parse, or is not an object.
    """
    redo = "run the step that writes it again (nox -s validate / nox -s upstream_tests) or remove it"
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError as e:
        raise ReleaseError(f"{path} cannot be read ({e.strerror or e}); {redo}") from None
    if len(raw) > MAX_BYTES:
        raise ReleaseError(f"{path} is larger than any report ({MAX_BYTES} bytes at most); {redo}")
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise ReleaseError(f"{path} is not valid JSON ({_short(str(e) or type(e).__name__)}); {redo}") from None
    if not isinstance(data, dict):
        raise ReleaseError(
            f"{path} holds a JSON {type(data).__name__}, not a report (a JSON object written by tools/validate.py or "
            f"nox -s upstream_tests); {redo}"
        )
    return data


def _refuse_constant(token: str):
    raise ValueError(f"{token} is not a JSON number")


def _message(error) -> str:
    # The schema's one "not" is tools/validate.py's setup error; jsonschema's own text quotes the whole report.
    if error.validator == "not":
        return f"holds a setup error, the suite did not run: {_short(str(error.instance.get('error')))}"
    return error.message


def _where(error) -> str:
    path = ".".join(str(p) for p in error.absolute_path)
    return f"at {path}: " if path else ""


def problems(report: dict, kind: str) -> list[str]:
    """What makes `report` (a parsed JSON object) not an acceptable report of kind `kind`; [] when it is.

    The schema's errors first (in document order, at most a few, then how many more), then the
    cross-checks the schema cannot express: a validation report's ``counts`` equal the statuses of
    its case rows; an upstream-tests summary's ``total`` and ``ran`` equal the sums of its
    ``functions``. Raises ReleaseError only when jsonschema is not installed.
    """
    errors = sorted(_validator(kind).iter_errors(report), key=lambda e: [str(p) for p in e.absolute_path])
    found = [_short(_where(e) + _message(e)) for e in errors[:_SHOWN]]
    if len(errors) > _SHOWN:
        found.append(f"and {len(errors) - _SHOWN} more schema error(s)")
    if errors:
        return found
    if kind == VALIDATION:
        rows: dict[str, int] = {}
        for section in SECTIONS:
            for row in report[section]:
                rows[row["status"]] = rows.get(row["status"], 0) + 1
        claimed = {k: v for k, v in report["counts"].items() if v}
        if claimed != rows:
            found.append(f"counts {report['counts']} do not match its case rows {rows}")
    else:
        total = {o: sum(f[o] for f in report["functions"].values()) for o in OUTCOMES}
        if total != report["total"]:
            found.append(f"total {report['total']} is not the sum of its functions {total}")
        if report["ran"] != sum(total.values()):
            found.append(f"ran {report['ran']} is not the number of outcomes {sum(total.values())}")
    return found


def wheel_label(version: str) -> str:
    """The label of a wheel's full version: its local part ("2.8.3.post2+cu130...rev1" -> "cu130...rev1")."""
    return version.partition("+")[2]


def identity_problems(record: dict, wheel: Path, sha256: str, version: str) -> list[str]:
    """Where the wheel a report names (`record`: its ``{file, sha256, label}``) is not `wheel`
    (whose sha256 and full version are given): a report of another file, or of another label."""
    found = []
    if record.get("sha256") != sha256:
        found.append(f"was measured on another file than {wheel.name} (sha256 differs)")
    if record.get("label") != wheel_label(version):
        found.append(
            f"names the label {_short(repr(record.get('label')))}, not {wheel_label(version)!r} of {wheel.name}"
        )
    return found
