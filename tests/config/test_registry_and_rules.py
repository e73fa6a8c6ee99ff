"""The dataset catalog, benchmark definitions as files, and the rules read from mlperf-logging."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mlperf_wf.config import mlperf_rules as rules
from mlperf_wf.config import registry
from mlperf_wf.config.registry import load_benchmark, load_dataset, parse_benchmark_file
from mlperf_wf.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
DATASETS = registry.dataset_ids(ROOT)


@pytest.mark.parametrize("dataset_id", DATASETS)
def test_dataset_definitions_point_at_their_published_source(dataset_id):
    dataset = registry.check_dataset(dataset_id, ROOT)
    if dataset.source.protocol == "external":
        assert dataset.source.instructions and dataset.source.uri is None
        return
    if dataset.source.protocol == "made_in_image":
        # Made by a one-off job of its benchmark's image, which declares it; what every good output holds is listed.
        made_by = registry.load_benchmark(dataset.source.made_by)
        assert dataset.source.uri is None and dataset.files
        assert dataset_id in [made_by.roles_for("train")[role] for role in made_by.full.made_in_image]
        return
    if dataset.source.protocol == "fiftyone":
        # Fetched by the reference's own script, received from its folder: counts per split and pinned checksums.
        assert dataset.source.instructions and dataset.source.uri is None and all(n > 0 for n in dataset.source.splits.values())
        assert dataset.tiny is None or set(dataset.tiny.splits) == set(dataset.source.splits)
        return
    if dataset.source.protocol == "huggingface":
        assert dataset.source.endpoint == "https://huggingface.co" and dataset.source.uri is None
        assert dataset.source.repository.count("/") == 1 and dataset.version == dataset.source.revision
        return
    assert dataset.source.uri.startswith("https://") and dataset.source.uri.endswith(".uri")
    assert dataset.source.md5 == dataset.source.uri.removesuffix(".uri") + ".md5"
    assert all(len(f.md5) == 32 for f in dataset.files if f.md5)


def test_llama2_target_and_run_count_come_from_mlperf_logging():
    target = rules.quality_target("llama2_70b_lora", "6.1.0")
    assert (target.comparison, target.value) == ("<=", 0.925)
    assert target.reached(0.925) and not target.reached(0.926)
    assert rules.required_runs("llama2_70b_lora") == 10


def test_an_open_run_aims_at_the_benchmark_target_and_the_open_check_together():
    """An open result must meet the quality target and pass the open rules' own check."""
    # dlrm_dcnv2's open rules only bound AUROC by <= 1.0 (a range, the other side): the closed target stands.
    assert rules.quality_target("dlrm_dcnv2", "6.0.0", "open") == rules.QualityTarget(">=", 0.80275)
    assert rules.quality_target("rgat", "5.1.0", "open") == rules.quality_target("rgat", "5.1.0", "closed")
    # llama31_8b's open placeholder `< 1.0` is stricter than the closed <= 3.3 on the same side: it is the target.
    assert rules.quality_target("llama31_8b", "6.1.0", "open") == rules.QualityTarget("<", 1.0)
    assert rules.quality_target("llama31_8b", "6.1.0", "closed") == rules.QualityTarget("<=", 3.3)
    # llama2_70b_lora's closed 0.925 is stricter than its open `< 1.0`.
    assert rules.quality_target("llama2_70b_lora", "6.1.0", "open") == rules.QualityTarget("<=", 0.925)


def test_rounds_come_from_mlperf_logging():
    assert rules.rulesets_of("llama2_70b_lora") == ["4.0.0", "4.1.0", "5.0.0", "5.1.0", "6.0.0", "6.1.0"]
    assert rules.rulesets_of("rgat") == ["5.0.0", "5.1.0"]
    with pytest.raises(ConfigError, match=r"submission_benchmark 'resnet50' is in no training round"):
        rules.rulesets_of("resnet50")


def test_required_keys_include_the_division_and_benchmark_rules():
    keys = rules.required_keys("llama2_70b_lora", "6.1.0")
    assert {"lora_rank", "opt_gradient_clip_norm", "micro_batch_size", "tensor_parallelism", "submission_org"} <= keys
    assert "micro_batch_size" not in rules.required_keys("llama2_70b_lora", "5.1.0")
    assert "opt_name" in rules.required_keys("rgat", "5.1.0")


