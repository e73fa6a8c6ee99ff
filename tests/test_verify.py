"""verify: every file against the md5 list; a mismatch names file and both md5s."""

from __future__ import annotations

import hashlib
import json

import pytest

from mlperf_wf.cli import main
from mlperf_wf.errors import ChecksumError
from mlperf_wf.verify import verify_dataset, write_record


def make_dataset(folder, files):
    folder.mkdir(parents=True)
    lines = []
    for rel, data in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
        lines.append(f"{hashlib.md5(data).hexdigest()}  {rel}\n")
    (folder / "manifest.md5").write_text("".join(lines))


def test_good_dataset_gets_a_record(tmp_path):
    make_dataset(tmp_path / "ds", {"a.bin": b"a" * 100, "sub/b.bin": b"b" * 10})
    record = verify_dataset(tmp_path / "ds")
    write_record(record, tmp_path / "rec.json")
    saved = json.loads((tmp_path / "rec.json").read_text())
    assert saved["total_bytes"] == 110
    assert {f["path"] for f in saved["files"]} == {"a.bin", "sub/b.bin"}


def test_corrupted_file_fails_with_name_and_both_md5s(tmp_path):
    make_dataset(tmp_path / "ds", {"a.bin": b"a" * 100, "b.bin": b"b" * 100})
    (tmp_path / "ds" / "b.bin").write_bytes(b"b" * 99 + b"X")
    with pytest.raises(ChecksumError) as err:
        verify_dataset(tmp_path / "ds")
    message = str(err.value)
    assert "ds/b.bin" in message
    assert f"expected {hashlib.md5(b'b' * 100).hexdigest()}" in message
    assert f"actual {hashlib.md5(b'b' * 99 + b'X').hexdigest()}" in message


def test_missing_file_is_named(tmp_path):
    make_dataset(tmp_path / "ds", {"a.bin": b"a"})
    (tmp_path / "ds" / "a.bin").unlink()
    with pytest.raises(ChecksumError, match=r"ds/a\.bin: listed in manifest\.md5 but missing"):
        verify_dataset(tmp_path / "ds")


def test_cli_reports_one_line_and_writes_no_record(tmp_path, capsys):
    make_dataset(tmp_path / "ds", {"a.bin": b"a"})
    (tmp_path / "ds" / "a.bin").write_bytes(b"z")
    assert main(["verify", str(tmp_path / "ds"), "--out", str(tmp_path / "rec.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("mlperf-wf: error: ds/a.bin: md5 mismatch")
    assert not (tmp_path / "rec.json").exists()
