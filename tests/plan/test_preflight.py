"""Preflight (mlperf_wf.plan.preflight): every problem of a full-scale plan at once, from `mlperf-wf preflight` and from
Snakemake before anything is queued; each kind of problem, and the train job that still fails with its reason in its
own log."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from mlperf_wf import cli
from mlperf_wf.acquire import download, hub
from mlperf_wf.config import registry
from mlperf_wf.config.workflow_config import WorkflowConfig
from mlperf_wf.errors import ConfigError
from mlperf_wf.plan import plan as planning
from mlperf_wf.plan import preflight
from tests.workflow.test_workflow import job_counts, new_workdir, snakemake_argv, snakemake_env

ROOT = Path(__file__).resolve().parents[2]
DEFAULTS = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
DIGEST = "sha256:" + "ab" * 32
CREDENTIALS = ("MLPERF_WF_CF_ACCESS_CLIENT_ID", "MLPERF_WF_CF_ACCESS_CLIENT_SECRET", "MLPERF_WF_CF_ACCESS_TOKEN", "HF_TOKEN")
SYSTEM = "dgx-example"
"""A platform with a system description in the test's workflow folder."""


@pytest.fixture
def workdir(tmp_path, monkeypatch) -> Path:
    """A workflow folder (its own copy of config/, with a description of SYSTEM) as the current folder."""
    folder = new_workdir(tmp_path / "campaign")
    (folder / "config" / "systems" / f"{SYSTEM}.yaml").write_text((ROOT / "config" / "systems" / "cpu-tiny.yaml").read_text())
    monkeypatch.chdir(folder)
    for name in CREDENTIALS:
        monkeypatch.delenv(name, raising=False)
    return folder


def make_plan(workdir: Path, **changes) -> planning.Plan:
    config = {**DEFAULTS, "scale": "full", **changes}
    return planning.Plan(WorkflowConfig.parse(config), project_root=ROOT, workdir=workdir)


def fine_plan(workdir: Path, name: str, **changes) -> planning.Plan:
    """A plan with nothing wrong for ``name`` but what ``changes`` break: a real platform, its image pinned."""
    settings = {"submission": {**DEFAULTS["submission"], "platform": SYSTEM}, "full_container": {name: {"digest": DIGEST}}}
    return make_plan(workdir, **{**settings, **changes})


def kinds(problems: list[preflight.Problem]) -> list[tuple[str, str]]:
    return [(problem.kind, problem.subject) for problem in problems]


def test_a_fine_plan_has_no_problem(workdir):
    # rgat: public data (no credentials), no scratch area
    assert preflight.plan_problems(fine_plan(workdir, "rgat"), ["rgat"], environ={}) == []


def test_the_tiny_platform_and_a_platform_without_a_system_description(workdir):
    tiny = fine_plan(workdir, "rgat", submission={**DEFAULTS["submission"], "platform": "cpu-tiny"})
    assert kinds(preflight.plan_problems(tiny, ["rgat"], environ={})) == [("platform", "config")]
    undescribed = fine_plan(workdir, "rgat", submission={**DEFAULTS["submission"], "platform": "dgx-nowhere"})
    (problem,) = preflight.plan_problems(undescribed, ["rgat"], environ={})
    assert problem.kind == "platform" and "config/systems/dgx-nowhere.yaml" in problem.message


def test_an_unpinned_image_except_with_the_local_launcher(workdir):
    plan = fine_plan(workdir, "rgat", full_container={})
    (problem,) = preflight.plan_problems(plan, ["rgat"], environ={})
    assert (problem.kind, problem.subject) == ("image", "rgat") and "full_container: {rgat: {digest: 'sha256:...'}}" in problem.message
    assert preflight.plan_problems(fine_plan(workdir, "rgat", full_container={}, launcher="local"), ["rgat"], environ={}) == []


def test_a_ruleset_the_benchmark_is_not_part_of(workdir):
    plan = fine_plan(workdir, "rgat", ruleset="6.1.0")  # rgat was retired after 5.1.0
    (problem,) = preflight.plan_problems(plan, ["rgat"], environ={})
    assert (problem.kind, problem.subject) == ("ruleset", "rgat") and "not part of this round" in problem.message


