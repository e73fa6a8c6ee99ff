"""Published outputs of lscpu, /proc/meminfo, nvidia-smi and rocm-smi for the systems the tests describe
(``tests/config/systems/<system>/``, each file's header cites where its output and values come from)."""

from __future__ import annotations

from pathlib import Path

from mlperf_wf.config import system

FIXTURES = Path(__file__).parent / "config" / "systems"
HEADER_END = "# ---\n"

OUTPUT_FILES = {"lscpu": "lscpu.txt", "meminfo": "meminfo.txt", "nvidia_smi": "nvidia-smi.csv", "topology": "topo.txt", "rocm_smi": "rocm-smi.json"}
"""``hardware_from``'s argument -> the fixture file holding that tool's output."""


def output(node: str, kind: str) -> str | None:
    """The tool's output as it printed it (the file without its citing header); None where the node has no such file."""
    path = FIXTURES / node / OUTPUT_FILES[kind]
    if not path.is_file():
        return None
    text = path.read_text()
    assert HEADER_END in text, f"{path}: no citing header ending in {HEADER_END!r}"
    header, body = text.split(HEADER_END, 1)
    assert "http" in header or "reference" in header, f"{path}: the header cites no source"
    return body


NVLINK_DOMAIN_NODES = {"gb200_nvl72": 18}
"""Nodes of one NVLink domain where it spans several (``system probe --nvlink-domain-nodes``): an NVL72 rack's 18
compute trays of 4 GPUs (NVIDIA's GB200 NVL72 datasheet: 72 GPUs, 36 Grace CPUs, one NVLink domain)."""


def hardware(node: str, nodes: int = 1) -> system.Hardware:
    """The typed description of ``node``'s published outputs."""
    outputs = {kind: output(node, kind) for kind in OUTPUT_FILES}
    return system.hardware_from(nodes=nodes, **outputs).model_copy(update={"nvlink_domain_nodes": NVLINK_DOMAIN_NODES.get(node, 1)})


SYSTEMS = {
    "dgx_a100_80gb": ("dgx_a100_80gb", 1),
    "dgx_h100": ("dgx_h100", 1),
    "dgx_b200": ("dgx_b200", 1),
    "gb200_nvl72": ("gb200_nvl72", 1),
    "mi300x": ("mi300x", 1),
    "dgx_h100_x2": ("dgx_h100", 2),
}
"""The matrix's systems: name -> (node fixture, nodes)."""
