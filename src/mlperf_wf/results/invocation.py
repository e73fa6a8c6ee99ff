"""What the running (or the last) Snakemake invocation in a campaign folder targets, so that ``mlperf-wf status`` with
no arguments shows it rather than the config file's benchmarks.

The workflow records each invocation that runs jobs (its ``onstart``, after the DAG is built) in
``.snakemake/mlperf-wf/invocation.json``: the ``--config`` values (and ``--configfile`` contents) Snakemake was given
and the benchmarks its jobs belong to. A Snakemake that runs but has not recorded itself yet (still building its DAG)
is followed by the benchmarks its output lock names.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from mlperf_wf.results.snakemake_state import read_snakemake_records, snakemake_processes_in

RECORD = Path(".snakemake/mlperf-wf/invocation.json")
"""Where the workflow records its invocation, relative to the campaign folder."""


@dataclass(frozen=True)
class Invocation:
    """One Snakemake invocation in the folder, as ``status`` follows it."""

    config: dict = field(default_factory=dict)
    """The ``--config`` values it was given (with ``--configfile`` contents), as Snakemake parsed them."""
    benchmarks: list[str] = field(default_factory=list)
    """The benchmarks its jobs belong to, in the config's order (none: the config's benchmarks)."""
    running: bool = False
    """It is running now (else it is the last one that ran jobs here)."""
    pid: int | None = None
    """Its process id."""
    started: float | None = None
    """When it recorded itself (seconds since the epoch)."""

    def config_items(self) -> list[str]:
        """Its ``--config`` values as ``KEY=VALUE`` items (values in JSON, which YAML reads back)."""
        return [f"{key}={json.dumps(value)}" for key, value in self.config.items()]

    def describe(self) -> str:
        """One line: which invocation the status follows, and its ``--config``."""
        which = f"the running Snakemake (pid {self.pid})" if self.running else "the last Snakemake invocation"
        given = " ".join(f"{key}={_as_given(value)}" for key, value in self.config.items())
        return f"status follows {which} ({'--config ' + given if given else 'no --config'})" + (
            f"; its benchmarks: {', '.join(self.benchmarks)}" if self.benchmarks else ""
        )


def _as_given(value: object) -> str:
    """A ``--config`` value as typed on the command line (``[a,b]`` for a list)."""
    if isinstance(value, list):
        return "[" + ",".join(_as_given(item) for item in value) + "]"
    return value if isinstance(value, str) else json.dumps(value)


def record(root: Path, config: dict, benchmarks: list[str], pid: int | None = None) -> Path:
    """Write the invocation record of the Snakemake running in ``root`` (the workflow's ``onstart``)."""
    path = Path(root) / RECORD
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"pid": os.getpid() if pid is None else pid, "started": time.time(), "config": config, "benchmarks": benchmarks}
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(data, indent=2, default=str) + "\n")
    partial.replace(path)
    return path


def _read(root: Path) -> dict | None:
    try:
        data = json.loads((Path(root) / RECORD).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("config", {}), dict) or not isinstance(data.get("benchmarks", []), list):
        return None
    return data


def locked_benchmarks(outputs: frozenset[str] | set[str], known: list[str]) -> list[str]:
    """The benchmarks whose files (``results[/tiny]/<name>/``, ``resources/<scale>/prepared/<name>/``) are among
    ``outputs``, in ``known``'s order."""
    named = set()
    for output in outputs:
        parts = Path(output).parts
        if parts[:1] == ("results",):
            named.add(parts[2] if parts[1:2] == ("tiny",) and len(parts) > 2 else parts[1] if len(parts) > 1 else "")
        elif parts[:1] == ("resources",) and len(parts) > 3 and parts[2] == "prepared":
            named.add(parts[3])
    return [name for name in known if name in named]


def current(root: Path, known: list[str]) -> Invocation | None:
    """The invocation ``status`` follows in ``root``: the running Snakemake's, else the last recorded one; None when
    Snakemake never ran jobs there (``known``: every benchmark name)."""
    running = snakemake_processes_in(Path(root)) or []
    data = _read(root)
    if running and (data is None or data.get("pid") not in running):
        locked = locked_benchmarks(read_snakemake_records(Path(root)).wanted, known)
        if locked:
            return Invocation(benchmarks=locked, running=True, pid=running[0])
    if data is None:
        return None
    return Invocation(
        config=data.get("config") or {},
        benchmarks=[name for name in data.get("benchmarks") or [] if name in known],
        running=data.get("pid") in running,
        pid=data.get("pid"),
        started=data.get("started"),
    )
