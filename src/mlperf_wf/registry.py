"""Benchmark and dataset definitions: the registries under ``config/``.

A benchmark is data: which datasets it needs, which container and launch
command run it at full scale, and which modules prepare its data and train it
at tiny scale. Adding a benchmark adds one YAML file here plus one trainer and
one preprocessing module; no Snakemake rule changes.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from mlperf_wf.errors import ConfigError


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class DatasetFile(_Strict):
    """One file of a dataset as published."""

    path: str
    """Path relative to the dataset's base URL (and to its local folder)."""
    md5: str | None = None
    """Published md5, used to cross-check the downloaded ``.md5`` list."""
    size: int | None = None
    """Size in bytes where known."""


class DatasetSource(_Strict):
    """Where a dataset is published."""

    protocol: Literal["r2", "external"] = "r2"
    """``r2``: the MLCommons R2 layout (``<name>.uri`` gives the base URL, ``<name>.md5`` beside it lists ``md5  path`` lines).
    ``external``: published elsewhere by a tool of its own (``instructions`` say how); the download stage stops with them."""
    uri: str | None = None
    """URL of the ``<name>.uri`` metadata file (https:// or file://); required for r2."""
    md5: str | None = None
    """URL of the ``<name>.md5`` list beside it; required for r2."""
    instructions: str | None = None
    """How to obtain an external dataset, and where to put it."""
    base_url: str | None = None
    """The base URL the ``.uri`` file held when this definition was written (informational)."""

    @model_validator(mode="after")
    def _r2_has_urls(self) -> DatasetSource:
        if self.protocol == "r2" and not (self.uri and self.md5):
            raise ValueError("protocol r2 needs uri and md5")
        if self.protocol == "external" and not self.instructions:
            raise ValueError("protocol external needs instructions")
        return self


class TinyGenerator(_Strict):
    """How the tiny tier generates a dataset in the same R2 layout."""

    module: str
    """Python module with ``generate(out_dir: Path, seed: int) -> list[Path]``."""
    seed: int
    """Generator seed; fixed so the tiny dataset is the same everywhere."""


class DatasetDef(_Strict):
    """A dataset (or model checkpoint) entry of ``config/datasets/``."""

    id: str
    """Registry id; also the folder name under ``resources/<scale>/datasets/``."""
    version: str
    """Version of the published data, as MLCommons names it."""
    title: str
    """Human-readable name."""
    kind: Literal["dataset", "checkpoint", "tokenizer"] = "dataset"
    """Training data, a model checkpoint or a tokenizer."""
    benchmarks: list[str] = Field(default_factory=list)
    """Benchmarks that use it."""
    source: DatasetSource
    """Where the full-scale data is published."""
    size: str | None = None
    """Total published size, as in MLCommons' manifest (e.g. "112MB")."""
    file_count: int | None = None
    """Number of files in the published .md5 list when this definition was written."""
    files: list[DatasetFile] = Field(default_factory=list)
    """Files that make up the dataset; empty means "whatever the .md5 lists" (long lists are not copied here)."""
    exclude: list[str] = Field(default_factory=list)
    """Glob patterns of listed files not to download (e.g. ``.git/**`` in a mirrored HF repo)."""
    license: str
    """License and access note (members-only data says so and how to get access)."""
    tiny: TinyGenerator | None = None
    """Generator of the tiny-scale stand-in; None where no tiny tier exists yet."""

    def wanted(self, path: str) -> bool:
        """Whether a listed file is part of the dataset after ``exclude``."""
        return not any(fnmatch.fnmatch(path, pattern) for pattern in self.exclude)


class Container(_Strict):
    """The full-scale container image."""

    image: str
    """Image repository and tag."""
    digest: str | None = None
    """``sha256:...`` content digest the image is pinned to; required to launch at full scale."""
    dockerfile: str | None = None
    """Dockerfile (under ``containers/``) that builds the image from the reference base."""

    @property
    def reference(self) -> str:
        """``image@digest`` when pinned, else the tag alone."""
        return f"{self.image}@{self.digest}" if self.digest else self.image


class Geometry(_Strict):
    """Accelerators a full-scale run uses."""

    nodes: int = Field(1, ge=1)
    """Number of nodes."""
    gpus_per_node: int = Field(8, ge=1)
    """Accelerators per node."""
    walltime_minutes: int = Field(240, ge=1)
    """Time limit of one run."""
    cpus_per_gpu: int = Field(8, ge=1)
    """Host CPU cores per accelerator (data loading, launcher)."""


