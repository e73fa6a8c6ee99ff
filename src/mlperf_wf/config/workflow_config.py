"""The workflow config (``config/config.yaml`` and ``--config``) as one typed model: the single source of every key,
its type, default and meaning.

Generated from it, and compared with it by ``tests/config/test_config_schema.py``: ``workflow/schemas/config.schema.yaml``
(Snakemake's ``validate`` and editors read it), ``config/config.yaml`` (every key at its default, with its meaning as
the comment) and the table of ``config/README.md``. ``mlperf-wf config-files`` writes all three again after a change
here.

Snakemake's ``--config`` passes nested values as text (``'full_geometry={gpt3: {nodes: 2}}'`` arrives with ``"2"``),
so counts and sizes inside the per-benchmark maps accept digits as text, and a hyperparameter given as text that reads
as a number is that number; the model turns them into numbers, so a key means the same from ``--config`` as from a
``--configfile`` (:func:`command_line_value` reads a value as Snakemake does).
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints, ValidationError, WithJsonSchema
from pydantic.fields import FieldInfo

from mlperf_wf.config import docstrings
from mlperf_wf.errors import ConfigError, describe_validation_error
from mlperf_wf.kinds import Scale

BenchmarkName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_]+$")]
Count = Annotated[int, Field(ge=1), WithJsonSchema({"type": ["integer", "string"], "pattern": "^[1-9][0-9]*$", "minimum": 1})]
"""A positive whole number, also as text (``--config`` passes nested values as text)."""
SizeGb = Annotated[float, Field(ge=0), WithJsonSchema({"type": ["number", "string"], "pattern": "^[0-9]+([.][0-9]+)?$", "minimum": 0})]
FlagValue = Annotated[int | float | str, WithJsonSchema({"type": ["string", "number"]})]


def _number_of_text(value: object) -> object:
    """A hyperparameter given as text that reads as a number (``"64"``, ``"1e-4"``, ``"0.0001"``): that number, as a
    ``--configfile`` would give it (YAML reads ``64`` and ``0.0001`` as numbers; ``1e-4`` as text, a number too here).
    Other text, numbers and booleans stay as they are."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if re.fullmatch(r"[-+]?[0-9]+", text):
        return int(text)
    if re.fullmatch(r"[-+]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?", text):
        return float(text)
    return value


HyperValueText = Annotated[int | float | str, BeforeValidator(_number_of_text), WithJsonSchema({"type": ["string", "number"]})]
Flags = Annotated[
    dict[str, FlagValue],
    WithJsonSchema({"type": "object", "propertyNames": {"pattern": "^--?[A-Za-z0-9][A-Za-z0-9_.-]*$"}, "additionalProperties": {"type": ["string", "number"]}}),
]
Hyperparameters = Annotated[
    dict[str, HyperValueText],
    WithJsonSchema({"type": "object", "propertyNames": {"pattern": "^[a-z][a-z0-9_]*$"}, "additionalProperties": {"type": ["string", "number"]}}),
]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Submission(_Section):
    """What the runs' logs state about the submitter and system."""

    org: Annotated[str, Field(min_length=1)] = "mlperf-workflow"
    """`submission_org` each run logs."""
    platform: Annotated[str, Field(min_length=1)] = "cpu-tiny"
    """`submission_platform` (system name) each run logs; the package uses `config/systems/<platform>.yaml`."""
    status: Literal["onprem", "cloud", "research", "preview"] = "research"
    """`submission_status`: `onprem`, `cloud`, `research` or `preview`."""


class GeometryOverride(_Section):
    """One benchmark's full-scale geometry other than its definition's."""

    nodes: Count | None = None
    """Nodes per run."""
    gpus_per_node: Count | None = None
    """Accelerators per node."""
    host_memory_gb: Count | None = None
    """Host memory one node of a run needs (GiB), requested from the scheduler."""
    walltime_minutes: Count | None = None
    """Time limit of one run's job (minutes): the scheduler's limit and every time the reference derives from it."""
    nvlink_segments: bool | None = None
    """Whether the runs are placed in whole NVLink-domain segments (``full.geometry.segment_nodes``, ``sbatch
    --segment``); None: where the system's domains span a segment (a system not probed is taken as the reference's);
    false: never (a site whose SLURM has no topology/block plugin, or whose domains are single nodes)."""
    rehearsal: bool = False
    """Whether the geometry is a rehearsal of the launch on fewer nodes than a submission's: a benchmark whose nodes
    split into roles (``full.geometry.node_split``) then gives each role at least one node where the reference's ratio
    cannot split them (two nodes: one of each), and the dry run names the geometry a rehearsal's, not a submission's."""


