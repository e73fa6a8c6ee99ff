"""Data preparation for bert: the reference's TFRecord generation, one shard per text part.

MLCommons publishes the Wikipedia text already extracted, cleaned and split (``results_text.zip``:
``results/part-00000-of-00500`` ... and ``eval.txt``; reference README.md:43-74), and the reference
turns each part into one TFRecord file with ``create_pretraining_data.py`` (README.md:76-102) and
the eval text into ``eval_intermediate``, from which ``pick_eval_samples.py`` keeps 10,000 records
(``eval_10k``, README.md:106-124). Each of those is one shard here (``pretraining_data.py`` does the
reference's steps), so 501 independent jobs at full scale, and a killed preparation reruns only the
parts it had not finished. Parts are read from the zip, which, unlike the tar.gz, opens one member
without reading the ones before it. The vocabulary is the input files' ``vocab.txt``.
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import asdict
from pathlib import Path

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
    """One shard per text part, and the evaluation file."""
    count = PARTS[_scale(scale)]
    return [part_name(i, count) for i in range(count)] + [EVAL_SHARD]


def layout(scale: str) -> dict[str, str]:
    """The tree run_pretraining.py's --input_file globs read: ``tfrecords/part-*`` and ``eval_10k``."""
    tree = {f"{TRAIN_FOLDER}/{name}": f"{name}/{name}" for name in shards(scale) if name != EVAL_SHARD}
    tree[EVAL_FILE] = f"{EVAL_SHARD}/{EVAL_FILE}"
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
