"""SHA256SUMS writing and verification (release.checksums)."""

from __future__ import annotations

import hashlib
import os
import subprocess

import pytest

from release import checksums
from release.errors import ReleaseError


@pytest.fixture
def files(tmp_path):
    a = tmp_path / "b.whl"
    a.write_bytes(b"wheel bytes")
    b = tmp_path / "a-report.md"
    b.write_text("report\n")
    return [a, b]


def test_format_is_sha256sum_format(files, tmp_path):
    sums = checksums.write_sha256sums(files, tmp_path / "SHA256SUMS")
    lines = sums.read_text().splitlines()
    report_hash = hashlib.sha256(b"report\n").hexdigest()
    assert lines == [
        f"{report_hash}  a-report.md",
        f"{hashlib.sha256(b'wheel bytes').hexdigest()}  b.whl",
    ]
    assert sums.read_bytes().endswith(b"\n") and b"\r" not in sums.read_bytes()
    assert checksums.verify_sha256sums(sums) == ["a-report.md", "b.whl"]
    assert not list(tmp_path.glob(".*partial"))


@pytest.mark.skipif(os.name == "nt", reason="GNU sha256sum is a POSIX tool: not on Windows")
def test_sha256sum_c_reads_it(files, tmp_path):
    checksums.write_sha256sums(files, tmp_path / "SHA256SUMS")
    proc = subprocess.run(["sha256sum", "-c", "--strict", "SHA256SUMS"], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "b.whl: OK" in proc.stdout
    (tmp_path / "b.whl").write_bytes(b"changed")
    assert subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=tmp_path, capture_output=True).returncode != 0


def test_we_read_what_sha256sum_writes(files, tmp_path):
    if os.name == "nt":
        pytest.skip("GNU sha256sum is a POSIX tool: not on Windows")
    out = subprocess.run(["sha256sum", "-b", "b.whl", "a-report.md"], cwd=tmp_path, capture_output=True, text=True)
    (tmp_path / "SUMS").write_text(out.stdout)  # binary mode: "<hash> *<name>"
    assert sorted(checksums.verify_sha256sums(tmp_path / "SUMS")) == ["a-report.md", "b.whl"]


def test_mismatch_and_missing_are_reported(files, tmp_path):
    sums = checksums.write_sha256sums(files, tmp_path / "SHA256SUMS")
    files[0].write_bytes(b"other bytes")
    files[1].unlink()
    with pytest.raises(ReleaseError) as e:
        checksums.verify_sha256sums(sums)
    assert "b.whl: checksum mismatch" in str(e.value) and "a-report.md: missing" in str(e.value)


def test_malformed_line(tmp_path):
    (tmp_path / "SUMS").write_text("abc  file\n")
    with pytest.raises(ReleaseError, match="line 1"):
        checksums.verify_sha256sums(tmp_path / "SUMS")


def test_empty_file_does_not_verify(tmp_path):
    (tmp_path / "SUMS").write_text("")
    with pytest.raises(ReleaseError, match="lists no files"):
        checksums.verify_sha256sums(tmp_path / "SUMS")


def test_sidecar(files):
    side = checksums.write_sidecar(files[0])
    assert side.name == "b.whl.sha256"
    assert side.read_text() == f"{hashlib.sha256(b'wheel bytes').hexdigest()}  b.whl\n"
    assert checksums.verify_sha256sums(side) == ["b.whl"]
