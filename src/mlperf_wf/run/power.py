"""Energy to train: power logs in the MLPerf Power format, sampled beside every run on every node.

MLPerf Training accepts power results beside time to train. Each run's result file
``<folder>/<name>.txt`` gets ``<folder>/power/<name>/node_<k>.txt`` (one per node, ``k`` in
``0..nodes-1``: the package checker's ``PowerChecker`` reads ``k`` as an integer) and, for the
interconnect, ``sw_<k>.txt``. A node file holds mllog lines: ``power_measurement_start``,
``conversion_eff`` (when known), one ``power_reading`` (watts) per sample at the reading's own
time, and ``power_measurement_stop``. mlperf-logging's result summarizer turns them into the energy
of the run (``_compute_total_power``: the mean power over the measurement window times the run's
time to train) and an olympic energy score; :mod:`mlperf_wf.results.scoring` calls those same functions.

The sampler (``mlperf-wf power-sample``) reads, every ``interval_ms``:

- the node's own power from ``node_command`` when the site has one (IPMI, Redfish, a PDU: a shell
  command whose output's first number is the node's watts), which is what MLPerf Power asks for;
- otherwise the sum of the node's GPUs from ``gpu_command``, ``nvidia-smi --query-gpu=timestamp,
  index,power.draw --format=csv,noheader,nounits -lms N`` by default (a long-running command whose
  lines are ``[timestamp,] index, watts``; DCGM or another tool printing those columns can replace
  it). GPU power alone leaves out CPUs, memory, fans and power supplies: the start line says which.

It stops when its stop file appears (the launch line touches it after the run ends) or on
SIGTERM/SIGINT, and writes ``power_measurement_stop`` then. Every line is flushed as it is written,
so a run killed by its walltime keeps the readings taken until then.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import queue
import re
import shlex
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import mlperf_wf
from mlperf_wf.config.workflow_config import PowerConfig
from mlperf_wf.errors import ConfigError

STOP_FILE = ".stop"
"""Name of the stop file in a run's power folder: the launch line touches it when the run has ended."""


def power_folder(result_file: Path) -> Path:
    """Where the power logs of ``result_file`` go: ``power/<its name without suffix>/`` beside it, the summarizer's rule."""
    return result_file.parent / "power" / result_file.stem


def node_file(folder: Path, node_index: int) -> Path:
    return folder / f"node_{node_index}.txt"


# ---- readers ----


@dataclass(frozen=True)
class Reading:
    """One sample of a node's power."""

    time_ms: int
    """When it was read (the reader's own timestamp where it prints one), ms since the epoch."""
    watts: float
    detail: dict = field(default_factory=dict)
    """What it is made of: the GPUs' own watts by index, or the command's output."""


_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")
_SMI_TIME = re.compile(r"^\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?$")


def _now_ms() -> int:
    return int(time.time() * 1000)


def parse_gpu_line(line: str) -> tuple[int | None, str, float] | None:
    """``(time_ms or None, index, watts)`` of one line of ``gpu_command``; None for headers and unsupported readings.

    Columns are comma or blank separated: ``2026/11/30 09:21:40.123, 0, 301.25`` (nvidia-smi with ``timestamp``),
    ``0, 301.25``, or ``GPU 0  301.25`` (``dcgmi dmon``); the time is nvidia-smi's local time.
    """
    parts = [part.strip() for part in (line.split(",") if "," in line else line.split())]
    parts = [part for part in parts if part and part != "GPU"]
    if not parts or parts[0].startswith("#"):
        return None
    time_ms = None
    if _SMI_TIME.match(parts[0]):
        moment = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f" if "." in parts[0] else "%Y/%m/%d %H:%M:%S")
        time_ms, parts = int(moment.timestamp() * 1000), parts[1:]
    if not parts or not _NUMBER.fullmatch(parts[-1]):
        return None  # "[N/A]", "[Not Supported]", a header
    index = parts[-2] if len(parts) >= 2 else "0"
    return time_ms, index, float(parts[-1])


def parse_watts(output: str) -> float | None:
    """The first number of a node-power command's output (``Instantaneous power reading: 412 Watts`` -> 412.0)."""
    found = _NUMBER.search(output)
    return float(found.group()) if found else None


