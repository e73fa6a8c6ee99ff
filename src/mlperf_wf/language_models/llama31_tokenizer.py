"""Seeded stand-in of the Llama 3.1 8B tokenizer folder, in the Hugging Face format the reference loads.

The reference (NeMo) opens the tokenizer folder with ``AutoTokenizer.from_pretrained`` and reads
``tokenizer.json``/``tokenizer_config.json``/``special_tokens_map.json``. The stand-in is a word-level
tokenizer over the C4 stand-in's 256 symbols plus the beginning/end-of-text tokens Llama 3.1 uses
(``language_models.symbol_tokenizer``). The real folder also holds the 8B weights (33 GB); the
pretraining benchmark only reads its tokenizer, so the stand-in has none.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mlperf_wf.language_models import symbol_tokenizer

if TYPE_CHECKING:  # transformers loads where a tokenizer is built, not where its constants are read
    from transformers import PreTrainedTokenizerFast

SYMBOLS = 256
"""Symbols of the corpus; token id i is symbol i."""
BOS = "<|begin_of_text|>"
EOS = "<|end_of_text|>"


def build() -> PreTrainedTokenizerFast:
    """The tokenizer: ids 0..255 are the symbols, then BOS and EOS (as Llama 3.1 names them)."""
    return symbol_tokenizer.build(SYMBOLS, BOS, EOS, max_length=8192)


def generate(out_dir: Path, seed: int) -> list[Path]:
    """Write the tokenizer folder (``seed`` is unused: the tokenizer is fixed by the corpus's symbols)."""
    del seed
    return symbol_tokenizer.save(build(), out_dir, "the Llama 3.1 8B tokenizer")