def test_credentials_only_where_the_catalog_requires_them_and_only_for_data_still_to_download(workdir):
    name = "llama2_70b_lora"  # both datasets are for MLCommons members (credentials_required)
    plan = fine_plan(workdir, name)
    members = [("credentials", "scrolls_gov_report_8k"), ("credentials", "llama2_70b_fused_qkv")]
    assert kinds(preflight.plan_problems(plan, [name], environ={})) == members
    assert kinds(preflight.plan_problems(plan, [name], environ={"MLPERF_WF_CF_ACCESS_CLIENT_ID": "id"})) == members  # half a token
    service_token = {"MLPERF_WF_CF_ACCESS_CLIENT_ID": "id", "MLPERF_WF_CF_ACCESS_CLIENT_SECRET": "secret"}
    assert preflight.plan_problems(plan, [name], environ=service_token) == []
    assert preflight.plan_problems(plan, [name], environ={"MLPERF_WF_CF_ACCESS_TOKEN": "token"}) == []
    # downloaded, or verified: nothing more to fetch
    (workdir / plan.dataset_dir("scrolls_gov_report_8k")).mkdir(parents=True)
    (workdir / plan.verified_record("llama2_70b_fused_qkv")).parent.mkdir(parents=True)
    (workdir / plan.verified_record("llama2_70b_fused_qkv")).write_text("{}")
    assert preflight.plan_problems(plan, [name], environ={}) == []
    # the catalog marks no public dataset: rgat's IGBH downloads without a token
    assert not registry.load_dataset("igbh_full").source.credentials_required


def test_a_gated_hub_repository_needs_hf_token(workdir):
    path = workdir / "config" / "datasets" / "r2e_gym_subset.yaml"  # a site's own copy of the entry takes precedence
    entry = yaml.safe_load(registry.dataset_file("r2e_gym_subset").read_text())
    entry["source"]["credentials_required"] = True
    path.write_text(yaml.safe_dump(entry))
    plan = fine_plan(workdir, "qwen35_397b_grpo")
    problems = preflight.plan_problems(plan, [], ["r2e_gym_subset"], environ={})
    assert kinds(problems) == [("credentials", "r2e_gym_subset")] and "export HF_TOKEN" in problems[0].message
    assert preflight.plan_problems(plan, [], ["r2e_gym_subset"], environ={"HF_TOKEN": "hf_x"}) == []


def test_data_the_workflow_does_not_download_must_be_in_place(workdir):
    plan = fine_plan(workdir, "llama31_405b")
    problems = preflight.plan_problems(plan, [], ["llama31_405b_checkpoint"], environ={})  # external: members-only, by hand
    assert kinds(problems) == [("data", "llama31_405b_checkpoint")] and "resources/full/datasets/llama31_405b_checkpoint" in problems[0].message
    fetched = preflight.plan_problems(plan, [], ["openimages_mlperf"], environ={})  # fiftyone: the reference's fetch first
    assert kinds(fetched) == [("data", "openimages_mlperf")]
    (workdir / planning.FETCHED_DIR / "openimages_mlperf").mkdir(parents=True)
    assert preflight.plan_problems(plan, [], ["openimages_mlperf"], environ={}) == []


def test_scratch_below_the_declared_need(workdir):
    name = "gpt_oss_20b"  # one scratch area (Megatron's index cache, 2 GB declared)
    assert preflight.plan_problems(fine_plan(workdir, name), [name], environ={}) == []
    plan = fine_plan(workdir, name, full_scratch={name: {"megatron_index_cache": 10**9}})
    (problem,) = preflight.plan_problems(plan, [name], environ={})
    assert (problem.kind, problem.subject) == ("scratch", name) and "need 1e+09 GB (megatron_index_cache 1e+09 GB)" in problem.message
    assert f"{workdir}/results/{name}/runs" in problem.message
    with pytest.raises(ConfigError, match=r"full_scratch.gpt_oss_20b: \['index'\] names no scratch area of its definition"):
        fine_plan(workdir, name, full_scratch={name: {"index": 1}})