class GpuReader:
    """Runs ``gpu_command`` (it keeps printing) and turns each round of per-GPU lines into one reading, their sum.

    A round ends when a GPU index it already has comes again; its time is its first line's timestamp
    (or when that line arrived, for a command that prints none)."""

    def __init__(self, command: str, interval_ms: int) -> None:
        self.argv = shlex.split(command.replace("{interval_ms}", str(interval_ms)))
        self.readings: queue.Queue[Reading] = queue.Queue()
        self.problems: list[str] = []
        self._proc: subprocess.Popen | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False

    def start(self) -> None:
        try:
            self._proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
        except OSError as err:
            command = shlex.join(self.argv)
            raise ConfigError(f"power.gpu_command: {command!r} cannot start ({err.strerror}); set power.gpu_command or power.node_command") from None
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        group: dict[str, float] = {}
        group_time = 0
        last_round: set[str] = set()
        with self._proc.stdout:  # closed when the command has ended: its pipe is not left to the collector
            for line in self._proc.stdout:
                parsed = parse_gpu_line(line)
                if parsed is None:
                    continue
                time_ms, index, watts = parsed
                if index in group:
                    self.readings.put(Reading(group_time, sum(group.values()), {"gpus": dict(group)}))
                    last_round, group = set(group), {}
                if not group:
                    group_time = time_ms if time_ms is not None else _now_ms()
                group[index] = watts
        if group and set(group) >= last_round:  # a round cut short when the command was stopped is not a reading
            self.readings.put(Reading(group_time, sum(group.values()), {"gpus": dict(group)}))
        status = self._proc.wait()
        if not self._stopping:  # it should print until stopped: the log's readings end here
            self.problems.append(f"gpu_command {shlex.join(self.argv)!r} ended by itself with status {status}")

    def stop(self) -> None:
        self._stopping = True
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
        if self._thread is not None:
            self._thread.join(timeout=5)


