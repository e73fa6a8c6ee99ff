"""One writer per file: a full-scale run's MLLOG lines, written by each of its processes into a file of its own, become
the run's result file in time order after the run.

The ranks of a run log from several nodes (gpt3's last pipeline rank its ``eval_accuracy`` while rank 0 logs
``eval_stop``; every rank of llama31_405b before the world forms; deepseekv3_671b's last stage every step). Appends from
several nodes to one file on NFS or Lustre interleave or tear lines. So the launch line names a parts folder
(``MLPERF_WF_MLLOG_PARTS``: ``<run folder>/mllog-parts``), where the images' start-up hooks
(``containers/hooks/mlperf_wf_mllog.py``) send every file handler opened on the result file of that process, and the
train job runs ``mlperf-wf merge-mllog`` once the run has ended, whether it succeeded or not.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

PARTS_FOLDER = "mllog-parts"
"""The parts folder's name, beside the result file (the launch line gives its container path)."""
MLLOG_PREFIX = ":::MLLOG "


def parts_folder(result: Path) -> Path:
    return result.parent / PARTS_FOLDER


def _time_ms(line: str) -> float | None:
    start = line.find(MLLOG_PREFIX)
    if start < 0:
        return None
    try:
        stamp = json.loads(line[start + len(MLLOG_PREFIX) :]).get("time_ms")
    except (ValueError, AttributeError):
        return None  # a torn line: kept where its writer put it, and compliance reads it as what it is
    return float(stamp) if isinstance(stamp, int | float) else None


def ordered_lines(result: Path) -> list[str]:
    """The lines of ``result`` and of its parts, in time order (``time_ms``). Lines of equal time keep the order of
    their files (the result file's own first, then the parts by name) and their order in the file; a line without a
    time goes right after the line before it in its own file."""
    sources = [result, *sorted(parts_folder(result).glob("*"))] if parts_folder(result).is_dir() else [result]
    keyed = []
    for source_index, source in enumerate(sources):
        try:
            text = source.read_text(encoding="utf-8", errors="surrogateescape")
        except FileNotFoundError:
            continue
        latest = float("-inf")
        for line_index, line in enumerate(text.splitlines(keepends=True)):
            stamp = _time_ms(line)
            latest = stamp if stamp is not None else latest
            keyed.append(((latest, source_index, line_index), line if line.endswith("\n") else line + "\n"))
    keyed.sort(key=lambda item: item[0])
    return [line for _, line in keyed]


def merge(result: Path) -> int:
    """Write ``result`` as its lines and its parts' in time order (whole or not at all), then remove the parts; the
    number of lines. Without parts the file is left as it is."""
    folder = parts_folder(result)
    if not folder.is_dir():
        return len(result.read_text(errors="surrogateescape").splitlines()) if result.is_file() else 0
    lines = ordered_lines(result)
    partial = result.with_name(f".{result.name}.merging")
    with open(partial, "w", encoding="utf-8", errors="surrogateescape") as handle:
        handle.writelines(lines)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(partial, result)
    for part in folder.iterdir():
        part.unlink()
    folder.rmdir()
    return len(lines)
