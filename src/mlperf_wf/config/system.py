"""The system under test: what ``config/systems/<name>.yaml`` says, and what a node has (``mlperf-wf system probe``).

One model, :class:`SystemDescription`, serves both ends. Its top-level fields are the submission's system JSON
(``systems/<system>.json``, which ``mlperf_logging.system_desc_checker`` reads); its ``hardware`` section is what the
plan reads: the CPU architecture and cores, host memory, GPUs per node, their memory and compute capability (NVIDIA)
or gfx target (AMD), and the GPU interconnect. ``mlperf-wf system probe`` writes both from what the node itself says:
``lscpu``, ``/proc/meminfo``, ``nvidia-smi --query-gpu=name,memory.total,compute_cap --format=csv`` and ``nvidia-smi
topo -m``, or ``rocm-smi --showproductname --showmeminfo vram --json`` (the AMD GPUs' links are left to the
submitter: ``accelerator_interconnect``).

The plan picks, for each benchmark, the image (or image variant) whose declared targets fit the hardware
(:func:`image_fit`), and the preflight refuses a system no image of a benchmark fits, in one line
(``mlperf_wf.plan.preflight.system_fit_problems``).
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from mlperf_wf.config.registry import Container, ImageTargets
from mlperf_wf.errors import ConfigError

Text = Annotated[str, BeforeValidator(str)]
"""The checker formats these fields as strings (published descriptions write "8", not 8)."""

AVAILABILITY = ("Available on-premise", "Available cloud", "Research, Development, or Internal (RDI)", "Preview")
"""The availability categories ``system_desc_checker`` accepts in ``status``."""

CpuArchitecture = Literal["x86_64", "aarch64"]
"""CPU architectures as ``uname -m`` and ``lscpu`` name them (Docker's linux/amd64 and linux/arm64)."""


class Hardware(BaseModel):
    """What one node of the system has, as ``mlperf-wf system probe`` read it (every node alike)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    nodes: int = Field(1, ge=1)
    """Nodes of the system a run may span (``system probe --nodes``; a probe sees one node)."""
    cpu_architecture: CpuArchitecture
    """``lscpu`` Architecture: x86_64 or aarch64."""
    cpu_model: str
    """``lscpu`` Model name (Intel(R) Xeon(R) Platinum 8480C, Neoverse-V2, AMD EPYC 9654 96-Core Processor)."""
    sockets: int = Field(ge=1)
    """``lscpu`` Socket(s): CPU packages per node."""
    cores_per_socket: int = Field(ge=1)
    """``lscpu`` Core(s) per socket."""
    threads_per_core: int = Field(1, ge=1)
    """``lscpu`` Thread(s) per core (2 with SMT)."""
    host_memory_gib: float = Field(gt=0)
    """``/proc/meminfo`` MemTotal, GiB."""
    gpu_vendor: Literal["nvidia", "amd"] | None = None
    """Whose GPUs the node has (which tool answered: nvidia-smi or rocm-smi); None: no GPU."""
    gpus_per_node: int = Field(0, ge=0)
    """GPUs the tool lists on the node."""
    gpu_model: str = ""
    """The GPU's name as the tool prints it (NVIDIA H100 80GB HBM3, AMD Instinct MI300X)."""
    gpu_memory_gb: float = Field(0, ge=0)
    """Memory of one GPU in GB (10^9 bytes, as GPUs are sold): nvidia-smi's memory.total MiB, rocm-smi's VRAM bytes."""
    compute_capability: str | None = Field(None, pattern=r"^[0-9]+\.[0-9]+$")
    """NVIDIA: nvidia-smi's compute_cap (8.0 A100, 9.0 H100, 10.0 B200 and GB200, 10.3 B300 and GB300)."""
    gfx_target: str | None = Field(None, pattern=r"^gfx[0-9a-f]+$")
    """AMD: rocm-smi's GFX Version, without feature flags (gfx942 MI300X, gfx950 MI350X/MI355X)."""
    gpu_interconnect: str = ""
    """How the node's GPUs reach each other where the tool says (nvidia-smi topo -m: NVLink (NV18), PCIe); '' for AMD."""
    nvlink_domain_nodes: int = Field(1, ge=1)
    """Nodes whose GPUs share one NVLink domain: 1 for an HGX/DGX node; 18 for a GB200 or GB300 NVL72 rack of 4-GPU
    nodes (``system probe --nvlink-domain-nodes``: one node's tools show that its fabric spans others, not how many)."""
    slurm_topology: str = ""
    """SLURM's ``TopologyPlugin`` (``scontrol show config``): ``topology/block`` places a job in whole blocks and takes
    ``sbatch --segment``; '' where scontrol is not on the node."""

    @property
    def cores_per_node(self) -> int:
        """Physical cores of one node."""
        return self.sockets * self.cores_per_socket

    @property
    def cpus_per_node(self) -> int:
        """Hardware threads of one node (what SLURM counts as CPUs where SMT is on)."""
        return self.cores_per_node * self.threads_per_core

    def in_words(self) -> str:
        """One phrase: ``x86_64, 8 x NVIDIA H100 80GB HBM3 (sm_90, 85.5 GB), 112 cores, 1 node``."""
        if self.gpu_vendor is None:
            gpus = "no GPU"
        else:
            target = f"sm_{self.compute_capability.replace('.', '')}" if self.compute_capability else self.gfx_target or "unknown target"
            gpus = f"{self.gpus_per_node} x {self.gpu_model} ({target}, {self.gpu_memory_gb:.1f} GB)"
        return f"{self.cpu_architecture}, {gpus}, {self.cores_per_node} cores, {self.nodes} node{'s' if self.nodes > 1 else ''}"


class SystemDescription(BaseModel):
    """``config/systems/<name>.yaml``: the submission's system JSON (the fields ``system_desc_checker`` requires; empty
    strings are accepted there) and, where probed, the node's ``hardware`` the plan fits images and geometry to."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    system_name: Text
    """Human-readable system name (the results tables show it)."""
    status: str = Field(json_schema_extra={"enum": list(AVAILABILITY)})
    """Availability: one of Available on-premise, Available cloud, Research, Development, or Internal (RDI), Preview."""
    number_of_nodes: Text
    """Nodes of the system under test."""
    host_processors_per_node: Text
    """CPU sockets per node."""
    host_processor_model_name: Text
    """The CPU's model name."""
    host_processor_core_count: Text
    """Cores of one CPU (per socket, as published descriptions give it)."""
    host_processor_vcpu_count: Text = ""
    """Hardware threads of one node, where SMT makes them more than the cores."""
    host_processor_frequency: Text = ""
    """The CPU's clock."""
    host_processor_caches: Text = ""
    """The CPU's caches."""
    host_processor_interconnect: Text = ""
    """How the sockets are linked."""
    host_memory_capacity: Text
    """Host memory of one node."""
    host_storage_type: Text = ""
    """Local storage kind."""
    host_storage_capacity: Text = ""
    """Local storage size."""
    host_networking: Text = ""
    """The nodes' network (InfiniBand NDR 400 Gb/s ...)."""
    host_networking_topology: Text = ""
    """Its topology (fat tree, rail optimised ...)."""
    host_memory_configuration: Text = ""
    """DIMMs and channels."""
    accelerators_per_node: Text
    """GPUs per node."""
    accelerator_model_name: Text
    """The GPU's model name."""
    accelerator_host_interconnect: Text = ""
    """GPU to host link (PCIe Gen5 x16, NVLink-C2C)."""
    accelerator_frequency: Text = ""
    """The GPU's clock."""
    accelerator_on_chip_memories: str = Field("", alias="accelerator_on-chip_memories")
    """On-chip memories of the GPU."""
    accelerator_memory_configuration: Text = ""
    """The GPU's memory kind (HBM3, HBM3e)."""
    accelerator_memory_capacity: Text = ""
    """Memory of one GPU."""
    accelerator_interconnect: Text = ""
    """GPU to GPU link within a node (NVLink, XGMI)."""
    accelerator_interconnect_topology: Text = ""
    """Its topology (NVSwitch all-to-all ...)."""
    cooling: Text = ""
    """Air or liquid."""
    hw_notes: Text = ""
    """Anything else about the hardware."""
    framework: Text
    """The framework the runs used (the image's)."""
    other_software_stack: list | dict | Text = ""
    """Drivers, CUDA or ROCm, libraries."""
    operating_system: Text
    """The nodes' operating system."""
    sw_notes: Text = ""
    """Anything else about the software."""
    hardware: Hardware | None = None
    """What a node of the system has, as ``mlperf-wf system probe`` read it; the plan picks the image variant that fits
    it and the preflight refuses a benchmark no image of which fits. Not part of the system JSON. None: not probed
    (the plan then assumes the reference's system)."""

    def system_json(self, submitter: str, division: str) -> dict:
        """``systems/<system>.json``: the submitter, the division and every field but ``hardware``."""
        return {"submitter": submitter, "division": division, **self.model_dump(by_alias=True, exclude={"hardware"})}


def load_system(name: str, root: Path | None = None) -> SystemDescription:
    """Load and validate ``config/systems/<name>.yaml``."""
    path = (root or Path.cwd()) / "config" / "systems" / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in path.parent.glob("*.yaml"))
        raise ConfigError(f"system {name!r} has no description {path}; known systems: {', '.join(known) or 'none'}")
    return read_system(path)


