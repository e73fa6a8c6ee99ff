"""Seeded stand-in of the Llama 3.1 8B tokenizer folder, in the Hugging Face format the reference loads.

The reference (NeMo) opens the tokenizer folder with ``AutoTokenizer.from_pretrained`` and reads
``tokenizer.json``/``tokenizer_config.json``/``special_tokens_map.json``. The tiny tier writes those
files for a word-level tokenizer over the Markov corpus's symbols (``t000`` ... ``t255``, one token
each, so token ids and symbols coincide and nats per token are the corpus's own), plus the
beginning/end-of-text tokens Llama 3.1 uses. The real folder also holds the 8B weights (33 GB); the
pretraining benchmark only reads its tokenizer, so the stand-in has none.
"""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

SYMBOLS = 256
"""Symbols of the corpus; token id i is symbol i."""
BOS = "<|begin_of_text|>"
EOS = "<|end_of_text|>"


def symbol(index: int) -> str:
    """The text of symbol ``index``."""
    return f"t{index:03d}"


def build() -> PreTrainedTokenizerFast:
    """The tokenizer: ids 0..255 are the symbols, then BOS and EOS (as Llama 3.1 names them)."""
    vocab = {symbol(i): i for i in range(SYMBOLS)}
    vocab[BOS] = SYMBOLS
    vocab[EOS] = SYMBOLS + 1
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=EOS))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=core, bos_token=BOS, eos_token=EOS, pad_token=EOS, model_max_length=8192)


def generate(out_dir: Path, seed: int) -> list[Path]:
    """Write the tokenizer folder (``seed`` is unused: the tokenizer is fixed by the corpus's symbols)."""
    del seed
    out_dir.mkdir(parents=True, exist_ok=True)
    build().save_pretrained(out_dir)
    (out_dir / "README.md").write_text(
        "Tiny stand-in of the Llama 3.1 8B tokenizer (mlperf-workflow tiny tier): a word-level tokenizer over\n"
        f"{SYMBOLS} corpus symbols plus {BOS} and {EOS}, in the Hugging Face format; no model weights.\n"
    )
    return sorted(p for p in out_dir.rglob("*") if p.is_file())
