"""The GitHub Actions semantics the release rehearsal reproduces (release.workflow.gha): expressions, the
implicit success() of an if:, the step files, and the artifact actions' folder layout (v4 and later)."""

from __future__ import annotations

import pytest

from release.workflow import gha

CTX = {
    "inputs": {"from_run": "", "kernel_set": "ci"},
    "needs": {"matrix": {"result": "success", "outputs": {"publish": "true", "m": '{"include": [{"a": 1}]}'}}},
    "matrix": {"args": ["--kernel-set", "ci"], "torch": "2.14.1", "torch_newest": "2.15.0", "torch_abi": "stable"},
    "runner": {"os": "Linux"},
}
OK = {"success": True, "failure": False}
FAILED = {"success": False, "failure": True}


@pytest.mark.parametrize(
    "expr, value",
    [
        ("!inputs.from_run", True),
        ("inputs.from_run != ''", False),
        ("inputs.missing == ''", True),  # null equals '' (both coerce to 0)
        ("runner.os == 'linux'", True),  # strings compare case-insensitively
        ("matrix.torch_abi == 'stable' && matrix.torch_newest != matrix.torch", True),
        ("needs.matrix.outputs.publish == 'true' || false", True),
        ("join(matrix.args, ' ')", "--kernel-set ci"),
        ("fromJSON(needs.matrix.outputs.m).include[0]", None),  # indexing is not used by release.yml
        ("inputs.kernel_set || 'release'", "ci"),
        ("contains(matrix.args, 'ci')", True),
    ],
)
def test_expressions(expr, value):
    if value is None:
        with pytest.raises(gha.ExpressionError):
            gha.Evaluator(CTX, OK).evaluate(expr)
        return
    assert gha.Evaluator(CTX, OK).evaluate(expr) == value


def test_interpolation_keeps_an_object_and_formats_text():
    assert gha.interpolate("${{ fromJSON(needs.matrix.outputs.m) }}", CTX) == {"include": [{"a": 1}]}
    assert gha.interpolate("torch ${{ matrix.torch }}+${{ inputs.none }}!", CTX) == "torch 2.14.1+!"
    assert gha.interpolate("${{ true }}", CTX) is True


def test_an_if_without_a_status_function_also_needs_success():
    """GitHub: "A default status check of success() is applied unless you include one of these functions"."""
    assert gha.condition(None, CTX, OK) and not gha.condition(None, CTX, FAILED)
    assert gha.condition("needs.matrix.outputs.publish == 'true'", CTX, OK)
    assert not gha.condition("needs.matrix.outputs.publish == 'true'", CTX, FAILED)
    assert gha.condition("${{ always() && needs.matrix.outputs.publish == 'true' }}", CTX, FAILED)
    assert gha.condition("failure()", CTX, FAILED) and not gha.condition("failure()", CTX, OK)
    assert gha.uses_status_function("always() && x") and not gha.uses_status_function("needs.always == 1")


def test_step_files_lines_and_heredocs(tmp_path):
    f = tmp_path / "out"
    f.write_text("a=1\nb<<EOF\nx=y\nz\nEOF\nc=d=e\n")
    assert gha.read_step_file(f) == {"a": "1", "b": "x=y\nz", "c": "d=e"}
    assert gha.read_step_file(tmp_path / "none") == {}


def _make(folder, files):
    for name in files:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(name)


def test_upload_takes_the_folder_contents_without_hidden_files(tmp_path):
    _make(tmp_path / "kernels", ["kernels-x/kernels-manifest.json", "trace.json", ".hidden"])
    store = tmp_path / "store"
    assert gha.upload_artifact(store, "a", tmp_path / "kernels", False, "error") == 2
    assert sorted(p.relative_to(store).as_posix() for p in store.rglob("*") if p.is_file()) == [
        "a/kernels-x/kernels-manifest.json",
        "a/trace.json",
    ]
    with pytest.raises(gha.ReleaseError, match="already exists"):
        gha.upload_artifact(store, "a", tmp_path / "kernels", False, "error")
    gha.upload_artifact(store, "a", tmp_path / "kernels", True, "error")  # overwrite: true
    (tmp_path / "empty").mkdir()
    with pytest.raises(gha.ReleaseError, match="no files found"):
        gha.upload_artifact(store, "b", tmp_path / "empty", False, "error")


@pytest.mark.parametrize(
    "count, merge, layout",
    [
        (1, False, ["f0"]),  # ONE match: straight into path (download-artifact v5+)
        (2, False, ["a0/f0", "a1/f1"]),  # several: one folder per artifact
        (2, True, ["f0", "f1"]),  # merge-multiple
    ],
)
def test_download_by_pattern_single_vs_many(tmp_path, count, merge, layout):
    store = tmp_path / "store"
    for k in range(count):
        _make(store / f"a{k}", [f"f{k}"])
    _make(store / "other", ["o"])
    names = gha.download_artifact(store, tmp_path / "dl", pattern="a*", merge_multiple=merge)
    assert names == [f"a{k}" for k in range(count)]
    assert (
        sorted(p.relative_to(tmp_path / "dl").as_posix() for p in (tmp_path / "dl").rglob("*") if p.is_file()) == layout
    )


def test_download_by_name_is_flat_and_must_exist(tmp_path):
    store = tmp_path / "store"
    _make(store / "k", ["kernels-x/m.json"])
    gha.download_artifact(store, tmp_path / "dl", name="k")
    assert (tmp_path / "dl" / "kernels-x" / "m.json").is_file()
    with pytest.raises(gha.ReleaseError, match="no artifact named nope"):
        gha.download_artifact(store, tmp_path / "dl", name="nope")