class FullScale(_Strict):
    """How the reference implementation runs at full scale."""

    container: Container
    """Container image."""
    geometry: Geometry
    """GPU geometry."""
    workdir: str
    """Working directory inside the container."""
    mounts: dict[str, str]
    """Container paths for ``data``, ``checkpoint`` and ``results``."""
    command: list[str]
    """Launch command (one per node); ``{seed}``, ``{data}``, ``{checkpoint}``, ``{results}``, ``{run}``, ``{result_file}``,
    ``{nodes}``, ``{gpus_per_node}`` and ``{processes}`` are filled per run."""
    multi_node_args: list[str] = Field(default_factory=list)
    """Launcher flags added right after the launcher word when a run spans several nodes
    (``{master_addr}``, ``{master_port}``, ``{node_rank}`` become the allocation's values)."""
    process_model: Literal["per_node", "per_gpu"] = "per_node"
    """per_node: the command is a launcher (accelerate, torchrun) started once per node; per_gpu: one process per GPU, ranks from SLURM."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment set inside the container."""


class BenchmarkDef(_Strict):
    """A benchmark entry of ``config/benchmarks/``."""

    name: str
    """Workflow name; ``results/<name>/``."""
    submission_benchmark: str
    """The ``submission_benchmark`` value mlperf-logging knows."""
    rulesets: list[str]
    """Training rulesets the benchmark exists in (checked against mlperf-logging)."""
    reference: str
    """Reference implementation (repository path)."""
    datasets: dict[str, str]
    """Role (e.g. ``data``, ``checkpoint``) to dataset id."""
    preprocess: str
    """Module with ``shards(scale) -> list[str]``, ``prepare_shard(shard, inputs: dict[str, Path], out_dir: Path, scale) -> dict``
    (one cached job per shard) and ``layout(scale) -> dict[str, str]`` (the tree the trainer reads, as links into the shards)."""
    trainer: str
    """Module with the tiny-scale trainer ``main``."""
    full: FullScale
    """Full-scale launch."""
    tiny: dict[str, float | int | str | bool]
    """Tiny-scale hyperparameters passed to the trainer."""

    @model_validator(mode="after")
    def _command_placeholders_known(self) -> BenchmarkDef:
        known = {
            "seed",
            "data",
            "checkpoint",
            "results",
            "run",
            "result_file",
            "nodes",
            "gpus_per_node",
            "processes",
            "master_addr",
            "master_port",
            "node_rank",
        }
        if "checkpoint" not in self.datasets:
            known.discard("checkpoint")
        for part in [*self.full.command, *self.full.multi_node_args]:
            for name in _placeholders(part):
                if name not in known:
                    raise ValueError(f"full.command uses unknown placeholder {{{name}}}; allowed: {sorted(known)}")
        needed = {"data", "results"} | ({"checkpoint"} if "checkpoint" in self.datasets else set())
        if set(self.full.mounts) != needed:
            raise ValueError(f"full.mounts has {sorted(self.full.mounts)}; this benchmark needs exactly {sorted(needed)}")
        return self


def _placeholders(text: str) -> list[str]:
    import string

    return [name for _, name, _, _ in string.Formatter().parse(text) if name]


_Entry = TypeVar("_Entry", "BenchmarkDef", "DatasetDef")


def config_dir(root: Path | None = None) -> Path:
    """The project's ``config/`` folder."""
    return (root or Path.cwd()) / "config"


def _load_entry(kind: str, name: str, model: type[_Entry], root: Path | None) -> _Entry:
    """Load and validate ``config/<kind>s/<name>.yaml``; every error is one line naming file, key and value."""
    folder = config_dir(root) / f"{kind}s"
    path = folder / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in folder.glob("*.yaml"))
        raise ConfigError(f"{kind} {name!r} is not defined; known {kind}s: {', '.join(known)}")
    try:
        entry = model.model_validate(yaml.safe_load(path.read_text()))
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise ConfigError(f"{path}: {where}: {first['msg']} (got {first.get('input')!r})") from None
    declared = entry.name if isinstance(entry, BenchmarkDef) else entry.id
    if declared != name:
        raise ConfigError(f"{path}: declares {declared!r} but the file is named {name!r}")
    return entry


def benchmark_names(root: Path | None = None) -> list[str]:
    """Every benchmark defined under ``config/benchmarks/``."""
    return sorted(path.stem for path in (config_dir(root) / "benchmarks").glob("*.yaml"))


def load_benchmark(name: str, root: Path | None = None) -> BenchmarkDef:
    """Load ``config/benchmarks/<name>.yaml``."""
    return _load_entry("benchmark", name, BenchmarkDef, root)


def load_dataset(dataset_id: str, root: Path | None = None) -> DatasetDef:
    """Load ``config/datasets/<id>.yaml``."""
    return _load_entry("dataset", dataset_id, DatasetDef, root)
