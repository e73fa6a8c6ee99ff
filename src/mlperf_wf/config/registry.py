"""Benchmark definitions (one folder each, discovered) and the shared dataset catalog.

A benchmark is the folder ``mlperf_wf/benchmarks/<name>/``; see ``mlperf_wf.benchmarks``
for what it holds. Its ``benchmark.yaml`` is read into :class:`BenchmarkDef`: the
datasets it needs by role, the reference implementation, and how that reference runs at
full scale. Datasets are one catalog of ``<id>.yaml`` entries (:class:`DatasetDef`): a benchmark's own in its
folder's ``datasets/``, those several benchmarks read (C4 serves several) in ``config/datasets/``, which also
holds a site's own copy of any entry (it takes precedence).

Every error is one line naming the file, the key, the value and what is allowed, and
:func:`check_all` collects them for every definition at once (``mlperf-wf check`` and
the Snakefile call it), so a broken definition names itself before any job runs.
"""

from __future__ import annotations

import ast
import fnmatch
import importlib
import importlib.util
import re
import string
from functools import cache
from pathlib import Path
from typing import Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

import mlperf_wf
from mlperf_wf.config import yaml_files
from mlperf_wf.errors import ConfigError, describe_validation_error
from mlperf_wf.kinds import DEFAULT_PREPARATION, Scale

PACKAGE = "mlperf_wf"
BENCHMARKS_PACKAGE = f"{PACKAGE}.benchmarks"
PACKAGE_DIR = Path(mlperf_wf.__file__).parent
"""The installed package's folder (its benchmarks, its modules' sources)."""
BENCHMARKS_DIR = PACKAGE_DIR / "benchmarks"
DEFINITION_FILE = "benchmark.yaml"
CATALOG_FOLDER = "datasets"
"""A benchmark folder's catalog entries (``<name>/datasets/<id>.yaml``), and the shared ones' ``config/datasets/``."""
CONTAINER_FOLDER = "container"
"""A benchmark folder's image definitions: ``Dockerfile`` (built with the repository root as the context),
``Apptainer.def`` and the round patches ``patches/`` the images put on ``PYTHONPATH``."""
BENCHMARK_MODULES = ("hyperparameters", "prepare", "trainer")
"""Modules every benchmark folder has: its tiny hyperparameter model, its preparation, its tiny trainer."""
BENCHMARK_FILES = (DEFINITION_FILE, "README.md", *(f"{module}.py" for module in BENCHMARK_MODULES))
"""Files every benchmark folder has."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ---- datasets ---------------------------------------------------------------


class DatasetFile(_Strict):
    """One file of a dataset as published."""

    path: str
    """Path relative to the dataset's base URL (and to its local folder)."""
    md5: str | None = None
    """Published md5, used to cross-check the downloaded ``.md5`` list."""
    size: int | None = None
    """Size in bytes where known."""
    sha256: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")
    """Published sha256 (the huggingface protocol: the hub's LFS sha256 at the pinned revision, or the value a
    reference's own verification script checks)."""
    rows: int | None = Field(None, ge=0)
    """Rows where the publisher checks them (a JSON-lines file's line count, a parquet file's row count)."""

    @model_validator(mode="after")
    def _rows_are_countable(self) -> DatasetFile:
        if self.rows is not None and not self.path.endswith((".jsonl", ".parquet")):
            raise ValueError(f"{self.path}: rows are counted for .jsonl and .parquet files only")
        return self


class DatasetSource(_Strict):
    """Where a dataset is published."""

    protocol: Literal["r2", "huggingface", "fiftyone", "external", "made_in_image"] = "r2"
    """``r2``: the MLCommons R2 layout (``<name>.uri`` gives the base URL, ``<name>.md5`` beside it lists ``md5  path`` lines).
    ``huggingface``: a Hugging Face Hub repository at a pinned commit (``repository``, ``revision``), each file checked
    against the sha256 and size the hub reports for that commit (and the ``files`` values where given).
    ``fiftyone``: fetched by the reference's own FiftyOne script (``instructions``) into a local folder in FiftyOne's zoo
    layout, which the download stage receives: image counts per split (``splits``) and pinned checksums (``files``) are
    checked before and after a resumable, staged copy (``mlperf_wf.acquire.fiftyone``).
    ``external``: published elsewhere by a tool of its own (``instructions`` say how); the download stage stops with them.
    ``made_in_image``: nobody publishes it; a one-off full-scale job of a benchmark's own image makes it once, before
    that benchmark's runs (``made_by``; its definition's ``full.made_in_image`` says how), e.g. a checkpoint the
    reference converts on first use. The tiny tier mirrors its stand-in like an R2 dataset's."""
    uri: str | None = None
    """URL of the ``<name>.uri`` metadata file (https:// or file://); required for r2."""
    md5: str | None = None
    """URL of the ``<name>.md5`` list beside it; required for r2."""
    instructions: str | None = None
    """How to obtain an external dataset, and where to put it."""
    base_url: str | None = None
    """The base URL the ``.uri`` file held when this definition was written (informational)."""
    repository: str | None = None
    """Hugging Face repository id (``owner/name``); required for huggingface."""
    repository_type: Literal["dataset", "model"] = "dataset"
    """Hugging Face repository type (the reference's ``hf download --repo-type``)."""
    revision: str | None = None
    """The full 40-hex commit the reference pins (``hf download --revision``); required for huggingface: a branch
    name would let the data change under a result."""
    endpoint: str = "https://huggingface.co"
    """The hub's base URL (a mirror, or the tiny tier's loopback copy in the hub's layout)."""
    splits: dict[str, int] = Field(default_factory=dict)
    """fiftyone: split folder -> number of images a complete fetch holds (in its COCO labels file and its ``data/``)."""
    labels_file: str | None = None
    """fiftyone: each split's COCO labels file under ``<split>/labels/`` (the reference script's ``--output-labels``)."""
    made_by: str | None = None
    """``made_in_image``: the benchmark whose image makes the dataset (its ``full.made_in_image`` names the role)."""
    credentials_required: bool = False
    """The download needs credentials the environment gives (never the command line): r2, a Cloudflare Access service
    token (``MLPERF_WF_CF_ACCESS_CLIENT_ID`` and ``MLPERF_WF_CF_ACCESS_CLIENT_SECRET``) or access token
    (``MLPERF_WF_CF_ACCESS_TOKEN``), as members-only data is; huggingface, ``HF_TOKEN`` for a gated or private
    repository. ``mlperf-wf preflight`` (and a full-scale Snakemake run) reports such a dataset still to download when
    they are not set; false: public, a token is sent only where one is set."""

    @field_validator("revision")
    @classmethod
    def _revision_is_a_commit(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[0-9a-f]{40}", value):
            raise ValueError("expected the full 40-hex commit the reference pins (a branch or tag could change under a result)")
        return value

    @model_validator(mode="after")
    def _r2_has_urls(self) -> DatasetSource:
        if self.protocol == "r2" and not (self.uri and self.md5):
            raise ValueError("protocol r2 needs uri and md5")
        if self.protocol == "huggingface" and not (self.repository and self.revision):
            raise ValueError("protocol huggingface needs repository (owner/name) and revision (a 40-hex commit)")
        if self.protocol == "fiftyone" and not (self.instructions and self.splits and self.labels_file):
            raise ValueError("protocol fiftyone needs instructions (the fetch command), splits (images per split) and labels_file")
        if self.protocol == "external" and not self.instructions:
            raise ValueError("protocol external needs instructions")
        if (self.protocol == "made_in_image") != (self.made_by is not None):
            raise ValueError("protocol made_in_image needs made_by (the benchmark whose image makes it), and only it takes made_by")
        if self.credentials_required and self.protocol not in ("r2", "huggingface"):
            raise ValueError(f"credentials_required: protocol {self.protocol} is not downloaded by the workflow; say in instructions what access it needs")
        return self


class TinyGenerator(_Strict):
    """How the tiny tier generates a dataset's stand-in (the mirror then publishes it in the layout of the dataset's protocol)."""

    module: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.]*(:[A-Za-z_][A-Za-z0-9_]*)?$")
    """The generator, ``generate(out_dir: Path, seed: int)``: ``package.module:function``, or ``package.module`` for its
    function ``generate`` (usually in the benchmark's folder)."""
    seed: int
    """Generator seed; fixed so the tiny dataset is the same everywhere."""
    splits: dict[str, int] = Field(default_factory=dict)
    """fiftyone: images per split the tiny mirror holds, checked as ``source.splits`` is at full scale."""
    files: list[DatasetFile] = Field(default_factory=list)
    """fiftyone: the tiny mirror's pinned files (its labels files' sha256), checked as ``files`` is at full scale."""

    @property
    def module_name(self) -> str:
        """The generator's module."""
        return self.module.partition(":")[0]

    @property
    def function_name(self) -> str:
        """The generator's function in it."""
        return self.module.partition(":")[2] or "generate"

    def function(self):
        """The generator, imported."""
        return getattr(importlib.import_module(self.module_name), self.function_name)


