"""The harness every tiny trainer runs in: one place for what all runs share.

``TinyRun`` sets torch's threads, joins the process group under torchrun (gloo on CPU),
writes the mllog result file on rank 0 only, and logs the preamble the rules ask for:
``cache_clear`` (whether the page cache really was dropped), ``init_start``, the
``submission_*`` keys, the seed, ``config_filename`` and every hyperparameter from the typed
model the loop uses. ``begin()`` refuses to start the clock while a key the round's checker
requires is missing (read from mlperf-logging's rules for the benchmark, ruleset and
division), then logs ``init_stop`` and ``run_start``. The loop logs its blocks/epochs and
evaluations through the run; ``finish()`` logs ``run_stop`` with its status, and a run
that raises is logged as aborted before the error propagates. A tiny trainer therefore
holds only its model, its data loading and its step.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from mlperf_logging.mllog import constants

from mlperf_wf.config import registry
from mlperf_wf.config.mlperf_rules import QualityTarget
from mlperf_wf.errors import ConfigError
from mlperf_wf.run.mllog_utils import RunLogger, Submission, clear_caches, rank_from_env

if TYPE_CHECKING:
    from mlperf_wf.config.hyperparameters import TinyHyperparameters

LOGGED_BY_THE_HARNESS_LATER = frozenset(
    {
        constants.INIT_STOP,
        constants.RUN_START,
        constants.RUN_STOP,
        constants.EVAL_START,
        constants.EVAL_STOP,
        constants.EVAL_ACCURACY,
        constants.BLOCK_START,
        constants.BLOCK_STOP,
        constants.EPOCH_START,
        constants.EPOCH_STOP,
        constants.TRAIN_SAMPLES,
        constants.EVAL_SAMPLES,
        "averaged_validation_loss",  # flux1's open rules name its evaluation result so (logged with eval_accuracy)
    }
)
"""Required keys that belong to the timed part of the run (after ``run_start``)."""

DEVICE_VARIABLE = "MLPERF_WF_TINY_DEVICE"
"""Where a tiny run computes: ``cpu`` (unset: the CPU tier) or ``cuda``/``cuda:N`` (``bench/gpu_smoke.py`` on a GPU
machine). A trainer that moves its model and batches to :attr:`TinyRun.device` says so in its definition
(``tiny.runs_on_cuda``, :func:`device_trainers`); the others refuse a device other than the CPU."""
_DEVICE = re.compile(r"^(cpu|cuda(:[0-9]+)?)$")


def device_trainers() -> list[str]:
    """The benchmarks whose tiny trainer runs on :data:`DEVICE_VARIABLE`'s device (``tiny.runs_on_cuda``)."""
    return [name for name in registry.benchmark_names() if registry.load_benchmark(name).tiny.runs_on_cuda]


def run_device(benchmark: str, environ: dict[str, str] | None = None) -> str:
    """The device of ``benchmark``'s tiny run from :data:`DEVICE_VARIABLE`, or one line saying why it cannot be."""
    value = (os.environ if environ is None else environ).get(DEVICE_VARIABLE, "").strip() or "cpu"
    if not _DEVICE.match(value):
        raise ConfigError(f"{DEVICE_VARIABLE}={value!r}: not a device; allowed: cpu, cuda, cuda:N")
    if value == "cpu":
        return value
    if benchmark not in (capable := device_trainers()):
        raise ConfigError(f"{DEVICE_VARIABLE}={value}: the tiny {benchmark} trainer runs on the CPU only; on {value}: {', '.join(capable)}")
    import torch

    if not torch.cuda.is_available():
        raise ConfigError(f"{DEVICE_VARIABLE}={value}: torch {torch.__version__} sees no CUDA device")
    return value


