"""Data preparation for llama2_70b_lora.

Full scale: MLCommons publishes SCROLLS GovReport already tokenized with the
Llama-2 tokenizer (parquet with ``input_ids``, ``attention_mask``, ``labels``),
and the reference reads those files as they are. Preparation therefore checks
the columns and row counts and hard-links the verified files (a symlink would
dangle inside the container, which mounts only the prepared folder).

The prepared data is one shard (``govreport``); ``layout`` exposes its two files.

Tiny scale: the generated reports are raw text (``input``/``output`` columns as
in raw SCROLLS). They are tokenized here with the tokenizer that ships with the
checkpoint (a byte-level BPE trained with the ``tokenizers`` library on the
generated language), using the reference's prompt template, into the same
three columns. ``labels`` is -100 on the prompt so loss counts summary tokens.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from mlperf_wf.acquire.prepare import link_or_copy
from mlperf_wf.errors import UserError

if TYPE_CHECKING:  # pandas and pyarrow load where a shard is made, not on every parse that lists the shards
    import pandas as pd

SPLITS = ("train", "validation")
COLUMNS = ("input_ids", "attention_mask", "labels")
PROMPT = "### Summarize the following text:\n {document}\n ### Summary:\n"
"""The reference's GovReport template (training:llama2_70b_lora/scripts/utils.py)."""
IGNORE = -100


def shard_name(split: str) -> str:
    """File name of a split, as published."""
    return f"{split}-00000-of-00001.parquet"


def tokenize_split(frame: pd.DataFrame, tokenizer) -> pd.DataFrame:
    """Tokenize (report, summary) rows into input_ids/attention_mask/labels."""
    import pandas as pd

    rows = []
    for document, summary in zip(frame["input"], frame["output"], strict=True):
        prompt = [tokenizer.bos_token_id, *tokenizer(PROMPT.format(document=document)).input_ids]
        answer = [*tokenizer(f" {summary}").input_ids, tokenizer.eos_token_id]
        input_ids = prompt + answer
        rows.append(
            {
                "input_ids": input_ids,
                "attention_mask": [1] * len(input_ids),
                "labels": [IGNORE] * len(prompt) + answer,
            }
        )
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _check_tokenized(path: Path) -> int:
    import pyarrow.parquet as pq

    schema = pq.read_schema(path)
    missing = [c for c in COLUMNS if c not in schema.names]
    if missing:
        raise UserError(f"{path}: missing columns {missing}; expected {list(COLUMNS)} (pre-tokenized GovReport)")
    return pq.read_metadata(path).num_rows


SHARD = "govreport"
"""The one shard: the data is small (a few hundred MB), there is nothing to split."""


def shards(scale: str) -> list[str]:
    """One shard at every scale."""
    return [SHARD]


def layout(scale: str) -> dict[str, str]:
    """The folder the trainer (and the reference's ``--dataset_path``) reads: the two parquet files."""
    return {name: f"{SHARD}/{name}" for name in [*(shard_name(split) for split in SPLITS), "prepared.json"]}


def prepare_shard(shard: str, inputs: dict[str, Path], out_dir: Path, scale: str) -> dict:
    """Prepare ``inputs['data']`` (and the tokenizer in ``inputs['checkpoint']``) into ``out_dir``."""
    if shard != SHARD:
        raise UserError(f"llama2_70b_lora: unknown shard {shard!r}; known: {SHARD}")
    out_dir.mkdir(parents=True, exist_ok=True)
    data = inputs["data"]
    rows: dict[str, int] = {}
    if scale == "full":
        for split in SPLITS:
            source = data / shard_name(split)
            rows[split] = _check_tokenized(source)
            link_or_copy(source, out_dir / shard_name(split))
    else:
        import pandas as pd
        from transformers import PreTrainedTokenizerFast

        tokenizer = PreTrainedTokenizerFast.from_pretrained(inputs["checkpoint"])
        for split in SPLITS:
            frame = tokenize_split(pd.read_parquet(data / shard_name(split)), tokenizer)
            frame.to_parquet(out_dir / shard_name(split), index=False)
            rows[split] = len(frame)
    summary = {"scale": scale, "rows": rows, "columns": list(COLUMNS)}
    (out_dir / "prepared.json").write_text(json.dumps(summary, indent=2))
    return summary