def test_the_one_off_job_that_makes_an_input_needs_its_scratch_too_until_it_has_made_it(workdir):
    """qwen35_397b_grpo's conversion job writes the runs' scratch areas in its own folder under resources/ (maybe
    another filesystem than results/): checked while the conversion is still to make, not once it is there."""
    name = "qwen35_397b_grpo"
    plan = fine_plan(workdir, name, full_scratch={name: {"hf_cache": 10**9}})
    messages = [problem.message for problem in preflight.plan_problems(plan, [name], environ={}) if problem.kind == "scratch"]
    job = (
        "the scratch areas of the one-off job that makes qwen35_397b_megatron_checkpoint need 1e+09 GB "
        f"(logs 10 GB, checkpoint_dir 1 GB, hf_cache 1e+09 GB) under {workdir}/resources/full/made_in_image/qwen35_397b_megatron_checkpoint"
    )
    assert len(messages) == 2 and messages[0].startswith("each run's scratch areas need") and messages[1].startswith(job), messages
    (workdir / plan.dataset_dir("qwen35_397b_megatron_checkpoint")).mkdir(parents=True)
    assert len([p for p in preflight.plan_problems(plan, [name], environ={}) if p.kind == "scratch"]) == 1


def test_every_problem_at_once_also_when_a_ruleset_stops_the_plan(workdir):
    config = {**DEFAULTS, "benchmarks": ["rgat", "llama2_70b_lora"], "ruleset": "6.1.0"}
    with pytest.raises(ConfigError, match="rgat"):
        planning.load({**config, "scale": "full"}, project_root=ROOT, workdir=workdir)
    problems = preflight.config_problems(config, ROOT, workdir, environ={})
    assert kinds(problems) == [
        ("platform", "config"),
        ("ruleset", "rgat"),
        ("image", "rgat"),
        ("image", "llama2_70b_lora"),
        ("credentials", "scrolls_gov_report_8k"),
        ("credentials", "llama2_70b_fused_qkv"),
    ]


