"""gpt3's R2 catalog entries name exactly what MLCommons publishes: the top-level files of the ``.md5`` list
(README.md:40-42, 66-69 and 169-178 at aa344c7: ``dataset_c4_spm.tar``, ``checkpoint_megatron_fp32.tar``), which the
rehearsal's ``published()`` writes and the tiny mirror publishes. ``check(benchmark, dataset_id)`` works for any
benchmark with a rehearsal module (the other benchmarks' owners may parametrize it over theirs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlperf_wf.acquire.mirror import generate_tiny_mirror
from mlperf_wf.config import registry
from tests.rehearsal.spec import module


def top_level(folder: Path) -> list[str]:
    return sorted({path.relative_to(folder).parts[0] for path in folder.rglob("*") if path.is_file() and path.name != "manifest.md5"})


def check(benchmark: str, dataset_id: str, folder: Path) -> tuple[list[str], list[str]]:
    """(the catalog's top-level files, what the rehearsal's ``published`` writes)."""
    catalog = sorted({item.path.split("/")[0] for item in registry.load_dataset(dataset_id).files})
    module(benchmark).published(dataset_id, folder)
    return catalog, top_level(folder)


GPT3_DATASETS = registry.load_benchmark("gpt3").roles_for("prepare").values()
R2_ENTRIES = [dataset_id for dataset_id in GPT3_DATASETS if registry.load_dataset(dataset_id).source.protocol == "r2"]


@pytest.mark.parametrize("dataset_id", R2_ENTRIES)
def test_catalog_files_are_the_published_top_level_files(dataset_id, tmp_path):
    catalog, published = check("gpt3", dataset_id, tmp_path)
    assert catalog and catalog == published == module("gpt3").published_files()[dataset_id]
    assert registry.load_dataset(dataset_id).file_count == len(catalog)


def test_gpt3_reads_both_tarballs():
    assert sorted(R2_ENTRIES) == ["c4_gpt3_spm_preprocessed", "gpt3_megatron_fp32_checkpoint"]


def test_the_tiny_mirror_publishes_the_same_names(tmp_path):
    """The tiny corpus in its published form (the checkpoint's pretraining is tested in test_gpt3.py)."""
    data = generate_tiny_mirror(registry.load_dataset("c4_gpt3_spm_preprocessed"), tmp_path / "data").data
    assert top_level(data) == module("gpt3").published_files()["c4_gpt3_spm_preprocessed"]


def test_a_killed_extraction_resumes_after_the_complete_members_and_records_every_digest(tmp_path, monkeypatch):
    import hashlib
    import json

    from mlperf_wf.benchmarks.gpt3 import tarball

    published = tmp_path / "published"
    published.mkdir()
    module("gpt3").published("gpt3_megatron_fp32_checkpoint", published)
    archive = published / module("gpt3").CHECKPOINT_TARBALL
    out, scratch = tmp_path / "shards" / "checkpoint", tmp_path / "scratch" / "checkpoint"
    copy, written = tarball._copy_member, []

    def killed_after_two(source, target, size):
        if len(written) == 2:
            raise KeyboardInterrupt("killed")
        written.append(str(target))
        return copy(source, target, size)

    monkeypatch.setattr(tarball, "_copy_member", killed_after_two)
    with pytest.raises(KeyboardInterrupt):
        tarball.extract(archive, out, scratch)
    monkeypatch.setattr(tarball, "_copy_member", lambda source, target, size: written.append(str(target)) or copy(source, target, size))
    members = tarball.extract(archive, out, scratch)
    assert len(written) == len(members) and len(set(written)) == len(written), "no member is written twice"
    assert not scratch.exists()
    recorded = json.loads((out / tarball.MEMBERS_RECORD).read_text())["members"]
    for name, entry in recorded.items():
        assert hashlib.md5((out / name).read_bytes()).hexdigest() == entry["md5"] and (out / name).stat().st_size == entry["size"]