def test_unknown_ruleset_and_retired_benchmark_are_clear_errors():
    with pytest.raises(ConfigError, match=r"ruleset '9\.9\.9' is not known to mlperf-logging"):
        rules.check_benchmark_in_ruleset("llama2_70b_lora", "9.9.9")
    with pytest.raises(ConfigError, match=r"ruleset 6\.1\.0: benchmark 'rgat' is not part of this round; allowed: "):
        rules.check_benchmark_in_ruleset("rgat", "6.1.0")


def test_latest_ruleset_is_each_benchmarks_newest_round():
    assert rules.resolve_ruleset("llama2_70b_lora", "latest") == "6.1.0"
    assert rules.resolve_ruleset("rgat", "latest") == "5.1.0"
    assert rules.resolve_ruleset("rgat", "5.0.0") == "5.0.0"
    with pytest.raises(ConfigError, match=r"ruleset 6\.0\.0: benchmark 'rgat' is not part of this round"):
        rules.resolve_ruleset("rgat", "6.0.0")
    target = rules.quality_target("rgat", "5.1.0")
    assert (target.comparison, target.value) == (">=", 0.72) and rules.required_runs("rgat") == 10


def test_unknown_benchmark_lists_known_ones():
    with pytest.raises(ConfigError, match=r"benchmark 'resnet' is not defined .*; known benchmarks: " + ", ".join(registry.benchmark_names()) + "$"):
        load_benchmark("resnet")


def edited_definition(tmp_path: Path, name: str, edit) -> Path:
    """A copy of benchmark ``name``'s definition with ``edit(entry)`` applied."""
    entry = yaml.safe_load(load_benchmark(name).definition_file.read_text())
    edit(entry)
    path = tmp_path / "benchmark.yaml"
    path.write_text(yaml.safe_dump(entry))
    return path


def test_unknown_command_placeholder_is_rejected(tmp_path):
    def edit(entry):
        entry["full"]["command"] = [part.replace("{seed}", "{sed}") for part in entry["full"]["command"]]

    with pytest.raises(ConfigError, match=r"benchmark\.yaml: full\.command uses unknown placeholder \{sed\}; allowed: "):
        parse_benchmark_file(edited_definition(tmp_path, "llama2_70b_lora", edit), "llama2_70b_lora")


def test_one_process_driving_a_node_s_gpus_needs_a_per_node_launch(tmp_path):
    def per_gpu(entry):
        entry["full"]["process_model"] = "per_gpu"

    with pytest.raises(
        ConfigError, match=r"full\.gpus_per_process: node \(one process drives every GPU of its node\) needs full\.process_model per_node, not per_gpu"
    ):
        parse_benchmark_file(edited_definition(tmp_path, "bert", per_gpu), "bert")
    assert load_benchmark("bert").full.gpus_per_process == "node" and load_benchmark("flux1").full.gpus_per_process == "one"


def test_a_benchmark_names_only_roles_it_declares(tmp_path):
    def uses_checkpoint(entry):
        entry["full"]["command"] = [*entry["full"]["command"], "--model_path", "{checkpoint}"]

    with pytest.raises(ConfigError, match=r"full\.command uses unknown placeholder \{checkpoint\}"):
        parse_benchmark_file(edited_definition(tmp_path, "rgat", uses_checkpoint), "rgat")

    def mounts_checkpoint(entry):
        entry["full"]["mounts"]["checkpoint"] = "/ckpt"

    with pytest.raises(ConfigError, match=r"full\.mounts has \['checkpoint', 'prepared', 'results'\]; this benchmark needs exactly \['prepared', 'results'\]"):
        parse_benchmark_file(edited_definition(tmp_path, "rgat", mounts_checkpoint), "rgat")

    def reserved_role(entry):
        entry["inputs"]["seed"] = {"dataset": "igbh_full"}

    with pytest.raises(ConfigError, match=r"inputs: role 'seed' must be a lower-case identifier other than"):
        parse_benchmark_file(edited_definition(tmp_path, "rgat", reserved_role), "rgat")


