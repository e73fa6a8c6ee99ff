"""The job spec: one train job (or one-off job of a benchmark's image) as data.

The plan (``mlperf_wf.plan.plan.BenchmarkPlan.job_spec``) describes each job as a :class:`JobSpec`: the image, what is mounted
where and how, the environment, the geometry and the scheduler request, which launcher starts it, and the steps around
the launch (the campaign gate, the prepared tree's check, the preflight, the emptied run folder, the node check, the
page-cache drop, the scratch removal, the power sampler, the MLLOG merge, the provenance). A spec is written as JSON
(``JobSpec.model_dump_json``) and read back (``JobSpec.read``); the launchers (``mlperf_wf.run.launchers``) render its
shell line, and ``mlperf-wf job run SPEC.json`` runs it (``mlperf_wf.run.job``).

``spec_version`` names the layout: a reader refuses a version it does not know, one line naming the file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from mlperf_wf.config.workflow_config import NodeCheckConfig, PowerConfig
from mlperf_wf.errors import ConfigError, describe_validation_error

SPEC_VERSION = 1
"""The layout of :class:`JobSpec` this package writes and reads."""

LauncherName = Literal["local", "docker", "apptainer", "pyxis", "none"]
"""How the job's processes are started (``none``: a job that only refuses, see :attr:`JobSpec.refused`)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Image(_Model):
    """The container image a job starts."""

    reference: str
    """Docker's spelling (``image@digest`` when pinned): what the preflight checks and the run records."""
    digest: str | None = None
    """``sha256:...`` content digest the image is pinned to; None for an image not pinned (tiny scale)."""
    launched: str
    """What this job's launcher is given: Docker's reference or loaded image ID, Apptainer's ``docker://...@digest``
    (or the site's SIF or OCI archive), enroot's ``registry#repository:digest`` (or the site's squashfs file)."""


class Mount(_Model):
    """A host folder seen in the container."""

    host: str
    """Absolute host path."""
    container: str
    """Path inside the container."""
    mode: Literal["ro", "rw"]
    """Read-only or read-write."""


class Geometry(_Model):
    """Where the job's processes run."""

    nodes: int = 1
    """Nodes of the run."""
    gpus_per_node: int = 0
    """Accelerators per node (0 at tiny scale)."""
    tasks: int = 1
    """SLURM tasks of the job (one per node, or one per GPU with ``per_gpu``)."""
    process_model: Literal["per_node", "per_gpu"] = "per_node"
    """``per_node``: the command is a launcher started once per node; ``per_gpu``: srun starts one task per GPU, each
    reading its rank from SLURM."""
    processes: int = 1
    """Processes of a tiny run (torchrun with gloo when > 1)."""


class Resources(_Model):
    """The scheduler request (Snakemake resource names; the SLURM executor maps them to sbatch)."""

    runtime: int
    """Walltime in minutes."""
    mem_mb: int = 0
    """Host memory per node; 0 leaves it to the profile and partition."""
    nodes: int = 1
    """Nodes."""
    gres: str = ""
    """``gpu:N`` per node at full scale."""
    tasks: int = 1
    """Tasks of the job."""
    tasks_per_gpu: int = 0
    """0: SLURM never starts one task per GPU (the launcher starts the GPU processes)."""
    cpus_per_gpu: int = 0
    """Host cores per GPU."""
    mpi: str | None = None
    """``srun`` when the job starts several tasks, so the SLURM jobstep does not wrap it in ``srun -n1``."""


class HostHooks(_Model):
    """This checkout's start-up hooks and the benchmark's round patches, for a run on the host (``local``)."""

    folders: tuple[str, ...]
    """Folders put first on ``PYTHONPATH`` (``containers/hooks``, ``<its folder>/container/patches``)."""
    modules: tuple[str, ...]
    """Patch modules for ``MLPERF_WF_HOOKS``."""


class Process(_Model):
    """The command the launcher starts, and what it sees."""

    command: tuple[str, ...]
    """The argv (the reference command at full scale, ``mlperf-wf train ...`` at tiny scale)."""
    workdir: str = ""
    """Folder the command starts in ('' for a tiny run on the host: the workflow's folder)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment given to the command, values written out."""
    passthrough: tuple[str, ...] = ()
    """Host environment variables passed in by name (their values never appear in the spec or on the line)."""
    accelerator: Literal["nvidia", "amd"] | None = None
    """The GPUs the container is given (None: a CPU run, with no network)."""
    devices: tuple[str, ...] = ()
    """Other host devices the container sees (``full.devices``)."""
    ulimits: dict[str, int] = Field(default_factory=dict)
    """Soft limits raised for the run (``full.ulimits``: ``nofile``)."""
    home: str | None = None
    """Host folder bound as the container's home (Apptainer)."""
    srun_mpi: str | None = None
    """srun's ``--mpi`` for one task per GPU (``full.srun_mpi``; pyxis)."""
    hooks: HostHooks | None = None
    """Round patches for a run on the host (``local``)."""


class CampaignGate(_Model):
    """The first step with ``stop_when_doomed``: the job ends, not started, when its benchmark's set cannot pass."""

    benchmark: str
    """The benchmark."""
    run: int
    """The run index."""
    config_file: str
    """Where the running Snakemake recorded its config."""


