"""Time before spending it: published MLPerf Training results, scaled to a system, and model FLOPs where none fits.

``published_results.csv`` (beside this module) holds one row per published (system, benchmark) result of the
mlcommons/training_results rounds: the accelerator, how many, the official score in minutes (the olympic mean of
the run set times its scaling factor, as the result summarizer gives it) and the folder it was scored from. The rows
are made by :func:`mlperf_wf.results.published_rounds.rows_of_round` from a round's folders (``python -m mlperf_wf.results.published_rounds ROUND_FOLDER --round
5.1.0 --repo mlcommons/training_results_v5.1 --commit SHA``), never typed by hand.

An estimate for a system of ``count`` accelerators of family ``F`` takes the published row of the same family
nearest in count (else the nearest of any family whose peak is known), and scales its minutes by count (linear:
time x published count / count; more accelerators rarely scale better than that, so the estimate errs short at
large counts and the walltime's margin covers it) and by the families' dense BF16 peaks. Where no row fits, the
model's training FLOPs (``model_flops.yaml``: FLOPs per sample, each with its source) times the samples to converge
(the RCP's mean), over the system's peak at :data:`ASSUMED_MFU`. A benchmark no round has published yet says so in
its folder's ``model_flops.yaml`` (``unpublished``: where the results were looked for), and its estimate says so first: it then
rests on the reference's own measured runs where its README gives them (``reference_run``), scaled like a published
row, else on the model's FLOPs.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from mlperf_wf.config import registry
from mlperf_wf.errors import ConfigError

TABLE = "published_results.csv"
FLOPS_TABLE = "model_flops.yaml"
ASSUMED_MFU = 0.3
"""Model FLOPs utilisation assumed for a FLOPs estimate (published LLM pretraining runs on H100 report 0.3-0.5 in
BF16; a reference implementation rarely reaches the upper end)."""


class PublishedResult(BaseModel):
    """One published result: a (system, benchmark) score of a training_results round."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    benchmark: str = Field(min_length=1)
    """The benchmark's name in this project (``rgat``; the round's folder may say ``gnn``)."""
    round: str = Field(pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$")
    """The ruleset the result was scored under."""
    submitter: str = Field(min_length=1)
    """The organisation folder the result is in."""
    system: str = Field(min_length=1)
    """The system's folder name in the round."""
    accelerator: str = Field(min_length=1)
    """The system description's ``accelerator_model_name``."""
    family: str = Field(min_length=1)
    """The accelerator family :func:`family_of` reads from it (``H100``, ``B200``, ``MI300X``...)."""
    accelerators: int = Field(ge=1)
    """Accelerators of the whole system (nodes x accelerators per node)."""
    minutes: float = Field(gt=0)
    """The official score: olympic mean of the run set's minutes x its scaling factor."""
    global_batch_size: int | None = Field(None, ge=1)
    """The GBS the runs logged."""
    source: str = Field(pattern=r"^https://")
    """The result folder at the round's commit."""


class ModelFlops(BaseModel):
    """Training FLOPs of one sample of a benchmark's model, with where the number comes from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    flops_per_sample: float = Field(gt=0)
    """Forward and backward FLOPs of one training sample (6 x parameters x tokens for a dense transformer; for a mixture
    of experts, the active parameters)."""
    source: str = Field(min_length=1)
    """How it is derived: the model's size and sequence length, and where they are stated."""
    lower_bound: bool = False
    """Whether the FLOPs count only part of a run's work (an agent's tool calls and sandboxed tests are none): the
    estimate is then the least the run takes, said so, never that a walltime holds it."""


class AcceleratorPeak(BaseModel):
    """An accelerator family's dense BF16 peak, with its data sheet."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bf16_tflops: float = Field(gt=0)
    """Dense (not sparse) BF16 peak per device, TFLOPS."""
    source: str = Field(min_length=1)
    """The data sheet and the figure it gives."""


class Slowdown(BaseModel):
    """How much slower a benchmark's reference implementation trains than the published results, and why."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    factor: float = Field(ge=1)
    """Minutes of the reference over minutes of the published code on the same system."""
    source: str = Field(min_length=1)
    """Why: what the reference runs that the published code does not, and where it says so."""


class ReferenceRun(BaseModel):
    """A benchmark's reference implementation's own measured time to train, as its README gives it: what an estimate
    scales where no round has published a result of the benchmark."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    family: str = Field(min_length=1)
    """The accelerator family it ran on (a family of ``accelerators``)."""
    accelerators: int = Field(ge=1)
    """How many."""
    minutes: float = Field(gt=0)
    """The mean minutes from run_start to the converging evaluation."""
    global_batch_size: int = Field(ge=1)
    """The GBS of those runs."""
    source: str = Field(min_length=1)
    """The reference's file and lines that state it."""


class _Peaks(BaseModel):
    """``mlperf_wf/plan/model_flops.yaml``: the accelerators' peaks."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    accelerators: dict[str, AcceleratorPeak]
    """Family -> peak, most specific family name first (``GB200`` before ``B200``)."""


class BenchmarkFlops(BaseModel):
    """A benchmark folder's ``model_flops.yaml``: what its time estimates rest on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    flops_per_sample: float | None = Field(None, gt=0)
    """Forward and backward FLOPs of one training sample (:class:`ModelFlops`); none where no estimate rests on them."""
    source: str | None = Field(None, min_length=1)
    """How ``flops_per_sample`` is derived, and where its figures are stated (given with it)."""
    lower_bound: bool = False
    """Whether the FLOPs count only part of a run's work (:class:`ModelFlops`)."""
    reference_slowdown: Slowdown | None = None
    """How much slower its reference trains than the published results (applied to those estimates); none: as fast."""
    unpublished: str | None = Field(None, min_length=1)
    """Why no training_results round has a result of it (its round, and where the results were looked for): its
    estimates say so first, then rest on ``reference_run`` or the model's FLOPs."""
    reference_run: ReferenceRun | None = None
    """The reference's own measured time to train, scaled like a published row where none is published."""

    @model_validator(mode="after")
    def _flops_with_their_source(self) -> BenchmarkFlops:
        if (self.flops_per_sample is None) != (self.source is None):
            raise ValueError("flops_per_sample and source are given together")
        return self


class FlopsTable(BaseModel):
    """The accelerators' peaks and every benchmark's time facts, from its folder (:func:`flops_table`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    accelerators: dict[str, AcceleratorPeak]
    """Family -> peak, most specific family name first (``GB200`` before ``B200``)."""
    models: dict[str, ModelFlops]
    """Benchmark -> FLOPs per training sample."""
    reference_slowdown: dict[str, Slowdown] = {}
    """Benchmark -> how much slower its reference trains than the published results (applied to those estimates)."""
    unpublished: dict[str, str] = {}
    """Benchmark -> why the table has no published result of it (its round, and where the results were looked for):
    the estimate says so, then rests on ``reference_runs`` or the model's FLOPs."""
    reference_runs: dict[str, ReferenceRun] = {}
    """Benchmark -> the reference's own measured time, scaled like a published row where none is published."""


def _data_file(name: str):
    return resources.files("mlperf_wf.plan") / name


@cache
def published_results() -> tuple[PublishedResult, ...]:
    """Every row of the table, typed; a bad row is a one-line error naming its line."""
    return read_rows(_data_file(TABLE).read_text())


def read_rows(text: str) -> tuple[PublishedResult, ...]:
    """The rows of a table's text (``published_results.csv``'s columns), typed."""
    rows = []
    for number, record in enumerate(csv.DictReader(text.splitlines()), start=2):
        try:
            rows.append(PublishedResult(**{key: (value if value != "" else None) for key, value in record.items()}))
        except ValidationError as err:
            first = err.errors()[0]
            raise ConfigError(f"{TABLE}:{number}: {'.'.join(map(str, first['loc']))}: {first['msg']} (got {first.get('input')!r})") from None
    return tuple(rows)


@cache
def flops_table() -> FlopsTable:
    """The accelerators' peaks (``mlperf_wf/plan/model_flops.yaml``) and each benchmark's facts (its folder's)."""

    def read(path, model):
        try:
            return model(**yaml.safe_load(path.read_text()))
        except ValidationError as err:
            first = err.errors()[0]
            raise ConfigError(f"{path}: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None

    peaks = read(_data_file(FLOPS_TABLE), _Peaks)
    folders = [registry.BENCHMARKS_DIR / name for name in registry.benchmark_names()]
    own = {folder.name: read(folder / FLOPS_TABLE, BenchmarkFlops) for folder in folders if (folder / FLOPS_TABLE).is_file()}
    return FlopsTable(
        accelerators=peaks.accelerators,
        models={
            name: ModelFlops(flops_per_sample=facts.flops_per_sample, source=facts.source, lower_bound=facts.lower_bound)
            for name, facts in own.items()
            if facts.flops_per_sample is not None
        },
        reference_slowdown={name: facts.reference_slowdown for name, facts in own.items() if facts.reference_slowdown},
        unpublished={name: facts.unpublished for name, facts in own.items() if facts.unpublished},
        reference_runs={name: facts.reference_run for name, facts in own.items() if facts.reference_run},
    )


def family_of(accelerator: str | None) -> str | None:
    """The family of an accelerator model name (``NVIDIA H100-SXM5-80GB`` -> ``H100``): the first family of
    ``model_flops.yaml`` whose name is a word of it (``GB200`` before ``B200``); None where none is."""
    name = (accelerator or "").upper()
    for family in flops_table().accelerators:
        if re.search(rf"(?<![A-Z0-9]){re.escape(family)}(?![0-9])", name):
            return family
    return None


def peak_tflops(family: str | None) -> float | None:
    known = flops_table().accelerators.get(family or "")
    return known.bf16_tflops if known else None


@dataclass(frozen=True)
class TimeEstimate:
    """The expected minutes to train of one run on a system, and what it rests on."""

    minutes: float
    """From run_start to the converging evaluation."""
    basis: str
    """One line: the published row (its source) or the FLOPs it rests on, and how it was scaled."""
    lower_bound: bool = False
    """Whether the run takes at least ``minutes`` rather than about (``ModelFlops.lower_bound``)."""


def estimate(benchmark: str, family: str | None, count: int, samples_to_converge: float | None = None) -> TimeEstimate | None:
    """The expected time to train of ``benchmark`` on ``count`` accelerators of ``family`` (:mod:`this module's
    <mlperf_wf.plan.published>` method); None where no published row fits and no FLOPs estimate can be made."""
    rows = [row for row in published_results() if row.benchmark == benchmark]
    same = [row for row in rows if row.family == family]
    scalable = same or ([row for row in rows if peak_tflops(row.family)] if peak_tflops(family) else [])
    if scalable:

        def nearness(r: PublishedResult) -> tuple[float, float, float]:
            """Nearest count first, then (another family's) nearest peak, then the faster result."""
            peak = 0.0 if r.family == family else abs(math.log(peak_tflops(family) / peak_tflops(r.family)))
            return (abs(math.log(r.accelerators / count)), peak, r.minutes)

        row = min(scalable, key=nearness)
        speed = 1.0 if row.family == family else peak_tflops(family) / peak_tflops(row.family)
        slowdown = flops_table().reference_slowdown.get(benchmark)
        minutes = row.minutes * row.accelerators / count / speed * (slowdown.factor if slowdown else 1.0)
        scaled = f"x {row.accelerators}/{count} accelerators" + ("" if row.family == family else f", / {speed:.2f} ({family} vs {row.family} dense BF16 peak)")
        if slowdown:
            scaled += f", x {slowdown.factor:g} for the reference ({slowdown.source})"
        return TimeEstimate(
            minutes, f"published {row.round} {row.submitter} {row.system}: {row.minutes:.1f} min on {row.accelerators} {row.family} {scaled} ({row.source})"
        )
    table = flops_table()
    unpublished = f"no published result ({table.unpublished[benchmark]}); " if benchmark in table.unpublished else ""
    run = table.reference_runs.get(benchmark)
    if run is not None and (run.family == family or (peak_tflops(family) and peak_tflops(run.family))):
        speed = 1.0 if run.family == family else peak_tflops(family) / peak_tflops(run.family)
        scaled = f"x {run.accelerators}/{count} accelerators" + ("" if run.family == family else f", / {speed:.2f} ({family} vs {run.family} dense BF16 peak)")
        return TimeEstimate(
            run.minutes * run.accelerators / count / speed,
            f"{unpublished}the reference's own runs: {run.minutes:.1f} min on {run.accelerators} {run.family} at GBS {run.global_batch_size} "
            f"{scaled} ({run.source})",
        )
    model = table.models.get(benchmark)
    peak = peak_tflops(family)
    if model is None or peak is None or not samples_to_converge:
        return None
    seconds = model.flops_per_sample * samples_to_converge / (count * peak * 1e12 * ASSUMED_MFU)
    return TimeEstimate(
        seconds / 60,
        f"{unpublished}model FLOPs: {model.flops_per_sample:.3g} per sample x {samples_to_converge:,.0f} samples (the RCP mean) over {count} {family} "
        f"at {ASSUMED_MFU:.0%} of {peak:g} TFLOPS ({model.source})",
        lower_bound=model.lower_bound,
    )