class DatasetDef(_Strict):
    """A dataset (or model checkpoint, or tokenizer) entry of the catalog (:func:`dataset_file`)."""

    id: str
    """Catalog id; also the folder name under ``resources/<scale>/datasets/``."""
    version: str
    """Version of the published data, as MLCommons names it."""
    title: str
    """Human-readable name."""
    kind: Literal["dataset", "checkpoint", "tokenizer"] = "dataset"
    """Training data, a model checkpoint or a tokenizer."""
    source: DatasetSource
    """Where the full-scale data is published."""
    size: str | None = None
    """Total published size, as in MLCommons' manifest (e.g. "112MB")."""
    file_count: int | None = None
    """Number of files in the published .md5 list when this definition was written."""
    files: list[DatasetFile] = Field(default_factory=list)
    """Files that make up the dataset; empty means "whatever the .md5 list (R2) or the hub's listing (huggingface) holds"
    (long lists are not copied here). For huggingface, the files whose values a reference pins (checked as well as the hub's)."""
    exclude: list[str] = Field(default_factory=list)
    """Glob patterns of listed files not to download (e.g. ``.git/**`` in a mirrored HF repo)."""
    license: str
    """License and access note (members-only data says so and how to get access)."""
    tiny: TinyGenerator | None = None
    """Generator of the tiny-scale stand-in; None where no tiny tier exists yet."""

    def wanted(self, path: str) -> bool:
        """Whether a listed file is part of the dataset after ``exclude``."""
        return not any(fnmatch.fnmatch(path, pattern) for pattern in self.exclude)


# ---- benchmarks ---------------------------------------------------------------

RESERVED_PLACEHOLDERS = (
    "seed",
    "run",
    "prepared",
    "results",
    "result_file",
    "nodes",
    "gpus_per_node",
    "processes",
    "master_addr",
    "master_port",
    "node_rank",
    "walltime_minutes",
    "quality_target",
    "segment_nodes",
)
"""Placeholders every full-scale command may use; a role read by the runs adds its own name."""
ENV_PLACEHOLDERS = ("quality_target",)
"""Placeholders every ``full.env`` value may use (besides the sizing ones with ``full.sizing``): ``{quality_target}``
is the value the runs stop at under the plan's round and division, from mlperf-logging's rules (its one source)."""
NODE_SPLIT_PLACEHOLDERS = ("train_nodes", "generation_nodes")
"""Placeholders of a benchmark with ``full.geometry.node_split``: the nodes of each role on the run's geometry."""
SIZING_PLACEHOLDERS = ("gbs", "micro_batch", "accumulation", "hp", "rule")
"""Placeholders of a benchmark with ``full.sizing``: the run's global batch (``{gbs://N}``: N samples as whole
steps, rounded down), its split on the run's GPUs, ``{hp[KEY]}``, the value of the RCP hyperparameter KEY at that
batch (``{hp[KEY]:steps}``: a sample count as optimizer steps, rounded up), and ``{rule[NAME]}``, a value the round's
closed rules derive from the batch (``mlperf_wf.plan.sizing.RuleValue``)."""
SHARDS_ROLE = "shards"
"""The input name under which a shard that reads other shards (``shard_inputs``) receives their folder."""


class Input(_Strict):
    """One dataset a benchmark needs, under the role it plays."""

    dataset: str
    """Catalog id (``<id>.yaml`` in its benchmark's ``datasets/`` or in ``config/datasets/``)."""
    used_by: list[Literal["prepare", "train"]] = Field(default_factory=lambda: ["prepare"], min_length=1)
    """Stages that read it: ``prepare`` (handed to every preparation shard as ``--input ROLE=FOLDER``) and/or
    ``train`` (handed to every run: ``--input ROLE=FOLDER`` at tiny scale, mounted at ``full.mounts[ROLE]`` and
    named by ``{ROLE}`` in the command at full scale)."""


class Submodule(_Strict):
    """A git submodule of the reference folder that holds the code the full-scale command runs."""

    path: str
    """Its folder inside the reference folder (``llm_moe_grpo/RL``)."""
    repository: str
    """Its git repository URL."""
    commit: str = Field(pattern=r"^[0-9a-f]{40}$")
    """The commit the reference pins it to (40 hex digits)."""


class Reference(_Strict):
    """The reference implementation the full-scale runs execute."""

    repository: str
    """Git repository URL."""
    commit: str = Field(pattern=r"^[0-9a-f]{40}$")
    """Pinned commit (40 hex digits)."""
    path: str
    """Folder of the benchmark inside the repository."""
    submodule: Submodule | None = None
    """Where the scripts and configs the full-scale command names live, when they are in a submodule of the reference
    folder (qwen35_397b_grpo: NeMo-RL at its own pinned commit) rather than in the folder itself; None: in the folder."""

    launch: list[str] = Field(default_factory=list)
    """The reference's own files that launch a full-scale run, relative to ``path`` (a file of ``submodule`` under
    ``submodule.path``): its batch and launch scripts (``run.sub``, ``run_and_time.sh``), the configuration they source
    (``config_*.sh``) and its Dockerfile. Every environment variable, ``ulimit`` and launcher flag they set is either
    set by the plan or named in the README's "Launch environment" section with why it is not needed
    (``tests/config/test_launch_environment.py``); empty where the reference has no launch file."""

    @property
    def url(self) -> str:
        """Browsable URL of the folder at the commit."""
        return f"{self.repository}/tree/{self.commit}/{self.path}"


IMAGE_DIGEST = r"sha256:[0-9a-f]{64}"
"""A content digest that pins a container image."""


TARGET_FORMS = {
    "cuda_architectures": (r"[0-9]+\.[0-9]+", "a compute capability", "MAJOR.MINOR such as 9.0"),
    "rocm_targets": (r"gfx[0-9a-f]+", "a gfx target", "gfx followed by hex digits such as gfx942"),
}
"""How an image's GPU targets are written (field -> pattern, what it is, what is allowed), checked by one validator."""