def read_system(path: Path) -> SystemDescription:
    """A system description file, or one line naming the file, the key, the value and what is wrong."""
    try:
        system = SystemDescription.model_validate(yaml.safe_load(path.read_text()))
    except ValidationError as err:
        first = err.errors()[0]
        raise ConfigError(f"{path}: {'.'.join(map(str, first['loc']))}: {first['msg']} (got {first.get('input')!r})") from None
    if system.status not in AVAILABILITY:
        raise ConfigError(f"{path}: status is {system.status!r}; allowed: {', '.join(AVAILABILITY)}")
    return system


# ---- what the node's tools print -----------------------------------------------------------------------------


def parse_lscpu(text: str) -> dict[str, str]:
    """``lscpu``'s ``Key: value`` lines (any indentation, the first of a repeated key), e.g. Architecture, Model name,
    Socket(s), Core(s) per socket, Thread(s) per core."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, colon, value = line.partition(":")
        if colon and key.strip() and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    return fields


def parse_meminfo(text: str) -> float:
    """GiB of ``/proc/meminfo``'s MemTotal (kB)."""
    match = re.search(r"^MemTotal:\s+([0-9]+)\s*kB", text, re.MULTILINE)
    if not match:
        raise ConfigError("/proc/meminfo: no 'MemTotal: N kB' line")
    return int(match.group(1)) / 2**20


