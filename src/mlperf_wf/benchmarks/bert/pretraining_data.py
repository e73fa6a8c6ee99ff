"""The reference's TFRecord generation (cleanup_scripts/create_pretraining_data.py and pick_eval_samples.py).

Written from the reference's algorithm, without TensorFlow: documents are read one sentence a line
with blank lines between articles, tokenized with the WordPiece vocabulary (lower-cased), shuffled,
and turned ``dupe_factor`` times into sentence-pair instances ``[CLS] A [SEP] B [SEP]`` (B is the
actual continuation or, half the time, a random span of another article: the next-sentence label),
with ``masked_lm_prob`` of the tokens masked 80% ``[MASK]`` / 10% random word / 10% kept. The calls
on ``random.Random(random_seed)`` come in the reference's order, so the same text, vocabulary and
settings give the same instances. Each instance is one ``tf.train.Example`` with the seven features
run_pretraining.py parses (input_ids, input_mask, segment_ids, masked_lm_positions, masked_lm_ids,
masked_lm_weights, next_sentence_labels).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mlperf_wf.benchmarks.bert.tfrecord import TFRecordWriter, encode_example, read_records
from mlperf_wf.errors import UserError

FEATURES = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids", "masked_lm_weights", "next_sentence_labels")
"""The features of every record, in the reference's order."""


@dataclass(frozen=True)
class GenerationSettings:
    """create_pretraining_data.py's flags (reference README.md:83-92)."""

    max_seq_length: int
    """Tokens per instance, padded (reference 512)."""
    max_predictions_per_seq: int
    """Masked positions per instance, padded (reference 76)."""
    masked_lm_prob: float = 0.15
    """Fraction of tokens masked (reference 0.15)."""
    random_seed: int = 12345
    """Seed of ``random.Random`` (reference 12345; "extremely critical", README.md:104)."""
    dupe_factor: int = 10
    """Passes over the documents, each with new masks (reference 10)."""
    short_seq_prob: float = 0.1
    """Probability of a shorter target length (reference default 0.1)."""
    do_lower_case: bool = True
    """Lower-case before WordPiece (reference True)."""


@dataclass
class Instance:
    tokens: list[str]
    segment_ids: list[int]
    is_random_next: bool
    masked_lm_positions: list[int]
    masked_lm_labels: list[str]


class Vocabulary:
    """vocab.txt (one token a line, line number = id) and the WordPiece tokenizer over it."""

    def __init__(self, vocab_file: Path, do_lower_case: bool) -> None:
        from transformers import BertTokenizer

        if not vocab_file.is_file():
            raise UserError(f"{vocab_file}: missing; the BERT input files should contain vocab.txt")
        self.words = [line.rstrip("\n") for line in vocab_file.read_text(encoding="utf-8").splitlines()]
        self.ids = {word: index for index, word in enumerate(self.words)}
        self._tokenizer = BertTokenizer(str(vocab_file), do_lower_case=do_lower_case)

    def tokenize(self, line: str) -> list[str]:
        return self._tokenizer.tokenize(line)

    def to_ids(self, tokens: list[str]) -> list[int]:
        unknown = self.ids["[UNK]"]
        return [self.ids.get(token, unknown) for token in tokens]


def read_documents(text: str, vocabulary: Vocabulary) -> list[list[list[str]]]:
    """Articles as lists of tokenized sentences (blank lines separate articles; empty ones dropped)."""
    documents: list[list[list[str]]] = [[]]
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            documents.append([])
        tokens = vocabulary.tokenize(line)
        if tokens:
            documents[-1].append(tokens)
    return [document for document in documents if document]


def _truncate_pair(tokens_a: list[str], tokens_b: list[str], max_num_tokens: int, rng: random.Random) -> None:
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


def _mask(tokens: list[str], settings: GenerationSettings, vocab_words: list[str], rng: random.Random) -> tuple[list[str], list[int], list[str]]:
    candidates = [i for i, token in enumerate(tokens) if token not in ("[CLS]", "[SEP]")]
    rng.shuffle(candidates)
    output = list(tokens)
    to_predict = min(settings.max_predictions_per_seq, max(1, round(len(tokens) * settings.masked_lm_prob)))
    masked: list[tuple[int, str]] = []
    covered: set[int] = set()
    for index in candidates:
        if len(masked) >= to_predict:
            break
        if index in covered:
            continue
        covered.add(index)
        if rng.random() < 0.8:
            replacement = "[MASK]"
        elif rng.random() < 0.5:
            replacement = tokens[index]
        else:
            replacement = vocab_words[rng.randint(0, len(vocab_words) - 1)]
        output[index] = replacement
        masked.append((index, tokens[index]))
    masked.sort(key=lambda item: item[0])
    return output, [i for i, _ in masked], [label for _, label in masked]