class ImageTargets(_Strict):
    """What an image runs on, read from its Dockerfile and base image or declared by the reference, with the source
    cited (``mlperf_wf.config.system.image_fit`` holds a probed system against it)."""

    cpu_architectures: list[Literal["x86_64", "aarch64"]] = Field(min_length=1)
    """CPU architectures the image is built for (x86_64 is Docker's linux/amd64, aarch64 its linux/arm64)."""
    cuda_architectures: list[str] = Field(default_factory=list)
    """NVIDIA compute capabilities every GPU library of the image has native code for (``9.0``); empty for a ROCm image."""
    cuda_ptx: str | None = Field(None, pattern=r"^[0-9]+\.[0-9]+$")
    """The newest PTX the image carries (``8.0``): a newer GPU runs it only after the driver compiles it at first use,
    inside the timed region; None: no PTX, a newer GPU does not run it."""
    rocm_targets: list[str] = Field(default_factory=list)
    """AMD gfx targets the image is built for (``gfx950``); empty for a CUDA image."""
    min_gpu_memory_gb: float | None = Field(None, gt=0)
    """GPU memory (GB) of the GPUs the reference's configuration was made and run on: a GPU with less may run out of
    memory at the reference's micro batch; None: the reference names no GPU."""
    gpus_per_node: list[int] = Field(default_factory=list)
    """GPUs per node the image's launch supports; empty: any."""
    source: str = Field(min_length=1)
    """Where these facts are read: the Dockerfile line, the base image's documentation, the reference's README."""

    @field_validator("cuda_architectures", "rocm_targets")
    @classmethod
    def _targets(cls, value: list[str], info: ValidationInfo) -> list[str]:
        pattern, what, allowed = TARGET_FORMS[info.field_name]
        for target in value:
            if not re.fullmatch(pattern, target):
                raise ValueError(f"{info.field_name}: {target!r} is not {what}; allowed: {allowed}")
        return value

    def in_words(self) -> str:
        """One phrase: ``x86_64; CUDA sm_80 sm_86 (+PTX compute_86); >= 80 GB per GPU``."""
        parts = ["/".join(self.cpu_architectures)]
        if self.cuda_architectures:
            ptx = f" (+PTX compute_{self.cuda_ptx.replace('.', '')})" if self.cuda_ptx else " (no PTX)"
            parts.append("CUDA " + " ".join(f"sm_{c.replace('.', '')}" for c in self.cuda_architectures) + ptx)
        if self.rocm_targets:
            parts.append("ROCm " + " ".join(self.rocm_targets))
        if self.min_gpu_memory_gb:
            parts.append(f">= {self.min_gpu_memory_gb:g} GB per GPU")
        if self.gpus_per_node:
            parts.append(f"{' or '.join(map(str, self.gpus_per_node))} GPUs per node")
        return "; ".join(parts)


class ImageVariant(_Strict):
    """Another image of the same reference for other GPUs (rgat's ``Dockerfile.h100``): the plan takes it where the
    default image does not fit the probed system and it does."""

    image: str
    """Image repository and tag."""
    dockerfile: str
    """Dockerfile that builds it, relative to the repository root (``src/mlperf_wf/benchmarks/<name>/container/Dockerfile``)."""
    targets: ImageTargets
    """What it runs on: CUDA or ROCm targets, either vendor's (llama31_8b's reference has an MI325X image beside its
    NVIDIA ones); the runs of the variant get that vendor's devices."""
    env: dict[str, str | None] = Field(default_factory=dict)
    """Environment the variant's own configuration sets for every run, over ``full.env`` (the reference's config
    script for that system: its libraries' settings, the config's file name); null: a variable of ``full.env`` that
    configuration leaves unset (the recipe's default then holds)."""

    @property
    def accelerator(self) -> Literal["nvidia", "amd"]:
        """The vendor of the GPUs it runs on, read from its targets."""
        return "amd" if self.targets.rocm_targets else "nvidia"


class Container(_Strict):
    """The full-scale container image."""

    image: str
    """Image repository and tag."""
    digest: str | None = Field(None, pattern=f"^{IMAGE_DIGEST}$")
    """``sha256:...`` content digest the image is pinned to; required to launch at full scale
    (or give it in the workflow config's ``full_container``)."""
    dockerfile: str | None = None
    """Dockerfile that builds the image from the reference base, relative to the repository root (in the benchmark's ``container/``)."""
    squashfs: str | None = None
    """This site's enroot image file of the pinned image (``mlperf-wf bundle import`` writes it): pyxis starts it
    directly (``--container-image=/path.sqsh``) instead of importing ``image@digest`` from a registry."""
    oci_archive: str | None = None
    """This site's OCI archive of the pinned image (``mlperf-wf bundle import``): Apptainer starts it
    (``oci-archive:/path``) instead of pulling from a registry."""
    sif: str | None = None
    """This site's Apptainer SIF of the pinned image (``mlperf-wf bundle import`` where apptainer exists): Apptainer
    starts it, converting nothing."""
    image_id: str | None = Field(None, pattern=f"^{IMAGE_DIGEST}$")
    """The pinned image's Docker ID (its config digest) where ``mlperf-wf bundle import --docker`` loaded it into this
    node's engine: ``docker run`` starts it by ID, never from a registry."""
    targets: ImageTargets | None = None
    """What the image runs on (CPU architecture, CUDA capabilities or ROCm targets, GPU memory, GPUs per node), with
    the source; None: undeclared, the plan fits nothing to a probed system."""
    variants: dict[str, ImageVariant] = Field(default_factory=dict)
    """Name -> another image of the reference for other GPUs, where the reference has one (rgat: ``h100``)."""

    @property
    def reference(self) -> str:
        """Docker's spelling: ``image@digest`` when pinned (the digest decides), else the tag alone. What a run records."""
        return f"{self.image}@{self.digest}" if self.digest else self.image

    @property
    def docker_reference(self) -> str:
        """What ``docker run`` starts: the loaded image's ID where the site imported it, else :attr:`reference`."""
        return self.image_id or self.reference

    def location(self) -> tuple[str | None, str]:
        """(registry, repository) of ``image``; registry None for Docker Hub's short names."""
        registry, repository, _ = self._parts()
        return registry, repository

    def _parts(self) -> tuple[str | None, str, str | None]:
        """(registry, repository, tag) of ``image``; a registry is a first component with a dot, a port or ``localhost``."""
        first, slash, rest = self.image.partition("/")
        registry = first if slash and ("." in first or ":" in first or first == "localhost") else None
        name = rest if registry else self.image
        repository, colon, tag = name.rpartition(":") if ":" in name.rsplit("/", 1)[-1] else (name, "", "")
        return registry, repository, tag if colon else None

    @property
    def apptainer_reference(self) -> str:
        """Apptainer's: ``docker://registry/repository@digest``: it refuses a tag beside a digest; the site's SIF file or
        else its OCI archive (``oci-archive:/path``) where it imported one."""
        if self.sif:
            return self.sif
        if self.oci_archive:
            return f"oci-archive:{self.oci_archive}"
        if not self.digest:
            return f"docker://{self.image}"
        registry, repository, _ = self._parts()
        return f"docker://{registry + '/' if registry else ''}{repository}@{self.digest}"

    @property
    def enroot_reference(self) -> str:
        """pyxis/enroot's: ``registry#repository:tag``; a digest takes the tag's place (enroot asks the
        registry for ``manifests/<tag>``, which accepts a digest); the site's squashfs file where it imported one."""
        if self.squashfs:
            return self.squashfs
        registry, repository, tag = self._parts()
        reference = self.digest or tag
        return f"{registry + '#' if registry else ''}{repository}{':' + reference if reference else ''}"


