"""Every benchmark on six probed systems (DGX A100 80 GB, DGX H100, DGX B200, GB200 NVL72 with 4 GPUs per node,
MI300X, two DGX H100 nodes): each cell is a plan or a one-line refusal saying why, and the image each system gets
(the definition's, a variant, or none) is the table of docs/systems.md."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from mlperf_wf.config import registry, system
from mlperf_wf.config.workflow_config import WorkflowConfig
from mlperf_wf.errors import ConfigError
from mlperf_wf.plan import plan as planning
from mlperf_wf.plan import preflight, sizing
from tests import system_fixtures

ROOT = Path(__file__).resolve().parents[2]
DEFAULTS = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
DOC = ROOT / "docs" / "systems.md"
TABLE_START = "<!-- the table below is made by tests/plan/test_system_matrix.py (MLPERF_WF_UPDATE_GOLDEN=1 writes it) -->"
TABLE_END = "<!-- end of the image table -->"


def hardware_of(name: str) -> system.Hardware:
    node, nodes = system_fixtures.SYSTEMS[name]
    return system_fixtures.hardware(node, nodes)


@pytest.fixture(scope="module")
def workdirs(tmp_path_factory) -> dict[str, Path]:
    """One workflow folder per system, its config/systems/<system>.yaml written by the probe's description."""
    folders = {}
    for name in system_fixtures.SYSTEMS:
        folder = tmp_path_factory.mktemp(name)
        (folder / "config" / "systems").mkdir(parents=True)
        (folder / "config" / "datasets").symlink_to(ROOT / "config" / "datasets")
        description = system.describe(hardware_of(name), name, "Ubuntu 24.04 LTS", "PyTorch")
        (folder / "config" / "systems" / f"{name}.yaml").write_text(system.description_text(description))
        folders[name] = folder
    return folders


def system_plan(folder: Path, name: str) -> planning.Plan:
    """The full-scale plan of every benchmark on the system: its GPUs per node and nodes, its description."""
    hw = hardware_of(name)
    geometry = {bench: {"gpus_per_node": hw.gpus_per_node or 1, "nodes": hw.nodes} for bench in registry.benchmark_names()}
    config = {**DEFAULTS, "scale": "full", "submission": {**DEFAULTS["submission"], "platform": name}, "full_geometry": geometry}
    return planning.Plan(WorkflowConfig.parse(config), project_root=ROOT, workdir=folder)


def cell(plan: planning.Plan, bench: str) -> str:
    """``plan: IMAGE`` or ``refused: WHY`` (one line)."""
    problems = preflight.system_fit_problems(plan, bench)
    if problems:
        return "refused: " + "; ".join(f"{problem.kind}: {problem.message}" for problem in problems)
    try:
        job = plan.of(bench).train_job(0)
    except ConfigError as err:
        return f"refused: {err}"
    return f"plan: {job.image}"


@pytest.mark.parametrize("name", sorted(system_fixtures.SYSTEMS))
def test_every_benchmark_is_a_plan_or_a_one_line_refusal(workdirs, name):
    plan = system_plan(workdirs[name], name)
    cells = {bench: cell(plan, bench) for bench in registry.benchmark_names()}
    for bench, text in cells.items():
        assert "\n" not in text, f"{name} x {bench}: {text}"
        assert text.startswith(("plan: ", "refused: ")), text
        if text.startswith("refused: "):
            assert len(text) > len("refused: ") + 10, f"{name} x {bench}: a refusal says why"
    hw = hardware_of(name)
    # the image facts of the definitions, as the preflight states them
    qwen = cells["qwen35_397b_grpo"]
    if hw.cpu_architecture == "aarch64":
        assert not qwen.startswith("refused: image"), qwen
    else:
        assert qwen.startswith("refused: image: ") and "CPU x86_64" in qwen and "aarch64" in qwen, qwen
    assert cells["dlrmv4"].startswith("refused: image: ") and "gfx950" in cells["dlrmv4"], cells["dlrmv4"]