def test_any_role_a_run_reads_is_mounted_and_named(tmp_path):
    """A new role (a tokenizer) needs only the definition: mount, placeholder and run spec follow."""
    from mlperf_wf.plan.launch import Launch, RunPaths
    from tests.plan.launch_line import full_scale

    def add_tokenizer(entry):
        entry["inputs"]["tokenizer"] = {"dataset": "llama31_8b_tokenizer", "used_by": ["train"]}
        entry["full"]["mounts"]["tokenizer"] = "/tokenizer"
        entry["full"]["command"] = [*entry["full"]["command"], "--tokenizer", "{tokenizer}"]

    bench = parse_benchmark_file(edited_definition(tmp_path, "llama2_70b_lora", add_tokenizer), "llama2_70b_lora")
    assert bench.roles_for("train") == {"checkpoint": "llama2_70b_fused_qkv", "tokenizer": "llama31_8b_tokenizer"}
    paths = RunPaths(
        prepared=tmp_path / "p" / "dataset", result_file=tmp_path / "r" / "result.txt", inputs={"checkpoint": tmp_path / "c", "tokenizer": tmp_path / "t"}
    )
    line = full_scale(bench, 0, 1, paths, Launch("docker"))
    assert f"-v {tmp_path}/t:/tokenizer:ro" in line and line.endswith("--tokenizer /tokenizer")


def test_bad_dataset_definition_names_file_key_and_value(tmp_path):
    (tmp_path / "config" / "datasets").mkdir(parents=True)
    text = (ROOT / "src/mlperf_wf/benchmarks/llama2_70b_lora/datasets/scrolls_gov_report_8k.yaml").read_text()
    (tmp_path / "config/datasets/scrolls_gov_report_8k.yaml").write_text(text.replace("kind: dataset", "kind: weights"))
    with pytest.raises(ConfigError, match=r"scrolls_gov_report_8k\.yaml: kind: .*'weights'"):
        load_dataset("scrolls_gov_report_8k", tmp_path)
    (tmp_path / "config/datasets/scrolls_gov_report_8k.yaml").write_text(text.replace("id: scrolls_gov_report_8k", "id: govreport"))
    with pytest.raises(ConfigError, match=r"id: declares 'govreport' but the file is named 'scrolls_gov_report_8k'"):
        load_dataset("scrolls_gov_report_8k", tmp_path)
    (tmp_path / "config/datasets/scrolls_gov_report_8k.yaml").write_text(text.replace("module: mlperf_wf.benchmarks.", "module: mlperf_wf.benchmark."))
    with pytest.raises(ConfigError, match=r"tiny\.module: module 'mlperf_wf\.benchmark\.llama2_70b_lora\.govreport' does not exist"):
        registry.check_dataset("scrolls_gov_report_8k", tmp_path)


def test_a_tiny_generator_is_a_module_or_a_module_and_its_function(tmp_path):
    """``tiny.module`` names ``package.module`` (its ``generate``) or ``package.module:function``; a function the module
    does not define is one line with --import-modules, a malformed name a schema error."""
    (tmp_path / "config" / "datasets").mkdir(parents=True)
    text = (ROOT / "src/mlperf_wf/benchmarks/stable_diffusion/datasets/sd_coco2014_validation_stats.yaml").read_text()
    assert "module: mlperf_wf.benchmarks.stable_diffusion.tiny_data:generate_stats" in text
    from mlperf_wf.benchmarks.stable_diffusion import tiny_data

    assert load_dataset("sd_coco2014_validation_stats", ROOT).tiny.function() is tiny_data.generate_stats
    (tmp_path / "config/datasets/sd_coco2014_validation_stats.yaml").write_text(text.replace(":generate_stats", ":generate_statz"))
    registry.check_dataset("sd_coco2014_validation_stats", tmp_path)  # the module exists; its functions are read only on import
    with pytest.raises(ConfigError, match=r"tiny\.module: mlperf_wf\.benchmarks\.stable_diffusion\.tiny_data defines no generate_statz\(out_dir, seed\)"):
        registry.check_dataset("sd_coco2014_validation_stats", tmp_path, import_modules=True)
    (tmp_path / "config/datasets/sd_coco2014_validation_stats.yaml").write_text(text.replace(":generate_stats", "::generate_stats"))
    with pytest.raises(ConfigError, match=r"tiny\.module: String should match pattern"):
        load_dataset("sd_coco2014_validation_stats", tmp_path)