class NodeSplit(_Strict):
    """How a run's nodes divide between two roles that never share a node (qwen35_397b_grpo: policy training and
    generation, the reference's ``TRAIN_NODES=16`` and ``GEN_NODES=48``), kept in the reference's ratio on any node
    count (``mlperf_wf.plan.node_roles``)."""

    train: int = Field(ge=1)
    """The training role's part of the ratio (the reference's 16 of 16 + 48 is 1 of 1:3)."""
    generation: int = Field(ge=1)
    """The generation role's part of the ratio (3 of 1:3)."""
    source: str = Field(min_length=1)
    """Where the reference sets its split (file and line)."""


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
    host_memory_gb: int | None = Field(None, ge=1)
    """Host memory one node needs (GiB), requested from the scheduler; None: the partition's default for a whole node."""
    segment_nodes: int | None = Field(None, ge=2)
    """Nodes of one NVLink domain each of the reference's expert-parallel groups must lie in (qwen35_397b_grpo's
    config_GB300_*.sh ``SEGMENT``: EP 32 on 4-GPU nodes is 8 nodes). On a system whose NVLink domains span that many
    nodes (``hardware.nvlink_domain_nodes``; a system not probed is taken as the reference's) the plan asks sbatch for
    whole segments (``--segment``), the runs' nodes must be a multiple of it, and the command's ``{segment_nodes}`` is
    it; elsewhere the groups cross the network anyway: no segment, and ``{segment_nodes}`` is ``null``."""
    node_split: NodeSplit | None = None
    """The run's nodes divided between training and generation in the reference's ratio, each role whole segments
    where segments apply: the command's ``{train_nodes}`` and ``{generation_nodes}``; None: every node trains."""


class Sizing(_Strict):
    """How a full-scale run's global batch is made and which RCP it follows (``mlperf_wf.plan.sizing``)."""

    global_batch_size: int = Field(ge=1)
    """The GBS the plan runs at unless the config's ``full_hyperparameters`` names another: it must be an RCP's of
    the latest round, whose hyperparameters then fill the command's ``{hp[KEY]}``."""
    model_parallel: int = Field(1, ge=1)
    """GPUs one model replica spans (tensor x pipeline x context parallel): data-parallel replicas = GPUs / this."""
    max_micro_batch: int = Field(ge=1)
    """The largest samples per replica per pass the reference's configuration runs (memory bound); the plan takes
    the largest micro batch up to this that splits the GBS evenly, the rest is gradient accumulation."""
    reference_gpu_memory_gib: float | None = Field(None, gt=0)
    """Memory of one GPU of the system the reference's ``max_micro_batch`` was set for (GiB); on GPUs with less, the
    plan takes a micro batch at most in proportion (``mlperf_wf.plan.sizing.micro_batch_limit``). None: not declared."""
    accumulates: bool = True
    """Whether the reference accumulates gradients over micro batches; where not (its GBS is the per-GPU batch x
    replicas), the per-replica share is the micro batch, and one above ``max_micro_batch`` is flagged."""
    literal_batch: Literal["global", "per_gpu"] = "global"
    """Where the command's batch flags are literal (no sizing placeholder): ``global``, they give the GBS, the same on
    any geometry; ``per_gpu``, they give each GPU's batch (``max_micro_batch``), so the GBS is it x the GPUs."""
    literal_values: dict[str, str] = Field(default_factory=dict)
    """Where the command's flags are literal: RCP hyperparameter -> the flag (``--lr``) or ``$VARIABLE`` of ``full.env``
    that sets it, compared with the RCP at the geometry's GBS in the dry run's table."""
    fixed: dict[str, float | int | str] = Field(default_factory=dict)
    """RCP hyperparameters the reference's code fixes (not a flag): the plan refuses an RCP that used other values."""
    samples_per_epoch: int | None = Field(None, ge=1)
    """Training samples of one epoch, where the RCPs count epochs (to turn them into samples and time)."""
    tokens_per_sample: int | None = Field(None, ge=1)
    """Tokens of one training sample (the sequence length), where the RCPs count tokens (gpt3): to turn them into
    samples and time."""
    samples_per_second_per_gpu: float | None = Field(None, gt=0)
    """Training throughput one GPU is expected to reach (a measured first run or a published result), for the
    walltime estimate; None: the size command asks for ``--throughput``."""


class ScratchArea(_Strict):
    """A writable folder the reference needs at a fixed container path, one per run (under the run's folder)."""

    mount: str
    """Container path the reference writes to (absolute)."""
    size_gb: float = Field(gt=0)
    """How much it may hold at full scale (GB), as the reference says; the README repeats it."""
    purpose: str
    """What the reference keeps there, and the source that says so."""

    @field_validator("mount")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"scratch mount is {value!r}; a container path starts with /")
        return value


class MadeInImage(_Strict):
    """How a one-off full-scale job of the benchmark's image makes one of its runs' inputs, once, before the runs.

    The job is a run of the reference command on the runs' geometry, with the same image, mounts and environment,
    except that the role's folder (the dataset's, empty at first) is mounted read-write and ``replace_words`` apply; the
    reference then writes the input where every later run, mounted read-only, finds it. Its mllog goes to the job's own
    folder (``resources/full/made_in_image/<dataset>``), never to a run's: nothing it logs is scored."""

    replace_words: dict[str, str] = Field(default_factory=dict)
    """Whole words of ``full.command`` and what the job runs instead (e.g. one step instead of the run's steps); each
    must be a word of the command."""
    made_from: list[str] = Field(min_length=1)
    """The input roles what the job makes is made from (a conversion: the checkpoint it converts): a newer one makes it
    again. The job reads the others (the prepared tree, other inputs) only to start the reference, so a newer one
    does not remake hundreds of GB."""
    purpose: str = Field(min_length=1)
    """What the reference does at this point and where it says so (the source, file and line)."""


class RehearsalStop(_Strict):
    """How ``mlperf-wf rehearse`` stops a run whose ranks the rehearsal hook must not end: processes a driver waits on
    (qwen35_397b_grpo's Ray actors), where a rank ending itself fails the driver and so the job. The rehearsal job
    appends ``override`` to the reference command, so the framework ends the run after the rehearsal's steps by its
    own step limit, and the hook only counts each rank's steps and records the rank after every one."""

    override: str = Field(min_length=1)
    """A word appended to ``full.command`` whose ``{steps}`` becomes the rehearsal's training steps, e.g. the Hydra
    override ``++grpo.max_num_steps={steps}`` (the reference applies its overrides in order: it wins over the
    command's own value)."""
    step: str = Field(min_length=1)
    """What one training step of the rehearsal is, in words (the rehearsal's first line says it)."""
    source: str = Field(min_length=1)
    """Where the reference reads the override and ends the run (file and line)."""

    @field_validator("override")
    @classmethod
    def _holds_the_steps(cls, value: str) -> str:
        if placeholders(value) != ["steps"]:
            raise ValueError(
                f"full.rehearsal_stop.override: {value!r} must hold {{steps}} once and no other placeholder (e.g. '++grpo.max_num_steps={{steps}}')"
            )
        return value