def test_the_train_jobs_own_check_reports_both_problems(capsys):
    assert kinds(preflight.run_problems("rgat", "reg/rgat:ref", "cpu-tiny")) == [("platform", "rgat"), ("image", "rgat")]
    assert preflight.run_problems("rgat", f"reg/rgat:ref@{DIGEST}", SYSTEM) == []
    assert preflight.run_problems("rgat", None, SYSTEM) == []  # the local launcher has no image
    assert cli.main(["preflight", "--benchmark", "rgat", "--image", "reg/rgat:ref", "--platform", "cpu-tiny"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mlperf-wf: error: preflight: 2 problems in the train job of rgat:\n  - rgat: submission.platform is 'cpu-tiny'")
    assert "\n  - rgat: the container image 'reg/rgat:ref' is not pinned" in err


def test_the_cli_checks_the_configs_full_scale_plan(workdir, capsys):
    assert cli.main(["preflight"]) == 2  # the default config: llama2_70b_lora
    err = capsys.readouterr().err
    assert err.startswith("mlperf-wf: error: preflight: 4 problems in the full-scale plan of llama2_70b_lora:\n")
    assert [line.split(":")[0] for line in err.splitlines()[1:]] == [
        "  - config",
        "  - llama2_70b_lora",
        "  - scrolls_gov_report_8k",
        "  - llama2_70b_fused_qkv",
    ]
    configfile = workdir / "site.yaml"
    configfile.write_text(yaml.safe_dump({"submission": {"platform": SYSTEM}, "full_container": {"rgat": {"digest": DIGEST}}}))
    assert cli.main(["preflight", "--benchmark", "rgat", "--configfile", str(configfile)]) == 0
    assert capsys.readouterr().out == "preflight: no problem in the full-scale plan of rgat\n"
    # --config after --configfile, as Snakemake applies them; nested mappings merge
    assert cli.main(["preflight", "--benchmark", "rgat", "--configfile", str(configfile), "--config", "ruleset=6.1.0"]) == 2
    assert "rgat: ruleset 6.1.0: benchmark 'rgat' is not part of this round" in capsys.readouterr().err


def test_the_variables_are_those_the_downloaders_read():
    assert {var for group in preflight.R2_CREDENTIALS for var in group} == set(download.AUTH_ENV.values())
    assert preflight.HUB_CREDENTIALS == hub.TOKEN_ENV
    assert preflight.TINY_PLATFORM == planning.TINY_PLATFORM


# ---- through Snakemake -------------------------------------------------------------------------------------------

TARGET = "results/llama2_70b_lora/report.json"
PROBLEMS = [
    "  - config: submission.platform is 'cpu-tiny'",
    "  - llama2_70b_lora: the container image 'mlperf-workflow/llama2_70b_lora:ref-aa344c7-pytorch24.01-patches1' is not pinned",
    "  - llama2_70b_fused_qkv: to download it, MLCommons R2 needs access",
    "  - scrolls_gov_report_8k: to download it, MLCommons R2 needs access",
]


def snakemake_without_credentials(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {key: value for key, value in snakemake_env().items() if key not in CREDENTIALS}
    return subprocess.run(snakemake_argv(workdir, *args), capture_output=True, text=True, env=env, check=False)


def listed(output: str, heading: str) -> list[str]:
    """The problem lines under ``heading`` (their first words)."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if heading in line) + 1
    block = [line for line in lines[start : start + len(PROBLEMS)] if line.startswith("  - ")]
    return sorted(next(p for p in PROBLEMS if line.startswith(p)) for line in block if any(line.startswith(p) for p in PROBLEMS))


def test_a_full_scale_dry_run_renders_the_plan_and_lists_every_problem_a_real_run_refuses_on(tmp_path):
    workdir = new_workdir(tmp_path / "campaign")
    dry = snakemake_without_credentials(workdir, "-n", TARGET, "--config", "scale=full")
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert job_counts(dry.stdout)["train"] == 10 and dry.stdout.count("rule train:") == 10
    heading = "WARNING: mlperf-wf preflight: 4 problems in the full-scale plan of llama2_70b_lora:"
    assert heading in dry.stderr and listed(dry.stderr, heading) == sorted(PROBLEMS)
    assert "A run without -n refuses to start until they are fixed." in dry.stderr

    real = snakemake_without_credentials(workdir, "--cores", "1", TARGET, "--config", "scale=full")
    assert real.returncode != 0
    output = real.stdout + real.stderr
    heading = "preflight: 4 problems in the full-scale plan of llama2_70b_lora:"
    assert heading in output and listed(output, heading) == sorted(PROBLEMS)
    assert "No job was submitted" in output and "WARNING: mlperf-wf preflight" not in output  # said once
    assert not (workdir / "logs").exists() and not (workdir / "resources").exists() and not (workdir / "results").exists()


def test_a_train_job_that_still_fails_says_why_in_its_own_log(tmp_path):
    """Skipping the plan-time check (`--no-hooks`), the job's own preflight stops it: its reason is in the job's log."""
    workdir = new_workdir(tmp_path / "campaign")
    plan = planning.Plan(WorkflowConfig.parse({**DEFAULTS, "scale": "full"}), ROOT, workdir=workdir)
    name = "llama2_70b_lora"
    # Everything the train job reads, made in the order the rules would (Snakemake compares modification times).
    datasets = [*plan.bench(name).roles_for("prepare").values(), *plan.bench(name).roles_for("train").values()]
    for dataset_id in dict.fromkeys(datasets):
        (workdir / plan.dataset_dir(dataset_id)).mkdir(parents=True)
    for dataset_id in dict.fromkeys(datasets):
        (workdir / plan.verified_record(dataset_id)).parent.mkdir(parents=True, exist_ok=True)
        (workdir / plan.verified_record(dataset_id)).write_text("{}")
    for shard in plan.of(name).shard_dirs():
        (workdir / shard).mkdir(parents=True)
    (workdir / plan.of(name).prepared_dataset()).mkdir(parents=True)
    target = plan.of(name).run_file(0, "result.txt")
    proc = snakemake_without_credentials(
        workdir, "--cores", "1", "--no-hooks", target, "--config", "scale=full", "--allowed-rules", "train"
    )  # fmt: skip
    assert proc.returncode != 0
    log = (workdir / "logs" / "full" / "train" / name / "0.log").read_text()
    said = [line for line in log.splitlines(keepends=True) if "mlperf-wf check-prepared" not in line and " INFO mlperf_wf: " not in line]
    log = "".join(said)  # what the job said after its prepared-tree check (which only recorded the tree's stamps)
    assert log.startswith(f"mlperf-wf: error: preflight: 2 problems in the train job of {name}:\n"), log
    assert f"  - {name}: submission.platform is 'cpu-tiny'" in log and "is not pinned" in log
    assert "page cache" not in log and not (workdir / target).exists(), "nothing after the refusal ran"


def test_jobs_read_the_snakefile_without_the_preflight(tmp_path):
    """Inside a job (Snakemake's remote mode on a node) and at tiny scale there is nothing to track."""
    plan = planning.Plan(WorkflowConfig.parse({**DEFAULTS, "scale": "full"}), ROOT, workdir=tmp_path)
    assert preflight.tracker(plan, main_process=False) is None
    assert preflight.tracker(planning.Plan(WorkflowConfig.parse(DEFAULTS), ROOT, workdir=tmp_path), main_process=True) is None
    tracker = preflight.tracker(plan, main_process=True)
    tracker.saw_benchmark("rgat")
    problems, what = tracker.problems([("train", {"benchmark": "llama2_70b_lora", "run": "0"}), ("report", {"benchmark": "rgat"})])
    assert what == "the full-scale plan of llama2_70b_lora" and ("image", "llama2_70b_lora") in kinds(problems)
    assert json.dumps([str(problem) for problem in problems])  # plain lines
    assert tracker.problems()[1] == "the full-scale plan of rgat"


@pytest.mark.parametrize(("name", "nodes", "jobs"), [("gpt3", 8, {"train": 3}), ("qwen35_397b_grpo", 64, {"train": 3, "make_in_image": 1})])
def test_a_geometry_the_launcher_refuses_is_one_preflight_line_not_an_input_function_error(tmp_path, name, nodes, jobs):
    """gpt3 runs on 8 nodes, qwen35_397b_grpo and the one-off job that converts its checkpoint on 64; launcher docker
    runs on one. The dry run still renders the plan and lists the problem with the others (it used to stop in a
    Snakemake InputFunctionException block with a traceback); a real run refuses."""
    workdir = new_workdir(tmp_path / "geometry")
    dry = snakemake_without_credentials(workdir, "-n", f"results/{name}/report.json", "--config", "scale=full", "launcher=docker")
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert "InputFunctionException" not in dry.stdout + dry.stderr and "Traceback" not in dry.stdout + dry.stderr
    assert f"  - {name}: {nodes} nodes need the pyxis launcher; docker runs on one node (set launcher: pyxis" in dry.stderr
    assert {job: job_counts(dry.stdout)[job] for job in jobs} == jobs
    real = snakemake_without_credentials(workdir, "--cores", "1", f"results/{name}/report.json", "--config", "scale=full", "launcher=docker")
    assert real.returncode != 0 and f"{nodes} nodes need the pyxis launcher" in real.stdout + real.stderr
    assert "InputFunctionException" not in real.stdout + real.stderr and not (workdir / "logs").exists()


def test_a_literal_global_batch_that_the_gpus_cannot_split_is_refused(workdir):
    """gpt_oss_20b's command sets GBS 16 literally: 64 GPUs make no whole micro batch of it (Megatron stops at start-up),
    so the preflight refuses 8 nodes in one line with what does fit; 2 nodes (16 GPUs) plan."""
    wide = fine_plan(workdir, "gpt_oss_20b", full_geometry={"gpt_oss_20b": {"nodes": 8, "gpus_per_node": 8}})
    batch = [problem for problem in preflight.plan_problems(wide, ["gpt_oss_20b"], datasets=[], environ={}) if problem.kind == "batch"]
    assert [str(problem) for problem in batch] == [
        "gpt_oss_20b: its command's literal GBS 16 cannot be split over 64 data-parallel replicas (64 GPUs, 1 per replica): "
        "run it on at most 16 GPUs (full_geometry.gpt_oss_20b), or set a larger GBS through full_arguments (a deviation from the RCP)"
    ]
    fits = fine_plan(workdir, "gpt_oss_20b", full_geometry={"gpt_oss_20b": {"nodes": 2, "gpus_per_node": 8}})
    assert [p for p in preflight.plan_problems(fits, ["gpt_oss_20b"], datasets=[], environ={}) if p.kind == "batch"] == []
