"""Registries under config/ and the rules read from mlperf-logging."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlperf_logging import benchmark_meta

from mlperf_wf import mlperf_rules as rules
from mlperf_wf.errors import ConfigError
from mlperf_wf.registry import load_benchmark, load_dataset

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = sorted(p.stem for p in (ROOT / "config" / "benchmarks").glob("*.yaml"))
DATASETS = sorted(p.stem for p in (ROOT / "config" / "datasets").glob("*.yaml"))


@pytest.mark.parametrize("name", BENCHMARKS)
def test_benchmark_definitions_load_and_agree_with_mlperf_logging(name):
    bench = load_benchmark(name, ROOT)
    listed = [
        ruleset
        for ruleset in ("4.0.0", "4.1.0", "5.0.0", "5.1.0", "6.0.0", "6.1.0")
        if bench.submission_benchmark in benchmark_meta.get_allowed_benchmarks("training", ruleset)
    ]
    assert bench.rulesets == listed
    for dataset_id in bench.datasets.values():
        load_dataset(dataset_id, ROOT)


@pytest.mark.parametrize("dataset_id", DATASETS)
def test_dataset_definitions_point_at_r2_metadata(dataset_id):
    dataset = load_dataset(dataset_id, ROOT)
    if dataset.source.protocol == "external":
        assert dataset.source.instructions and dataset.source.uri is None
        return
    assert dataset.source.uri.startswith("https://") and dataset.source.uri.endswith(".uri")
    assert dataset.source.md5 == dataset.source.uri.removesuffix(".uri") + ".md5"
    assert all(len(f.md5) == 32 for f in dataset.files if f.md5)


def test_llama2_target_and_run_count_come_from_mlperf_logging():
    target = rules.quality_target("llama2_70b_lora", "6.1.0")
    assert (target.comparison, target.value) == ("<=", 0.925)
    assert target.reached(0.925) and not target.reached(0.926)
    assert rules.required_runs("llama2_70b_lora") == 10


def test_unknown_ruleset_and_retired_benchmark_are_clear_errors():
    with pytest.raises(ConfigError, match=r"ruleset '9\.9\.9' is not known to mlperf-logging"):
        rules.check_benchmark_in_ruleset("llama2_70b_lora", "9.9.9")
    with pytest.raises(ConfigError, match=r"ruleset 6\.1\.0: benchmark 'rgat' is not part of this round; allowed: "):
        rules.check_benchmark_in_ruleset("rgat", "6.1.0")


def test_unknown_benchmark_lists_known_ones():
    with pytest.raises(ConfigError, match=r"benchmark 'bert' is not defined; known benchmarks: llama2_70b_lora"):
        load_benchmark("bert", ROOT)


def edited_copy(tmp_path, kind: str, name: str, old: str, new: str):
    """A config/ under tmp_path whose <kind>/<name>.yaml has ``old`` replaced by ``new``."""
    (tmp_path / "config" / kind).mkdir(parents=True)
    text = (ROOT / "config" / kind / f"{name}.yaml").read_text()
    assert old in text
    (tmp_path / "config" / kind / f"{name}.yaml").write_text(text.replace(old, new))
    return tmp_path


def test_bad_definition_names_file_key_and_value(tmp_path):
    root = edited_copy(tmp_path, "datasets", "scrolls_gov_report_8k", "kind: dataset", "kind: weights")
    with pytest.raises(ConfigError, match=r"scrolls_gov_report_8k\.yaml: kind: .*'weights'"):
        load_dataset("scrolls_gov_report_8k", root)


def test_unknown_command_placeholder_is_rejected(tmp_path):
    root = edited_copy(tmp_path, "benchmarks", "llama2_70b_lora", '"{seed}"', '"{sed}"')
    with pytest.raises(ConfigError, match=r"unknown placeholder \{sed\}"):
        load_benchmark("llama2_70b_lora", root)


def test_definition_must_match_its_file_name(tmp_path):
    root = edited_copy(tmp_path, "datasets", "scrolls_gov_report_8k", "id: scrolls_gov_report_8k", "id: govreport")
    with pytest.raises(ConfigError, match=r"declares 'govreport' but the file is named 'scrolls_gov_report_8k'"):
        load_dataset("scrolls_gov_report_8k", root)


def test_latest_ruleset_is_each_benchmarks_newest_round():
    llama, rgat = load_benchmark("llama2_70b_lora", ROOT), load_benchmark("rgat", ROOT)
    assert rules.resolve_ruleset("llama2_70b_lora", llama.rulesets, "latest") == "6.1.0"
    assert rules.resolve_ruleset("rgat", rgat.rulesets, "latest") == "5.1.0"
    assert rules.resolve_ruleset("rgat", rgat.rulesets, "5.0.0") == "5.0.0"
    with pytest.raises(ConfigError, match=r"ruleset 6\.0\.0: benchmark 'rgat' is not part of this round"):
        rules.resolve_ruleset("rgat", rgat.rulesets, "6.0.0")
    target = rules.quality_target("rgat", "5.1.0")
    assert (target.comparison, target.value) == (">=", 0.72) and rules.required_runs("rgat") == 10


def test_benchmark_without_a_checkpoint_cannot_mount_or_use_one(tmp_path):
    import yaml

    (tmp_path / "config" / "benchmarks").mkdir(parents=True)
    entry = yaml.safe_load((ROOT / "config/benchmarks/rgat.yaml").read_text())
    entry["full"]["command"] = [*entry["full"]["command"], "--model_path", "{checkpoint}"]
    (tmp_path / "config/benchmarks/rgat.yaml").write_text(yaml.safe_dump(entry))
    with pytest.raises(ConfigError, match=r"full\.command uses unknown placeholder \{checkpoint\}"):
        load_benchmark("rgat", tmp_path)
    entry = yaml.safe_load((ROOT / "config/benchmarks/rgat.yaml").read_text())
    entry["full"]["mounts"]["checkpoint"] = "/ckpt"
    (tmp_path / "config/benchmarks/rgat.yaml").write_text(yaml.safe_dump(entry))
    with pytest.raises(ConfigError, match=r"full\.mounts has \['checkpoint', 'data', 'results'\]; this benchmark needs exactly \['data', 'results'\]"):
        load_benchmark("rgat", tmp_path)