@dataclass(frozen=True)
class Gpu:
    """One GPU as a vendor's tool lists it."""

    model: str
    """Its name."""
    memory_gb: float
    """Its memory, GB."""
    target: str
    """Compute capability (9.0) or gfx target (gfx942)."""


def parse_nvidia_smi(text: str) -> list[Gpu]:
    """``nvidia-smi --query-gpu=name,memory.total,compute_cap --format=csv``: a header, then one line per GPU
    (``NVIDIA H100 80GB HBM3, 81559 MiB, 9.0``; ``noheader`` and ``nounits`` are read too)."""
    gpus = []
    for row in csv.reader(io.StringIO(text), skipinitialspace=True):
        if not row or row[0].strip() == "name":
            continue
        if len(row) != 3:
            raise ConfigError(f"nvidia-smi: {', '.join(row)!r} is not 'name, memory.total [MiB], compute_cap'")
        name, memory, capability = (cell.strip() for cell in row)
        mib = re.fullmatch(r"([0-9]+)(?:\s*MiB)?", memory)
        if not mib or not re.fullmatch(r"[0-9]+\.[0-9]+", capability):
            raise ConfigError(f"nvidia-smi: {', '.join(row)!r}: memory.total is not N MiB or compute_cap is not M.m")
        gpus.append(Gpu(name, int(mib.group(1)) * 2**20 / 1e9, capability))
    return gpus


def parse_nvidia_topology(text: str) -> str:
    """``nvidia-smi topo -m``: ``NVLink (NV18)`` where GPUs reach each other over NVLink (the most links a pair has),
    ``PCIe`` where only PIX/PXB/PHB/NODE/SYS paths are listed, '' where no GPU row is."""
    rows = [line.split() for line in text.splitlines() if re.match(r"^GPU[0-9]+\s", line)]
    links = [int(cell[2:]) for row in rows for cell in row[1:] if re.fullmatch(r"NV[0-9]+", cell)]
    if links:
        return f"NVLink (NV{max(links)})"
    return "PCIe" if len(rows) > 1 else ""


