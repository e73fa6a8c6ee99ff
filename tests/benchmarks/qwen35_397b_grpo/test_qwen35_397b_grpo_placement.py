"""qwen35_397b_grpo on the user's nodes: each expert-parallel group of 32 GPUs inside one NVLink domain through whole
8-node segments (the reference's SEGMENT and SBATCH_SEGMENT, config_GB300_64x4_t16g48_tp4pp2ep32gtp8.sh:31-36), where
the system's domains span 8 nodes."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mlperf_wf.config import system
from mlperf_wf.config.workflow_config import WorkflowConfig
from mlperf_wf.errors import ConfigError
from mlperf_wf.plan import plan as planning
from mlperf_wf.plan import preflight
from tests import system_fixtures

ROOT = Path(__file__).resolve().parents[3]
DEFAULTS = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
BENCH = "qwen35_397b_grpo"


def qwen_plan(folder: Path, nodes: int, segments: bool | None = None, rehearsal: bool = False, **hardware: object) -> planning.Plan:
    """The full-scale plan of qwen on ``nodes`` GB200 NVL72 nodes of 4 GPUs (``hardware`` changes the probed node;
    none given: a system not probed, taken as the reference's)."""
    config = {**DEFAULTS, "scale": "full", "full_geometry": {BENCH: {"nodes": nodes, "nvlink_segments": segments, "rehearsal": rehearsal}}}
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
    command = plan.of(BENCH).train_job(0).command
    assert "++cluster.segment_size=8" in command and "++policy.generation.colocated.resources.num_nodes=48" in command
    assert "--segment=8" in plan.of(BENCH).train_slurm_extra()
    assert geometry_problems(plan) == []


def test_a_probed_nvl72_system_of_32_nodes_is_placed_in_whole_segments_of_each_role(tmp_path):
    plan = qwen_plan(tmp_path, 32, **NVL72)
    command = plan.of(BENCH).train_job(0).command
    assert "++cluster.num_nodes=32" in command and "++policy.generation.colocated.resources.num_nodes=24" in command
    assert "++cluster.segment_size=8" in command and plan.of(BENCH).train_slurm_extra() == "--exclusive --segment=8"
    assert geometry_problems(plan) == []
    assert "qwen35_397b_grpo: its 32 nodes are 8 policy-training + 24 generation nodes, the reference's 1:3" in preflight.batch_tables(plan, [BENCH])


SPLIT_SOURCE = "full.geometry.node_split: N:docker/mlperf/config_GB300_64x4_t16g48_tp4pp2ep32gtp8.sh:26-27 TRAIN_NODES=16 GEN_NODES=48"


@pytest.mark.parametrize("nodes", [20, 24])
def test_nodes_that_are_not_whole_segments_of_each_role_are_refused(tmp_path, nodes):
    """24 nodes are whole segments, but not 1:3 of them (8 + 16 would halve the generation the reference has)."""
    assert geometry_problems(qwen_plan(tmp_path, nodes, **NVL72)) == [
        f"{nodes} nodes cannot split 1:3 into policy-training and generation nodes in whole 8-node NVLink segments "
        f"(sbatch --segment=8) (the reference's ratio, {SPLIT_SOURCE}): set full_geometry.qwen35_397b_grpo.nodes to a multiple of 32"
    ]


@pytest.mark.parametrize("nodes, train, generation", [(4, 1, 3), (8, 2, 6), (20, 5, 15), (64, 16, 48), (128, 32, 96)])
def test_the_generation_nodes_follow_the_user_s_node_count_in_the_reference_s_ratio(tmp_path, nodes, train, generation):
    """Nodes whose NVLink domain is one node: any multiple of 4 splits 1:3 (the reference's 16 + 48)."""
    plan = qwen_plan(tmp_path, nodes, nvlink_domain_nodes=1)
    command = plan.of(BENCH).train_job(0).command
    assert f"++cluster.num_nodes={nodes}" in command and f"++policy.generation.colocated.resources.num_nodes={generation}" in command
    assert geometry_problems(plan) == []
    assert f"its {nodes} nodes are {train} policy-training + {generation} generation nodes" in preflight.batch_tables(plan, [BENCH])


@pytest.mark.parametrize("nodes", [1, 2, 6])
def test_nodes_that_cannot_split_are_refused_in_one_line(tmp_path, nodes):
    plan = qwen_plan(tmp_path, nodes, nvlink_domain_nodes=1)
    assert geometry_problems(plan) == [
        f"{nodes} node{'s' if nodes > 1 else ''} cannot split 1:3 into policy-training and generation nodes (the reference's ratio, {SPLIT_SOURCE}): "
        f"set full_geometry.qwen35_397b_grpo.nodes to a multiple of 4, or set full_geometry.qwen35_397b_grpo.rehearsal: true "
        f"to rehearse the launch on {max(2, nodes)} nodes"
    ]
    with pytest.raises(ConfigError, match="cannot split 1:3"):  # never a command with the reference's 48
        plan.of(BENCH).train_job(0)


def test_a_rehearsal_geometry_gives_each_role_a_node_and_says_it_is_no_submission(tmp_path):
    """The cluster in a box rehearses the launch on 2 nodes (tests/rehearsal/campaign.py): one training and one
    generation node, as NeMo-RL needs at least one of each on more than one node (grpo.py:683-686)."""
    plan = qwen_plan(tmp_path, 2, segments=False, rehearsal=True)
    command = plan.of(BENCH).train_job(0).command
    assert "++cluster.num_nodes=2" in command and "++policy.generation.colocated.resources.num_nodes=1" in command
    assert geometry_problems(plan) == []
    assert (
        "qwen35_397b_grpo: its 2 nodes are 1 policy-training + 1 generation nodes: a rehearsal geometry (full_geometry rehearsal: true), "
        "not the reference's 1:3; its runs are not a submission's"
    ) in preflight.batch_tables(plan, [BENCH])
    # on nodes that split, a rehearsal keeps the reference's ratio
    assert "++policy.generation.colocated.resources.num_nodes=6" in qwen_plan(tmp_path / "8", 8, segments=False, rehearsal=True).of(BENCH).train_job(0).command


def test_a_rehearsal_in_segments_is_still_whole_segments_of_each_role(tmp_path):
    assert len(geometry_problems(qwen_plan(tmp_path, 16, rehearsal=True, **NVL72))) == 1


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
    assert "++cluster.segment_size=null" in plan.of(BENCH).train_job(0).command
    assert "--segment" not in plan.of(BENCH).train_slurm_extra() and geometry_problems(plan) == []


@pytest.mark.parametrize("text, plugin", [("TopologyPlugin          = topology/block\nTreeWidth = 50\n", "topology/block"), ("SlurmctldPort = 6817\n", "")])
def test_the_probe_reads_slurm_s_topology_plugin(text, plugin):
    assert system.parse_topology_plugin(text) == plugin


def test_a_site_turns_segments_off_for_a_slurm_that_cannot_place_them(tmp_path):
    plan = qwen_plan(tmp_path, 4, segments=False)
    assert "++cluster.segment_size=null" in plan.of(BENCH).train_job(0).command
    assert "--segment" not in plan.of(BENCH).train_slurm_extra() and not any("segment" in message for message in geometry_problems(plan))
