"""A file restored from Snakemake's output cache is checked against its own recorded md5 each time a checkout uses it;
a corrupted entry is refused whole and made again, never broken up by moving one of its files out.

The cache is laid out as Snakemake 9's local output cache lays it (``snakemake/caching/local.py``): the job that made
an entry leaves its output folder as a symbolic link to ``$SNAKEMAKE_OUTPUT_CACHE/<hash>``; a checkout that fetches
it makes a real folder whose every top-level entry is a symbolic link into the entry."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from mlperf_wf.acquire import prepare
from mlperf_wf.acquire.verify import quarantine_dir_for, refuse_cached, verify_dataset
from mlperf_wf.errors import ChecksumError

FILES = {"a.bin": b"a" * 300, "sub/b.bin": b"b" * 300}


def cache_entry(cache: Path, name: str, files: dict[str, bytes], md5_list: str = "manifest.md5") -> Path:
    entry = cache / name
    for rel, data in files.items():
        (entry / rel).parent.mkdir(parents=True, exist_ok=True)
        (entry / rel).write_bytes(data)
    (entry / md5_list).write_text("".join(f"{hashlib.md5(data).hexdigest()}  {rel}\n" for rel, data in files.items()))
    return entry


def stored(entry: Path, output: Path) -> Path:
    """The checkout that made the entry: its output is a link to the entry."""
    output.parent.mkdir(parents=True, exist_ok=True)
    output.symlink_to(entry)
    return output


def fetched(entry: Path, output: Path) -> Path:
    """A checkout that fetched the entry: a real folder, each top-level entry a link into the cache."""
    output.mkdir(parents=True)
    for item in entry.iterdir():
        (output / item.name).symlink_to(item)
    return output


def flip(path: Path) -> None:
    with path.open("r+b") as handle:
        handle.seek(10)
        handle.write(b"\xff")


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "output-cache"
    folder.mkdir()
    monkeypatch.setenv("SNAKEMAKE_OUTPUT_CACHE", str(folder))
    return folder


@pytest.mark.parametrize("restore", [stored, fetched])
def test_a_corrupted_file_of_a_cached_download_leaves_the_entry_whole_and_is_made_again(tmp_path, cache, restore):
    entry = cache_entry(cache, "e1" * 32, FILES)
    dataset = restore(entry, tmp_path / "checkout/resources/tiny/datasets/ds")
    verify_dataset(dataset, stamps_file=tmp_path / "stamps.json")
    flip(entry / "sub/b.bin")
    expected, actual = hashlib.md5(FILES["sub/b.bin"]).hexdigest(), hashlib.md5((entry / "sub/b.bin").read_bytes()).hexdigest()
    with pytest.raises(ChecksumError) as refused:
        verify_dataset(dataset, stamps_file=tmp_path / "stamps.json")
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"ds/sub/b.bin: md5 mismatch: expected {expected}, actual {actual}"), message
    assert f"output cache entry {entry}" in message and "rerun" in message, message
    # nothing was moved out of the entry: it was set aside whole, so the next run makes it again
    assert not entry.exists()
    aside = [path for path in cache.rglob("*") if path.name == entry.name]
    assert len(aside) == 1 and sorted(p.relative_to(aside[0]).as_posix() for p in aside[0].rglob("*.bin")) == ["a.bin", "sub/b.bin"]
    assert str(aside[0]) in message
    # the checkout's own output (links) is gone, so Snakemake runs the job again; a copy of the bad file is kept
    assert not os.path.lexists(dataset)
    assert (quarantine_dir_for(dataset) / "sub/b.bin").read_bytes() != FILES["sub/b.bin"]


def test_a_cache_entry_an_earlier_quarantine_broke_is_set_aside_and_made_again(tmp_path, cache):
    """An entry that lost a file (moved out by an earlier version's quarantine) is not a "missing" for ever: deleting
    the checkout's folder and rerunning fetched the same broken entry again."""
    entry = cache_entry(cache, "e2" * 32, FILES)
    dataset = fetched(entry, tmp_path / "checkout/resources/tiny/datasets/ds")
    (entry / "sub/b.bin").unlink()
    with pytest.raises(ChecksumError) as refused:
        verify_dataset(dataset, stamps_file=tmp_path / "stamps.json")
    message = str(refused.value)
    assert "ds/sub/b.bin: listed in manifest.md5 but missing" in message and f"output cache entry {entry}" in message, message
    assert not entry.exists() and not os.path.lexists(dataset)


def test_a_file_reached_through_a_link_outside_the_cache_is_copied_to_quarantine_and_left_in_place(tmp_path, cache):
    shared = cache_entry(tmp_path / "shared-storage", "ds", FILES)
    dataset = stored(shared, tmp_path / "checkout/resources/tiny/datasets/ds")
    flip(shared / "a.bin")
    with pytest.raises(ChecksumError) as refused:
        verify_dataset(dataset, stamps_file=tmp_path / "stamps.json")
    message = str(refused.value)
    assert "ds/a.bin: md5 mismatch" in message and f"left in place as {shared / 'a.bin'}" in message, message
    assert (shared / "a.bin").exists() and (quarantine_dir_for(dataset) / "a.bin").read_bytes() == (shared / "a.bin").read_bytes()


def test_each_shard_records_the_md5_of_its_files_where_it_is_made(tmp_path):
    shard = tmp_path / "shards/one"
    (shard / "part").mkdir(parents=True)
    (shard / "part/x.bin").write_bytes(b"x" * 50)
    (shard / "y.bin").write_bytes(b"y" * 50)
    (shard / prepare.SNAKEMAKE_TIMESTAMP).touch()
    prepare.record_shard(shard)
    listed = (shard / prepare.SHARD_MD5).read_text().splitlines()
    assert sorted(listed) == sorted(f"{hashlib.md5(c * 50).hexdigest()}  {p}" for p, c in (("part/x.bin", b"x"), ("y.bin", b"y")))


@pytest.mark.parametrize("restore", [stored, fetched])
def test_a_byte_flipped_in_a_cached_shard_is_refused_at_assembly_and_the_shard_made_again(tmp_path, cache, restore):
    """The shard's own file (not a link of a verified download, so verify never reads it) is checked against the md5
    the shard recorded when it was made, each time a checkout assembles its tree from the cache."""
    entry = cache_entry(cache, "e3" * 32, FILES, md5_list=prepare.SHARD_MD5)
    shards = tmp_path / "checkout/resources/tiny/prepared/bench/shards"
    restore(entry, shards / "one")
    layout = {"train/a.bin": "one/a.bin", "b.bin": "one/sub/b.bin"}
    tree = shards.parent / "dataset"
    prepare.assemble(layout, shards, tree)  # as cached: passes
    flip(entry / "sub/b.bin")
    with pytest.raises(ChecksumError) as refused:
        prepare.assemble(layout, shards, tree)
    message = str(refused.value)
    assert "\n" not in message and message.startswith("one/sub/b.bin: md5 mismatch: expected "), message
    assert f"output cache entry {entry}" in message and "rerun" in message
    assert not entry.exists() and not os.path.lexists(shards / "one"), "the shard is made again by the next run"


def test_a_byte_flipped_in_a_shard_made_here_moves_the_whole_shard_aside_so_it_is_made_again(tmp_path):
    shards = tmp_path / "prepared/bench/shards"
    shard = cache_entry(shards, "one", FILES, md5_list=prepare.SHARD_MD5)
    layout = {"a.bin": "one/a.bin"}
    prepare.assemble(layout, shards, shards.parent / "dataset")
    flip(shard / "a.bin")
    with pytest.raises(ChecksumError) as refused:
        prepare.assemble(layout, shards, shards.parent / "dataset")
    assert "one/a.bin: md5 mismatch" in str(refused.value) and "rerun" in str(refused.value)
    assert not shard.exists() and (quarantine_dir_for(shard) / "a.bin").exists()


def test_a_shard_without_its_md5_list_is_refused_by_name(tmp_path):
    shards = tmp_path / "prepared/bench/shards"
    (shards / "one").mkdir(parents=True)
    (shards / "one/a.bin").write_bytes(b"a")
    with pytest.raises(ChecksumError, match=r"one/\.mlperf-wf-shard\.md5: md5 list not found: .*rerun"):
        prepare.assemble({"a.bin": "one/a.bin"}, shards, shards.parent / "dataset")


def test_a_prepared_folder_copied_whole_is_checked_against_its_shards_md5_before_its_stamps_are_renewed(tmp_path):
    """A train job renews the stamps of a tree copied whole (every file a new inode, sizes and mtimes kept); a byte
    flipped in the copy (its mtime kept too) is no longer renewed with them: the shards are checked first."""
    from mlperf_wf.errors import UserError

    made = tmp_path / "first/prepared/bench"
    cache_entry(made / "shards", "one", FILES, md5_list=prepare.SHARD_MD5)
    prepare.assemble({"a.bin": "one/a.bin"}, made / "shards", made / "dataset")
    copy = tmp_path / "second/prepared/bench"
    shutil.copytree(made, copy, symlinks=True)
    prepare.check_prepared(copy / "dataset")  # copied as it is: stamps renewed
    shutil.rmtree(copy)
    shutil.copytree(made, copy, symlinks=True)
    target = copy / "shards/one/a.bin"
    stat = target.stat()
    flip(target)
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with pytest.raises((UserError, ChecksumError)) as refused:
        prepare.check_prepared(copy / "dataset")
    assert "one/a.bin: md5 mismatch" in str(refused.value), refused.value


def test_two_checkouts_that_find_the_same_corrupted_entry_both_refuse_it_in_one_line(tmp_path, cache):
    entry = cache_entry(cache, "e4" * 32, FILES)
    first = fetched(entry, tmp_path / "first/resources/tiny/datasets/ds")
    second = fetched(entry, tmp_path / "second/resources/tiny/datasets/ds")
    # both found the mismatch before either set the entry aside, as two jobs at once do
    with pytest.raises(ChecksumError, match="set aside whole as"):
        refuse_cached(first, entry, "ds/a.bin: md5 mismatch")
    with pytest.raises(ChecksumError, match="already set aside whole by another checkout"):
        refuse_cached(second, entry, "ds/a.bin: md5 mismatch")
    assert not os.path.lexists(first) and not os.path.lexists(second)


def test_a_linked_folder_of_a_shard_is_covered_by_its_files_entries(tmp_path):
    """A layout may link a folder of a shard (flux1 links an empty encodings folder): the folder is covered by its
    files' entries in the md5 list; a file added under it afterwards is refused."""
    shard = tmp_path / "shards/empty"
    (shard / "encodings").mkdir(parents=True)
    (shard / "shard.json").write_text("{}")
    prepare.record_shard(shard)
    layout = {"train/encodings": "empty/encodings", "shard.json": "empty/shard.json"}
    prepare.assemble(layout, shard.parent, tmp_path / "dataset")
    (shard / "encodings/added.bin").write_bytes(b"x")
    with pytest.raises(ChecksumError, match="empty/encodings: not in the shard's md5 list"):
        prepare.assemble(layout, shard.parent, tmp_path / "dataset2")