def parse_rocm_smi(text: str) -> list[Gpu]:
    """``rocm-smi --showproductname --showmeminfo vram --json``: one ``cardN`` object per GPU with its Card Series
    (or Card series, or Device Name), GFX Version (``gfx942``, feature flags such as ``:sramecc+:xnack-`` dropped) and
    ``VRAM Total Memory (B)``."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(f"rocm-smi --json: not JSON ({err})") from None
    gpus = []
    for card, fields in data.items():
        if not re.fullmatch(r"card[0-9]+", card):
            continue
        model = next((fields[key] for key in ("Card Series", "Card series", "Device Name") if fields.get(key) not in (None, "", "N/A")), "")
        target = str(fields.get("GFX Version", "")).split(":")[0]
        if not re.fullmatch(r"gfx[0-9a-f]+", target):
            raise ConfigError(f"rocm-smi --json: {card} has no GFX Version (got {fields.get('GFX Version')!r}); ROCm 6 or later prints it")
        vram = fields.get("VRAM Total Memory (B)")
        if vram is None or not str(vram).isdigit():
            raise ConfigError(f"rocm-smi --json: {card} has no 'VRAM Total Memory (B)' (got {vram!r}); add --showmeminfo vram")
        gpus.append(Gpu(model, int(vram) / 1e9, target))
    return gpus


def hardware_from(
    lscpu: str, meminfo: str, nvidia_smi: str | None = None, rocm_smi: str | None = None, topology: str | None = None, nodes: int = 1
) -> Hardware:
    """The typed description of a node from its tools' outputs (``nvidia_smi`` or ``rocm_smi``; neither: no GPU)."""
    cpu = parse_lscpu(lscpu)
    architecture = cpu.get("Architecture", "")
    if architecture not in ("x86_64", "aarch64"):
        raise ConfigError(f"lscpu: Architecture is {architecture!r}; allowed: x86_64, aarch64")

    def count(key: str, default: int | None = None) -> int:
        value = cpu.get(key, "")
        if value.isdigit():
            return int(value)
        if default is not None:
            return default
        raise ConfigError(f"lscpu: {key} is {value!r}; expected a whole number")

    threads = count("Thread(s) per core", 1)
    sockets = count("Socket(s)", 1)
    cores = count("Core(s) per socket", 0) or count("CPU(s)") // (threads * sockets)
    gpus, vendor, interconnect = [], None, ""
    if nvidia_smi is not None:
        gpus, vendor = parse_nvidia_smi(nvidia_smi), "nvidia"
        interconnect = parse_nvidia_topology(topology or "")
    elif rocm_smi is not None:
        gpus, vendor = parse_rocm_smi(rocm_smi), "amd"
    if len({(gpu.model, gpu.target) for gpu in gpus}) > 1:
        raise ConfigError(f"{vendor}: the node mixes GPUs ({', '.join(sorted({gpu.model for gpu in gpus}))}); a run needs one kind")
    first = gpus[0] if gpus else None
    return Hardware(
        nodes=nodes,
        cpu_architecture=architecture,
        cpu_model=cpu.get("Model name", ""),
        sockets=sockets,
        cores_per_socket=cores,
        threads_per_core=threads,
        host_memory_gib=round(parse_meminfo(meminfo), 1),
        gpu_vendor=vendor if gpus else None,
        gpus_per_node=len(gpus),
        gpu_model=first.model if first else "",
        gpu_memory_gb=round(min(gpu.memory_gb for gpu in gpus), 1) if gpus else 0,
        compute_capability=first.target if first and vendor == "nvidia" else None,
        gfx_target=first.target if first and vendor == "amd" else None,
        gpu_interconnect=interconnect,
    )


Runner = Callable[[list[str]], "str | None"]
"""Runs a command on the node: its standard output, or None where the tool is not there or fails."""

PROBE_COMMANDS = {
    "lscpu": ["lscpu"],
    "nvidia_smi": ["nvidia-smi", "--query-gpu=name,memory.total,compute_cap", "--format=csv"],
    "nvidia_topology": ["nvidia-smi", "topo", "-m"],
    "rocm_smi": ["rocm-smi", "--showproductname", "--showmeminfo", "vram", "--json"],
    "slurm_config": ["scontrol", "show", "config"],
}
"""What ``system probe`` asks the node, by the output it reads."""


