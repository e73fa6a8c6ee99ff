"""verify: md5 list check, stamp-based re-verification, quarantine of bad files."""

from __future__ import annotations

import errno
import hashlib
import json
import os
from pathlib import Path

import pytest

from mlperf_wf.acquire.verify import quarantine_dir_for, verify_dataset, write_record
from mlperf_wf.cli import main
from mlperf_wf.errors import ChecksumError


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
    assert saved["total_bytes"] == 110 and saved["bytes_hashed"] == 110
    assert {f["path"] for f in saved["files"]} == {"a.bin", "sub/b.bin"}


def test_unchanged_dataset_is_only_statted_and_a_changed_file_is_rehashed(tmp_path):
    make_dataset(tmp_path / "ds", {"a.bin": b"a" * 1000, "b.bin": b"b" * 500})
    assert verify_dataset(tmp_path / "ds").bytes_hashed == 1500
    again = verify_dataset(tmp_path / "ds")
    assert again.bytes_hashed == 0 and not any(f.rehashed for f in again.files)
    os.utime(tmp_path / "ds" / "b.bin")  # touched, same content
    touched = verify_dataset(tmp_path / "ds")
    assert touched.bytes_hashed == 500 and [f.path for f in touched.files if f.rehashed] == ["b.bin"]


def test_corrupted_file_fails_with_name_and_both_md5s_and_is_quarantined(tmp_path):
    make_dataset(tmp_path / "ds", {"a.bin": b"a" * 100, "b.bin": b"b" * 100})
    (tmp_path / "ds" / "b.bin").write_bytes(b"b" * 99 + b"X")
    with pytest.raises(ChecksumError) as err:
        verify_dataset(tmp_path / "ds")
    message = str(err.value)
    assert "ds/b.bin" in message
    assert f"expected {hashlib.md5(b'b' * 100).hexdigest()}" in message
    assert f"actual {hashlib.md5(b'b' * 99 + b'X').hexdigest()}" in message
    assert not (tmp_path / "ds" / "b.bin").exists()
    assert (quarantine_dir_for(tmp_path / "ds") / "b.bin").read_bytes() == b"b" * 99 + b"X"
    assert (tmp_path / "ds" / "a.bin").exists(), "good files stay"


def test_tampering_after_verification_is_caught_even_with_the_old_mtime(tmp_path):
    make_dataset(tmp_path / "ds", {"a.bin": b"a" * 100})
    verify_dataset(tmp_path / "ds")
    path = tmp_path / "ds" / "a.bin"
    st = path.stat()
    with path.open("r+b") as handle:  # same size, same inode
        handle.write(b"Z")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.raises(ChecksumError, match=r"ds/a\.bin: md5 mismatch"):
        verify_dataset(tmp_path / "ds")


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


def test_cli_with_an_external_manifest_and_stamps(tmp_path):
    make_dataset(tmp_path / "ds", {"a.bin": b"a" * 10})
    (tmp_path / "ds" / "manifest.md5").rename(tmp_path / "list.md5")
    argv = ["verify", str(tmp_path / "ds"), "--manifest", str(tmp_path / "list.md5"), "--stamps", str(tmp_path / "stamps.json")]
    assert main(argv) == 0
    assert json.loads((tmp_path / "stamps.json").read_text())[0]["path"] == "a.bin"


def _converted(folder, listed_too=True):
    """A folder as the qwen35_397b_grpo conversion job leaves it (the catalog's files, optionally one left out)."""
    from mlperf_wf.config import registry

    entry = registry.load_dataset("qwen35_397b_megatron_checkpoint")
    paths = [item.path for item in entry.files] + ["model__inputs_hf_checkpoint/iter_0000000/__0_0.distcp"]
    for path in paths if listed_too else paths[1:]:
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(path.encode())
    return paths


def test_a_dataset_made_in_an_image_is_sealed_then_verified_without_reading_it_again(tmp_path):
    """`mlperf-wf seal` (the make_in_image rule's last step) lists every file the job left by md5; the verify stage
    then checks against that list, re-reading nothing just hashed, and still catches a byte changed since."""
    folder = tmp_path / "qwen35_397b_megatron_checkpoint"
    paths = _converted(folder)
    assert main(["seal", "--dataset", "qwen35_397b_megatron_checkpoint", str(folder)]) == 0
    listed = (folder / "manifest.md5").read_text().splitlines()
    assert sorted(line.split("  ", 1)[1] for line in listed) == sorted(paths)
    record = verify_dataset(folder)
    assert len(record.files) == len(paths) and record.bytes_hashed == 0
    changed = folder / paths[-1]
    changed.write_bytes(b"X" + changed.read_bytes()[1:])
    with pytest.raises(ChecksumError, match="md5 mismatch"):
        verify_dataset(folder)


