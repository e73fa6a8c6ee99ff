"""Seeded stand-in of ``bert_wikipedia_input_files``: ``bert_config.json``, ``vocab.txt``, a phase-1 checkpoint.

The published folder (R2 ``bert-input-files``, reference README.md:3-19) holds the phase-1 checkpoint
every run starts from (``tf1_ckpt/model.ckpt-28252.*``: BERT-large after phase-1 pretraining, masked-LM
accuracy about 0.34085 on eval_10k, README.md:154), ``bert_config.json`` (the model; the reference reads
it with ``--bert_config_file``), ``vocab.txt`` (one WordPiece per line, line number = id;
``create_pretraining_data.py --vocab_file``) and the raw Wikipedia dump. The stand-in writes:

- ``vocab.txt`` of the Markov language and ``bert_config.json`` of the tiny model, in those formats;
- ``phase1_ckpt/model.safetensors``: the tiny model after its own phase 1, pretrained from scratch here
  (AdamW, on text of the same language drawn with this entry's seed, never the benchmark's parts or
  eval text) until its held-out masked-LM accuracy first reaches ``PHASE1_ACCURACY`` (the published
  checkpoint's 0.34), and ``phase1_ckpt/phase1.json`` saying how. TensorFlow checkpoints cannot be
  written without TensorFlow, so this one is a safetensors file of the PyTorch model's weights
  (README.md, "Deviations");
- no Wikipedia dump, which no stage reads.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from mlperf_wf.benchmarks.bert import markov
from mlperf_wf.benchmarks.bert.prepare import PHASE1_CHECKPOINT

TINY_BERT_CONFIG = {
    "attention_probs_dropout_prob": 0.1,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "hidden_size": 128,
    "initializer_range": 0.02,
    "intermediate_size": 256,
    "max_position_embeddings": 64,
    "num_attention_heads": 4,
    "num_hidden_layers": 2,
    "type_vocab_size": 2,
}
"""The tiny model, in the keys of the published bert_config.json (BERT-large: 1024 hidden, 24 layers, 16 heads, 4096 FFN, 512 positions)."""
PHASE1_ACCURACY = 0.34
"""Phase 1 stops at the first evaluation at or above this accuracy (the published checkpoint: 0.34085)."""
PHASE1_LEARNING_RATE = 2e-3
PHASE1_WARMUP_STEPS = 100
PHASE1_BATCH = 32
PHASE1_MAX_STEPS = 3000
PHASE1_EVAL_EVERY_STEPS = 25
PHASE1_EVAL_RECORDS = 512
PHASE1_ARTICLES = (1000, 120)
"""Training and held-out articles of phase 1's own text."""


def write_vocabulary_and_config(out_dir: Path) -> tuple[Path, Path]:
    vocabulary = markov.vocabulary()
    vocab_file = out_dir / "vocab.txt"
    vocab_file.write_text("".join(token + "\n" for token in vocabulary))
    config_file = out_dir / "bert_config.json"
    config_file.write_text(json.dumps({**TINY_BERT_CONFIG, "vocab_size": len(vocabulary)}, indent=2, sort_keys=True) + "\n")
    return vocab_file, config_file


def _phase1_text(count: int, rng: np.random.Generator) -> str:
    matrix = markov.transitions()
    return "\n\n".join("\n".join(markov.article(matrix, (8, 24), (6, 24), rng)) for _ in range(count)) + "\n"


def pretrain_phase1(vocab_file: Path, config_file: Path, seed: int) -> tuple[dict, dict]:
    """(state dict, summary) of the tiny model after phase 1 (see the module docstring)."""
    import torch

    from mlperf_wf.benchmarks.bert import pretraining_data, trainer
    from mlperf_wf.benchmarks.bert.hyperparameters import Hyperparameters
    from mlperf_wf.benchmarks.bert.prepare import SETTINGS

    torch.set_num_threads(1)  # the same bytes on every machine
    settings = pretraining_data.GenerationSettings(
        max_seq_length=SETTINGS["tiny"].max_seq_length, max_predictions_per_seq=SETTINGS["tiny"].max_predictions_per_seq, random_seed=seed
    )
    hp = Hyperparameters(max_seq_length=settings.max_seq_length, max_predictions_per_seq=settings.max_predictions_per_seq)
    vocabulary = pretraining_data.Vocabulary(vocab_file, settings.do_lower_case)
    rng = np.random.default_rng(seed)
    features = [
        [pretraining_data.example_features(i, vocabulary, settings) for i in pretraining_data.create_instances(_phase1_text(count, rng), vocabulary, settings)]
        for count in PHASE1_ARTICLES
    ]
    train, held_out = features[0], features[1][:PHASE1_EVAL_RECORDS]
    held_out_batches = [trainer.batch_of(held_out[i : i + 128], hp, config_file) for i in range(0, len(held_out), 128)]
    torch.manual_seed(seed)
    model = trainer.build_model(config_file)
    optimizer = torch.optim.AdamW(model.parameters(), lr=PHASE1_LEARNING_RATE, weight_decay=0.01)
    order = np.random.default_rng(seed + 1).permutation(len(train))
    accuracy, step = 0.0, 0
    for step in range(1, PHASE1_MAX_STEPS + 1):
        for group in optimizer.param_groups:
            group["lr"] = PHASE1_LEARNING_RATE * min(1.0, step / PHASE1_WARMUP_STEPS)
        start = ((step - 1) * PHASE1_BATCH) % (len(order) - PHASE1_BATCH)
        batch = trainer.batch_of([train[i] for i in order[start : start + PHASE1_BATCH]], hp, config_file)
        trainer.loss_of(model, batch).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step % PHASE1_EVAL_EVERY_STEPS == 0:
            accuracy = trainer.masked_lm_accuracy(model, held_out_batches)
            if accuracy >= PHASE1_ACCURACY:
                break
    if accuracy < PHASE1_ACCURACY:
        raise RuntimeError(f"phase 1 reached masked-LM accuracy {accuracy:.3f} < {PHASE1_ACCURACY} in {PHASE1_MAX_STEPS} steps")
    state = {name: tensor.detach().clone().contiguous() for name, tensor in model.state_dict().items()}
    summary = {
        "optimizer": "adamw",
        "learning_rate": PHASE1_LEARNING_RATE,
        "warmup_steps": PHASE1_WARMUP_STEPS,
        "batch": PHASE1_BATCH,
        "steps": step,
        "training_records": len(train),
        "held_out_records": len(held_out),
        "held_out_masked_lm_accuracy": accuracy,
        "seed": seed,
    }
    return state, summary


def generate(out_dir: Path, seed: int) -> list[Path]:
    """Write ``vocab.txt``, ``bert_config.json``, the phase-1 checkpoint and ``License.txt``."""
    from safetensors.torch import save_file

    out_dir.mkdir(parents=True, exist_ok=True)
    vocab_file, config_file = write_vocabulary_and_config(out_dir)
    state, summary = pretrain_phase1(vocab_file, config_file, seed)
    checkpoint = out_dir / PHASE1_CHECKPOINT
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    save_file(state, str(checkpoint))
    (checkpoint.parent / "phase1.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out_dir / "License.txt").write_text(
        "Tiny stand-in of MLCommons' BERT input files (mlperf-workflow tiny tier): a tiny bert_config.json, the vocab.txt\n"
        f"of a {markov.WORDS}-word Markov language and a phase-1 checkpoint trained on it here; no Wikipedia dump.\n"
    )
    return sorted(p for p in out_dir.rglob("*") if p.is_file())
