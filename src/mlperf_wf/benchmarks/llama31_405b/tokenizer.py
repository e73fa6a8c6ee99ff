"""Seeded stand-in of the Mixtral 8x22B tokenizer folder, in the Hugging Face format the reference loads.

The reference opens ``--tokenizer_path`` with NeMo's ``AutoTokenizer`` (pretrain_llama31.py:209), which reads
``tokenizer.json``/``tokenizer_config.json``/``special_tokens_map.json``; the published folder also has the
SentencePiece ``tokenizer.model`` and ``tokenizer.model.v1`` (README.md:82-87). The stand-in is a word-level
tokenizer over the C4 stand-in's 1024 symbols plus Mixtral's ``<s>``/``</s>`` (``language_models.symbol_tokenizer``),
and no SentencePiece files (the tiny trainer never reads them; the catalog's tiny mirror lists what it writes).
The real vocabulary has 32,768 tokens; the stand-in's 1026 keep one token per corpus symbol, so the log
perplexity is the corpus's own nats per symbol.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mlperf_wf.language_models import symbol_tokenizer

if TYPE_CHECKING:  # transformers loads where a tokenizer is built, not where its constants are read
    from transformers import PreTrainedTokenizerFast

SYMBOLS = 1024
"""Symbols of the corpus; token id i is symbol i (more than e^5.6 ~ 270, so the target is not a unigram fit)."""
BOS = "<s>"
EOS = "</s>"


def build() -> PreTrainedTokenizerFast:
    """The tokenizer: ids 0..1023 are the symbols, then BOS and EOS (as Mixtral names them)."""
    return symbol_tokenizer.build(SYMBOLS, BOS, EOS, max_length=8192)


def generate(out_dir: Path, seed: int) -> list[Path]:
    """Write the tokenizer folder (``seed`` is unused: the tokenizer is fixed by the corpus's symbols)."""
    del seed
    return symbol_tokenizer.save(build(), out_dir, "the Mixtral 8x22B tokenizer")
