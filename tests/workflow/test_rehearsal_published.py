"""Each R2 catalog entry names exactly the files MLCommons publishes (its ``.md5`` list, which the catalog copies with
each file's md5), and the rehearsal's published layout (``tests/benchmarks/<name>/rehearsal.py``'s ``published``) writes
exactly those: the full-scale preparation and runs are rehearsed on what the downloader leaves, not on a subset (gpt3's
catalog once expected loose files where R2 publishes one tarball; issue 24). ``campaign.write_published`` checks every
entry the same way when the cluster in a box writes them; this module checks them without the box, each dataset once.
The C4 corpora (20-40 s each to generate) are checked elsewhere: gpt3's by tests/benchmarks/gpt3/test_gpt3_published.py
against the reference README's list, the others by the campaign."""

from __future__ import annotations

import pytest

from mlperf_wf.config import registry
from tests.rehearsal import campaign
from tests.rehearsal.spec import module

CHECKED_ELSEWHERE = {"c4_llama31_8b_preprocessed", "c4_mixtral_8x22b_preprocessed", "c4_gpt3_spm_preprocessed", "gpt3_megatron_fp32_checkpoint"}


def _first_reader() -> dict[str, str]:
    """R2 dataset with a file list -> the first benchmark (by name) that reads it."""
    readers: dict[str, str] = {}
    for name in registry.benchmark_names():
        for dataset_id in registry.load_benchmark(name).datasets_read():
            entry = registry.load_dataset(dataset_id)
            if entry.source.protocol == "r2" and entry.files and dataset_id not in CHECKED_ELSEWHERE:
                readers.setdefault(dataset_id, name)
    return readers


READERS = _first_reader()


@pytest.mark.parametrize("dataset_id", sorted(READERS))
def test_the_published_layout_is_the_catalog_s_file_list(dataset_id, tmp_path):
    module(READERS[dataset_id]).published(dataset_id, tmp_path)
    campaign.check_catalog_names(dataset_id, tmp_path)


def test_the_entries_checked_elsewhere_are_read_by_a_benchmark():
    read = {dataset_id for name in registry.benchmark_names() for dataset_id in registry.load_benchmark(name).datasets_read()}
    assert CHECKED_ELSEWHERE <= read