def test_a_made_dataset_missing_a_catalog_file_is_not_sealed(tmp_path, capsys):
    folder = tmp_path / "qwen35_397b_megatron_checkpoint"
    paths = _converted(folder, listed_too=False)
    assert main(["seal", "--dataset", "qwen35_397b_megatron_checkpoint", str(folder)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and f"{folder / paths[0]}: the job of qwen35_397b_grpo's image did not leave it" in error, error
    assert not (folder / "manifest.md5").exists()
    assert main(["seal", "--dataset", "r2e_gym_subset", str(folder)]) == 2
    assert "r2e_gym_subset is protocol huggingface; only a made_in_image dataset is sealed" in capsys.readouterr().err


def test_a_read_only_dataset_folder_still_names_the_md5_mismatch_and_what_to_do(tmp_path, capsys, monkeypatch):
    """The quarantine cannot move a file out of a read-only folder: the line is still the mismatch (file, both md5s),
    with why the file stayed and what to do, and the file stays where it was."""
    folder = tmp_path / "ds"
    make_dataset(folder, {"a.bin": b"a" * 100})
    (folder / "a.bin").write_bytes(b"z" * 100)
    if os.geteuid() == 0:  # root renames anywhere: refuse the move as a read-only folder does for anyone else
        rename = Path.replace

        def replace(self, target):
            if self.parent == folder:
                raise PermissionError(errno.EACCES, "Permission denied", str(self))
            return rename(self, target)

        monkeypatch.setattr(Path, "replace", replace)
    folder.chmod(0o555)
    try:
        status = main(["verify", str(folder), "--stamps", str(tmp_path / "stamps.json")])
    finally:
        folder.chmod(0o755)
    err = capsys.readouterr().err.strip().splitlines()
    expected, actual = hashlib.md5(b"a" * 100).hexdigest(), hashlib.md5(b"z" * 100).hexdigest()
    assert status == 2 and len(err) == 1, err
    assert err[0].startswith(f"mlperf-wf: error: ds/a.bin: md5 mismatch: expected {expected}, actual {actual}; left in place"), err[0]
    assert "Permission denied" in err[0] and f"make {folder} writable and rerun" in err[0], err[0]
    assert (folder / "a.bin").read_bytes() == b"z" * 100


# ---- what a later stage checks before it reads a verified dataset ----


def verified(tmp_path: Path) -> tuple[Path, Path]:
    folder, stamps = tmp_path / "datasets" / "ds", tmp_path / "verified" / "ds.stamps.json"
    make_dataset(folder, {"a.bin": b"a" * 1000, "sub/b.bin": b"b" * 500})
    verify_dataset(folder, stamps_file=stamps)
    return folder, stamps


def test_a_downloaded_file_changed_after_verify_is_refused_by_name_before_it_is_read(tmp_path):
    from mlperf_wf.acquire.verify import check_unchanged

    folder, stamps = verified(tmp_path)
    (folder / "sub/b.bin").write_bytes(b"c" * 500)  # rewritten after verify: same size, new mtime
    with pytest.raises(ChecksumError) as refused:
        check_unchanged(folder, stamps)
    message = str(refused.value)
    assert "\n" not in message and "ds/sub/b.bin: md5 mismatch" in message and hashlib.md5(b"c" * 500).hexdigest() in message
    assert not (folder / "sub/b.bin").exists(), "moved aside as verify does, never read"


def test_a_file_only_linked_or_touched_since_verify_is_not_refused_and_only_the_touched_one_is_read(tmp_path):
    """Linking a verified file into a preparation changes its ctime; every shard job would read the whole dataset
    again if that counted. A touched file (new mtime, same bytes) is read once more and passes."""
    from mlperf_wf.acquire.verify import check_unchanged

    folder, stamps = verified(tmp_path)
    os.link(folder / "a.bin", tmp_path / "linked-into-a-shard.bin")
    assert check_unchanged(folder, stamps) == 0
    os.utime(folder / "sub/b.bin")
    assert check_unchanged(folder, stamps) == 1
    assert check_unchanged(folder, stamps) == 0, "the new stamp is kept"


def test_a_verified_file_gone_or_a_missing_stamps_file_is_one_line(tmp_path):
    from mlperf_wf.acquire.verify import check_unchanged

    folder, stamps = verified(tmp_path)
    with pytest.raises(ChecksumError, match=r"no stamps .*nothing.json.*run verify"):
        check_unchanged(folder, tmp_path / "nothing.json")
    (folder / "a.bin").unlink()
    with pytest.raises(ChecksumError, match=r"ds/a\.bin: verified but missing .*delete .*ds and rerun"):
        check_unchanged(folder, stamps)