class Preflight(_Model):
    """The job's own preflight (``mlperf-wf preflight``): a failure refuses the job (status 2)."""

    benchmark: str
    """The benchmark."""
    image: str | None
    """The image checked (None for a run on the host)."""
    platform: str
    """The system description's name."""


class NodeCheck(_Model):
    """The readiness check of every node of the job before it starts (``mlperf_wf.run.node_check``)."""

    attempts: str
    """Folder of the job's node checks, one subfolder per attempt."""
    excluded: str
    """File of the nodes a failed check named (later jobs exclude them)."""
    prepared: str
    """The prepared tree the nodes must read."""
    inputs: dict[str, tuple[str, str]] = Field(default_factory=dict)
    """Input role -> (folder, verification record) the nodes must read."""
    check: NodeCheckConfig
    """The config's ``node_check``."""
    gpu_tflops: float | None = None
    """What a GPU of the system description's model must show where the config sets no expectation."""


class Provenance(_Model):
    """What the job records once it succeeded (``mlperf-wf provenance``)."""

    out: str
    """The provenance file."""
    result: str
    """The run's result file."""
    consumed: tuple[str, ...]
    """Every input the job read (their digests are recorded)."""
    scale: Literal["tiny", "full"]
    """The workflow's scale."""
    node_checks: str = ""
    """The run's node-check folder ('' where it has none)."""
    config: str = ""
    """The benchmark's resolved config (JSON text), part of the run's campaign identity."""


class Steps(_Model):
    """The steps around the launch, in the order they run."""

    campaign_gate: CampaignGate | None = None
    """With ``stop_when_doomed``: first, the campaign gate."""
    check_prepared: str | None = None
    """The prepared tree checked against its stamps before anything starts."""
    preflight: Preflight | None = None
    """The job's own preflight (full scale)."""
    fresh_run_folder: str | None = None
    """The run folder emptied before each attempt (full scale)."""
    node_check: NodeCheck | None = None
    """The node check (full scale, ``node_check.enabled``)."""
    drop_page_cache: bool = False
    """Drop the page cache on every node of the run before the launch (full scale)."""
    make_folders: tuple[str, ...] = ()
    """Host folders created before the launch (the ones the container binds)."""
    remove_scratch: str | None = None
    """The run's scratch folder, removed once the run succeeded."""
    power: PowerConfig | None = None
    """The power sampler beside the run (``power.enabled``)."""
    mllog_merge: str | None = None
    """The result file the processes' MLLOG parts are merged into after the run (full scale)."""
    provenance: Provenance | None = None
    """What the job records once it succeeded (a train job; None for a one-off job of an image)."""


class JobSpec(_Model):
    """One job of the workflow as data; see the module docstring."""

    spec_version: Literal[1] = SPEC_VERSION
    """The layout of this spec."""
    scale: Literal["tiny", "full"]
    """The scale of the job."""
    launcher: LauncherName
    """How the job's processes are started."""
    result_file: str = ""
    """The run's MLLOG result file (where the power sampler and the MLLOG merge write beside)."""
    image: Image | None = None
    """The container image (None for a run on the host)."""
    mounts: tuple[Mount, ...] = ()
    """Host folders the container sees."""
    process: Process | None = None
    """The command, its folder, environment and devices (None for a job that only refuses)."""
    geometry: Geometry = Field(default_factory=Geometry)
    """Nodes, GPUs, tasks and the process model."""
    resources: Resources
    """The scheduler request."""
    threads: int = 1
    """CPU threads the job occupies on its host."""
    steps: Steps = Field(default_factory=Steps)
    """The steps around the launch."""
    refused: str | None = None
    """Why the config cannot plan this job (one line): the job only fails with it, status 2."""

    @model_validator(mode="after")
    def _launchable(self) -> JobSpec:
        """A job that does not refuse has a process, and a container launcher an image."""
        if self.refused is None and self.process is None:
            raise ValueError("a job spec without 'refused' needs a 'process' (the command it launches)")
        if self.refused is None and self.launcher in ("docker", "apptainer", "pyxis") and self.image is None:
            raise ValueError(f"launcher {self.launcher} needs an 'image'; only local runs on the host")
        if self.refused is None and self.launcher == "none":
            raise ValueError("launcher none is only for a job that refuses (give 'refused')")
        return self

    def write(self, path: Path) -> None:
        """The spec as indented JSON in ``path``."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.model_dump_json(indent=2) + "\n")

    @classmethod
    def read(cls, path: Path) -> JobSpec:
        """The spec in ``path``; a missing file, bad JSON, another version or a bad field is one ``ConfigError`` line."""
        try:
            text = path.read_text()
        except OSError as err:
            raise ConfigError(f"job spec {path}: cannot be read ({err.strerror})") from None
        return cls.parse(text, str(path))

    @classmethod
    def parse(cls, text: str, where: str = "job spec") -> JobSpec:
        """The spec in the JSON ``text`` (``where`` names it in errors)."""
        try:
            raw = json.loads(text)
        except ValueError as err:
            raise ConfigError(f"job spec {where}: not JSON ({err})") from None
        version = raw.get("spec_version") if isinstance(raw, dict) else None
        if version != SPEC_VERSION:
            raise ConfigError(f"job spec {where}: spec_version is {version!r}; this mlperf-wf reads version {SPEC_VERSION}")
        try:
            return cls.model_validate(raw)
        except ValidationError as err:
            raise ConfigError(describe_validation_error(f"job spec {where}", err)) from None
