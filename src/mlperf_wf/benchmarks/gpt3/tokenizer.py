"""Seeded stand-in of the GPT-2 BPE files (``vocab.json``, ``merges.txt``) the gpt3 reference is given.

The reference's data is tokenized with a SentencePiece model (``c4_en_301_5Mexp2_spm.model``) by the
preprocessing step; at training time Megatron is handed the GPT-2 BPE ``vocab.json`` and ``merges.txt``
(run_gpt3.sh:75-76) and reads them only for the end-of-document id and the vocabulary size
(README.md:44-47). The stand-in is a byte-level BPE vocabulary in the same two files, over the tiny
corpus's 128 symbols (the bytes 0-127, with GPT-2's byte-to-character mapping) plus ``<|endoftext|>``,
and no merges: every symbol is one token, so nats per token are the corpus's own. Hugging Face's GPT-2
tokenizer (and Megatron's ``GPT2BPETokenizer``) load the folder as they load the real one.
"""

from __future__ import annotations

import json
from pathlib import Path

SYMBOLS = 128
"""Corpus symbols: token id i is the byte i."""
EOD = "<|endoftext|>"
"""GPT-2's end-of-document token (id 50256 in the real vocabulary, ``SYMBOLS`` here)."""
MAKE_VOCAB_SIZE_DIVISIBLE_BY = 128
"""Megatron pads the vocabulary to a multiple of this (its ``--make-vocab-size-divisible-by`` default) times TP."""


def byte_characters() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map (printable Latin-1 bytes map to themselves)."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    shifted, extra = {}, 0
    for byte in range(256):
        if byte in kept:
            shifted[byte] = chr(byte)
        else:  # control and blank bytes move above 255 so every byte has a visible character
            shifted[byte] = chr(256 + extra)
            extra += 1
    return shifted


def vocabulary() -> dict[str, int]:
    """``vocab.json``: symbol i (byte i) is id i, then the end-of-document token."""
    characters = byte_characters()
    vocab = {characters[i]: i for i in range(SYMBOLS)}
    vocab[EOD] = SYMBOLS
    return vocab


def text_of(symbols: list[int]) -> str:
    """The text whose GPT-2 byte-level tokenization is ``symbols`` (one ASCII byte per symbol)."""
    return bytes(symbols).decode("ascii")


def padded_vocabulary_size(size: int, tensor_parallel: int = 1) -> int:
    """Megatron's embedding rows for a vocabulary of ``size`` (``_vocab_size_with_padding``)."""
    multiple = MAKE_VOCAB_SIZE_DIVISIBLE_BY * tensor_parallel
    return -(-size // multiple) * multiple


def load(folder: Path) -> dict[str, int]:
    """``vocab.json`` of a tokenizer folder; a clear error when it is not a GPT-2 style vocabulary with EOD."""
    path = folder / "vocab.json"
    try:
        vocab = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: not a readable vocab.json: {err}") from None
    if EOD not in vocab or not (folder / "merges.txt").is_file():
        raise ValueError(f"{folder}: needs vocab.json with {EOD!r} and merges.txt (the GPT-2 BPE files)")
    return vocab


def build():
    """The files as a Hugging Face GPT-2 tokenizer (the tiny corpus is tokenized with it)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE(vocab=vocabulary(), merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=core, bos_token=EOD, eos_token=EOD, unk_token=EOD, model_max_length=2048)


def generate(out_dir: Path, seed: int) -> list[Path]:
    """Write ``vocab.json`` and ``merges.txt`` (``seed`` is unused: the files follow from the symbols)."""
    del seed
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "vocab.json").write_text(json.dumps(vocabulary(), ensure_ascii=False))
    (out_dir / "merges.txt").write_text("#version: 0.2\n")  # no merges: one token per byte symbol
    return [out_dir / "merges.txt", out_dir / "vocab.json"]