def run_on_this_node(argv: list[str]) -> str | None:
    """``argv``'s standard output, or None where its program is missing or it fails."""
    if shutil.which(argv[0]) is None:
        return None
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)
    return proc.stdout if proc.returncode == 0 else None


def parse_topology_plugin(text: str) -> str:
    """``scontrol show config``'s ``TopologyPlugin = topology/block`` line: its value ('' where there is none)."""
    match = re.search(r"^TopologyPlugin\s*=\s*(\S+)", text, re.MULTILINE)
    return match.group(1) if match else ""


def probe(nodes: int = 1, run: Runner = run_on_this_node, meminfo: Path = Path("/proc/meminfo"), nvlink_domain_nodes: int = 1) -> Hardware:
    """This node's hardware: lscpu and /proc/meminfo, then nvidia-smi (and its topology), else rocm-smi (neither: a
    node without GPUs), and SLURM's topology plugin where scontrol answers."""
    lscpu = run(PROBE_COMMANDS["lscpu"])
    if lscpu is None:
        raise ConfigError("system probe: lscpu is not on PATH or failed (util-linux); it says the CPU architecture and cores")
    nvidia = run(PROBE_COMMANDS["nvidia_smi"])
    rocm = None if nvidia is not None else run(PROBE_COMMANDS["rocm_smi"])
    topology = run(PROBE_COMMANDS["nvidia_topology"]) if nvidia is not None else None
    hardware = hardware_from(lscpu, meminfo.read_text(), nvidia, rocm, topology, nodes)
    slurm = run(PROBE_COMMANDS["slurm_config"])
    try:
        return Hardware.model_validate(
            {**hardware.model_dump(), "nvlink_domain_nodes": nvlink_domain_nodes, "slurm_topology": parse_topology_plugin(slurm or "")}
        )
    except ValidationError:
        raise ConfigError(f"system probe: --nvlink-domain-nodes is {nvlink_domain_nodes}; allowed: a whole number of nodes, 1 or more") from None


def describe(hardware: Hardware, system_name: str, operating_system: str = "", framework: str = "") -> SystemDescription:
    """A system description filled from the probed hardware; what a probe cannot read (status, networking, the
    framework) stays for the submitter to write."""
    vcpus = hardware.cpus_per_node if hardware.threads_per_core > 1 else ""
    return SystemDescription(
        system_name=system_name,
        status="Research, Development, or Internal (RDI)",
        number_of_nodes=str(hardware.nodes),
        host_processors_per_node=str(hardware.sockets),
        host_processor_model_name=hardware.cpu_model,
        host_processor_core_count=str(hardware.cores_per_socket),
        host_processor_vcpu_count=str(vcpus),
        host_memory_capacity=f"{hardware.host_memory_gib:.0f} GiB",
        accelerators_per_node=str(hardware.gpus_per_node),
        accelerator_model_name=hardware.gpu_model or "none",
        accelerator_memory_capacity=f"{hardware.gpu_memory_gb:.0f} GB" if hardware.gpus_per_node else "",
        accelerator_interconnect=hardware.gpu_interconnect,
        framework=framework,
        operating_system=operating_system,
        hardware=hardware,
    )


def operating_system(os_release: Path = Path("/etc/os-release")) -> str:
    """PRETTY_NAME of ``/etc/os-release`` ('' where there is none)."""
    if not os_release.is_file():
        return ""
    match = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', os_release.read_text(), re.MULTILINE)
    return match.group(1) if match else ""


def description_text(description: SystemDescription) -> str:
    """The YAML of ``config/systems/<name>.yaml``, with a header saying what was probed and what to fill in."""
    data = description.model_dump(by_alias=True, mode="json")
    header = (
        "# Written by `mlperf-wf system probe` from this node's lscpu, /proc/meminfo and nvidia-smi or rocm-smi.\n"
        "# `hardware` is what the plan fits images and geometry to; every other key is the submission's system JSON:\n"
        "# set status, networking, storage, framework and the software stack before packaging a submission.\n"
    )
    return header + yaml.safe_dump(data, sort_keys=False, width=120, allow_unicode=True)


