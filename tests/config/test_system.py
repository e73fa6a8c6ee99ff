"""The system description: published tool outputs read into the typed hardware, ``mlperf-wf system probe``, and the
system JSON written from it."""

from __future__ import annotations

import json
import platform
import shutil
import subprocess
import sys

import pytest
import yaml

from mlperf_wf import cli
from mlperf_wf.config import system
from mlperf_wf.errors import ConfigError
from mlperf_wf.results import package
from tests import system_fixtures
from tests.system_fixtures import hardware, output

EXPECTED = {
    # node: (architecture, sockets x cores, threads, vendor, GPUs, model, GB per GPU, capability or gfx, interconnect)
    "dgx_a100_80gb": ("x86_64", 128, 2, "nvidia", 8, "NVIDIA A100-SXM4-80GB", 85.9, "8.0", "NVLink (NV12)"),
    "dgx_h100": ("x86_64", 112, 2, "nvidia", 8, "NVIDIA H100 80GB HBM3", 85.5, "9.0", "NVLink (NV18)"),
    "dgx_b200": ("x86_64", 112, 2, "nvidia", 8, "NVIDIA B200", 192.3, "10.0", "NVLink (NV18)"),
    "gb200_nvl72": ("aarch64", 144, 1, "nvidia", 4, "NVIDIA GB200", 198.7, "10.0", "NVLink (NV18)"),
    "mi300x": ("x86_64", 192, 2, "amd", 8, "AMD Instinct MI300X", 206.1, "gfx942", ""),
}


@pytest.mark.parametrize("node", sorted(EXPECTED))
def test_published_outputs_make_the_typed_hardware(node):
    arch, cores, threads, vendor, gpus, model, memory, target, link = EXPECTED[node]
    hw = hardware(node)
    assert (hw.cpu_architecture, hw.cores_per_node, hw.threads_per_core) == (arch, cores, threads)
    assert (hw.gpu_vendor, hw.gpus_per_node, hw.gpu_model, hw.gpu_memory_gb) == (vendor, gpus, model, memory)
    assert (hw.compute_capability or hw.gfx_target) == target
    assert hw.gpu_interconnect == link
    assert hw.host_memory_gib > 800


def test_every_fixture_cites_its_source():
    for folder in sorted(system_fixtures.FIXTURES.iterdir()):
        for kind in system_fixtures.OUTPUT_FILES:
            output(folder.name, kind)  # asserts the citing header


def test_nvidia_smi_noheader_nounits_and_a_bad_line():
    assert system.parse_nvidia_smi("NVIDIA H100 80GB HBM3, 81559, 9.0\n")[0].target == "9.0"
    with pytest.raises(ConfigError, match=r"memory\.total is not N MiB"):
        system.parse_nvidia_smi("name, memory.total [MiB], compute_cap\nNVIDIA H100, [N/A], 9.0\n")


def test_rocm_smi_without_gfx_version_names_the_card():
    with pytest.raises(ConfigError, match="card0 has no GFX Version"):
        system.parse_rocm_smi(json.dumps({"card0": {"Card Series": "AMD Instinct MI300X", "VRAM Total Memory (B)": "1"}}))


def test_a_mixed_node_is_refused():
    mixed = "name, memory.total [MiB], compute_cap\nNVIDIA H100 80GB HBM3, 81559 MiB, 9.0\nNVIDIA A100-SXM4-80GB, 81920 MiB, 8.0\n"
    with pytest.raises(ConfigError, match="mixes GPUs"):
        system.hardware_from(output("dgx_h100", "lscpu"), output("dgx_h100", "meminfo"), nvidia_smi=mixed)


def _runner(node):
    commands = {
        tuple(system.PROBE_COMMANDS["lscpu"]): output(node, "lscpu"),
        tuple(system.PROBE_COMMANDS["nvidia_smi"]): output(node, "nvidia_smi"),
        tuple(system.PROBE_COMMANDS["nvidia_topology"]): output(node, "topology"),
        tuple(system.PROBE_COMMANDS["rocm_smi"]): output(node, "rocm_smi"),
        # the test's choice: a SLURM with the block plugin on the NVL72 rack, no scontrol on the other node
        tuple(system.PROBE_COMMANDS["slurm_config"]): "ClusterName = rack\nTopologyPlugin          = topology/block\n" if node == "gb200_nvl72" else None,
    }
    return lambda argv: commands[tuple(argv)]