def test_the_plan_takes_the_variant_that_fits(workdirs):
    h100 = system_plan(workdirs["dgx_h100"], "dgx_h100")
    assert h100.of("rgat").image_variant() == "h100"
    assert h100.of("rgat").container().image == "mlperf-workflow/rgat:ref-aa344c7-glt910cb55-h100"
    assert "rgat: takes image variant h100" in preflight.batch_tables(h100, ["rgat"])
    a100 = system_plan(workdirs["dgx_a100_80gb"], "dgx_a100_80gb")
    assert a100.of("rgat").image_variant() is None and a100.of("rgat").container().dockerfile == "src/mlperf_wf/benchmarks/rgat/container/Dockerfile"
    assert a100.of("llama31_8b").image_variant() == "b200"  # the H200 image's TransformerEngine has no sm_80
    (problem,) = [p for p in preflight.system_fit_problems(system_plan(workdirs["dgx_b200"], "dgx_b200"), "rgat") if p.kind == "image"]
    assert "sm_100" in problem.message and "variant h100" in problem.message and "CUDA sm_90 (no PTX)" in problem.message


def test_an_mi300x_system_takes_llama31_8b_s_rocm_image_with_its_devices_and_its_configuration(workdirs):
    """The reference's Dockerfile.mi325 (gfx942: MI300X and MI325X) beside its H200 and B200 images."""
    mi300x = system_plan(workdirs["mi300x"], "mi300x")
    assert mi300x.of("llama31_8b").image_variant() == "mi325"
    assert mi300x.of("llama31_8b").container().image == "mlperf-workflow/llama31_8b:ref-aa344c7-rocm6.4-patches1"
    command = mi300x.of("llama31_8b").train_job(0).command
    assert "--device=/dev/kfd" in command and " --gpus " not in command, command
    assert "NVTE_FUSED_ATTN_CK=1" in command and "MLPERF_CONFIG_FILENAME=config_MI325X_1x8x1_8b.sh" in command, command
    assert "llama31_8b: takes image variant mi325" in preflight.batch_tables(mi300x, ["llama31_8b"])
    h100 = system_plan(workdirs["dgx_h100"], "dgx_h100")
    h100_command = h100.of("llama31_8b").train_job(0).command
    assert h100.of("llama31_8b").image_variant() is None and "/dev/kfd" not in h100_command and "NVTE_FUSED_ATTN_CK" not in h100_command
    assert "MLPERF_CONFIG_FILENAME=config_H200_1x8x1_8b.sh" in h100_command


def test_an_mi355x_system_takes_gpt_oss_20b_s_rocm_image_with_the_mi355x_configuration(tmp_path):
    """The reference's ROCm Dockerfile (its README's MI355X image) beside Dockerfile.nvidia: its runs get the AMD devices
    and config_MI355X_1x8x1.sh's settings, without the B200 config's that the MI355X config leaves to the recipe."""
    mi355x = hardware_of("mi300x").model_copy(update={"gfx_target": "gfx950", "gpu_model": "AMD Instinct MI355X", "gpu_memory_gb": 309.2})
    (tmp_path / "config" / "systems").mkdir(parents=True)
    (tmp_path / "config" / "datasets").symlink_to(ROOT / "config" / "datasets")
    (tmp_path / "config" / "systems" / "mi355x.yaml").write_text(system.description_text(system.describe(mi355x, "mi355x")))
    config = {**DEFAULTS, "scale": "full", "submission": {**DEFAULTS["submission"], "platform": "mi355x"}}
    plan = planning.Plan(WorkflowConfig.parse(config), project_root=ROOT, workdir=tmp_path)
    assert plan.of("gpt_oss_20b").image_variant() == "mi355"
    command = plan.of("gpt_oss_20b").train_job(0).command
    assert "--device=/dev/kfd" in command and " --gpus " not in command, command
    assert "EXP=/workspace/code/conf/gpt_oss_20B-pretrain.yaml" in command and "PRIMUS_FP8_RECIPE=hybrid" in command, command
    assert "PRIMUS_TURBO_ENABLED" not in command and "PRIMUS_BF16" not in command, command
    # the MI300X (gfx942) is no target of it: still refused, naming the variant
    assert "variant mi355" in str(preflight.system_fit_problems(system_plan_for_mi300x(tmp_path), "gpt_oss_20b"))


def system_plan_for_mi300x(tmp_path: Path) -> planning.Plan:
    folder = tmp_path / "mi300x"
    (folder / "config" / "systems").mkdir(parents=True)
    (folder / "config" / "datasets").symlink_to(ROOT / "config" / "datasets")
    (folder / "config" / "systems" / "mi300x.yaml").write_text(system.description_text(system.describe(hardware_of("mi300x"), "mi300x")))
    return system_plan(folder, "mi300x")