class FullScale(_Strict):
    """How the reference implementation runs at full scale."""

    container: Container
    """Container image."""
    geometry: Geometry
    """GPU geometry."""
    workdir: str
    """Working directory inside the container."""
    mounts: dict[str, str]
    """Container path of ``prepared`` (the benchmark's prepared folder), ``results`` (the run's folder)
    and of every input role the runs read (``used_by: [train]``)."""
    command: list[str]
    """Launch command (one per node); placeholders: the ``RESERVED_PLACEHOLDERS`` and every role the runs read.
    ``{prepared}`` is the prepared dataset tree inside the container."""
    multi_node_args: list[str] = Field(default_factory=list)
    """Launcher flags added right after the launcher word when a run spans several nodes
    (``{master_addr}``, ``{master_port}``, ``{node_rank}`` become the allocation's values)."""
    process_model: Literal["per_node", "per_gpu"] = "per_node"
    """per_node: the command is a launcher (accelerate, torchrun) started once per node; per_gpu: one process per GPU, ranks from SLURM."""
    gpus_per_process: Literal["one", "node"] = "one"
    """How many of its node's GPUs one training process drives, which makes the ranks a rehearsal expects: ``one``, a
    process (rank) per GPU, which the per_node launcher starts or srun's per_gpu tasks are; ``node``, one process drives
    every GPU of its node (TensorFlow's ``MirroredStrategy``): a rank per launcher task, one per node (per_node only)."""
    ulimits: dict[Literal["nofile"], int] = Field(default_factory=dict)
    """Soft resource limits the reference's launch raises for its processes (``nofile``: open files, as qwen35's
    run.sub ``ulimit -Sn 65535``): the launch line raises each before it starts the run (srun, apptainer and the local
    launcher pass it on; docker gets ``--ulimit``), and says so in the job's log where the hard limit is lower."""
    srun_mpi: Literal["pmix", "pmi2", "none"] | None = None
    """``srun --mpi`` of a ``per_gpu`` launch, as the reference's launch passes it; unset: no ``--mpi`` (the site's
    ``MpiDefault``), as a reference whose srun line passes none (its ranks read SLURM's variables, no PMI needed). A
    ``per_node`` launch (one launcher a node) always runs with ``--mpi=none``."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment set inside the container."""
    scratch: dict[str, ScratchArea] = Field(default_factory=dict)
    """Name -> writable per-run folder mounted where the reference writes (index caches, its own output dirs)."""
    accelerator: Literal["nvidia", "amd"] = "nvidia"
    """The GPUs the reference image is built for, which decides how a container gets them: nvidia (CUDA: docker
    ``--gpus all``, apptainer ``--nv``, pyxis through enroot's NVIDIA hook) or amd (ROCm: the devices ``/dev/kfd``
    and ``/dev/dri``, apptainer ``--rocm``)."""
    sizing: Sizing | None = None
    """The run's batch geometry and RCP (None: the plan's batch flags are literal; ``mlperf-wf size`` says so)."""
    made_in_image: dict[str, MadeInImage] = Field(default_factory=dict)
    """Input role (``used_by: [train]``, its dataset of protocol ``made_in_image``) -> how a one-off job of this image
    makes it once before the runs (``MadeInImage``)."""
    rehearsal_stop: RehearsalStop | None = None
    """How ``mlperf-wf rehearse`` stops a run whose ranks the rehearsal hook must not end (the framework's own step
    limit, ``RehearsalStop``); None: the hook ends every rank after the rehearsal's steps."""
    devices: list[str] = Field(default_factory=list)
    """Host devices the container must see besides the GPUs (``/dev/...``), e.g. ``/dev/fuse`` where the reference
    starts Apptainer sandboxes inside its container: docker ``--device=DEV``, apptainer ``--bind DEV``, pyxis
    ``DEV:DEV`` in ``--container-mounts`` (as an AMD image's ROCm devices are)."""

    @field_validator("devices")
    @classmethod
    def _devices_are_under_dev(cls, value: list[str]) -> list[str]:
        for device in value:
            if not device.startswith("/dev/") or "," in device or ":" in device or " " in device:
                raise ValueError(
                    f"full.devices: {device!r} is not a device path; allowed: an absolute path under /dev/ without ',', ':' or spaces (e.g. /dev/fuse)"
                )
        return value


class StandInTarget(_Strict):
    """A tiny-tier threshold for a metric measured with stand-in encoders."""

    metric: str
    """The ``metric`` metadata of the ``eval_accuracy`` events it applies to."""
    comparison: Literal["<=", "<", ">=", ">"]
    """How the value must compare to ``value``."""
    value: float
    """The threshold."""
    calibration: str = Field(min_length=1)
    """How it was chosen (measured anchors), so that a reader can redo it."""


class TinyTier(_Strict):
    """How the tiny tier runs, where it cannot be what the full scale is."""

    division: Literal["closed", "open"] = "closed"
    """open when some closed rule of the benchmark's rounds cannot hold at tiny size (then its tiny runs log
    and are checked as open division, whatever the config's ``division``)."""
    closed_rules_not_met: list[str] = Field(default_factory=list)
    """With division open: each closed rule the tiny tier does not meet, and why (also in the README)."""

    open_rules_not_met: dict[str, str] = Field(default_factory=dict)
    """With division open: mllog key -> why, for each rule of the round's OPEN rules that the tiny tier cannot meet
    either (llama31_405b's open rules fix max_sequence_length and eval_samples). The official checker still runs
    unmodified; a run whose only complaints are failed CHECKs of these keys gets the verdict
    ``passed_except_declared`` (never ``passed``), and is scored as a run that reached the target."""

    runs_on_cuda: bool = False
    """The tiny trainer moves its model and batches to the run's device (``TinyRun.device``), so a tiny run may compute
    on a CUDA device (``MLPERF_WF_TINY_DEVICE``, ``bench/gpu_smoke.py``); false: it runs on the CPU only."""
    standin_targets: list[StandInTarget] = Field(default_factory=list)
    """Where the tiny tier measures a metric with stand-in encoders (stable_diffusion's FID/CLIP), the thresholds the
    tiny runs stop at instead of the rules' targets, one per metric, each with how it was calibrated (README)."""

    @model_validator(mode="after")
    def _reasons_match_the_division(self) -> TinyTier:
        if self.open_rules_not_met and self.division != "open":
            raise ValueError(
                f"tiny.open_rules_not_met is given ({', '.join(self.open_rules_not_met)}), but tiny.division is {self.division}: "
                "only an open tiny tier may declare open rules it does not meet"
            )
        for key, why in self.open_rules_not_met.items():
            if not why.strip():
                raise ValueError(f"tiny.open_rules_not_met.{key}: say why the rule is not met (got an empty reason)")
        if self.division == "open" and not self.closed_rules_not_met:
            raise ValueError("tiny.division is open: list each closed rule the tiny tier does not meet in tiny.closed_rules_not_met")
        if self.division == "closed" and self.closed_rules_not_met:
            raise ValueError("tiny.closed_rules_not_met is given, but tiny.division is closed: a closed tiny tier meets every closed rule")
        return self


class Preparation(_Strict):
    """Another way to prepare a benchmark's data (e.g. from the raw source instead of the published preprocessed
    files), chosen per benchmark by the config's ``preparation``; it must give the runs the same tree."""

    module: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    """Module of the benchmark's folder with ``shards``, ``layout``, ``resources``, ``prepare_shard`` (and
    optionally ``shard_inputs``), as ``prepare.py`` has."""
    about: str = Field(min_length=1)
    """What this preparation starts from, what it costs, and when to choose it (one line, shown in errors and docs)."""
    inputs: dict[str, Input] = Field(min_length=1)
    """Role -> dataset the preparation reads, instead of the benchmark's ``inputs`` used by ``prepare``
    (inputs the runs read stay those of ``inputs``)."""

    @model_validator(mode="after")
    def _inputs_are_for_preparation_only(self) -> Preparation:
        for role, item in self.inputs.items():
            if item.used_by != ["prepare"]:
                raise ValueError(f"inputs.{role}: a preparation's inputs are read by prepare only (got used_by {item.used_by})")
        return self


