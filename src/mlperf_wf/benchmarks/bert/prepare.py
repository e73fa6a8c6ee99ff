"""Data preparation for bert: the reference's TFRecord generation, one shard per text part.

MLCommons publishes the Wikipedia text already extracted, cleaned and split (``results_text.zip``:
``results/part-00000-of-00500`` ... and ``eval.txt``; reference README.md:43-74), and the reference
turns each part into one TFRecord file with ``create_pretraining_data.py`` (README.md:76-102) and
the eval text into ``eval_intermediate``, from which ``pick_eval_samples.py`` keeps 10,000 records
(``eval_10k``, README.md:106-124). Each of those is one shard here (``pretraining_data.py`` does the
reference's steps), so 501 independent jobs at full scale, and a killed preparation reruns only the
parts it had not finished. Parts are read from the zip, which, unlike the tar.gz, opens one member
without reading the ones before it. The vocabulary is the input files' ``vocab.txt``.

At full scale one more shard, ``init_checkpoint``, gives the phase-1 checkpoint the names TensorFlow's checkpoint
reader opens for ``--init_checkpoint=<dir>/model.ckpt-28252``: ``<prefix>.index`` and
``<prefix>.data-00000-of-00001``. The published input files name the data file
``tf1_ckpt/model.ckpt-28252-003.data-00000-of-00001`` (the R2 ``.md5`` list), which no prefix reaches; the shard
hard-links the published files under the reader's names (either data name is accepted).
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import asdict
from pathlib import Path

from mlperf_wf.acquire.prepare import link_or_copy
from mlperf_wf.benchmarks.bert import pretraining_data
from mlperf_wf.benchmarks.bert.wikipedia_text import ARCHIVE_ROOT, part_name
from mlperf_wf.benchmarks.bert.wikipedia_text import EVAL_FILE as EVAL_TEXT
from mlperf_wf.errors import UserError

TEXT_ARCHIVE = "results_text.zip"
TRAIN_FOLDER = "tfrecords"
"""Folder of the training records in the prepared tree (the reference's ``<tfrecord dir>``)."""
EVAL_FILE = "eval_10k"
"""The picked evaluation records (the reference's name)."""
EVAL_SHARD = "eval"
PHASE1_CHECKPOINT = "phase1_ckpt/model.safetensors"
"""Tiny scale: the phase-1 checkpoint the input files hold (``input_files``), relative to them (the reference's
--init_checkpoint)."""
CHECKPOINT_SHARD = "init_checkpoint"
"""Full scale: the phase-1 checkpoint under the names TensorFlow's reader opens (run_pretraining.py --init_checkpoint)."""
CHECKPOINT_PREFIX = "model.ckpt-28252"
CHECKPOINT_FILES = {
    f"{CHECKPOINT_PREFIX}.index": (f"tf1_ckpt/{CHECKPOINT_PREFIX}.index",),
    f"{CHECKPOINT_PREFIX}.data-00000-of-00001": (f"tf1_ckpt/{CHECKPOINT_PREFIX}.data-00000-of-00001", f"tf1_ckpt/{CHECKPOINT_PREFIX}-003.data-00000-of-00001"),
    f"{CHECKPOINT_PREFIX}.meta": (f"tf1_ckpt/{CHECKPOINT_PREFIX}.meta",),
}
"""Reader's name -> the published names it may have in bert_wikipedia_input_files (first found wins)."""
PARTS = {"tiny": 4, "full": 500}
"""Text parts of the published archive at each scale."""
SETTINGS = {
    "tiny": pretraining_data.GenerationSettings(max_seq_length=64, max_predictions_per_seq=10),
    "full": pretraining_data.GenerationSettings(max_seq_length=512, max_predictions_per_seq=76),
}
"""create_pretraining_data.py's flags; full: the reference's (README.md:83-92); tiny: 64 tokens, 10 = round(0.15 x 64) masks."""
EVAL_RECORDS = {"tiny": 512, "full": 10_000}
"""Evaluation records picked (the reference: --num_examples_to_pick=10000)."""


def _scale(scale: str) -> str:
    if scale not in PARTS:
        raise UserError(f"bert: unknown scale {scale!r}; allowed: {', '.join(PARTS)}")
    return scale


def shards(scale: str) -> list[str]:
    """One shard per text part, the evaluation file, and (full scale) the initial checkpoint."""
    count = PARTS[_scale(scale)]
    return [part_name(i, count) for i in range(count)] + [EVAL_SHARD] + ([CHECKPOINT_SHARD] if scale == "full" else [])


def layout(scale: str) -> dict[str, str]:
    """The tree run_pretraining.py reads: ``tfrecords/part-*`` and ``eval_10k`` (--input_file), and at full scale
    ``init_checkpoint/model.ckpt-28252.*`` (--init_checkpoint)."""
    tree = {f"{TRAIN_FOLDER}/{name}": f"{name}/{name}" for name in shards(scale) if name not in (EVAL_SHARD, CHECKPOINT_SHARD)}
    tree[EVAL_FILE] = f"{EVAL_SHARD}/{EVAL_FILE}"
    if scale == "full":
        tree.update({f"{CHECKPOINT_SHARD}/{name}": f"{CHECKPOINT_SHARD}/{name}" for name in CHECKPOINT_FILES})
    return tree


def resources(shard: str, scale: str) -> dict[str, int]:
    """Scheduler resources of one shard (full scale: one 27 MB part becomes ~780 MB of records in pure Python)."""
    if scale == "tiny":
        return {"mem_mb": 2000, "runtime": 10}
    return {"mem_mb": 24000, "runtime": 240}


def _read_text(archive: Path, member: str) -> str:
    if not archive.is_file():
        raise UserError(f"{archive}: missing; the verified bert_wikipedia_preprocessed dataset should contain it")
    try:
        with zipfile.ZipFile(archive) as handle:
            return handle.read(member).decode("utf-8")
    except KeyError:
        raise UserError(f"{archive}: no member {member}; the published archive has {ARCHIVE_ROOT}/part-*-of-00500 and {ARCHIVE_ROOT}/{EVAL_TEXT}") from None
    except zipfile.BadZipFile as err:
        raise UserError(f"{archive}: not a zip archive ({err})") from None


def prepare_shard(shard: str, inputs: dict[str, Path], out_dir: Path, scale: str) -> dict:
    """Write one part's TFRecord file (or the evaluation file) into ``out_dir``."""
    if shard not in shards(scale):
        raise UserError(f"bert: unknown shard {shard!r} at scale {scale}; known: part-NNNNN-of-{PARTS[_scale(scale)]:05d}, {EVAL_SHARD}")
    settings = SETTINGS[scale]
    out_dir.mkdir(parents=True, exist_ok=True)
    if shard == CHECKPOINT_SHARD:
        return _link_checkpoint(inputs["checkpoint"], out_dir, scale)
    vocabulary = pretraining_data.Vocabulary(inputs["checkpoint"] / "vocab.txt", settings.do_lower_case)
    member = f"{ARCHIVE_ROOT}/{EVAL_TEXT if shard == EVAL_SHARD else shard}"
    instances = pretraining_data.create_instances(_read_text(inputs["data"] / TEXT_ARCHIVE, member), vocabulary, settings)
    if shard == EVAL_SHARD:
        intermediate = out_dir / "eval_intermediate"
        pretraining_data.write_tfrecord(intermediate, instances, vocabulary, settings)
        records = pretraining_data.pick_eval_samples(intermediate, out_dir / EVAL_FILE, EVAL_RECORDS[scale])
        intermediate.unlink()
    else:
        records = pretraining_data.write_tfrecord(out_dir / shard, instances, vocabulary, settings)
    summary = {"shard": shard, "scale": scale, "source": member, "records": records, "settings": asdict(settings)}
    (out_dir / "shard.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def _link_checkpoint(input_files: Path, out_dir: Path, scale: str) -> dict:
    """The published phase-1 checkpoint files, hard-linked under the names TensorFlow's reader opens."""
    linked = {}
    for name, candidates in CHECKPOINT_FILES.items():
        found = next((input_files / c for c in candidates if (input_files / c).is_file()), None)
        if found is None:
            raise UserError(f"{input_files}: none of {', '.join(candidates)}; the verified bert_wikipedia_input_files should contain one")
        target = out_dir / name
        target.unlink(missing_ok=True)
        link_or_copy(found, target)
        linked[name] = str(found.relative_to(input_files))
    summary = {"shard": CHECKPOINT_SHARD, "scale": scale, "linked": linked}
    (out_dir / "shard.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