@dataclass(frozen=True)
class RunSpec:
    """One tiny training run, as the train job describes it."""

    benchmark: str
    """Workflow name of the benchmark."""
    submission_benchmark: str
    """``submission_benchmark`` value."""
    data_dir: Path
    """The benchmark's prepared dataset tree (``resources/<scale>/prepared/<benchmark>/dataset``)."""
    result_file: Path
    """mllog output."""
    seed: int
    """Run seed."""
    target: float
    """Quality target from the compliance rules."""
    ruleset: str
    """Ruleset the run is logged for (its required keys are enforced)."""
    submission: Submission
    """submission_* values."""
    config_filename: str
    """Where the run's configuration is written (logged as ``config_filename``)."""
    inputs: dict[str, Path] = field(default_factory=dict)
    """Input role -> folder, for every role the benchmark's runs read besides the prepared tree (e.g. ``checkpoint``)."""
    threads: int = 1
    """CPU threads for torch, per process."""
    target_comparison: str = "<="
    """How ``eval_accuracy`` must compare to ``target`` (the rules' own: <=, <, >= or >)."""
    metric_targets: tuple[QualityTarget, ...] = ()
    """One target per metric where the benchmark has several (stable_diffusion: FID and CLIP); empty otherwise."""

    def reached(self, value: float) -> bool:
        """Whether an evaluation result meets the target the way the rules compare it."""
        return QualityTarget(self.target_comparison, self.target).reached(value)

    def reached_all(self, values: dict[str, float]) -> bool:
        """Whether one evaluation's metrics (name -> value) meet every metric target; a metric not given fails."""
        if not self.metric_targets:
            raise ConfigError(f"{self.benchmark}: reached_all needs per-metric targets, and the run has one target")
        return all(t.metric in values and t.reached(values[t.metric]) for t in self.metric_targets)

    def input(self, role: str) -> Path:
        """The folder of input ``role``; a clear error when the job did not hand it over."""
        if role not in self.inputs:
            raise ConfigError(f"{self.benchmark}: the run needs --input {role}=FOLDER (given: {', '.join(sorted(self.inputs)) or 'none'})")
        return self.inputs[role]


PRECISION_NAMES = {"float32": "fp32", "bfloat16": "bfloat16", "float16": "fp16"}
"""How the rounds name a torch parameter dtype in ``lowest_numerical_precision_in_*``."""