class BenchmarkDef(_Strict):
    """A benchmark folder's ``benchmark.yaml``."""

    name: str
    """Workflow name: the folder's name (not written in the file); ``results/<name>/``."""
    submission_benchmark: str
    """The ``submission_benchmark`` value mlperf-logging knows; the rounds it belongs to come from mlperf-logging."""
    results_folder_names: list[str] = Field(default_factory=list)
    """Other names the rounds' published results give its folders (rgat's ``gnn``), read as this benchmark by
    ``mlperf_wf.results.published_rounds``."""
    quality_metric: str
    """What the benchmark's ``eval_accuracy`` measures, in words (an AUC, a loss, an accuracy): figures and status say
    it beside the key (the target itself comes from mlperf-logging)."""
    reference: Reference
    """Reference implementation at its pinned commit."""
    inputs: dict[str, Input] = Field(min_length=1)
    """Role (``data``, ``checkpoint``, ``tokenizer``, ``encodings`` ...) to the dataset that plays it."""
    full: FullScale
    """Full-scale launch."""
    tiny: TinyTier = Field(default_factory=TinyTier)
    """The tiny tier's division (closed unless a closed rule cannot hold at tiny size)."""
    preparations: dict[str, Preparation] = Field(default_factory=dict)
    """Other preparations than the default one (name -> how), selected by the config's ``preparation``."""

    @property
    def folder(self) -> Path:
        """The benchmark's folder."""
        return BENCHMARKS_DIR / self.name

    @property
    def definition_file(self) -> Path:
        return self.folder / DEFINITION_FILE

    @property
    def module_prefix(self) -> str:
        """Dotted name of the benchmark's package."""
        return f"{BENCHMARKS_PACKAGE}.{self.name}"

    def roles_for(self, stage: str, preparation: str = DEFAULT_PREPARATION) -> dict[str, str]:
        """Role -> dataset id of the inputs ``stage`` (prepare or train) reads; ``preparation`` names which
        preparation's inputs the prepare stage reads."""
        inputs = self.inputs if stage == "train" or preparation == DEFAULT_PREPARATION else self.preparation(preparation).inputs
        return {role: item.dataset for role, item in inputs.items() if stage in item.used_by}

    def datasets_read(self) -> list[str]:
        """Every dataset the benchmark reads, its default preparation's and its runs', each once (sorted)."""
        return sorted({*self.roles_for("prepare").values(), *self.roles_for("train").values()})

    def datasets_made_in_image(self) -> dict[str, str]:
        """Dataset id -> role of each input a one-off job of this benchmark's image makes (``full.made_in_image``)."""
        return {self.roles_for("train")[role]: role for role in self.full.made_in_image}

    def preparation_names(self) -> list[str]:
        """The preparations this benchmark offers, the default first."""
        return [DEFAULT_PREPARATION, *self.preparations]

    def preparation(self, name: str) -> Preparation:
        """The named non-default preparation; a clear error for a name the benchmark does not offer."""
        if name not in self.preparations:
            raise KeyError(name)
        return self.preparations[name]

    def preparation_module(self, name: str = DEFAULT_PREPARATION) -> str:
        """Module (in the benchmark's folder) of the named preparation."""
        return "prepare" if name == DEFAULT_PREPARATION else self.preparation(name).module

    @model_validator(mode="after")
    def _declared_open_rules_are_checked_rules(self) -> BenchmarkDef:
        if not self.tiny.open_rules_not_met:
            return self
        from mlperf_wf.config import mlperf_rules

        ruleset = mlperf_rules.resolve_ruleset(self.submission_benchmark, "latest")
        checked = mlperf_rules.checked_keys(self.submission_benchmark, ruleset, "open")
        for key in self.tiny.open_rules_not_met:
            if key not in checked:
                raise ValueError(
                    f"tiny.open_rules_not_met: {key!r} is not a key the {ruleset} open rules of {self.submission_benchmark} check; "
                    f"allowed: {', '.join(sorted(checked))}"
                )
        return self

    @model_validator(mode="after")
    def _one_process_a_node_is_launched_per_node(self) -> BenchmarkDef:
        if self.full.gpus_per_process == "node" and self.full.process_model != "per_node":
            raise ValueError(
                f"full.gpus_per_process: node (one process drives every GPU of its node) needs full.process_model per_node, not {self.full.process_model};"
                " allowed with per_gpu: one"
            )
        return self

    @model_validator(mode="after")
    def _image_targets_match_the_accelerator(self) -> BenchmarkDef:
        container = self.full.container
        targets = container.targets
        if targets is not None and self.full.accelerator == "amd" and (targets.cuda_architectures or not targets.rocm_targets):
            raise ValueError("full.container.targets: full.accelerator is amd; declare rocm_targets (gfx...) and no cuda_architectures")
        if targets is not None and self.full.accelerator == "nvidia" and (targets.rocm_targets or not targets.cuda_architectures):
            raise ValueError("full.container.targets: full.accelerator is nvidia; declare cuda_architectures (MAJOR.MINOR) and no rocm_targets")
        for name, variant in container.variants.items():  # a variant may be the other vendor's: one vendor's targets each
            if bool(variant.targets.cuda_architectures) == bool(variant.targets.rocm_targets):
                raise ValueError(
                    f"full.container.variants.{name}.targets: declare either cuda_architectures (MAJOR.MINOR) or rocm_targets (gfx...), one vendor's"
                )
        return self

    @model_validator(mode="after")
    def _roles_mounts_and_placeholders_agree(self) -> BenchmarkDef:
        for role in [*self.inputs, *(role for way in self.preparations.values() for role in way.inputs)]:
            if not role.isidentifier() or not role.islower() or role in (*RESERVED_PLACEHOLDERS, *NODE_SPLIT_PLACEHOLDERS, SHARDS_ROLE):
                reserved = ", ".join((*RESERVED_PLACEHOLDERS, *NODE_SPLIT_PLACEHOLDERS, SHARDS_ROLE))
                raise ValueError(f"inputs: role {role!r} must be a lower-case identifier other than {reserved}")
        if DEFAULT_PREPARATION in self.preparations:
            raise ValueError(f"preparations: {DEFAULT_PREPARATION!r} is the name of the benchmark's own prepare.py; name the other preparation differently")
        run_roles = set(self.roles_for("train"))
        needed = {"prepared", "results"} | run_roles
        if set(self.full.mounts) != needed:
            raise ValueError(f"full.mounts has {sorted(self.full.mounts)}; this benchmark needs exactly {sorted(needed)}")
        known = set(RESERVED_PLACEHOLDERS) | run_roles | (set(SIZING_PLACEHOLDERS) if self.full.sizing else set())
        known |= set(NODE_SPLIT_PLACEHOLDERS) if self.full.geometry.node_split else set()
        for part in [*self.full.command, *self.full.multi_node_args]:
            for name in placeholders(part):
                if name not in known:
                    raise ValueError(f"full.command uses unknown placeholder {{{name}}}; allowed: {sorted(known)}")
        for variable, value in self.full.env.items():
            for name in placeholders(value):
                if name not in ENV_PLACEHOLDERS and (not self.full.sizing or name not in SIZING_PLACEHOLDERS):
                    allowed = f"{list(ENV_PLACEHOLDERS)}, and {list(SIZING_PLACEHOLDERS)} with full.sizing"
                    raise ValueError(f"full.env.{variable} uses placeholder {{{name}}}; allowed in env: {allowed}")
        for role, made in self.full.made_in_image.items():
            if role not in run_roles:
                raise ValueError(f"full.made_in_image: {role!r} is not an input role the runs read; allowed: {sorted(run_roles)}")
            sources = sorted(run_roles - {role})
            for source in made.made_from:
                if source not in sources:
                    raise ValueError(f"full.made_in_image.{role}.made_from: {source!r} is not another input role of the runs; allowed: {sources}")
            for word in made.replace_words:
                if word not in self.full.command:
                    raise ValueError(f"full.made_in_image.{role}.replace_words: {word!r} is not a word of full.command")
        return self


