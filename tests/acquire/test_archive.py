"""Archive extraction refuses traversal, absolute paths, outward links and special files."""

from __future__ import annotations

import io
import tarfile

import pytest

from mlperf_wf.acquire.archive import UnsafeArchiveError, safe_extract


def make_tar(path, members):
    with tarfile.open(path, "w:gz") as tar:
        for name, kind, extra in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                data = extra.encode()
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
                continue
            info.type = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE, "chr": tarfile.CHRTYPE, "fifo": tarfile.FIFOTYPE}[kind]
            if kind in ("sym", "hard"):
                info.linkname = extra
            tar.addfile(info)
    return path


def test_a_plain_archive_with_inner_links_extracts(tmp_path):
    archive = make_tar(tmp_path / "ok.tar.gz", [("d", "dir", ""), ("d/a.txt", "file", "hello"), ("d/link", "sym", "a.txt"), ("d/hard", "hard", "d/a.txt")])
    names = safe_extract(archive, tmp_path / "out")
    assert names == ["d", "d/a.txt", "d/link", "d/hard"]
    assert (tmp_path / "out/d/link").read_text() == "hello"


@pytest.mark.parametrize(
    ("member", "reason"),
    [
        (("/etc/evil", "file", "x"), "has an absolute path"),
        (("../evil", "file", "x"), "climbs out with '..'"),
        (("d/../../evil", "file", "x"), "climbs out with '..'"),
        (("link", "sym", "/etc/passwd"), "symlink to the absolute path"),
        (("link", "sym", "../../outside"), "symlink to '../../outside', outside"),
        (("hard", "hard", "/etc/passwd"), "hard link to '/etc/passwd', outside"),
        (("dev", "chr", ""), "device, FIFO or special file"),
        (("fifo", "fifo", ""), "device, FIFO or special file"),
    ],
)
def test_unsafe_members_are_refused_before_anything_is_written(tmp_path, member, reason):
    archive = make_tar(tmp_path / "bad.tar.gz", [("first.txt", "file", "x"), member])
    with pytest.raises(UnsafeArchiveError, match=reason) as err:
        safe_extract(archive, tmp_path / "out")
    assert "bad.tar.gz: member" in str(err.value)
    assert list((tmp_path / "out").iterdir()) == [], "nothing is extracted from an unsafe archive"


def test_a_symlink_then_a_file_through_it_is_refused(tmp_path):
    archive = make_tar(tmp_path / "bad.tar", [("up", "sym", ".."), ("up/escaped.txt", "file", "x")])
    with pytest.raises(UnsafeArchiveError):
        safe_extract(archive, tmp_path / "out" / "inner")
    assert not (tmp_path / "out" / "escaped.txt").exists()
