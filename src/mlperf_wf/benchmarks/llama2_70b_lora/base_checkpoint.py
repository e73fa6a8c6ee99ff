"""Builds the tiny pretrained Llama checkpoint that stands in for Llama-2-70B.

LoRA adapts a capability the base checkpoint already has; it does not create
one (a LoRA on a randomly initialised model stalls far above 0.925). So, as at
full scale, the fine-tuning run starts from a *pretrained* checkpoint. Here it
is pretrained once on a generated corpus of reports in the synthetic language
that name their subject in a ``Title:`` line or a ``Filed under:`` line, so the
base learns which wording goes with which subject. The fine-tuning task (write
"<Subject>." after a prompt template the base never saw)
is new to it.

The checkpoint is a normal Hugging Face folder (``config.json``,
``model.safetensors``, ``tokenizer.json``), published into an R2-layout mirror
and downloaded and verified like the real one.
"""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from mlperf_wf.benchmarks.llama2_70b_lora.language import Language, make_language, make_report
from mlperf_wf.progress import Progress

log = logging.getLogger(__name__)

BOS, EOS, PAD, UNK = "<s>", "</s>", "<pad>", "<unk>"
PROMPT_WORDS = "### Summarize the following text : Summary :"
"""Prompt-template words: in the vocabulary (as English is for Llama), never in the pretraining corpus."""


def pretraining_document(rng: random.Random, language: Language) -> str:
    """A report that states its subject's name, before or after the body."""
    subject = rng.choice(language.subjects)
    body = make_report(rng, language, subject)
    if rng.random() < 0.5:
        return f"Title: {subject.name}.\n {body}"
    return f"{body}\n Filed under: {subject.name}."


def train_tokenizer(texts: list[str]) -> PreTrainedTokenizerFast:
    """Word-level tokenizer trained on ``texts`` with the ``tokenizers`` library.

    Word-level (not BPE) keeps every word of the synthetic language one token,
    so per-token losses are comparable to the real benchmark's scale instead of
    being diluted across sub-word pieces.
    """
    tokenizer = Tokenizer(models.WordLevel(unk_token=UNK))
    tokenizer.normalizer = None
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    tokenizer.decoder = decoders.WordPiece(prefix="##")
    trainer = trainers.WordLevelTrainer(special_tokens=[PAD, BOS, EOS, UNK], show_progress=False)
    tokenizer.train_from_iterator([*texts, PROMPT_WORDS], trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token=BOS, eos_token=EOS, pad_token=PAD, unk_token=UNK)


def model_config(vocab_size: int) -> LlamaConfig:
    """Architecture of the tiny base: a 2-layer Llama with fused-friendly attention sizes."""
    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=176,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=512,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        attn_implementation="eager",
    )


def pack_batch(rows: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad token rows; labels ignore padding."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
    labels = ids.clone()
    labels[ids == pad_id] = -100
    return ids, labels


MAX_NAMING_LOSS = 1.5
"""Largest mean loss (nats) of the subject's name after ``Filed under:`` that a usable base may have.

The fine-tuning target (0.925 per summary token, of which the name is one of three tokens) is reachable only
if the base already names a report's subject well: a base at 2.7 nats leaves LoRA stalled at 0.93. Whether
1500 steps get there depended on the CPU's kernels (it did on one machine, not on another); 3000 steps reach
0.8-0.9 nats with every seed tried.
"""


def naming_loss(model: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast, language: Language, rng: random.Random, reports: int = 200) -> float:
    """Mean cross-entropy of the first token of the subject's name after a report and ``Filed under:``."""
    model.eval()
    total = 0.0
    with torch.no_grad():
        for _ in range(reports):
            subject = rng.choice(language.subjects)
            prefix = [tokenizer.bos_token_id, *tokenizer(f"{make_report(rng, language, subject)}\n Filed under:").input_ids]
            name = tokenizer(f" {subject.name}").input_ids[0]
            logits = model(input_ids=torch.tensor([prefix])).logits[0, -1]
            total += torch.nn.functional.cross_entropy(logits[None], torch.tensor([name])).item()
    model.train()
    return total / reports


def generate(out_dir: Path, seed: int, steps: int = 3000, batch_size: int = 32, lr: float = 5e-3) -> list[Path]:
    """Train the tokenizer and pretrain the base model into ``out_dir`` (a checkpoint folder).

    Refuses (one line) a base that cannot name a report's subject (``MAX_NAMING_LOSS``): every fine-tuning run
    from it would stall above the target.
    """
    torch.manual_seed(seed)
    rng = random.Random(seed)
    language = make_language()
    corpus = [pretraining_document(rng, language) for _ in range(steps * batch_size // 4)]
    tokenizer = train_tokenizer(corpus)
    encoded = [[tokenizer.bos_token_id, *tokenizer(text).input_ids, tokenizer.eos_token_id] for text in corpus]

    model = LlamaForCausalLM(model_config(len(tokenizer)))
    model.config.bos_token_id = tokenizer.bos_token_id
    model.config.eos_token_id = tokenizer.eos_token_id
    model.config.pad_token_id = tokenizer.pad_token_id
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, total_steps=steps, pct_start=0.1)
    model.train()
    progress = Progress(f"pretraining the tiny base model (seed {seed})", steps)
    for step in range(steps):
        rows = [encoded[rng.randrange(len(encoded))] for _ in range(batch_size)]
        ids, labels = pack_batch(rows, tokenizer.pad_token_id)
        loss = model(input_ids=ids, attention_mask=(ids != tokenizer.pad_token_id).long(), labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        progress.step(step + 1, loss=loss.item())

    naming = naming_loss(model, tokenizer, language, random.Random(seed + 1))
    log.info("naming loss of the tiny base model: %.3f nats (at most %s)", naming, MAX_NAMING_LOSS)
    if naming > MAX_NAMING_LOSS:
        raise RuntimeError(
            f"tiny base checkpoint (seed {seed}, {steps} steps): naming loss {naming:.3f} nats > {MAX_NAMING_LOSS}; it cannot name a report's subject"
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    (out_dir / "pretraining.json").write_text(
        json.dumps({"seed": seed, "steps": steps, "batch_size": batch_size, "lr": lr, "final_loss": loss.item(), "naming_loss": naming}, indent=2)
    )
    return sorted(p for p in out_dir.iterdir() if p.is_file())