def test_pre_hopper_images_say_the_driver_compiles_ptx(workdirs):
    plan = system_plan(workdirs["dgx_h100"], "dgx_h100")
    notes = preflight.batch_tables(plan, ["bert", "retinanet"])
    assert "bert: sm_90 has no native code in the image: the driver compiles its compute_80 PTX at first use" in notes
    assert "retinanet: sm_90 has no native code" in notes
    dlrm = preflight.system_fit_problems(plan, "dlrm_dcnv2")
    assert [p.kind for p in dlrm] == ["image"] and "sm_90" in dlrm[0].message


def test_the_reference_geometry_against_the_nodes(workdirs):
    """The definitions' own geometry (no full_geometry) on systems whose nodes differ from the reference's."""
    config = {**DEFAULTS, "scale": "full", "submission": {**DEFAULTS["submission"], "platform": "gb200_nvl72"}}
    gb200 = planning.Plan(WorkflowConfig.parse(config), project_root=ROOT, workdir=workdirs["gb200_nvl72"])
    problems = {(p.kind, p.message.split(" (")[0]) for p in preflight.system_fit_problems(gb200, "llama31_405b")}
    assert ("geometry", "the runs ask 8 GPUs per node, the system's nodes have 4") in problems
    assert ("geometry", "the runs ask 288 nodes, the system has 1") in problems
    config["submission"] = {**DEFAULTS["submission"], "platform": "dgx_h100"}
    h100 = planning.Plan(WorkflowConfig.parse(config), project_root=ROOT, workdir=workdirs["dgx_h100"])
    notes = preflight.batch_tables(h100, ["deepseekv3_671b", "llama31_8b"])
    assert "deepseekv3_671b: the runs use 4 of each node's 8 GPUs" in notes
    assert "llama31_8b: the runs ask 128 CPUs per node, more than its 112 cores (SMT threads make 224)" in notes


def test_a_description_without_hardware_changes_nothing(workdirs, tmp_path):
    folder = tmp_path / "plain"
    (folder / "config" / "systems").mkdir(parents=True)
    (folder / "config" / "systems" / "plain.yaml").write_text((ROOT / "config" / "systems" / "cpu-tiny.yaml").read_text())
    config = {**DEFAULTS, "scale": "full", "submission": {**DEFAULTS["submission"], "platform": "plain"}}
    plan = planning.Plan(WorkflowConfig.parse(config), project_root=ROOT, workdir=folder)
    assert plan.system_hardware is None
    assert all(preflight.system_fit_problems(plan, bench) == [] for bench in registry.benchmark_names())
    assert plan.of("rgat").container() == registry.load_benchmark("rgat").full.container