def test_yaml_syntax_error_is_one_line_with_its_position(tmp_path):
    path = tmp_path / "benchmark.yaml"
    path.write_text("submission_benchmark: rgat\ninputs: {data: [\n")
    with pytest.raises(ConfigError, match=r"benchmark\.yaml: line 3, column 1: YAML syntax error: "):
        parse_benchmark_file(path, "rgat")


def test_dataset_users_are_computed_not_kept():
    assert registry.users_of("igbh_full") == ["rgat"]
    assert registry.users_of("llama2_70b_fused_qkv") == ["llama2_70b_lora"]
    assert registry.users_of("criteo_1tb_click_logs") == ["dlrm_dcnv2"], "a preparation's inputs count as uses"


def test_a_preparation_reads_only_for_preparation_and_is_not_named_default(tmp_path):
    def trained_from_raw(entry):
        entry["preparations"]["from_raw"]["inputs"]["click_logs"]["used_by"] = ["prepare", "train"]

    with pytest.raises(ConfigError, match=r"preparations\.from_raw: inputs\.click_logs: a preparation's inputs are read by prepare only"):
        parse_benchmark_file(edited_definition(tmp_path, "dlrm_dcnv2", trained_from_raw), "dlrm_dcnv2")

    def named_default(entry):
        entry["preparations"]["default"] = entry["preparations"].pop("from_raw")

    with pytest.raises(ConfigError, match=r"preparations: 'default' is the name of the benchmark's own prepare\.py"):
        parse_benchmark_file(edited_definition(tmp_path, "dlrm_dcnv2", named_default), "dlrm_dcnv2")

    def role_named_shards(entry):
        entry["preparations"]["from_raw"]["inputs"] = {"shards": {"dataset": "criteo_1tb_click_logs"}}

    with pytest.raises(ConfigError, match=r"inputs: role 'shards' must be a lower-case identifier other than .*shards"):
        parse_benchmark_file(edited_definition(tmp_path, "dlrm_dcnv2", role_named_shards), "dlrm_dcnv2")
    bench = registry.load_benchmark("dlrm_dcnv2")
    assert bench.roles_for("prepare") == {"data": "criteo_1tb_multihot_reference"}
    assert bench.roles_for("prepare", "from_raw") == {"click_logs": "criteo_1tb_click_logs"}
    assert bench.roles_for("train", "from_raw") == {}


def test_image_targets_are_checked_with_the_key_and_the_value(tmp_path):
    def bad_capability(entry):
        entry["full"]["container"]["targets"]["cuda_architectures"] = ["sm_80"]

    with pytest.raises(ConfigError, match=r"cuda_architectures: 'sm_80' is not a compute capability; allowed: MAJOR\.MINOR"):
        parse_benchmark_file(edited_definition(tmp_path, "rgat", bad_capability), "rgat")

    def rocm_on_nvidia(entry):
        entry["full"]["container"]["targets"] = {"cpu_architectures": ["x86_64"], "rocm_targets": ["gfx942"], "source": "x"}

    with pytest.raises(ConfigError, match=r"full\.container\.targets: full\.accelerator is nvidia; declare cuda_architectures"):
        parse_benchmark_file(edited_definition(tmp_path, "rgat", rocm_on_nvidia), "rgat")

    # a variant may be the other vendor's image (llama31_8b's Dockerfile.mi325), but one vendor's only
    def both_vendors(entry):
        entry["full"]["container"]["variants"]["h100"]["targets"] = {
            "cpu_architectures": ["x86_64"],
            "rocm_targets": ["gfx942"],
            "cuda_architectures": ["9.0"],
            "source": "x",
        }

    with pytest.raises(ConfigError, match=r"full\.container\.variants\.h100\.targets: declare either cuda_architectures .* or rocm_targets"):
        parse_benchmark_file(edited_definition(tmp_path, "rgat", both_vendors), "rgat")
    assert registry.load_benchmark("llama31_8b").full.container.variants["mi325"].accelerator == "amd"

    def no_source(entry):
        del entry["full"]["container"]["targets"]["source"]

    with pytest.raises(ConfigError, match="source"):
        parse_benchmark_file(edited_definition(tmp_path, "dlrmv4", no_source), "dlrmv4")