@pytest.mark.parametrize("node, domain, plugin", [("gb200_nvl72", 18, "topology/block"), ("mi300x", 1, "")])
def test_probe_asks_the_node_in_order(node, domain, plugin, tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(output(node, "meminfo"))
    probed = system.probe(2, _runner(node), meminfo, nvlink_domain_nodes=domain)
    assert probed == hardware(node, nodes=2).model_copy(update={"slurm_topology": plugin}) and probed.nvlink_domain_nodes == domain


def test_a_bad_nvlink_domain_size_is_one_line(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(output("mi300x", "meminfo"))
    with pytest.raises(ConfigError, match=r"^system probe: --nvlink-domain-nodes is 0; allowed: a whole number of nodes, 1 or more$"):
        system.probe(1, _runner("mi300x"), meminfo, nvlink_domain_nodes=0)


def test_system_probe_writes_the_description_and_the_system_json_leaves_hardware_out(tmp_path, monkeypatch):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(output("dgx_h100", "meminfo"))
    monkeypatch.setattr(
        system,
        "probe",
        lambda nodes, nvlink_domain_nodes: system.hardware_from(nodes=nodes, **{k: output("dgx_h100", k) for k in system_fixtures.OUTPUT_FILES}).model_copy(
            update={"nvlink_domain_nodes": nvlink_domain_nodes}
        ),
    )
    assert cli.main(["--root", str(tmp_path), "system", "probe", "--name", "h100x2", "--nodes", "2"]) == 0
    written = tmp_path / "config" / "systems" / "h100x2.yaml"
    description = package.load_system("h100x2", tmp_path)
    assert description.hardware == hardware("dgx_h100", nodes=2)
    assert (description.number_of_nodes, description.accelerators_per_node, description.host_processor_core_count) == ("2", "8", "56")
    assert description.host_processor_vcpu_count == "224"
    data = description.system_json("org", "closed")
    assert "hardware" not in data and data["accelerator_model_name"] == "NVIDIA H100 80GB HBM3"
    # a second probe keeps what the submitter wrote and replaces the hardware only
    text = yaml.safe_load(written.read_text())
    written.write_text(yaml.safe_dump({**text, "host_networking": "InfiniBand NDR 400 Gb/s"}))
    assert cli.main(["--root", str(tmp_path), "system", "probe", "--name", "h100x2", "--nodes", "4"]) == 0
    again = package.load_system("h100x2", tmp_path)
    assert again.host_networking == "InfiniBand NDR 400 Gb/s" and again.hardware.nodes == 4 and again.hardware.nvlink_domain_nodes == 1
    assert cli.main(["--root", str(tmp_path), "system", "probe", "--name", "h100x2", "--nvlink-domain-nodes", "18"]) == 0
    assert package.load_system("h100x2", tmp_path).hardware.nvlink_domain_nodes == 18


def test_the_official_checker_passes_a_probed_description(tmp_path):
    description = system.describe(hardware("gb200_nvl72", nodes=16), "gb200x16", "Ubuntu 24.04 LTS", "PyTorch NVIDIA Release 25.12")
    path = tmp_path / "gb200x16.json"
    path.write_text(json.dumps(description.system_json("org", "closed")))
    proc = subprocess.run(
        [sys.executable, "-m", "mlperf_logging.system_desc_checker", str(path), "training", "6.1.0"], capture_output=True, text=True, cwd=tmp_path, check=False
    )
    assert proc.returncode == 0 and "checker passed for gb200x16" in proc.stdout + proc.stderr, proc.stdout + proc.stderr


@pytest.mark.skipif(shutil.which("lscpu") is None or shutil.which("nvidia-smi") or shutil.which("rocm-smi"), reason="needs lscpu and a node without GPUs")
def test_probe_reads_this_node(tmp_path):
    """The real tools on the machine the tests run on (a CPU node): lscpu's own output, no GPU."""
    hw = system.probe()
    assert hw.gpu_vendor is None and hw.gpus_per_node == 0 and hw.cores_per_node >= 1 and hw.host_memory_gib > 0
    assert hw.cpu_architecture == platform.machine()