def image_table() -> str:
    names = list(system_fixtures.SYSTEMS)
    hardware = {name: hardware_of(name) for name in names}
    rows = ["| benchmark | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for bench in registry.benchmark_names():
        container = registry.load_benchmark(bench).full.container
        rows.append(f"| {bench} | " + " | ".join(system.fit_in_words(container, hardware[name]) for name in names) + " |")
    systems = [f"- `{name}`: {hardware[name].in_words()}" for name in names]
    return "\n".join([TABLE_START, *rows, "", *systems, TABLE_END])


def test_the_docs_table_is_the_matrix():
    text = DOC.read_text()
    assert TABLE_START in text and TABLE_END in text, f"{DOC}: the table's markers are missing"
    head, rest = text.split(TABLE_START, 1)
    wanted = head + image_table() + rest.split(TABLE_END, 1)[1]
    if os.environ.get("MLPERF_WF_UPDATE_GOLDEN"):
        DOC.write_text(wanted)
    assert text == wanted, "docs/systems.md's table differs from the matrix: MLPERF_WF_UPDATE_GOLDEN=1 writes it"


def test_the_preflight_names_the_benchmark_the_images_and_the_system(workdirs):
    plan = system_plan(workdirs["dgx_b200"], "dgx_b200")
    problems = [p for p in preflight.plan_problems(plan, ["qwen35_397b_grpo"], environ={}) if p.kind == "image" and "no image fits" in str(p)]
    (line,) = [str(p) for p in problems]
    assert line.startswith("qwen35_397b_grpo: no image fits the system 'dgx_b200' (x86_64, 8 x NVIDIA B200 (sm_100, 192.3 GB)")
    assert "not supported: CPU x86_64, 8 GPUs per node" in line and "runs on aarch64; CUDA sm_100 sm_103 (no PTX); 4 GPUs per node" in line
    assert "\n" not in line


def test_the_plan_sizes_the_micro_batch_to_the_system_s_gpu_memory(workdirs):
    """llama31_8b's configuration is the H200's (141 GB, micro batch 2): on 80 GB GPUs the plan takes a micro batch of
    1 and accumulates the rest, as `mlperf-wf size --gpu-memory-gib` does; GPUs of the reference's memory keep its."""
    a100 = system_plan(workdirs["dgx_a100_80gb"], "dgx_a100_80gb").of("llama31_8b").launch_settings().batch
    assert (a100.max_micro_batch, a100.split.micro_batch, a100.split.accumulation) == (1, 1, 4)
    tables = preflight.batch_tables(system_plan(workdirs["dgx_a100_80gb"], "dgx_a100_80gb"), ["llama31_8b"])
    assert "micro batch at most 1: the GPUs' 80.0 GiB against the 141 GiB the reference ran micro batch 2 on" in tables
    b200 = system_plan(workdirs["dgx_b200"], "dgx_b200").of("llama31_8b").launch_settings().batch
    assert (b200.max_micro_batch, b200.split.micro_batch) == (2, 2)
    # an H200 sold as 141 GB reports 143,771 MiB (140.4 GiB) in nvidia-smi: the reference's own GPU keeps its micro batch
    assert sizing.micro_batch_limit(registry.load_benchmark("llama31_8b").full.sizing, 143_771 / 1024) == 2


NODE_COUNTS = (1, 2, 8, 64)
NODE_KINDS = list(dict.fromkeys(node for node, _nodes in system_fixtures.SYSTEMS.values()))
"""The matrix's nodes (dgx_h100_x2 is two of dgx_h100's: its column is dgx_h100's 2)."""
NODES_TABLE_START = "<!-- the tables below are made by tests/plan/test_system_matrix.py (MLPERF_WF_UPDATE_GOLDEN=1 writes them) -->"
NODES_TABLE_END = "<!-- end of the node-count tables -->"
FIT_KINDS = ("image", "geometry", "batch", "rcp", "rules", "walltime", "ruleset")
"""What a cell is refused for: what the system and its node count decide (not the site's digests, data or scratch)."""


def pinned_plan(folder: Path, node: str, nodes: int) -> planning.Plan:
    """Every benchmark on ``nodes`` of ``node``, its images pinned as a site's are once pushed."""
    hw = system_fixtures.hardware(node, nodes)
    (folder / "config" / "systems").mkdir(parents=True, exist_ok=True)
    if not (folder / "config" / "datasets").exists():
        (folder / "config" / "datasets").symlink_to(ROOT / "config" / "datasets")
    description = system.describe(hw, node, "Ubuntu 24.04 LTS", "PyTorch")
    (folder / "config" / "systems" / f"{node}.yaml").write_text(system.description_text(description))
    names = registry.benchmark_names()
    config = {
        **DEFAULTS,
        "scale": "full",
        "submission": {**DEFAULTS["submission"], "platform": node},
        "full_geometry": {bench: {"gpus_per_node": hw.gpus_per_node, "nodes": nodes} for bench in names},
        "full_container": {bench: {"digest": "sha256:" + "0" * 64} for bench in names},
    }
    return planning.Plan(WorkflowConfig.parse(config), project_root=ROOT, workdir=folder)


def node_cell(plan: planning.Plan, bench: str) -> tuple[str, str]:
    """(short, whole): ``GBS N (RCP case)`` of a plan, else ``refused: KINDS``; ``whole`` is the one line a user reads."""
    problems = [p for p in [*preflight.plan_problems(plan, [bench], datasets=[], environ={})] if p.kind in FIT_KINDS]
    if problems:
        return "refused: " + ", ".join(dict.fromkeys(p.kind for p in problems)), "; ".join(str(p) for p in problems)
    batch = plan.of(bench).launch_settings().batch
    if batch is None:
        return "plan (batch of its command)", "plan"
    count = len(batch.deviations)
    deviations = f", {count} deviation{'s' if count > 1 else ''}" if count else ""
    return f"GBS {batch.split.gbs} ({batch.coverage.kind}{deviations})", "\n".join(sizing.describe_batch(batch))


@pytest.fixture(scope="module")
def node_matrix(tmp_path_factory) -> dict[tuple[str, int, str], tuple[str, str]]:
    cells = {}
    for node in NODE_KINDS:
        for nodes in NODE_COUNTS:
            plan = pinned_plan(tmp_path_factory.mktemp(f"{node}-{nodes}"), node, nodes)
            for bench in registry.benchmark_names():
                cells[node, nodes, bench] = node_cell(plan, bench)
    return cells


def test_every_cell_of_every_node_count_is_a_plan_the_closed_rules_and_rcps_pass_or_one_refusal(node_matrix, tmp_path):
    plans = 0
    for (node, nodes, bench), (short, whole) in node_matrix.items():
        where = f"{node} x {nodes} nodes x {bench}"
        if short.startswith("refused: "):
            assert "\n" not in whole and bench in whole and len(whole) > 40, f"{where}: {whole}"
            continue
        plans += 1
        batch = pinned_plan(tmp_path / f"{node}-{nodes}", node, nodes).of(bench).launch_settings().batch
        if batch is None:
            continue
        # every planned value the round's closed rules check holds: mlperf-logging's checker run on the log of the
        # planned values evaluates each of their CHECK expressions (none left to the run's log) and finds none false
        assert all(check.held is True for check in batch.rules), f"{where}: {whole}\n{batch.rules}"
        # the GBS has an RCP the checker tests against (or is a deviation the dry run names)
        assert batch.coverage.kind in ("exact", "interpolated", "below") or batch.deviations, f"{where}: {whole}"
        assert batch.split.gbs == batch.split.replicas * batch.split.micro_batch * batch.split.accumulation, where
    assert plans >= 60, f"only {plans} cells plan"
    # what the node count decides, as a user meets it
    assert node_matrix["dgx_h100", 2, "bert"][0] == "refused: geometry"
    assert node_matrix["dgx_h100", 1, "bert"][0].startswith("GBS ")
    assert node_matrix["dgx_h100", 64, "llama2_70b_lora"][0] == "refused: batch"  # 512 replicas, no RCP that large
    assert node_matrix["mi300x", 8, "flux1"][0].startswith("refused: image")
    assert node_matrix["dgx_h100", 8, "gpt_oss_20b"][0] == "refused: batch"  # its literal GBS 16 on 64 GPUs
    # qwen's 1:3 training/generation split in whole 8-node NVLink segments: 64 nodes are 16 + 48, 8 cannot split
    assert node_matrix["gb200_nvl72", 64, "qwen35_397b_grpo"][0] == "GBS 256 (exact)"
    assert node_matrix["gb200_nvl72", 8, "qwen35_397b_grpo"][0] == "refused: geometry"
    assert (
        "8 nodes cannot split 1:3 into policy-training and generation nodes in whole 8-node NVLink segments"
        in node_matrix["gb200_nvl72", 8, "qwen35_397b_grpo"][1]
    )


def nodes_tables(cells: dict[tuple[str, int, str], tuple[str, str]]) -> str:
    parts = [NODES_TABLE_START]
    for node in NODE_KINDS:
        parts += ["", f"`{node}` ({system_fixtures.hardware(node).in_words()}):", ""]
        parts += ["| benchmark | " + " | ".join(f"{n} node{'s' if n > 1 else ''}" for n in NODE_COUNTS) + " |", "|---|" + "---|" * len(NODE_COUNTS)]
        for bench in registry.benchmark_names():
            parts.append(f"| {bench} | " + " | ".join(cells[node, n, bench][0] for n in NODE_COUNTS) + " |")
    return "\n".join([*parts, NODES_TABLE_END])


def test_the_docs_node_count_tables_are_the_matrix(node_matrix):
    text = DOC.read_text()
    assert NODES_TABLE_START in text and NODES_TABLE_END in text, f"{DOC}: the node-count tables' markers are missing"
    head, rest = text.split(NODES_TABLE_START, 1)
    wanted = head + nodes_tables(node_matrix) + rest.split(NODES_TABLE_END, 1)[1]
    if os.environ.get("MLPERF_WF_UPDATE_GOLDEN"):
        DOC.write_text(wanted)
    assert text == wanted, "docs/systems.md's node-count tables differ from the matrix: MLPERF_WF_UPDATE_GOLDEN=1 writes them"