def placeholders(text: str) -> list[str]:
    """The ``{name}`` fields of a command word (``{hp[KEY]}`` is ``hp``)."""
    return [name.split("[")[0] for _, name, _, _ in string.Formatter().parse(text) if name]


def hyperparameter_keys(text: str) -> list[str]:
    """The RCP keys a command word reads: ``KEY`` of each ``{hp[KEY]}``."""
    return [name[3:-1] for _, name, _, _ in string.Formatter().parse(text) if name and name.startswith("hp[")]


# ---- loading --------------------------------------------------------------------

_Entry = TypeVar("_Entry", BenchmarkDef, DatasetDef)


def config_dir(root: Path | None = None) -> Path:
    """The project's ``config/`` folder (the dataset catalog and system descriptions)."""
    return (root or Path.cwd()) / "config"


def _first_error(path: Path, err: ValidationError) -> ConfigError:
    return ConfigError(describe_validation_error(str(path), err))


def read_yaml(path: Path) -> object:
    """A YAML file; a syntax error is one line naming the file and the position."""
    try:
        return yaml_files.load(path.read_text())
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "syntax"
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError(f"{path}: {where}: YAML syntax error: {problem}") from None


def _validated(path: Path, model: type[_Entry], data: object) -> _Entry:
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: (top level): expected a mapping of keys, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise _first_error(path, err) from None


def benchmark_names() -> list[str]:
    """Every benchmark: the folders of ``mlperf_wf/benchmarks/`` that hold a ``benchmark.yaml``."""
    return sorted(path.parent.name for path in BENCHMARKS_DIR.glob(f"*/{DEFINITION_FILE}"))


@cache
def _benchmark_catalog_files() -> dict[str, list[Path]]:
    """Catalog id -> the entries of that id in the benchmark folders (more than one is a problem of :func:`check_all`);
    read once per process, as the definitions are."""
    found: dict[str, list[Path]] = {}
    for path in sorted(BENCHMARKS_DIR.glob(f"*/{CATALOG_FOLDER}/*.yaml")):
        if (path.parent.parent / DEFINITION_FILE).is_file():
            found.setdefault(path.stem, []).append(path)
    return found


def container_folder(name: str) -> Path:
    """Benchmark ``name``'s image definitions and round patches (``<its folder>/container/``)."""
    return BENCHMARKS_DIR / name / CONTAINER_FOLDER


def dataset_ids(root: Path | None = None) -> list[str]:
    """Every dataset of the catalog: the benchmark folders' entries and ``config/datasets/``'s."""
    shared = {path.stem for path in (config_dir(root) / CATALOG_FOLDER).glob("*.yaml")}
    return sorted(shared | set(_benchmark_catalog_files()))


def dataset_file(dataset_id: str, root: Path | None = None) -> Path | None:
    """The catalog entry of ``dataset_id``: ``config/datasets/<id>.yaml`` (the shared entries, and a site's own copy
    of any entry), else ``<id>.yaml`` in a benchmark folder's ``datasets/``; None for an id the catalog lacks."""
    shared = config_dir(root) / CATALOG_FOLDER / f"{dataset_id}.yaml"
    if shared.is_file():
        return shared
    own = _benchmark_catalog_files().get(dataset_id)
    return own[0] if own else None


def dataset_where(dataset_id: str, root: Path | None = None) -> str:
    """The catalog entry of ``dataset_id`` as errors name it: relative to the project or the installed package."""
    path = dataset_file(dataset_id, root)
    if path is None:
        return f"{CATALOG_FOLDER}/{dataset_id}.yaml"
    for base in (PACKAGE_DIR.parent, config_dir(root).parent):
        if path.is_relative_to(base):
            return str(path.relative_to(base))
    return str(path)


def parse_benchmark_file(path: Path, name: str) -> BenchmarkDef:
    """Validate one ``benchmark.yaml`` as the definition of benchmark ``name``."""
    data = read_yaml(path)
    if isinstance(data, dict) and "name" in data:
        raise ConfigError(f"{path}: name: the folder names the benchmark; remove the key (got {data['name']!r})")
    return _validated(path, BenchmarkDef, {**data, "name": name} if isinstance(data, dict) else data)


@cache
def _load_benchmark_file(name: str) -> BenchmarkDef:
    return parse_benchmark_file(BENCHMARKS_DIR / name / DEFINITION_FILE, name)


def load_benchmark(name: str) -> BenchmarkDef:
    """The definition of benchmark ``name`` (its folder's ``benchmark.yaml``)."""
    if not (BENCHMARKS_DIR / name / DEFINITION_FILE).is_file():
        raise ConfigError(
            f"benchmark {name!r} is not defined (no {BENCHMARKS_DIR.name}/{name}/{DEFINITION_FILE}); known benchmarks: {', '.join(benchmark_names())}"
        )
    return _load_benchmark_file(name)


def load_dataset(dataset_id: str, root: Path | None = None) -> DatasetDef:
    """Load the catalog entry of ``dataset_id`` (:func:`dataset_file`)."""
    path = dataset_file(dataset_id, root)
    if path is None:
        raise ConfigError(f"dataset {dataset_id!r} is not defined; known datasets: {', '.join(dataset_ids(root))}")
    entry = _validated(path, DatasetDef, read_yaml(path))
    if entry.id != dataset_id:
        raise ConfigError(f"{path}: id: declares {entry.id!r} but the file is named {dataset_id!r}")
    return entry


def benchmark_module(bench: BenchmarkDef, module: str):
    """One of the benchmark folder's modules (``hyperparameters``, ``prepare``, ``trainer``), imported."""
    return importlib.import_module(f"{bench.module_prefix}.{module}")


def declared_open_rules(benchmark: str | None, scale: str | None) -> dict[str, str] | None:
    """The open rules a benchmark's tiny tier declares it does not meet (``tiny.open_rules_not_met``); None at full scale."""
    if benchmark is None or scale != Scale.TINY:
        return None
    return dict(load_benchmark(benchmark).tiny.open_rules_not_met) or None


def users_of(dataset_id: str) -> list[str]:
    """Benchmarks whose inputs name ``dataset_id`` (computed, never kept by hand)."""
    users = []
    for name in benchmark_names():
        bench = _load_benchmark_file(name)
        inputs = [*bench.inputs.values(), *(item for way in bench.preparations.values() for item in way.inputs.values())]
        if any(item.dataset == dataset_id for item in inputs):
            users.append(name)
    return users


# ---- checking everything ----------------------------------------------------------


def _check_module_exists(path: Path, module: str, what: str) -> None:
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        found = False
    if not found:
        raise ConfigError(f"{path}: {what}: module {module!r} does not exist")


@cache
def imported_names(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, module, name) of every absolute import of a Python file, read without running it: ``import a.b`` is
    (line, "a.b", None), ``from a import b`` is (line, "a", "b")."""
    found: list[tuple[int, str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found += [(node.lineno, node.module, alias.name) for alias in node.names]
    return found


@cache
def _top_level_names(source: Path) -> set[str]:
    """Names a module's source binds at its top level (definitions, assignments, imports)."""
    names = set()
    for node in ast.parse(source.read_text(), filename=str(source)).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(leaf.id for target in targets for leaf in ast.walk(target) if isinstance(leaf, ast.Name))
    return names