class TinyRun:
    """One run's distributed setup and mllog events (see the module docstring)."""

    def __init__(self, spec: RunSpec, hp: TinyHyperparameters) -> None:
        import torch

        from mlperf_wf.config import mlperf_rules

        self.spec = spec
        self.hp = hp
        self.device = torch.device(run_device(spec.benchmark))
        """Where the trainer puts its model and batches (:data:`DEVICE_VARIABLE`; the CPU unless set)."""
        torch.set_num_threads(spec.threads)
        self.rank = rank_from_env()
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        if self.world_size > 1:
            torch.distributed.init_process_group("gloo")
        self.required = mlperf_rules.required_keys(spec.submission_benchmark, spec.ruleset, spec.submission.division)
        self.logged: set[str] = set()
        self.status = constants.ABORTED
        self.started = 0.0
        self._stopped = False
        self._log = RunLogger(spec.result_file, rank=self.rank)
        self.event(constants.CACHE_CLEAR, clear_caches() if self.rank == 0 else False)
        self._log.start(constants.INIT_START)
        self.logged.add(constants.INIT_START)
        self.config(
            {
                constants.SUBMISSION_BENCHMARK: spec.submission_benchmark,
                constants.SUBMISSION_ORG: spec.submission.org,
                constants.SUBMISSION_PLATFORM: spec.submission.platform,
                constants.SUBMISSION_DIVISION: spec.submission.division,
                constants.SUBMISSION_STATUS: spec.submission.status,
            }
        )
        self.event(constants.SEED, spec.seed)
        self.event("config_filename", spec.config_filename)
        self.config(hp.mllog(self.world_size))

    # ---- logging ----

    def event(self, key: str, value: object = None, **metadata: object) -> None:
        """One mllog event (rank 0 writes)."""
        self._log.event(key, value, metadata=metadata or None)
        self.logged.add(key)

    def config(self, values: dict[str, object]) -> None:
        """Log configuration keys (hyperparameters, numerics, parallelism) before ``begin()``."""
        for key, value in values.items():
            self.event(key, value)

    def config_unsharded(self, model: object) -> None:
        """The 6.1.0 numerics and parallelism keys of a run whose every process holds the whole model: the lowest
        precision is the dtype of the model's parameters, and tensor/pipeline/context/expert parallelism are 1."""
        dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
        precision = PRECISION_NAMES[dtype]
        self.config({f"lowest_numerical_precision_in_{part}": precision for part in ("linear", "attn", "comm")})
        self.config({f"{kind}_parallelism": 1 for kind in ("tensor", "pipeline", "context", "expert")})

    def begin(self) -> None:
        """End initialisation and start the clock; refuses when a key the round requires was never logged."""
        missing = sorted(self.required - self.logged - LOGGED_BY_THE_HARNESS_LATER)
        if missing:
            raise ConfigError(
                f"{self.spec.benchmark}: ruleset {self.spec.ruleset} ({self.spec.submission.division}) requires {', '.join(missing)}, "
                "which the trainer never logged: add them to its Hyperparameters.mllog or run.config()"
            )
        self._log.end(constants.INIT_STOP)
        self.started = time.time()
        self._log.start(constants.RUN_START)

    def block_start(self, **progress: object) -> None:
        self._log.start(constants.BLOCK_START, metadata=progress)

    def block_stop(self, **progress: object) -> None:
        self._log.end(constants.BLOCK_STOP, metadata=progress)

    def epoch_start(self, **progress: object) -> None:
        self._log.start(constants.EPOCH_START, metadata=progress)

    def epoch_stop(self, **progress: object) -> None:
        self._log.end(constants.EPOCH_STOP, metadata=progress)

    def eval_start(self, **progress: object) -> None:
        """``eval_start`` at ``progress`` (samples_count= or epoch_num=, as the round's rules ask)."""
        self._log.start(constants.EVAL_START, metadata=progress)

    def eval_result(self, value: float, **progress: object) -> None:
        """``eval_accuracy`` = ``value``, then ``eval_stop``."""
        self._log.event(constants.EVAL_ACCURACY, value, metadata=progress)
        self._log.end(constants.EVAL_STOP, metadata=progress)

    def eval_results(self, values: dict[str, float], **progress: object) -> None:
        """One ``eval_accuracy`` per metric (``metric`` metadata: name), then ``eval_stop``, as the rules of a
        benchmark with several metrics aggregate them (stable_diffusion's ``aggregated_eval_accuracy``)."""
        for metric, value in values.items():
            self._log.event(constants.EVAL_ACCURACY, value, metadata={**progress, "metric": metric})
        self._log.end(constants.EVAL_STOP, metadata=progress)

    def finish(self, status: str, **progress: object) -> None:
        """``run_stop`` with ``status`` (success when the target was reached, else aborted)."""
        self.status = status
        self._log.end(constants.RUN_STOP, metadata={**progress, constants.STATUS: status})
        self._stopped = True

    @property
    def seconds(self) -> float:
        """Seconds since ``run_start``."""
        return round(time.time() - self.started, 3)

    # ---- context ----

    def __enter__(self) -> TinyRun:
        return self

    def __exit__(self, kind, error, traceback) -> None:
        import torch

        if self.started and not self._stopped:
            # A run that dies still ends its log, so the checker reports why instead of a missing run_stop.
            self.finish(constants.ABORTED)
        if self.world_size > 1 and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def train(
    benchmark: str,
    seed: int,
    data: Path,
    inputs: list[str],
    result: Path,
    ruleset: str,
    submission: Submission,
    threads: int,
    overrides: str | None,
) -> dict:
    """One tiny-scale training run of ``benchmark``, logging to ``result``: its tiny hyperparameters with the JSON
    ``overrides``, its quality target from the ruleset's rules, its ``ROLE=FOLDER`` ``inputs``; returns the trainer's
    summary."""
    import json

    from mlperf_wf.acquire.prepare import role_folders
    from mlperf_wf.config import hyperparameters, mlperf_rules
    from mlperf_wf.config.registry import benchmark_module, load_benchmark
    from mlperf_wf.kinds import Scale

    bench = load_benchmark(benchmark)
    try:
        changes = json.loads(overrides) if overrides else {}
    except json.JSONDecodeError as err:
        raise ConfigError(f"--hyperparameters {overrides!r}: not JSON ({err.msg})") from None
    hp = hyperparameters.resolve(bench, changes, source="--hyperparameters")
    targets = mlperf_rules.run_targets(bench, ruleset, submission.division, Scale.TINY)
    target = targets[0]
    spec = RunSpec(
        benchmark=benchmark,
        submission_benchmark=bench.submission_benchmark,
        data_dir=data,
        result_file=result,
        seed=seed,
        target=target.value,
        target_comparison=target.comparison,
        metric_targets=tuple(targets) if target.metric else (),
        ruleset=ruleset,
        submission=submission,
        config_filename=f"mlperf_wf/benchmarks/{benchmark}/hyperparameters.py",
        inputs=role_folders(inputs, bench.roles_for("train")),
        threads=threads,
    )
    with TinyRun(spec, hp) as tiny_run:
        return benchmark_module(bench, "trainer").train(tiny_run, hp)