class ContainerOverride(_Section):
    """The full-scale image a site built and pushed for one benchmark."""

    image: Annotated[str, Field(min_length=1)] | None = None
    """Image repository and tag."""
    digest: Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")] | None = None
    """sha256 content digest the image is pinned to."""
    squashfs: Annotated[str, StringConstraints(pattern=r"^/")] | None = None
    """Absolute path of this site's enroot image of it (``mlperf-wf bundle import``): pyxis starts the file."""
    oci_archive: Annotated[str, StringConstraints(pattern=r"^/")] | None = None
    """Absolute path of this site's OCI archive of it (``mlperf-wf bundle import``): Apptainer starts the file."""
    sif: Annotated[str, StringConstraints(pattern=r"^/")] | None = None
    """Absolute path of this site's Apptainer SIF of it (``mlperf-wf bundle import`` where apptainer exists): Apptainer
    starts the file (before the OCI archive)."""
    image_id: Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")] | None = None
    """Its ID in this node's Docker engine (``mlperf-wf bundle import --docker``): docker starts it by ID."""


class NodeCheckConfig(_Section):
    """The readiness check of every node of a full-scale run before it starts (``mlperf_wf.run.node_check``)."""

    enabled: bool = True
    """Check each node (collective, matrix multiply, data, GPU state) before every full-scale run; a bad node fails the
    job, named, and the retry excludes it."""
    matmul_tflops_per_device: Annotated[float, Field(gt=0)] | None = None
    """Least matrix-multiply throughput per device (TFLOPS) a node must show; unset: half the dense BF16 peak of the
    system description's accelerator where known, else measured and recorded only."""
    allreduce_gbps: Annotated[float, Field(gt=0)] | None = None
    """Least all-reduce bus bandwidth across the run's nodes (GB/s); unset: measured and recorded only."""
    matrix_size: Annotated[int, Field(ge=64)] = 8192
    """n of each GPU's n x n bf16 matrix multiply (a node without GPUs multiplies 512 x 512 float32)."""
    timeout_s: Annotated[int, Field(ge=5)] = 120
    """Seconds the nodes wait for each other to join the collective."""


DEFAULT_GPU_COMMAND = "nvidia-smi --query-gpu=timestamp,index,power.draw --format=csv,noheader,nounits -lms {interval_ms}"
"""The power sampler's default ``gpu_command`` (``mlperf_wf.run.power``)."""
_MILLISECONDS_AS_TEXT_TOO = {"type": ["integer", "string"], "pattern": "^[1-9][0-9]*$", "minimum": 10, "maximum": 60_000}
"""``--config`` passes nested values as text."""


