"""Tiny-scale bert trainer: BERT masked-LM + next-sentence pretraining on the prepared TFRecords, on CPU.

It follows the reference (retired_benchmarks/bert/run_pretraining.py, modeling.py, optimization.py):
the model comes from the input files' ``bert_config.json`` (Hugging Face ``BertForPreTraining``, the
PyTorch stand-in for the reference's TensorFlow model) with the weights of their phase-1 checkpoint
(``--init_checkpoint``); training records are read from the
shuffled ``part-*`` TFRecord files, four interleaved, through a 1000-record shuffle buffer
(``input_fn_builder``); the loss is the masked-LM cross-entropy over the ``masked_lm_weights``
positions plus the next-sentence loss; gradients are clipped to global norm 1.0 and applied by LAMB
(``lamb.py``) under linear warm-up then polynomial decay. Every ``eval_every_samples`` sequences the
masked-LM accuracy (weighted by ``masked_lm_weights``, as ``tf.metrics.accuracy``) over the
held-out ``eval_10k`` file is logged as ``eval_accuracy``, with ``epoch_num`` = sequences trained
(the closed rules ask for epoch_num; bert's RCPs count samples) and ``samples_count``. The run stops
at the target read from the compliance rules. Every mllog value is the value the loop uses.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
from mlperf_logging.mllog import constants

from mlperf_wf.benchmarks.bert import tfrecord
from mlperf_wf.benchmarks.bert.hyperparameters import Hyperparameters
from mlperf_wf.benchmarks.bert.lamb import Lamb
from mlperf_wf.benchmarks.bert.prepare import EVAL_FILE, PHASE1_CHECKPOINT, TRAIN_FOLDER
from mlperf_wf.errors import UserError
from mlperf_wf.run.harness import TinyRun

CONFIG_FILE = "bert_config.json"
CYCLE_LENGTH = 4
"""Training files read at once (the reference: min(num_cpu_threads=4..8, files))."""
SHUFFLE_BUFFER = 1000
"""Records in the shuffle buffer (the reference's ``d.shuffle(buffer_size=1000)``)."""
INPUT_KEYS = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids", "masked_lm_weights", "next_sentence_labels")


def training_records(files: list[Path], seed: int) -> Iterator[dict[str, np.ndarray]]:
    """Endless training examples: files in a seeded order, ``CYCLE_LENGTH`` interleaved, through a shuffle buffer."""
    rng = random.Random(seed)
    while True:
        order = list(files)
        rng.shuffle(order)
        streams = [tfrecord.read_examples(path, check_crc=False) for path in order[:CYCLE_LENGTH]]
        waiting = order[CYCLE_LENGTH:]
        buffer: list[dict[str, np.ndarray]] = []
        while streams:
            for stream in list(streams):
                example = next(stream, None)
                if example is None:
                    streams.remove(stream)
                    if waiting:
                        streams.append(tfrecord.read_examples(waiting.pop(0), check_crc=False))
                    continue
                if len(buffer) < SHUFFLE_BUFFER:
                    buffer.append(example)
                    continue
                slot = rng.randrange(SHUFFLE_BUFFER)
                yield buffer[slot]
                buffer[slot] = example
        rng.shuffle(buffer)
        yield from buffer


def batch_of(examples: list[dict[str, np.ndarray]], hp: Hyperparameters, source: Path) -> dict[str, torch.Tensor]:
    """Stack examples into tensors; records of another shape than the hyperparameters say are an error."""
    expected = {"input_ids": hp.max_seq_length, "masked_lm_positions": hp.max_predictions_per_seq}
    for key, size in expected.items():
        if len(examples[0][key]) != size:
            raise UserError(f"{source}: records have {key} of length {len(examples[0][key])}, the hyperparameters say {size}")
    return {key: torch.from_numpy(np.stack([example[key] for example in examples])) for key in INPUT_KEYS}


def pretraining_outputs(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(masked-LM logits at the masked positions, next-sentence logits), as the reference's gather_indexes."""
    sequence, pooled = model.bert(input_ids=batch["input_ids"], attention_mask=batch["input_mask"], token_type_ids=batch["segment_ids"], return_dict=False)[:2]
    positions = batch["masked_lm_positions"].unsqueeze(-1).expand(-1, -1, sequence.size(-1))
    gathered = torch.gather(sequence, 1, positions)
    return model.cls.predictions(gathered), model.cls.seq_relationship(pooled)


def loss_of(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Masked-LM loss (mean over real masked positions) plus next-sentence loss (get_masked_lm_output/get_next_sentence_output)."""
    mlm_logits, nsp_logits = pretraining_outputs(model, batch)
    weights = batch["masked_lm_weights"]
    per_position = torch.nn.functional.cross_entropy(mlm_logits.flatten(0, 1), batch["masked_lm_ids"].flatten(), reduction="none")
    mlm = (per_position * weights.flatten()).sum() / (weights.sum() + 1e-5)
    nsp = torch.nn.functional.cross_entropy(nsp_logits, batch["next_sentence_labels"].flatten())
    return mlm + nsp


def masked_lm_accuracy(model: torch.nn.Module, batches: list[dict[str, torch.Tensor]]) -> float:
    """Accuracy over the masked positions, weighted by masked_lm_weights (the reference's tf.metrics.accuracy)."""
    model.eval()
    correct = total = 0.0
    with torch.no_grad():
        for batch in batches:
            mlm_logits, _ = pretraining_outputs(model, batch)
            weights = batch["masked_lm_weights"]
            correct += float(((mlm_logits.argmax(-1) == batch["masked_lm_ids"]).float() * weights).sum())
            total += float(weights.sum())
    model.train()
    return correct / total


def learning_rate_at(step: int, hp: Hyperparameters) -> float:
    """optimization.py's schedule: polynomial decay to 0 over num_train_steps, linear warm-up from start_warmup_step."""
    decayed = hp.learning_rate * (1.0 - min(step, hp.num_train_steps) / hp.num_train_steps) ** hp.poly_power
    warm = step - hp.start_warmup_step
    if hp.num_warmup_steps and warm < hp.num_warmup_steps:
        return hp.learning_rate * warm / hp.num_warmup_steps
    return decayed


def build_model(config_file: Path) -> torch.nn.Module:
    """BertForPreTraining from the reference's bert_config.json keys."""
    from transformers import BertConfig, BertForPreTraining

    if not config_file.is_file():
        raise UserError(f"{config_file}: missing; the BERT input files should contain {CONFIG_FILE}")
    values = json.loads(config_file.read_text())
    config = BertConfig(**values, attn_implementation="sdpa")
    return BertForPreTraining(config)


def load_model(input_files: Path) -> torch.nn.Module:
    """The model of ``bert_config.json`` with the phase-1 checkpoint's weights (--bert_config_file, --init_checkpoint)."""
    from safetensors.torch import load_file

    model = build_model(input_files / CONFIG_FILE)
    checkpoint = input_files / PHASE1_CHECKPOINT
    if not checkpoint.is_file():
        raise UserError(f"{checkpoint}: missing; the BERT input files should contain the phase-1 checkpoint")
    try:
        model.load_state_dict(load_file(str(checkpoint)), strict=True)
    except RuntimeError as err:
        raise UserError(f"{checkpoint}: does not fit {input_files / CONFIG_FILE}: {str(err).splitlines()[0]}") from None
    return model


def train(run: TinyRun, hp: Hyperparameters) -> dict:
    """Run to the target (or num_train_steps); the harness logs the preamble and hyperparameters."""
    torch.manual_seed(run.spec.seed)  # dropout and the record order are the run's; the weights start from phase 1
    model = load_model(run.spec.input("checkpoint"))
    optimizer = Lamb(
        model.named_parameters(),
        lr=learning_rate_at(0, hp),
        beta_1=hp.lamb_beta_1,
        beta_2=hp.lamb_beta_2,
        epsilon=hp.lamb_epsilon,
        weight_decay_rate=hp.lamb_weight_decay_rate,
    )
    for tensor in model.state_dict():  # every tensor comes from the phase-1 checkpoint (rounds 1.1.0-2.1.0 ask for each)
        run.event("weights_initialization", None, tensor=tensor)
    run.config({f"lowest_numerical_precision_in_{part}": "fp32" for part in ("linear", "attn", "comm")})
    run.begin()

    train_files = sorted((run.spec.data_dir / TRAIN_FOLDER).glob("part-*"))
    eval_file = run.spec.data_dir / EVAL_FILE
    if not train_files or not eval_file.is_file():
        raise UserError(f"{run.spec.data_dir}: no {TRAIN_FOLDER}/part-* training records or no {EVAL_FILE}; run the preparation")
    eval_examples = list(tfrecord.read_examples(eval_file, check_crc=False))
    if len(eval_examples) != hp.eval_samples:
        raise UserError(f"{eval_file}: {len(eval_examples)} records, but eval_samples is {hp.eval_samples}")
    eval_batches = [batch_of(eval_examples[i : i + 128], hp, eval_file) for i in range(0, len(eval_examples), 128)]
    train_count = sum(1 for path in train_files for _ in tfrecord.read_records(path, check_crc=False))
    run.event(constants.TRAIN_SAMPLES, train_count)
    run.event(constants.EVAL_SAMPLES, len(eval_examples))

    stream = training_records(train_files, run.spec.seed)
    samples, next_eval, status, value, history = 0, hp.eval_every_samples, constants.ABORTED, float("nan"), []
    run.block_start(samples_count=0, epoch_num=0)
    for step in range(hp.num_train_steps):
        batch = batch_of([next(stream) for _ in range(hp.global_batch_size)], hp, train_files[0])
        for group in optimizer.param_groups:
            group["lr"] = learning_rate_at(step, hp)
        loss = loss_of(model, batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), hp.gradient_clip_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        samples += hp.global_batch_size
        if samples >= next_eval:
            next_eval += hp.eval_every_samples
            run.block_stop(samples_count=samples, epoch_num=samples)
            run.eval_start(samples_count=samples, epoch_num=samples)
            value = masked_lm_accuracy(model, eval_batches)
            run.eval_result(value, samples_count=samples, epoch_num=samples)
            history.append({"samples": samples, "masked_lm_accuracy": value, "seconds": run.seconds})
            if run.spec.target <= value:
                status = constants.SUCCESS
                break
            run.block_start(samples_count=samples, epoch_num=samples)
    run.finish(status, samples_count=samples, epoch_num=samples)
    return {"status": status, "samples": samples, "masked_lm_accuracy": value, "seconds": run.seconds, "history": history}
