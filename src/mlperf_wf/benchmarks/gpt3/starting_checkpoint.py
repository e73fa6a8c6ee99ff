"""Builds the tiny starting checkpoint that stands in for the gpt3 reference's ``ckpt4000_fp32``.

The reference never trains GPT-3 from scratch: every run resumes a checkpoint trained 4000 steps at global
batch 1536 (README.md:64-74), whose validation log perplexity is about 2.776 (README.md:74), and continues
at LR 2e-5 until an evaluation reaches 2.69. The stand-in does the same at tiny size: a 2-layer GPT-2
(transformers' ``GPT2LMHeadModel``: learned positions, GELU, LayerNorm, tied embeddings, as Megatron's GPT)
pretrained for a fixed number of steps on the training shards of the C4 stand-in (regenerated from the
corpus's catalog seed, never its validation documents) to a little above 2.69, then saved with the samples
it consumed. Runs resume it at the rules' learning rate and reach the target on the validation subset.

Its pretraining uses a learning rate (1e-2) far above the runs' 2e-5: a tiny model from scratch needs it
to get near the target within a minute, as the reference's checkpoint needed 6 M samples (README deviation).

The folder is a Hugging Face checkpoint (``config.json``, ``model.safetensors``) plus ``checkpoint.json``
(iteration, consumed samples, global batch, the validation log perplexity measured after saving), published
as the real one is, one tarball ``checkpoint_megatron_fp32.tar`` whose members sit under ``ckpt4000_fp32/``, into
an R2-layout mirror; it is downloaded and verified like the real one and unpacked by preparation.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from mlperf_wf.benchmarks.gpt3 import c4_corpus, tarball, tokenizer
from mlperf_wf.errors import UserError

if TYPE_CHECKING:  # torch loads where the checkpoint is made or read, not where preparation reads its names
    import torch

log = logging.getLogger(__name__)

TARBALL = "checkpoint_megatron_fp32.tar"
"""The one file the R2 ``.md5`` of gpt-3-megatron-fp32-checkpoint lists (README.md:66-69, 175-178)."""
FOLDER = "ckpt4000_fp32"
"""The folder it unpacks to, ``EXTERNAL_MODEL_CHECKPOINT_DIR`` (README.md:68)."""
STATE_FILE = "checkpoint.json"
"""Iteration, consumed samples and global batch of the checkpoint (the reference's ``common.pt`` holds these)."""
CORPUS_ID = "c4_gpt3_spm_preprocessed"
"""Catalog id of the corpus it is pretrained on (its tiny seed regenerates the same documents)."""
SEQUENCE_LENGTH = 2048
"""Pretraining sequence length: the runs' (learned positions beyond it would be untrained)."""
HIDDEN, LAYERS, HEADS = 64, 2, 4
"""Width, blocks and heads (GPT-3 175B: 12288, 96, 96)."""
PRETRAIN_STEPS = 95
"""Pretraining steps: chosen so the validation log perplexity lands a little above 2.69 (test_gpt3.py)."""
PRETRAIN_BATCH = 2
"""Pretraining sequences per step."""
PRETRAIN_LR = 1e-2
"""Pretraining peak learning rate (linear warm-up over PRETRAIN_WARMUP steps, then constant)."""
PRETRAIN_WARMUP = 20
"""Pretraining warm-up steps."""


def model_config(vocab_size: int):
    """A GPT-3-family config at tiny width: no dropout (the reference's --attention-dropout/--hidden-dropout 0)."""
    from transformers import GPT2Config

    return GPT2Config(
        vocab_size=vocab_size,
        n_positions=SEQUENCE_LENGTH,
        n_embd=HIDDEN,
        n_layer=LAYERS,
        n_head=HEADS,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=vocab_size - 1,
        eos_token_id=vocab_size - 1,
        tie_word_embeddings=True,
    )


def read_state(folder: Path) -> dict:
    """``checkpoint.json``; a clear error when it is missing or incomplete."""
    path = folder / STATE_FILE
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise UserError(f"{path}: the starting checkpoint's state is unreadable: {err}") from None
    missing = [key for key in ("iteration", "consumed_samples", "global_batch_size") if not isinstance(state.get(key), int)]
    if missing or state["consumed_samples"] <= 0:
        raise UserError(f"{path}: needs positive integers iteration, consumed_samples, global_batch_size (missing or bad: {missing or 'consumed_samples'})")
    return state


def load_model(folder: Path) -> torch.nn.Module:
    """The checkpoint's model, in training mode."""
    from transformers import GPT2LMHeadModel

    model = GPT2LMHeadModel.from_pretrained(folder)
    model.train()
    return model


def write_corpus_files(out_dir: Path, seed: int) -> tuple[tuple[str, ...], str]:
    """The corpus's indexed datasets in ``out_dir`` (the same files its own generator writes)."""
    c4_corpus.write_files(out_dir, seed)
    return tuple(str(out_dir / prefix) for prefix in c4_corpus.TRAIN_PREFIXES), str(out_dir / c4_corpus.VALIDATION_PREFIX)


def generate(out_dir: Path, seed: int) -> list[Path]:
    """Pretrain the tiny GPT and publish the checkpoint folder as ``checkpoint_megatron_fp32.tar``."""
    import tempfile

    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        write_folder(Path(scratch), seed)
        return [tarball.write(out_dir / TARBALL, Path(scratch), FOLDER)]


def write_folder(out_dir: Path, seed: int) -> list[Path]:
    """Pretrain the tiny GPT and write the checkpoint folder."""
    import tempfile

    import torch
    from transformers import GPT2LMHeadModel

    from mlperf_wf.config.registry import load_dataset
    from mlperf_wf.language_models import causal_trainer

    torch.manual_seed(seed)
    with tempfile.TemporaryDirectory() as scratch:
        train_prefixes, validation_prefix = write_corpus_files(Path(scratch), load_dataset(CORPUS_ID).tiny.seed)
        train = torch.cat([causal_trainer.windows(prefix, SEQUENCE_LENGTH) for prefix in train_prefixes])
        validation = causal_trainer.windows(validation_prefix, SEQUENCE_LENGTH)
    vocab_size = tokenizer.padded_vocabulary_size(len(tokenizer.vocabulary()))
    model = GPT2LMHeadModel(model_config(vocab_size))
    optimizer = torch.optim.AdamW(model.parameters(), lr=PRETRAIN_LR, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    order = torch.randperm(len(train), generator=torch.Generator().manual_seed(seed))
    started = time.time()
    model.train()
    for step in range(PRETRAIN_STEPS):
        for group in optimizer.param_groups:
            group["lr"] = PRETRAIN_LR * min(1.0, (step + 1) / PRETRAIN_WARMUP)
        loss = causal_trainer.optimizer_step(model, train[order[step * PRETRAIN_BATCH : (step + 1) * PRETRAIN_BATCH]], optimizer, 1.0)
        if step % 20 == 0 or step == PRETRAIN_STEPS - 1:
            log.info("gpt3 starting checkpoint: step %d loss %.4f (%.1f s)", step, loss.item(), time.time() - started)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    state = {
        "iteration": PRETRAIN_STEPS,
        "consumed_samples": PRETRAIN_STEPS * PRETRAIN_BATCH,
        "global_batch_size": PRETRAIN_BATCH,
        "learning_rate": PRETRAIN_LR,
        "seed": seed,
        "validation_log_perplexity": round(causal_trainer.log_perplexity(model, validation), 4),
        "corpus": CORPUS_ID,
    }
    (out_dir / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n")
    return sorted(p for p in out_dir.iterdir() if p.is_file())