class PowerConfig(BaseModel):
    """`power:` of the workflow config (and of a profile's `config:`): energy measurement beside every run, sampled by
    ``mlperf_wf.run.power``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: Annotated[bool, WithJsonSchema({"type": ["boolean", "string"], "enum": [True, False, "true", "false", "True", "False"]})] = False
    """Sample power beside every run (off by default; runs' commands are unchanged when off)."""
    interval_ms: Annotated[int, Field(ge=10, le=60_000), WithJsonSchema(_MILLISECONDS_AS_TEXT_TOO)] = 1000
    """Milliseconds between two readings, 10 to 60000 (nvidia-smi refreshes power.draw every 100 ms or so)."""
    gpu_command: str = DEFAULT_GPU_COMMAND
    """Long-running command printing `[timestamp,] index, watts` per GPU per interval; `{interval_ms}` is replaced."""
    node_command: str = ""
    """Shell command printing the node's power (the first number of its output, in watts), run every interval;
    when set it is the node's reading instead of the GPUs' sum, e.g. `ipmitool dcmi power reading`."""
    conversion_eff: Annotated[float | None, Field(gt=0, le=1), WithJsonSchema({"type": ["number", "string", "null"]})] = None
    """Conversion efficiency of the measured power (e.g. a DC reading's supply efficiency), logged as `conversion_eff`;
    unset: not logged, and the summarizer takes 1.0."""

    @classmethod
    def from_config(cls, raw: dict | None) -> PowerConfig:
        """Validate ``power:`` (``--config`` passes nested values as text: ``"true"``, ``"500"``)."""
        try:
            return cls.model_validate(raw or {})
        except ValidationError as err:
            raise ConfigError(describe_validation_error("config: power", err, separator=".")) from None

    @property
    def source(self) -> str:
        """What a reading measures: ``node_command`` or ``gpus``."""
        return "node_command" if self.node_command else "gpus"


class WorkflowConfig(_Section):
    """The whole workflow config. *What* to run; *where* it runs (partition, account, retries) is a profile's."""

    benchmarks: Annotated[tuple[BenchmarkName, ...], Field(min_length=1)] = ("llama2_70b_lora",)
    """Benchmarks the default target builds: `results/<name>/report.json` (`results/tiny/<name>/report.json` at tiny
    scale) plus every run's `result.txt` and `compliance.json`. Each is a folder of `src/mlperf_wf/benchmarks/`."""
    scale: Scale = Scale.TINY
    """`tiny`: generated data, a tiny pretrained checkpoint and the project's CPU trainer (minutes on a laptop). `full`:
    the published MLCommons datasets and the reference container on GPUs. Resources are kept apart under
    `resources/tiny/` and `resources/full/`."""
    ruleset: Annotated[str, StringConstraints(pattern=r"^(latest|[0-9]+\.[0-9]+\.[0-9]+)$")] = "latest"
    """mlperf-logging training ruleset the logs are checked against. `latest`: each benchmark under the newest round it
    is part of (llama2_70b_lora 6.1.0; rgat 5.1.0, retired after it). A version such as `"6.1.0"`: every configured
    benchmark must be part of that round (mlperf-logging's `benchmark_meta`). The quality target is read from the
    round's compliance YAML. Each round and division of the configured benchmarks, and of the benchmarks already
    finished in the folder, has its own submission package (`results/submission/<ruleset>-<division>/`)."""
    division: Literal["closed", "open"] = "closed"
    """`closed` or `open`. Selects the compliance rules and the target. A benchmark whose closed rules cannot hold at
    tiny size runs its tiny tier as open (its definition's `tiny.division`, with the rules it does not meet); such a
    benchmark's package is then an open one."""
    runs: Annotated[int, Field(ge=0)] = 0
    """Runs per benchmark. `0` uses the count the rules require (10 for llama2_70b_lora and rgat, from
    `benchmark_meta`). Fewer runs are allowed for testing; the report then says the set is not a valid submission."""
    seed_base: Annotated[int, Field(ge=0)] = 1234
    """Run *i* uses seed `seed_base + i`; every run's seed is different, as the seed checker requires."""
    submission: Submission = Submission()
    """What the runs' logs state about the submitter and system."""
    tiny_threads: Annotated[int, Field(ge=1)] = 1
    """CPU threads of one tiny-scale run process; `--cores N` runs N / (`tiny_threads` x `tiny_processes`) runs at
    once."""
    tiny_processes: Annotated[int, Field(ge=1)] = 1
    """Processes of one tiny-scale run; above 1 it runs under `torchrun --standalone` with the gloo backend (data
    parallel, rank 0 logs)."""
    launcher: Literal["auto", "local", "docker", "apptainer", "pyxis"] = "auto"
    """How runs start: `auto` (local at tiny scale, docker at full scale on one node, pyxis on several), `local` (on
    the job's host), `docker` (`docker run --gpus all`), `apptainer` (`apptainer exec --nv`), `pyxis` (`srun
    --container-image ...` inside the SLURM allocation). See docs/cluster.md."""
    tiny_image: str = "mlperf-wf-tiny:bookworm"
    """Image of a tiny run with `launcher: docker`. It only supplies a Linux userland (e.g. `debootstrap
    --variant=minbase bookworm rootfs && tar -C rootfs -c . | docker import - mlperf-wf-tiny:bookworm`); this host's
    Python, venv and project are bind-mounted read-only at the same paths, the workflow directory read-write."""
    env_passthrough: tuple[Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")], ...] = ()
    """Host environment variables passed into the container by name (e.g. `NCCL_DEBUG`, `NCCL_IB_HCA`); their values
    never appear on command lines."""
    full_geometry: dict[str, GeometryOverride] = {}
    """Per-benchmark overrides of the definition's nodes, GPUs per node, host memory per node (GiB, requested as
    `--mem`) and walltime (minutes: the scheduler's limit and every time the reference derives from it, e.g. gpt3's
    `--exit-duration-in-mins`), e.g. `{llama2_70b_lora: {nodes: 2}}`, `{rgat: {host_memory_gb: 1500}}`,
    `{gpt3: {walltime_minutes: 720}}`; the launcher and the scheduler request follow. A key that names no benchmark
    stops the workflow."""
    reference_logs: dict[str, Annotated[str, Field(min_length=1)]] = {}
    """Per-benchmark folder of reference convergence logs (searched recursively for `.out`/`.log`/`.txt` files with
    `:::MLLOG` lines; they need not pass compliance), drawn in the convergence figure: on the runs' axes at full scale,
    in a panel beside them at tiny scale (tiny samples are not comparable). E.g. `{deepseekv3_671b:
    /data/rcp_logs/16384}` for the reference's own RCP runs. A missing folder is a one-line error when the workflow is
    parsed."""
    preparation: dict[str, Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$")]] = {}
    """Per-benchmark preparation other than its default (`benchmark.yaml` `preparations`; each benchmark's README lists
    them), e.g. `{dlrm_dcnv2: from_raw}`: Criteo's multi-hot day files made from the raw click logs, per day and per
    feature, instead of downloading the published ones. An unknown benchmark or preparation is a one-line error naming
    what is offered; switching keeps every shard already made."""
    full_container: dict[str, ContainerOverride] = {}
    """Per-benchmark full-scale image this site built and pushed, pinned by digest: `{llama2_70b_lora: {image:
    REGISTRY/llama2_70b_lora:ref-aa344c7, digest: "sha256:..."}}` (either key may be given alone). Full-scale runs
    refuse an image without a digest."""
    full_arguments: dict[str, Flags] = {}
    """Per-benchmark flags of the reference command whose value this site sets: `{llama2_70b_lora: {--config_file:
    configs/my_cluster.yaml, --max_seq_len: "4096"}}`. Each flag must already be in the benchmark's command; an
    unknown flag stops the workflow with the list of its flags. A flag whose value the plan derives from the batch (an
    RCP value, the micro batch and accumulation, a step count in samples) is a named DEVIATION in the dry run's batch
    table (`full_hyperparameters` sets those and keeps the table in charge). Closed-division rules still apply to what
    you change: the compliance checker reads them in each run's log."""
    full_hyperparameters: dict[str, Hyperparameters] = {}
    """Per-benchmark global batch size and RCP hyperparameters of full-scale runs: `{llama31_8b: {global_batch_size:
    64}}` runs at GBS 64 with the round's RCP values there; `{flux1: {opt_base_learning_rate: 0.0001}}` keeps the GBS
    and deviates from the RCP. By default each benchmark with sizing runs its definition's GBS with the RCP's values
    (`mlperf-wf size --benchmark B` shows them); the full-scale dry run prints the table and marks each deviation; a
    GBS without an RCP needs every hyperparameter given."""
    full_workdir: dict[str, Annotated[str, Field(min_length=1)]] = {}
    """Per-benchmark folder the reference command starts in. With `launcher: local` this is this host's checkout of
    the reference (`{llama2_70b_lora: /opt/training/llama2_70b_lora}`); containers default to the definition's
    `workdir`."""
    full_mounts: dict[str, list[str]] = {}
    """Per-benchmark extra container mounts, `HOST:CONTAINER[:ro|rw]` (read-only unless `:rw`), e.g. a site cache
    `{llama2_70b_lora: ["/scratch/hf:/hf:ro"]}`."""
    full_scratch: dict[str, dict[str, SizeGb]] = {}
    """Per-benchmark size (GB) a run's scratch area (`full.scratch` in `benchmark.yaml`) needs, instead of its
    declared `size_gb`, e.g. `{llama31_8b: {npy_index: 50}}` for a smaller index cache. The preflight (`mlperf-wf
    preflight`, and Snakemake at full scale before queueing anything) checks each run's total against the free space
    of the run folder's filesystem; an area the definition does not have is an error."""
    tiny_hyperparameters: dict[str, dict[str, Any]] = {}
    """Per-benchmark overrides of the tiny tier's typed hyperparameters (the fields of the benchmark folder's
    `hyperparameters.py`), e.g. `{rgat: {learning_rate: 0.005}}`. Unknown names and values of the wrong type stop the
    workflow when it is parsed, with the key, the value and the allowed names; the run logs the values it used."""
    power: PowerConfig = PowerConfig()
    """Energy to train (MLPerf Power): a power sampler beside every run on every node (`mlperf-wf power-sample`)
    writes `runs/<i>/power/result/node_<k>.txt`, and the report and `mlperf-wf score` give energy per run and the
    olympic energy score as the official summarizer does (docs/energy.md). `--config` passes it as
    `'power={enabled: true}'`."""
    stop_when_doomed: bool = False
    """Stop spending on a benchmark whose required set can no longer be valid (the olympic rule's allowance of failed
    or non-converged runs used up by the finished runs' verdicts, or the forecast below `doomed_below`): each train
    job asks first and, doomed, does not start (its log says `not started: campaign can no longer pass`, it is never
    scored), SLURM jobs of the benchmark still pending are cancelled, finished runs stay as they are, and `mlperf-wf
    status` gives the GPU-hours not spent. The next invocation makes none of the runs not started and writes the report
    from the finished runs: why, the runs not started, the GPU-hours not spent, no score (docs/status.md). Off:
    `mlperf-wf status` still says a benchmark is doomed, and why."""
    doomed_below: Annotated[float, Field(ge=0, lt=1)] = 0.0
    """A benchmark is doomed too when the forecast's probability of a valid set that passes the RCP check (valid alone
    in the open division) falls below this, e.g. `0.05`; `0` keeps to the olympic rule alone."""
    node_check: NodeCheckConfig = NodeCheckConfig()
    """Before every full-scale run, a short check of each of its nodes on the job's own allocation (all-reduce, matrix
    multiply, the data's names and sizes, GPU ECC and slowdown); a bad node fails the job, named, and the retry
    excludes it (docs/cluster.md). `--config 'node_check={enabled: false}'` turns it off."""

    @classmethod
    def parse(cls, config: dict) -> WorkflowConfig:
        """The config as Snakemake or ``status`` read it (every missing key at its default), or one line naming the
        key, the value and what is wrong."""
        try:
            return cls.model_validate(config)
        except ValidationError as err:
            raise ConfigError(describe_validation_error("config", err)) from None

    def filled(self) -> dict:
        """The config as plain data with every default filled in (what Snakemake's ``config`` holds after validate)."""
        return self.model_dump(mode="json")


def command_line_value(text: str) -> Any:
    """A ``--config KEY=VALUE`` value as Snakemake reads it (``snakemake.cli.parse_config``): a whole number, a float,
    a boolean, else YAML read with its BaseLoader (every nested value stays text), else the text itself."""
    if text == "":
        return None
    for parse in (int, float, _boolean):
        try:
            return parse(text)
        except ValueError:
            pass
    try:
        return yaml.load(text, Loader=yaml.BaseLoader)
    except yaml.YAMLError:
        return text


def _boolean(text: str) -> bool:
    if text in ("True", "False"):
        return text == "True"
    raise ValueError(text)


# ---- the generated files ----------------------------------------------------------


def merge_config(config: dict, update: dict) -> None:
    """``update`` into ``config``, mappings key by key (as Snakemake merges a ``--configfile``)."""
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            merge_config(config[key], value)
        else:
            config[key] = value


SCHEMA_FILE = Path("workflow/schemas/config.schema.yaml")
CONFIG_FILE = Path("config/config.yaml")
SITE_CONFIG = Path("config/site.yaml")
"""What ``mlperf-wf bundle import`` set for this site (its local image files), read after :data:`CONFIG_FILE` where it
exists: the Snakefile, ``mlperf-wf status`` and ``mlperf-wf preflight`` merge it the same way."""
README_FILE = Path("config/README.md")
TABLE_START = "<!-- the table below is generated from src/mlperf_wf/config/workflow_config.py: mlperf-wf config-files -->"
TABLE_END = "<!-- end of the generated table -->"


def _inline(node: Any, definitions: dict) -> Any:
    """The schema with every ``$ref`` replaced by its definition and pydantic's titles dropped (a readable file, and
    Snakemake's default-filling only follows ``properties``)."""
    if isinstance(node, dict):
        options = node.get("anyOf")
        if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:  # `X | None`: X or null
            merged = {**next(option for option in options if option != {"type": "null"}), **{k: v for k, v in node.items() if k != "anyOf"}}
            if "$ref" not in merged:
                kinds = merged.get("type", [])
                merged["type"] = [*(kinds if isinstance(kinds, list) else [kinds]), "null"]
            return _inline(merged, definitions)
        if "$ref" in node:  # the definition, with what the field says beside the reference (its description, default)
            siblings = {key: value for key, value in node.items() if key != "$ref"}
            return _inline({**definitions[node["$ref"].rsplit("/", 1)[1]], **siblings}, definitions)
        inlined = {key: _inline(value, definitions) for key, value in node.items() if key not in ("title", "$defs")}
        if isinstance(inlined.get("description"), str):
            inlined["description"] = " ".join(inlined["description"].split())
        return inlined
    if isinstance(node, list):
        return [_inline(item, definitions) for item in node]
    return node


def json_schema() -> dict:
    """The JSON schema of the config (draft 2020-12), with each key's docstring as its description."""
    raw = docstrings.with_descriptions(WorkflowConfig).model_json_schema(mode="validation")
    schema = _inline(raw, raw.get("$defs", {}))
    schema["description"] = "mlperf-workflow configuration (config/config.yaml), generated from src/mlperf_wf/config/workflow_config.py"
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def schema_text() -> str:
    return "# Generated from src/mlperf_wf/config/workflow_config.py by `mlperf-wf config-files`; edit the model, not this file.\n" + yaml.safe_dump(
        json_schema(), sort_keys=False, width=120, allow_unicode=True
    )


def _comment(text: str, indent: str = "") -> str:
    flat = " ".join(text.split())
    return "\n".join(f"{indent}# {line}" for line in textwrap.wrap(flat, 116 - len(indent)))


def _yaml_value(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=10_000).strip().removesuffix("\n...").strip()


def _section_of(field: FieldInfo) -> type[BaseModel] | None:
    """The model of a key that is a mapping of its own keys (``submission``, ``power``), else None."""
    return field.annotation if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel) else None


def config_text() -> str:
    """``config/config.yaml``: every key at its default, its meaning as the comment above it."""
    defaults = WorkflowConfig().filled()
    parts = [
        "# mlperf-workflow configuration: every key at its default. Generated from src/mlperf_wf/config/workflow_config.py\n"
        "# (`mlperf-wf config-files`), like workflow/schemas/config.schema.yaml and the table of config/README.md.\n"
        "# Cluster settings (partition, account, GPUs per job) belong in a profile, not here."
    ]
    for name, field in WorkflowConfig.model_fields.items():
        value = defaults[name]
        section = _section_of(field)
        if section is None:
            parts.append(f"{_comment(docstrings.description(WorkflowConfig, name))}\n{name}: {_yaml_value(value)}")
            continue
        lines = [_comment(docstrings.description(WorkflowConfig, name)), f"{name}:"]
        for sub in section.model_fields:
            lines += [_comment(docstrings.description(section, sub), "  "), f"  {sub}: {_yaml_value(value[sub])}"]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def table_text() -> str:
    """The key/default/meaning table of ``config/README.md``."""
    defaults = WorkflowConfig().filled()
    rows = ["| key | default | meaning |", "|---|---|---|"]
    for name, field in WorkflowConfig.model_fields.items():
        section = _section_of(field)
        shown = "(mapping)" if section is not None else f"`{_cell(_yaml_value(defaults[name]))}`"
        rows.append(f"| `{name}` | {shown} | {_cell(docstrings.description(WorkflowConfig, name))} |")
        if section is not None:
            for sub in section.model_fields:
                rows.append(f"| `{name}.{sub}` | `{_cell(_yaml_value(defaults[name][sub]))}` | {_cell(docstrings.description(section, sub))} |")
    return "\n".join([TABLE_START, *rows, TABLE_END])


def readme_text(current: str) -> str:
    """``config/README.md`` with its generated table replaced (the prose around it is written by hand)."""
    if TABLE_START not in current or TABLE_END not in current:
        raise ConfigError(f"{README_FILE}: the generated table's markers are missing; put {TABLE_START!r} and {TABLE_END!r} where it goes")
    head, rest = current.split(TABLE_START, 1)
    return head + table_text() + rest.split(TABLE_END, 1)[1]


def generated_files(root: Path) -> dict[Path, str]:
    """Every file generated from the model, with the text it must have."""
    return {
        root / SCHEMA_FILE: schema_text(),
        root / CONFIG_FILE: config_text(),
        root / README_FILE: readme_text((root / README_FILE).read_text()),
    }


def stale_files(root: Path) -> list[Path]:
    """The generated files that differ from what the model makes."""
    return [path for path, text in generated_files(root).items() if not path.is_file() or path.read_text() != text]
