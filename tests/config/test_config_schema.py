"""One typed config model (``mlperf_wf.config.workflow_config``) is the single source of every workflow setting: the schema,
``config/config.yaml`` and ``config/README.md``'s table are generated from it and fail here when they drift; the
schema Snakemake validates with and the model accept and refuse the same configs; nothing in the package finds its
files through ``__file__``'s parents."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from mlperf_wf.config import checkout, workflow_config
from mlperf_wf.config.config_check import check_config
from mlperf_wf.config.workflow_config import WorkflowConfig
from mlperf_wf.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def properties(schema: dict, prefix: str = ""):
    for key, spec in schema.get("properties", {}).items():
        yield f"{prefix}{key}", spec
        if "object" in spec.get("type", ()) and "properties" in spec:
            yield from properties(spec, f"{prefix}{key}.")


def test_every_key_has_description_and_default_and_is_documented():
    schema = yaml.safe_load((ROOT / "workflow/schemas/config.schema.yaml").read_text())
    readme = (ROOT / "config/README.md").read_text()
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    names = [name for name, _ in properties(schema)]
    assert {"benchmarks", "submission.platform", "power.interval_ms", "full_geometry"} <= set(names)
    for name, spec in properties(schema):
        assert spec.get("description"), f"{name} has no description"
        assert "default" in spec, f"{name} has no default"
        assert f"`{name}`" in readme, f"{name} is not in config/README.md"
        value = config
        for part in name.split("."):
            value = value[part]
        assert value == spec["default"], f"config.yaml {name}={value!r} differs from the schema default {spec['default']!r}"


def test_the_generated_files_are_what_the_model_makes():
    assert workflow_config.stale_files(ROOT) == [], "run `mlperf-wf config-files` after changing src/mlperf_wf/config/workflow_config.py"


@pytest.mark.parametrize(
    ("path", "edit"),
    [
        ("config/config.yaml", lambda text: text.replace("runs: 0", "runs: 3")),
        ("workflow/schemas/config.schema.yaml", lambda text: text.replace("default: 1234", "default: 42")),
        ("config/README.md", lambda text: text.replace("| `seed_base` | `1234` |", "| `seed_base` | `42` |")),
    ],
)
def test_a_generated_file_edited_by_hand_is_found(tmp_path, path, edit):
    for part in (workflow_config.CONFIG_FILE, workflow_config.SCHEMA_FILE, workflow_config.README_FILE):
        (tmp_path / part).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / part, tmp_path / part)
    edited = tmp_path / path
    before = edited.read_text()
    edited.write_text(edit(before))
    assert edited.read_text() != before
    assert workflow_config.stale_files(tmp_path) == [edited]


def test_the_readme_without_its_markers_is_one_line(tmp_path):
    (tmp_path / "config").mkdir()
    (tmp_path / "config/README.md").write_text("# Configuration\n")
    with pytest.raises(ConfigError, match=r"config/README.md: the generated table's markers are missing"):
        workflow_config.generated_files(tmp_path)


ACCEPTED = [
    {},
    {"runs": 3, "submission": {"platform": "dgx_h100"}},
    {"full_geometry": {"gpt3": {"nodes": "2", "walltime_minutes": 720}}},  # --config passes nested values as text
    {"full_scratch": {"llama31_8b": {"npy_index": "50.5"}}},
    {"power": {"enabled": "true", "interval_ms": "500", "conversion_eff": 0.9}},
    {"full_container": {"bert": {"digest": "sha256:" + "a" * 64}}},
    {"full_arguments": {"bert": {"--learning_rate": "5e-4", "--max_steps": 800}}},
]
REFUSED = [
    {"rnus": 3},
    {"runs": -1},
    {"scale": "huge"},
    {"benchmarks": []},
    {"submission": {"status": "secret"}},
    {"full_geometry": {"gpt3": {"nodes": 0}}},
    {"full_geometry": {"gpt3": {"nodez": 2}}},
    {"full_container": {"bert": {"digest": "sha256:abc"}}},
    {"power": {"interval_ms": 5}},
    {"env_passthrough": ["NOT-A-NAME"]},
]


@pytest.mark.parametrize("config", ACCEPTED, ids=lambda c: json.dumps(c)[:40])
def test_the_schema_and_the_model_accept_the_same_configs(config):
    check_config(config)
    parsed = WorkflowConfig.parse(config)
    assert parsed.filled()["seed_base"] == config.get("seed_base", 1234)


@pytest.mark.parametrize("config", REFUSED, ids=lambda c: json.dumps(c)[:40])
def test_the_schema_and_the_model_refuse_the_same_configs(config):
    with pytest.raises(ConfigError) as by_schema:
        check_config(config)
    with pytest.raises(ConfigError) as by_model:
        WorkflowConfig.parse(config)
    for err in (by_schema.value, by_model.value):
        assert "\n" not in str(err) and str(err).startswith("config")


def test_text_numbers_become_numbers_and_every_default_is_filled():
    parsed = WorkflowConfig.parse({"full_geometry": {"gpt3": {"nodes": "2"}}, "power": {"enabled": "true"}})
    assert parsed.full_geometry["gpt3"].nodes == 2 and parsed.power.enabled is True
    values = WorkflowConfig.parse({"full_hyperparameters": {"llama31_8b": {"global_batch_size": 64, "opt_base_learning_rate": "8e-4"}}})
    # a count stays a whole number; text that reads as a number is that number (YAML reads 8e-4 as text)
    assert values.full_hyperparameters["llama31_8b"] == {"global_batch_size": 64, "opt_base_learning_rate": 8e-4}
    assert type(values.full_hyperparameters["llama31_8b"]["global_batch_size"]) is int
    filled = parsed.filled()
    assert filled["submission"] == {"org": "mlperf-workflow", "platform": "cpu-tiny", "status": "research"}
    assert set(filled) == set(WorkflowConfig.model_fields)


def test_no_module_finds_files_through_its_own_path():
    """A regular (non-editable) install moves the package into site-packages: the checkout is found by
    ``checkout.project_root`` and the schema is made from the model, never ``Path(__file__).parents[N]``."""
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted((ROOT / "src/mlperf_wf").rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"__file__\)?(\.resolve\(\))?\.parents\[", line)
    ]
    assert offenders == []


def test_the_checkout_is_named_found_above_the_folder_or_the_editable_source(tmp_path, monkeypatch):
    monkeypatch.delenv(checkout.ENVIRONMENT, raising=False)
    project = tmp_path / "project"
    (project / "workflow").mkdir(parents=True)
    (project / "workflow/Snakefile").write_text("")
    (project / "results/tiny").mkdir(parents=True)
    assert checkout.project_root(project / "results/tiny") == project.resolve()
    elsewhere = tmp_path / "scratch"
    elsewhere.mkdir()
    assert checkout.project_root(elsewhere) == ROOT  # this checkout is installed editable (make test's venv)
    monkeypatch.setenv(checkout.ENVIRONMENT, str(project))
    assert checkout.project_root(elsewhere) == project
    monkeypatch.setenv(checkout.ENVIRONMENT, str(elsewhere))
    with pytest.raises(ConfigError, match=f"{checkout.ENVIRONMENT}={elsewhere}: no workflow/Snakefile there"):
        checkout.project_root()
    monkeypatch.delenv(checkout.ENVIRONMENT)
    monkeypatch.setattr(checkout, "_editable_source", lambda: None)
    with pytest.raises(ConfigError, match=f"no workflow/Snakefile in {elsewhere} or above it"):
        checkout.project_root(elsewhere)


def test_a_run_outside_any_checkout_records_an_unknown_commit_instead_of_failing(tmp_path, monkeypatch):
    """`mlperf-wf provenance` on a node where the package is installed and no checkout is found: the run's provenance
    says the commit is unknown; the run is not failed for it."""
    from mlperf_wf import cli

    monkeypatch.delenv(checkout.ENVIRONMENT, raising=False)
    monkeypatch.setattr(checkout, "_editable_source", lambda: None)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "provenance.json"
    assert cli.main(["--root", str(tmp_path), "provenance", "--out", str(out), "--scale", "full", "--launcher", "local", "--command=true"]) == 0
    assert json.loads(out.read_text())["workflow_git"] == {"commit": None, "dirty": None, "local_changes": None}
