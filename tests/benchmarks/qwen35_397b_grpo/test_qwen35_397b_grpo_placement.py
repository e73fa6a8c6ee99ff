"""qwen35_397b_grpo on the user's nodes: each expert-parallel group of 32 GPUs inside one NVLink domain through whole
8-node segments (the reference's SEGMENT and SBATCH_SEGMENT, config_GB300_64x4_t16g48_tp4pp2ep32gtp8.sh:31-36), where
the system's domains span 8 nodes."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mlperf_wf.config import system
from mlperf_wf.config.workflow_config import WorkflowConfig
from mlperf_wf.plan import plan as planning
from mlperf_wf.plan import preflight
from tests import system_fixtures

ROOT = Path(__file__).resolve().parents[3]
DEFAULTS = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
BENCH = "qwen35_397b_grpo"


def qwen_plan(folder: Path, nodes: int, segments: bool | None = None, **hardware: object) -> planning.Plan:
    """The full-scale plan of qwen on ``nodes`` GB200 NVL72 nodes of 4 GPUs (``hardware`` changes the probed node;
    none given: a system not probed, taken as the reference's)."""
    config = {**DEFAULTS, "scale": "full", "full_geometry": {BENCH: {"nodes": nodes, "nvlink_segments": segments}}}
    (folder / "config").mkdir(parents=True, exist_ok=True)
    (folder / "config" / "datasets").symlink_to(ROOT / "config" / "datasets")
    if hardware:
        probed = system_fixtures.hardware("gb200_nvl72", nodes).model_copy(update=hardware)
        (folder / "config" / "systems").mkdir(parents=True, exist_ok=True)
        (folder / "config" / "systems" / "nvl72.yaml").write_text(system.description_text(system.describe(probed, "nvl72")))
        config["submission"] = {**DEFAULTS["submission"], "platform": "nvl72"}
    return planning.Plan(WorkflowConfig.parse(config), project_root=ROOT, workdir=folder)


def geometry_problems(plan: planning.Plan) -> list[str]:
    return [problem.message for problem in preflight.plan_problems(plan, [BENCH]) if problem.kind == "geometry"]


NVL72 = {"nvlink_domain_nodes": 18, "slurm_topology": "topology/block"}


def test_the_reference_s_64_nodes_are_8_segments_with_48_generation_nodes(tmp_path):
    plan = qwen_plan(tmp_path, 64)
    command = plan.train_job(BENCH, 0).command
    assert "++cluster.segment_size=8" in command and "++policy.generation.colocated.resources.num_nodes=48" in command
    assert "--segment=8" in plan.train_slurm_extra(BENCH)
    assert geometry_problems(plan) == []


def test_a_probed_nvl72_system_of_24_nodes_is_placed_in_whole_segments(tmp_path):
    plan = qwen_plan(tmp_path, 24, **NVL72)
    command = plan.train_job(BENCH, 0).command
    assert "++cluster.num_nodes=24" in command
    assert "++cluster.segment_size=8" in command and plan.train_slurm_extra(BENCH) == "--exclusive --segment=8"
    assert geometry_problems(plan) == []


def test_nodes_that_are_not_whole_segments_are_refused(tmp_path):
    assert geometry_problems(qwen_plan(tmp_path, 20, **NVL72)) == [
        "the runs ask 20 nodes, not whole 8-node segments of an NVLink domain (sbatch --segment=8: each expert-parallel group "
        "within one domain, full.geometry.segment_nodes): set full_geometry.qwen35_397b_grpo.nodes to a multiple of 8"
    ]


def test_a_slurm_that_cannot_place_segments_is_refused_before_any_job(tmp_path):
    problems = geometry_problems(qwen_plan(tmp_path, 64, nvlink_domain_nodes=18, slurm_topology="topology/tree"))
    assert problems == [
        "its runs need whole 8-node NVLink segments (sbatch --segment=8), which SLURM places with TopologyPlugin=topology/block "
        "only; config/systems/nvl72.yaml says topology/tree"
    ]


def test_nodes_whose_nvlink_domain_is_one_node_ask_no_segment(tmp_path):
    """4-GPU nodes without a multi-node NVLink fabric: the expert groups cross the network whatever the placement, so
    no segment is asked for and NeMo-RL's segment placement is off (Hydra's null), on any node count."""
    plan = qwen_plan(tmp_path, 20, nvlink_domain_nodes=1)
    assert "++cluster.segment_size=null" in plan.train_job(BENCH, 0).command
    assert "--segment" not in plan.train_slurm_extra(BENCH) and geometry_problems(plan) == []


@pytest.mark.parametrize("text, plugin", [("TopologyPlugin          = topology/block\nTreeWidth = 50\n", "topology/block"), ("SlurmctldPort = 6817\n", "")])
def test_the_probe_reads_slurm_s_topology_plugin(text, plugin):
    assert system.parse_topology_plugin(text) == plugin


def test_a_site_turns_segments_off_for_a_slurm_that_cannot_place_them(tmp_path):
    plan = qwen_plan(tmp_path, 2, segments=False)
    assert "++cluster.segment_size=null" in plan.train_job(BENCH, 0).command
    assert "--segment" not in plan.train_slurm_extra(BENCH) and not any("segment" in message for message in geometry_problems(plan))