def _package_source(module: str) -> Path | None:
    """The source file of a module of this package (``a/b.py`` or ``a/b/__init__.py``), found without importing it."""
    path = PACKAGE_DIR.joinpath(*module.split(".")[1:])
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _check_import_resolves(source: Path, line: int, module: str, name: str | None) -> None:
    """A module of this package exists, and a name imported from it is a submodule or bound at its top level."""
    found = _package_source(module)
    if found is None:
        raise ConfigError(f"{source}: line {line}: import: module {module!r} does not exist")
    if name not in (None, "*") and _package_source(f"{module}.{name}") is None and name not in _top_level_names(found):
        raise ConfigError(f"{source}: line {line}: import: {module} has no {name!r}")


def _check_stands_alone(bench: BenchmarkDef) -> None:
    """A benchmark folder imports the shared modules and its own, never another benchmark's, and every module of
    this package it names exists: read from the source, so a missing one is found without importing torch."""
    own = f"{bench.module_prefix}."
    for source in sorted(bench.folder.rglob("*.py")):
        for line, module, name in imported_names(source):
            imported = f"{module}.{name}" if module == BENCHMARKS_PACKAGE else module  # `from mlperf_wf.benchmarks import rgat`
            if not imported.startswith(f"{PACKAGE}."):
                continue
            if imported.startswith(f"{BENCHMARKS_PACKAGE}.") and not f"{imported}.".startswith(own):
                raise ConfigError(
                    f"{source}:{line}: imports {imported}, another benchmark's module; a benchmark imports only its own folder "
                    "and the shared modules (move what both need to a shared module)"
                )
            _check_import_resolves(source, line, module, name)


def check_benchmark(name: str, root: Path | None = None, import_modules: bool = False, read_imports: bool = True) -> BenchmarkDef:
    """Load a benchmark and check that its roles name catalog datasets and that its folder has its modules.

    ``import_modules`` also imports them and checks what they define (torch and friends: slow;
    ``mlperf-wf check`` and the contract tests do it, the Snakefile does not).
    """
    from mlperf_wf.config.hyperparameters import hyperparameter_model

    bench = load_benchmark(name)
    declared = [(f"inputs.{role}", item) for role, item in bench.inputs.items()]
    declared += [(f"preparations.{way}.inputs.{role}", item) for way, prep in bench.preparations.items() for role, item in prep.inputs.items()]
    for key, item in declared:
        if dataset_file(item.dataset, root) is None:
            raise ConfigError(f"{bench.definition_file}: {key}.dataset: {item.dataset!r} is not in the dataset catalog; known: {', '.join(dataset_ids(root))}")
    made = bench.full.made_in_image
    for role, dataset_id in bench.roles_for("train").items():
        source = load_dataset(dataset_id, root).source
        if (source.protocol == "made_in_image") != (role in made) or (role in made and source.made_by != bench.name):
            raise ConfigError(
                f"{bench.definition_file}: inputs.{role}: dataset {dataset_id!r} is protocol {source.protocol}"
                f"{f' made by {source.made_by}' if source.made_by else ''}; a role the benchmark's own image makes is in full.made_in_image "
                f"and its catalog entry says protocol made_in_image, made_by {bench.name} (both, or neither)"
            )
    for way, prep in bench.preparations.items():
        if not (bench.folder / f"{prep.module}.py").is_file():
            raise ConfigError(f"{bench.definition_file}: preparations.{way}.module: {prep.module!r} has no {prep.module}.py in {bench.folder}")
    for file in BENCHMARK_FILES:
        if not (bench.folder / file).is_file():
            raise ConfigError(f"{bench.folder}: no {file}; a benchmark folder holds {', '.join(BENCHMARK_FILES)}")
    if read_imports:  # every module's source parsed: `mlperf-wf check` and the tests, not every Snakemake parse
        _check_stands_alone(bench)
    hyperparameter_model(bench)  # pydantic only: cheap, and it validates the tiny hyperparameters' defaults
    if import_modules:
        for way in bench.preparation_names():
            module_name = bench.preparation_module(way)
            prepare = _imported(bench, module_name)
            for function in ("shards", "layout", "prepare_shard"):
                if not callable(getattr(prepare, function, None)):
                    raise ConfigError(f"{bench.folder / (module_name + '.py')}: defines no {function}()")
        if not callable(getattr(_imported(bench, "trainer"), "train", None)):
            raise ConfigError(f"{bench.folder / 'trainer.py'}: defines no train(run, hp)")
    return bench


def _import(module: str, where: Path | str):
    """``importlib.import_module``, with an import that fails said in one line naming ``where`` it is asked for."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ConfigError(f"{where}: import failed: {type(err).__name__}: {err}") from None


def _imported(bench: BenchmarkDef, module: str):
    """One of the benchmark folder's modules (``benchmark_module``), or one line naming its file."""
    return _import(f"{bench.module_prefix}.{module}", bench.folder / f"{module}.py")


def check_dataset(dataset_id: str, root: Path | None = None, import_modules: bool = False) -> DatasetDef:
    """Load a catalog entry and check that its tiny generator module exists (and defines ``generate``)."""
    dataset = load_dataset(dataset_id, root)
    made_by = dataset.source.made_by
    if made_by is not None and dataset_id not in (made := _made_in_image_by(made_by, root)):
        path = dataset_file(dataset_id, root)
        makes = ", ".join(made) or "none"
        raise ConfigError(f"{path}: source.made_by: {made_by!r} makes no dataset {dataset_id!r} in its full.made_in_image (it makes: {makes})")
    if dataset.tiny is not None:
        path = dataset_file(dataset_id, root)
        tiny = dataset.tiny
        _check_module_exists(path, tiny.module_name, "tiny.module")
        if import_modules and not callable(getattr(_import(tiny.module_name, f"{path}: tiny.module {tiny.module_name}"), tiny.function_name, None)):
            raise ConfigError(f"{path}: tiny.module: {tiny.module_name} defines no {tiny.function_name}(out_dir, seed)")
    return dataset


def _made_in_image_by(benchmark: str, root: Path | None) -> list[str]:
    """The datasets ``benchmark``'s image makes (none for a name that is no benchmark)."""
    if benchmark not in benchmark_names():
        return []
    return list(load_benchmark(benchmark).datasets_made_in_image())


def check_all(root: Path | None = None, import_modules: bool = False, read_imports: bool = True) -> list[str]:
    """Every problem of every benchmark and dataset definition, one line each (empty: all good)."""
    problems = _catalog_placement_problems()
    for dataset_id in dataset_ids(root):
        try:
            check_dataset(dataset_id, root, import_modules)
        except ConfigError as err:
            problems.append(str(err))
    for name in benchmark_names():
        try:
            check_benchmark(name, root, import_modules, read_imports)
        except ConfigError as err:
            problems.append(str(err))
    return problems


def _catalog_placement_problems() -> list[str]:
    """A benchmark folder's catalog entry is that benchmark's alone: one folder holds it, and no other benchmark reads
    it (an entry several read is in ``config/datasets/``), so removing the folder removes only what it alone used."""
    problems = []
    for dataset_id, paths in _benchmark_catalog_files().items():
        owners = [path.parent.parent.name for path in paths]
        if len(paths) > 1:
            problems.append(f"{paths[1]}: id: {dataset_id!r} is also {paths[0]}; a catalog id has one entry")
            continue
        others = [name for name in users_of(dataset_id) if name != owners[0]]
        if others:
            problems.append(
                f"{paths[0]}: id: {dataset_id!r} is read by {', '.join(others)} too; an entry several benchmarks read is in config/{CATALOG_FOLDER}/"
            )
    return problems