class NodeCommandReader:
    """Runs ``node_command`` every interval; a reading's time is the middle of the command's run."""

    def __init__(self, command: str, interval_ms: int) -> None:
        self.command = command
        self.interval = interval_ms / 1000
        self.readings: queue.Queue[Reading] = queue.Queue()
        self.problems: list[str] = []
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _poll(self) -> None:
        next_at = time.monotonic()
        while not self._stopping.is_set():
            before = _now_ms()
            proc = subprocess.run(["bash", "-c", self.command], capture_output=True, text=True, check=False, timeout=max(10.0, 5 * self.interval))
            watts = parse_watts(proc.stdout) if proc.returncode == 0 else None
            if watts is None:
                if len(self.problems) < 5:
                    self.problems.append(f"node_command exited {proc.returncode} printing {proc.stdout.strip()[:80]!r}")
            else:
                self.readings.put(Reading((before + _now_ms()) // 2, watts, {"output": proc.stdout.strip()[:80]}))
            next_at += self.interval
            self._stopping.wait(max(0.0, next_at - time.monotonic()))

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=15)


# ---- the sampler ----


def _power_logger(path: Path):
    """An mllog MLLogger writing to ``path`` only (not the process-wide mllog logger the trainers use)."""
    from mlperf_logging.mllog import mllog

    logger = logging.getLogger(f"mlperf_wf.run.power.{path}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    logger.addHandler(logging.FileHandler(path))
    return mllog.MLLogger(logger=logger, default_stack_offset=1, root_dir=str(Path(mlperf_wf.__file__).parent))


@dataclass
class SampleSummary:
    """What one sampler wrote."""

    file: Path
    readings: int
    mean_watts: float | None
    problems: list[str]


def sample(
    config: PowerConfig, out_dir: Path, node_index: int, stop_file: Path | None, stop: threading.Event | None = None, host: str | None = None
) -> SampleSummary:
    """Sample this node's power into ``out_dir/node_<node_index>.txt`` until ``stop_file`` exists or ``stop`` is set."""
    from mlperf_logging.mllog import constants

    host = host or socket.gethostname()
    stop = stop or threading.Event()
    path = node_file(out_dir, node_index)
    logger = _power_logger(path)
    reader = NodeCommandReader(config.node_command, config.interval_ms) if config.node_command else GpuReader(config.gpu_command, config.interval_ms)
    command = config.node_command or config.gpu_command.replace("{interval_ms}", str(config.interval_ms))
    begun = _now_ms()
    logger.start(
        constants.POWER_MEASUREMENT_START,
        time_ms=begun,
        metadata={"host": host, "node": node_index, "source": config.source, "command": command, "interval_ms": config.interval_ms},
    )
    if config.conversion_eff is not None:
        logger.event(constants.CONVERTION_EFF, value=config.conversion_eff, time_ms=begun, metadata={"host": host})
    count, total = 0, 0.0
    try:
        reader.start()
        for reading in _until_stopped(reader, stop, stop_file, config.interval_ms):
            logger.event(constants.POWER_READING, value=reading.watts, time_ms=reading.time_ms, metadata={"host": host, **reading.detail})
            count, total = count + 1, total + reading.watts
    finally:
        reader.stop()
        while not reader.readings.empty():  # the last round, flushed when the command ended
            reading = reader.readings.get()
            logger.event(constants.POWER_READING, value=reading.watts, time_ms=reading.time_ms, metadata={"host": host, **reading.detail})
            count, total = count + 1, total + reading.watts
        logger.end(constants.POWER_MEASUREMENT_STOP, time_ms=_now_ms(), metadata={"host": host, "readings": count})
        for handler in logger.logger.handlers:
            handler.close()
    return SampleSummary(file=path, readings=count, mean_watts=total / count if count else None, problems=reader.problems)


def _until_stopped(reader: GpuReader | NodeCommandReader, stop: threading.Event, stop_file: Path | None, interval_ms: int) -> Iterator[Reading]:
    wait = min(0.5, interval_ms / 1000)
    while not stop.is_set() and not (stop_file is not None and stop_file.exists()):
        with contextlib.suppress(queue.Empty):
            yield reader.readings.get(timeout=wait)


def run_sampler(config: PowerConfig, out_dir: Path, node_index: int, stop_file: Path | None) -> SampleSummary:
    """:func:`sample` with SIGTERM and SIGINT as a stop (srun forwards them when the job ends or is cancelled)."""
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    return sample(config, out_dir, node_index, stop_file, stop)


# ---- launch lines ----


def sampler_argv(config: PowerConfig, out_dir: str) -> list[str]:
    """``mlperf-wf power-sample`` for one node, with every setting it uses spelt out."""
    argv = ["mlperf-wf", "power-sample", "--out-dir", out_dir, "--interval-ms", str(config.interval_ms)]
    argv += ["--node-command", config.node_command] if config.node_command else ["--gpu-command", config.gpu_command]
    if config.conversion_eff is not None:
        argv += ["--conversion-eff", repr(config.conversion_eff)]
    return argv


def with_sampler(command: str, config: PowerConfig, result_file: Path, nodes: int = 1, srun: bool = False) -> str:
    """``command`` with a power sampler beside it on every node, stopped when it ends; the line exits with its status.

    ``srun``: one sampler task per node of the allocation (``--overlap``: beside the run's own step), started by
    the job's shell on the host; else one sampler on this host, beside the container the command starts."""
    out_dir = power_folder(result_file)
    stop = out_dir / STOP_FILE
    sampler = shlex.join([*sampler_argv(config, str(out_dir)), "--stop-file", str(stop)])
    if srun:
        sampler = f"srun --nodes={nodes} --ntasks-per-node=1 --overlap {sampler}"
    # The node index comes from SLURM_NODEID in each srun task (0 on one host). The run starts once every node's
    # sampler has opened its log (or a sampler has died), so the measurement window covers the whole run; the
    # folder starts empty, so a retried run's old logs neither count nor mix in.
    folder, quoted = shlex.quote(str(out_dir)), shlex.quote(str(stop))
    ready = f'while kill -0 $power_sampler 2>/dev/null && [ "$(ls {folder} | grep -c ^node_)" -lt {nodes} ]; do sleep 0.2; done'
    # `(exit $status)`, not `exit`: the rule's next command (provenance) runs after a failed run, as without a sampler.
    start = f"rm -rf {folder} && mkdir -p {folder}; {sampler} & power_sampler=$!; {ready}"
    return f"{start}; ({command}); status=$?; touch {quoted}; wait $power_sampler; (exit $status)"
