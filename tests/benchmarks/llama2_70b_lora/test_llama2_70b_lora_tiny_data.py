"""Tiny-tier data: seeded generation, the R2 mirror layout and tokenization."""

from __future__ import annotations

import pandas as pd

from mlperf_wf.acquire.mirror import mirror_paths, publish
from mlperf_wf.benchmarks.llama2_70b_lora import govreport
from mlperf_wf.benchmarks.llama2_70b_lora.base_checkpoint import train_tokenizer
from mlperf_wf.benchmarks.llama2_70b_lora.language import make_language
from mlperf_wf.benchmarks.llama2_70b_lora.prepare import IGNORE, tokenize_split


def test_generation_is_seeded_and_splits_differ():
    first, again = govreport.generate_split(50, seed=7), govreport.generate_split(50, seed=7)
    pd.testing.assert_frame_equal(first, again)
    other = govreport.generate_split(50, seed=8)
    assert not first["input"].equals(other["input"])


def test_summary_names_a_subject_the_report_never_names():
    language = make_language()
    names = {s.name for s in language.subjects}
    frame = govreport.generate_split(200, seed=3)
    for report, summary in zip(frame["input"], frame["output"], strict=True):
        assert summary.removesuffix(".") in names
        words = {w.strip(".").lower() for w in report.split()}
        assert summary.removesuffix(".").lower() not in words


def test_mirror_metadata_is_r2_layout(tmp_path):
    paths = mirror_paths(tmp_path, "ds")
    govreport.generate(paths.data, seed=1, n_train=10, n_validation=5)
    publish(tmp_path, "ds", paths.data)
    assert paths.uri.read_text().strip() == paths.data.resolve().as_uri()
    listed = sorted(line.split("  ")[1] for line in paths.md5.read_text().splitlines())
    assert listed == ["train-00000-of-00001.parquet", "validation-00000-of-00001.parquet"]


def test_tokenization_masks_the_prompt_and_keeps_the_summary():
    frame = govreport.generate_split(20, seed=2)
    tokenizer = train_tokenizer(list(frame["input"] + " " + frame["output"]))
    tokens = tokenize_split(frame, tokenizer)
    for ids, mask, labels, summary in zip(tokens["input_ids"], tokens["attention_mask"], tokens["labels"], frame["output"], strict=True):
        assert len(ids) == len(mask) == len(labels)
        kept = [label for label in labels if label != IGNORE]
        assert kept == ids[len(ids) - len(kept) :]
        assert kept[-1] == tokenizer.eos_token_id
        assert tokenizer.decode(kept[:-1]).replace(" ", "") == summary.replace(" ", "")
