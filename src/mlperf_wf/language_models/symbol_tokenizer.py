"""Word-level tokenizers over a Markov corpus's symbols, written as Hugging Face tokenizer folders.

The references open their tokenizer folder with ``AutoTokenizer.from_pretrained`` (or read the same
``tokenizer.json``). The stand-ins map symbol ``i`` (text ``t000``...) to token id ``i`` so nats per token
are the corpus's own, and append the special tokens the real tokenizer names.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # tokenizers and transformers load where a tokenizer is built
    from transformers import PreTrainedTokenizerFast


def symbol(index: int) -> str:
    """The text of symbol ``index``."""
    return f"t{index:03d}"


def build(symbols: int, bos: str, eos: str, max_length: int) -> PreTrainedTokenizerFast:
    """Ids 0..symbols-1 are the symbols, then ``bos`` and ``eos`` (as the real tokenizer names them)."""
    vocab = {symbol(i): i for i in range(symbols)}
    vocab[bos] = symbols
    vocab[eos] = symbols + 1
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=eos))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=core, bos_token=bos, eos_token=eos, pad_token=eos, model_max_length=max_length)


def save(tokenizer: PreTrainedTokenizerFast, out_dir: Path, what: str) -> list[Path]:
    """Write the folder and a README saying what it stands in for."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(out_dir)
    (out_dir / "README.md").write_text(
        f"Tiny stand-in of {what} (mlperf-workflow tiny tier): a word-level tokenizer over {len(tokenizer) - 2} corpus\n"
        f"symbols plus {tokenizer.bos_token} and {tokenizer.eos_token}, in the Hugging Face format; no model weights.\n"
    )
    return sorted(p for p in out_dir.rglob("*") if p.is_file())