# ---- images against the hardware ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImageFit:
    """Whether an image's declared targets run on a node."""

    misfits: tuple[str, ...] = ()
    """What of the node the image cannot run on (empty: it runs)."""
    notes: tuple[str, ...] = ()
    """What runs, but slowly or untested: PTX compiled by the driver at first use (inside the timed region)."""

    @property
    def fits(self) -> bool:
        return not self.misfits


def _capability(text: str) -> tuple[int, int]:
    major, minor = text.split(".")
    return int(major), int(minor)


def image_fit(targets: ImageTargets, hardware: Hardware) -> ImageFit:
    """Whether an image built for ``targets`` runs on ``hardware``: its CPU architecture, its GPU vendor and compute
    capability or gfx target (native code, or PTX the driver compiles for a newer GPU at first use), the GPU memory
    its configuration was made for, and its GPUs per node."""
    misfits, notes = [], []
    if hardware.cpu_architecture not in targets.cpu_architectures:
        misfits.append(f"CPU {hardware.cpu_architecture}")
    if hardware.gpu_vendor == "nvidia":
        capability = hardware.compute_capability or "0.0"
        if not targets.cuda_architectures:
            misfits.append(f"an NVIDIA GPU (sm_{capability.replace('.', '')})")
        elif capability not in targets.cuda_architectures:
            if targets.cuda_ptx and _capability(targets.cuda_ptx) <= _capability(capability):
                notes.append(
                    f"sm_{capability.replace('.', '')} has no native code in the image: the driver compiles its compute_"
                    f"{targets.cuda_ptx.replace('.', '')} PTX at first use, inside the timed region, if the libraries run at all"
                )
            else:
                misfits.append(f"sm_{capability.replace('.', '')}")
    elif hardware.gpu_vendor == "amd":
        if hardware.gfx_target not in targets.rocm_targets:
            misfits.append(f"{hardware.gfx_target}" if targets.rocm_targets else f"an AMD GPU ({hardware.gfx_target})")
    else:
        misfits.append("no GPU")
    if targets.min_gpu_memory_gb and hardware.gpu_vendor and hardware.gpu_memory_gb < targets.min_gpu_memory_gb:
        misfits.append(f"{hardware.gpu_memory_gb:.0f} GB per GPU")
    if targets.gpus_per_node and hardware.gpus_per_node not in targets.gpus_per_node:
        misfits.append(f"{hardware.gpus_per_node} GPUs per node")
    return ImageFit(tuple(misfits), tuple(notes))


def choose_image(container: Container, hardware: Hardware) -> tuple[str | None, ImageFit]:
    """The image a benchmark's runs take on ``hardware``: (None, its fit) for the definition's own image where it fits
    or no variant does, else (the first variant that fits, its fit). An image without declared targets fits."""
    if container.targets is None:
        return None, ImageFit()
    own = image_fit(container.targets, hardware)
    if own.fits:
        return None, own
    for name, variant in container.variants.items():
        fit = image_fit(variant.targets, hardware)
        if fit.fits:
            return name, fit
    return None, own


def fit_in_words(container: Container, hardware: Hardware) -> str:
    """One table cell: ``image``, ``variant NAME``, ``image, PTX JIT`` or ``refused: sm_100, CPU aarch64``."""
    variant, fit = choose_image(container, hardware)
    if not fit.fits:
        return f"refused: {', '.join(fit.misfits)}"
    return ("image" if variant is None else f"variant {variant}") + (", PTX JIT" if fit.notes else "")


def probe_into(name: str, nodes: int, out: Path | None, nvlink_domain_nodes: int = 1) -> str:
    """Read this node's hardware (:func:`probe`) into ``out`` (default ``config/systems/<name>.yaml``): a new file gets
    every field a probe can fill, an existing one only its ``hardware`` section (what the submitter wrote stays).
    Returns one line saying what was written."""
    target = out or Path("config") / "systems" / f"{name}.yaml"
    hardware = probe(nodes, nvlink_domain_nodes=nvlink_domain_nodes)
    if target.is_file():
        description = read_system(target).model_copy(update={"hardware": hardware})
        what = "its hardware section replaced"
    else:
        description = describe(hardware, name, operating_system())
        what = "written; set status, networking, storage, framework and the software stack before packaging"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(description_text(description))
    return f"{target}: {hardware.in_words()} ({what})"