def _instances_of_document(
    documents: list[list[list[str]]], index: int, settings: GenerationSettings, vocab_words: list[str], rng: random.Random
) -> list[Instance]:
    document = documents[index]
    max_num_tokens = settings.max_seq_length - 3  # [CLS], [SEP], [SEP]
    target = max_num_tokens
    if rng.random() < settings.short_seq_prob:
        target = rng.randint(2, max_num_tokens)
    instances: list[Instance] = []
    chunk: list[list[str]] = []
    length = 0
    i = 0
    while i < len(document):
        chunk.append(document[i])
        length += len(document[i])
        if i == len(document) - 1 or length >= target:
            if chunk:
                a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
                tokens_a = [token for segment in chunk[:a_end] for token in segment]
                tokens_b: list[str] = []
                if len(chunk) == 1 or rng.random() < 0.5:
                    is_random_next = True
                    target_b = target - len(tokens_a)
                    for _ in range(10):
                        other = rng.randint(0, len(documents) - 1)
                        if other != index:
                            break
                    random_document = documents[other]
                    for segment in random_document[rng.randint(0, len(random_document) - 1) :]:
                        tokens_b.extend(segment)
                        if len(tokens_b) >= target_b:
                            break
                    i -= len(chunk) - a_end  # the unused sentences are used again
                else:
                    is_random_next = False
                    tokens_b = [token for segment in chunk[a_end:] for token in segment]
                _truncate_pair(tokens_a, tokens_b, max_num_tokens, rng)
                tokens = ["[CLS]", *tokens_a, "[SEP]", *tokens_b, "[SEP]"]
                segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
                tokens, positions, labels = _mask(tokens, settings, vocab_words, rng)
                instances.append(Instance(tokens, segment_ids, is_random_next, positions, labels))
            chunk, length = [], 0
        i += 1
    return instances


def create_instances(text: str, vocabulary: Vocabulary, settings: GenerationSettings) -> list[Instance]:
    """Every instance of one input file, shuffled (create_training_instances)."""
    rng = random.Random(settings.random_seed)
    documents = read_documents(text, vocabulary)
    rng.shuffle(documents)
    instances: list[Instance] = []
    for _ in range(settings.dupe_factor):
        for index in range(len(documents)):
            instances.extend(_instances_of_document(documents, index, settings, vocabulary.words, rng))
    rng.shuffle(instances)
    return instances


def example_features(instance: Instance, vocabulary: Vocabulary, settings: GenerationSettings) -> dict[str, np.ndarray]:
    """The padded features of one instance (write_instance_to_example_files)."""
    ids = vocabulary.to_ids(instance.tokens)
    if len(ids) > settings.max_seq_length:
        raise ValueError(f"instance of {len(ids)} tokens exceeds max_seq_length {settings.max_seq_length}")
    pad = settings.max_seq_length - len(ids)
    predictions = len(instance.masked_lm_positions)
    mask_pad = settings.max_predictions_per_seq - predictions
    return {
        "input_ids": np.array(ids + [0] * pad, dtype=np.int64),
        "input_mask": np.array([1] * len(ids) + [0] * pad, dtype=np.int64),
        "segment_ids": np.array(instance.segment_ids + [0] * pad, dtype=np.int64),
        "masked_lm_positions": np.array(instance.masked_lm_positions + [0] * mask_pad, dtype=np.int64),
        "masked_lm_ids": np.array(vocabulary.to_ids(instance.masked_lm_labels) + [0] * mask_pad, dtype=np.int64),
        "masked_lm_weights": np.array([1.0] * predictions + [0.0] * mask_pad, dtype=np.float32),
        "next_sentence_labels": np.array([1 if instance.is_random_next else 0], dtype=np.int64),
    }


def write_tfrecord(path: Path, instances: list[Instance], vocabulary: Vocabulary, settings: GenerationSettings) -> int:
    """Write the instances to ``path`` (written to a temporary name, then renamed: a kill leaves no half file)."""
    partial = path.with_name(path.name + ".partial")
    with TFRecordWriter(partial) as writer:
        for instance in instances:
            writer.write(encode_example(example_features(instance, vocabulary, settings)))
    partial.replace(path)
    return len(instances)


def pick_eval_samples(source: Path, target: Path, count: int) -> int:
    """Every ``len/count``-th record of ``source`` into ``target`` (pick_eval_samples.py)."""
    records = list(read_records(source))
    if len(records) < count:
        raise ValueError(f"{source}: {len(records)} evaluation records, fewer than the {count} to pick")
    ratio = len(records) / count
    partial = target.with_name(target.name + ".partial")
    with TFRecordWriter(partial) as writer:
        for i in range(count):
            writer.write(records[int(i * ratio)])
    partial.replace(target)
    return count
