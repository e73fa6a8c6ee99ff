"""The tiny stand-ins of the pre-tokenized C4 and the Llama 3.1 tokenizer (issue 12, work in progress)."""

from __future__ import annotations

import numpy as np
import pytest

from mlperf_wf.benchmarks.llama31_8b import c4_corpus, tokenizer
from mlperf_wf.mirror import generate_tiny_mirror
from mlperf_wf.registry import load_dataset


def test_the_target_lies_between_the_entropy_rate_and_the_unigram_entropy():
    matrix = c4_corpus.transitions(load_dataset("c4_llama31_8b_preprocessed").tiny.seed)
    assert np.allclose(matrix.sum(axis=1), 1.0)
    assert c4_corpus.entropy_rate(matrix) < 3.3 - 0.15 < 3.3 + 1.0 < c4_corpus.unigram_entropy(matrix)


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    root = tmp_path_factory.mktemp("mirror")
    return generate_tiny_mirror(load_dataset("c4_llama31_8b_preprocessed"), root / "c4")


def test_the_corpus_has_the_published_file_names_and_megatron_reads_it(mirror):
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    listed = sorted(line.split()[1] for line in mirror.md5.read_text().splitlines())
    assert listed == sorted(f.path for f in load_dataset("c4_llama31_8b_preprocessed").files)
    train = IndexedDataset(str(mirror.data / c4_corpus.TRAIN_PREFIX))
    assert len(train) == c4_corpus.CorpusShape().train_documents
    first = train[0]
    assert first.dtype == np.int32 and first.max() < tokenizer.SYMBOLS  # no BOS/EOD, as the reference's preprocessing
    text = tokenizer.build().decode(first.tolist())
    assert text.split()[0] == tokenizer.symbol(int(first[0]))


def test_the_tokenizer_folder_loads_with_autotokenizer(tmp_path):
    from transformers import AutoTokenizer

    tokenizer.generate(tmp_path, seed=0)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert loaded("t000 t255", add_special_tokens=False).input_ids == [0, 255]
    assert (loaded.bos_token, loaded.eos_token) == (tokenizer.BOS, tokenizer.EOS)
