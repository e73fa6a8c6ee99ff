"""The plan (mlperf_wf.plan.plan): golden command lines and resources of every benchmark x launcher x geometry,
the scale separation, and the checks a configuration gets when the workflow is parsed.

Golden files live in ``tests/benchmarks/<benchmark>/golden/*.json``; after an intended change of a plan,
regenerate them with ``MLPERF_WF_UPDATE_GOLDEN=1 pytest tests/plan/test_plan.py`` and review the diff.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from mlperf_wf.config import registry
from mlperf_wf.config.workflow_config import WorkflowConfig
from mlperf_wf.errors import ConfigError
from mlperf_wf.plan import launch
from mlperf_wf.plan import plan as planning
from tests.conftest import reference_source

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = "golden"
"""A benchmark's golden plans: ``tests/benchmarks/<name>/golden/<golden name>.json``, beside its tests."""
SPEC_GOLDEN = "spec"
"""Each golden job's spec (``Plan.job_spec``): ``tests/benchmarks/<name>/golden/spec/``, at the same keys as its command."""
DEFAULTS = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
LAUNCHERS = ("local", "docker", "apptainer", "pyxis")
NODE_COUNTS = (1, 2)


@pytest.fixture
def workdir(tmp_path, monkeypatch) -> Path:
    """A workflow directory (its own config/) as the current folder, as Snakemake runs jobs."""
    (tmp_path / "config").symlink_to(ROOT / "config")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def make_plan(workdir: Path, **changes) -> planning.Plan:
    config = {**DEFAULTS, **changes}
    return planning.Plan(WorkflowConfig.parse(config), project_root=Path("/project"), workdir=workdir)


def rendered(name: str, workdir: Path, specs: dict | None = None) -> dict:
    """Everything the plan says about one benchmark, with the work folder written as {workdir}; each job's spec goes to
    ``specs`` where given, at the same keys as its command."""
    out: dict = {}
    specs = {} if specs is None else specs
    tiny = make_plan(workdir)
    specs["tiny"] = {"run_3": {}}
    out["tiny"] = {
        "preprocess_inputs": tiny.of(name).preprocess_inputs(tiny.of(name).shard_names()[0]),
        "preprocess_args": tiny.of(name).preprocess_args(tiny.of(name).shard_names()[0]),
        "shards": tiny.of(name).shard_names(),
        "train_inputs": tiny.of(name).train_inputs(),
        "run_3": {launcher: planned_run(make_plan(workdir, launcher=launcher), name, specs["tiny"]["run_3"], launcher) for launcher in ("local", "docker")},
    }
    full = make_plan(workdir, scale="full")
    out["full"] = {
        "download": {dataset: full.download_source_args(dataset) for dataset in sorted(set(full.bench(name).roles_for("prepare").values()))},
        "shards": full.of(name).shard_names(),
        "shard_resources": {shard: full.of(name).shard_resources(shard) for shard in full.of(name).shard_names()},
        "train_inputs": full.of(name).train_inputs(),
    }
    specs["full"] = {}
    pinned = {name: {"image": f"registry.example:5000/mlperf/{name}:ref-1", "digest": "sha256:" + "ab" * 32}}
    for launcher in LAUNCHERS:
        for nodes in NODE_COUNTS:
            chosen = make_plan(workdir, scale="full", launcher=launcher, full_geometry={name: {"nodes": nodes}}, full_container=pinned)
            out["full"][f"run_3/{launcher}/{nodes}_node"] = planned_run(chosen, name, specs["full"], f"run_3/{launcher}/{nodes}_node")
            out["full"].update(image_jobs(chosen, name, f"{launcher}/{nodes}_node", specs["full"]))
    return portable(out, workdir)


def planned_run(plan: planning.Plan, name: str, specs: dict, key: str) -> dict:
    """Run 3 of ``name``'s train job as the rules read it (or the one line refusing it); its spec goes to ``specs[key]``."""
    try:
        job = plan.of(name).train_job(3).as_dict()
    except ConfigError as err:
        return {"refused": str(err)}
    specs[key] = plan.of(name).job_spec(3).model_dump(mode="json")
    return job


def image_jobs(plan: planning.Plan, name: str, key: str, specs: dict | None = None) -> dict:
    """The one-off jobs of ``name``'s image that make an input (``full.made_in_image``), with what they read; keys
    ``image_job/<dataset>/<key>`` (none for a benchmark whose runs read only published data); their specs go to
    ``specs`` where given."""
    out = {}
    specs = {} if specs is None else specs
    for dataset_id in (dataset for dataset, (maker, _) in plan.made_in_image.items() if maker == name):
        try:
            out[f"image_job/{dataset_id}/{key}"] = {**plan.image_job(dataset_id).as_dict(), "inputs": plan.image_job_inputs(dataset_id)}
        except ConfigError as err:
            out[f"image_job/{dataset_id}/{key}"] = {"refused": str(err)}
            continue
        specs[f"image_job/{dataset_id}/{key}"] = plan.image_job_spec(dataset_id).model_dump(mode="json")
    return out


def portable(out: dict, workdir: Path) -> dict:
    """``out`` with this machine's paths (a tiny run in docker mounts the host's venv and Python) read as names."""
    text = json.dumps(out, indent=2, sort_keys=True) + "\n"
    for path, name in sorted({str(workdir): "{workdir}", sys.prefix: "{venv}", sys.base_prefix: "{python}"}.items(), key=lambda item: -len(item[0])):
        text = text.replace(path, name)
    return json.loads(text)


def matches_golden(got: dict, golden_name: str, benchmark: str, kind: str = "") -> dict:
    """Assert ``got`` equals ``tests/benchmarks/<benchmark>/golden/[<kind>/]<golden_name>.json`` (rewritten with
    MLPERF_WF_UPDATE_GOLDEN=1); ``got``."""
    golden = ROOT / "tests" / "benchmarks" / benchmark / GOLDEN / kind / f"{golden_name}.json"
    if os.environ.get("MLPERF_WF_UPDATE_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(json.dumps(got, indent=2, sort_keys=True) + "\n")
    assert golden.is_file(), f"no golden plan {golden_name}: run MLPERF_WF_UPDATE_GOLDEN=1 pytest tests/plan/test_plan.py and review {golden}"
    assert got == json.loads(golden.read_text())
    return got


def reference_geometry_plan(name: str, workdir: Path) -> dict:
    """Run 3 of ``name`` at its definition's own geometry (the reference's node count) for every launcher, checked
    against ``<name>_<nodes>_nodes.json`` (the specs against the same name in its ``golden/spec``); keys
    ``run_3/<launcher>/<nodes>_node``."""
    nodes = make_plan(workdir, scale="full").bench(name).full.geometry.nodes
    pinned = {name: {"image": f"registry.example:5000/mlperf/{name}:ref-1", "digest": "sha256:" + "ab" * 32}}
    out: dict = {}
    specs: dict = {}
    for launcher in LAUNCHERS:  # local, docker and apptainer refuse several nodes
        plan = make_plan(workdir, scale="full", launcher=launcher, full_container=pinned)
        out[f"run_3/{launcher}/{nodes}_node"] = planned_run(plan, name, specs, f"run_3/{launcher}/{nodes}_node")
        out.update(image_jobs(plan, name, f"{launcher}/{nodes}_node", specs))
    matches_golden(portable(specs, workdir), f"{name}_{nodes}_nodes", name, SPEC_GOLDEN)
    return matches_golden(portable(out, workdir), f"{name}_{nodes}_nodes", name)


@pytest.mark.parametrize("name", registry.benchmark_names())
def test_plan_matches_its_golden_file(name, workdir):
    specs: dict = {}
    matches_golden(rendered(name, workdir, specs), name, name)
    matches_golden(portable(specs, workdir), name, name, SPEC_GOLDEN)


@pytest.mark.parametrize("name", registry.benchmark_names())
def test_full_plan_mounts_every_role_the_runs_read_and_requests_the_geometry(name, workdir):
    tmp_path = workdir
    # one node, so the default full-scale launcher is docker, whose command shows every mount
    plan = make_plan(tmp_path, scale="full", full_geometry={name: {"nodes": 1}})
    bench = plan.bench(name)
    if bench.full.geometry.node_split:  # training and generation never share a node: one node cannot split
        with pytest.raises(ConfigError, match=f"^{name}: 1 node cannot split"):
            plan.of(name).train_job(0)
        return
    job = plan.of(name).train_job(0)
    for role, dataset_id in bench.roles_for("train").items():
        assert f"{tmp_path}/resources/full/datasets/{dataset_id}:{bench.full.mounts[role]}:ro" in job.command
    assert f"{tmp_path}/resources/full/prepared/{name}:{bench.full.mounts['prepared']}:ro" in job.command
    preflight = f"mlperf-wf preflight --benchmark {name} --image {bench.full.container.reference} --platform cpu-tiny || exit 2; "
    preflight += f"mlperf-wf fresh-run-folder results/{name}/runs/0 || exit 2; {plan.of(name).node_check_line(0)}; "
    scratch = [f"{tmp_path}/results/{name}/runs/0/scratch/{area}" for area in bench.full.scratch]
    # per-run scratch is removed once the run succeeded: the launch is then a subshell followed by the removal
    removal = f") && rm -rf results/{name}/runs/0/scratch || exit $?" if scratch else ""
    # then the MLLOG files of the run's processes are merged into its result file, whatever the run's status
    merge = f') || run_status=$?; mlperf-wf merge-mllog results/{name}/runs/0/result.txt || exit 1; [ "$run_status" = 0 ] || exit "$run_status"'
    limits = launch.raise_limits(bench.full.ulimits)  # and the limits the reference's launch raises
    preflight += f"run_status=0; ({'(' if scratch else ''}{launch.drop_page_cache()}; {limits + '; ' if limits else ''}"  # then the page cache, on this host
    assert job.command.startswith(preflight) and job.command.endswith(removal + merge)
    assert job.command.removeprefix(preflight).startswith(f"mkdir -p {' '.join(scratch)} && docker run" if scratch else "docker run")
    for area, folder in zip(bench.full.scratch.values(), scratch, strict=True):
        assert f"-v {folder}:{area.mount} " in job.command
    geometry = bench.full.geometry
    assert job.resources.gres == f"gpu:{geometry.gpus_per_node}" and job.resources.runtime == geometry.walltime_minutes
    assert job.resources.tasks_per_gpu == 0, "SLURM must not start one copy per GPU"


def test_tiny_and_full_results_never_share_a_folder(tmp_path):
    tiny, full = make_plan(tmp_path), make_plan(tmp_path, scale="full")
    assert tiny.of("llama2_70b_lora").report() == "results/tiny/llama2_70b_lora/report.json"
    assert full.of("llama2_70b_lora").report() == "results/llama2_70b_lora/report.json"
    assert tiny.logs_root == "logs/tiny" and full.logs_root == "logs/full"
    assert tiny.of("rgat").run_file(2, "result.txt") == "results/tiny/rgat/runs/2/result.txt"


def test_tiny_run_reads_its_roles_and_overrides(tmp_path):
    plan = make_plan(tmp_path, tiny_hyperparameters={"llama2_70b_lora": {"learning_rate": "1e-3"}})
    job = plan.of("llama2_70b_lora").train_job(0)
    assert "--input checkpoint=resources/tiny/datasets/llama2_70b_fused_qkv" in job.command
    assert '--hyperparameters \'{"learning_rate": "1e-3"}\'' in job.command
    assert plan.of("llama2_70b_lora").hyperparameters().learning_rate == 1e-3, "YAML reads 1e-3 as text; the typed model makes it a number"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"full_geometry": {"llama2_70b_lorra": {"nodes": 2}}},
            r"config: full_geometry\.llama2_70b_lorra: names no benchmark; known: " + ", ".join(registry.benchmark_names()),
        ),
        (
            {"tiny_hyperparameters": {"rgat": {"lerning_rate": 0.1}}},
            r"config: tiny_hyperparameters\.rgat\.lerning_rate: unknown hyperparameter \(got 0\.1\); allowed: ",
        ),
        (
            {"tiny_hyperparameters": {"rgat": {"learning_rate": "fast"}}},
            r"config: tiny_hyperparameters\.rgat\.learning_rate: Input should be a valid number.*\(got 'fast'\)",
        ),
        ({"tiny_hyperparameters": {"rgat": {"fan_out": "5,5,5"}}}, r"config: tiny_hyperparameters\.rgat: fan_out '5,5,5' has 3 hops but num_layers is 2"),
        ({"full_container": {"rgat": {"digest": "sha256:abc"}}}, r"config: full_container\.rgat\.digest: String should match pattern"),
        ({"benchmarks": ["resnet"]}, r"config: benchmarks: \['resnet'\] has no folder in src/mlperf_wf/benchmarks/"),
        ({"launcher": "pyxis"}, r"config: launcher is 'pyxis' but tiny-scale runs use auto, local or docker"),
        ({"ruleset": "6.1.0", "benchmarks": ["rgat"]}, r"ruleset 6\.1\.0: benchmark 'rgat' is not part of this round"),
    ],
)
def test_bad_configuration_is_one_line_naming_key_value_and_what_is_allowed(tmp_path, changes, message):
    with pytest.raises(ConfigError, match=message) as caught:
        make_plan(tmp_path, **changes)
    assert "\n" not in str(caught.value)


def test_site_image_pins_the_run(workdir):
    tmp_path = workdir
    digest = "sha256:" + "ab" * 32
    plan = make_plan(tmp_path, scale="full", full_container={"rgat": {"image": "registry.example/rgat:ref", "digest": digest}})
    job = plan.of("rgat").train_job(0)
    assert job.image == f"registry.example/rgat:ref@{digest}"
    assert f"--image registry.example/rgat:ref@{digest} --platform cpu-tiny || exit 2; " in job.command
    assert f"/runs/0 || exit 2; {plan.of('rgat').node_check_line(0)}; run_status=0; ({launch.drop_page_cache()}; docker run" in job.command


def test_pyxis_srun_overlaps_the_jobstep_on_one_node_and_runs_straight_from_the_job_on_several(workdir):
    """One task: the executor refuses `mpi`, so the SLURM jobstep wraps the job in `srun -n1` and pyxis's own srun
    must overlap that step (else "step creation temporarily disabled" until walltime; tests/workflow/test_slurm.py runs it).
    Several tasks: `mpi` makes the jobstep run the job's shell directly."""
    for nodes, mpi in ((1, None), (2, "srun")):
        job = make_plan(workdir, scale="full", launcher="pyxis", full_geometry={"llama2_70b_lora": {"nodes": nodes}}).of("llama2_70b_lora").train_job(0)
        assert job.resources.mpi == mpi and job.resources.tasks == nodes
        assert f" srun --nodes={nodes} --ntasks-per-node=1 --mpi=none --kill-on-bad-exit=1 --overlap " in job.command
        assert 'scontrol show hostnames "${SLURM_JOB_NODELIST:-$(squeue -h -j "$SLURM_JOB_ID" -o %N)}"' in job.command


def test_declared_host_memory_reaches_the_scheduler(workdir):
    rgat = make_plan(workdir, scale="full").of("rgat").train_job(0)
    assert rgat.resources.mem_mb == registry.load_benchmark("rgat").full.geometry.host_memory_gb * 1024 >= 1100 * 1024
    site = make_plan(workdir, scale="full", full_geometry={"rgat": {"host_memory_gb": "1500"}}).of("rgat").train_job(0)
    assert site.resources.mem_mb == 1500 * 1024
    assert make_plan(workdir, scale="full").of("llama2_70b_lora").train_job(0).resources.mem_mb == 0  # not declared: the partition's


def test_full_scale_runs_get_the_configured_submission_values_and_refuse_the_tiny_platform(workdir, capsys):
    from mlperf_wf.cli import main

    plan = make_plan(workdir, scale="full", submission={"org": "acme", "platform": "dgx-h100", "status": "onprem"})
    job = plan.of("rgat").train_job(0)
    assert "-e MLPERF_SUBMISSION_ORG=acme -e MLPERF_SUBMISSION_PLATFORM=dgx-h100 -e MLPERF_SUBMISSION_STATUS=onprem" in job.command
    assert "-e MLPERF_SUBMISSION_BENCHMARK=rgat -e MLPERF_SUBMISSION_DIVISION=closed" in job.command
    assert "--platform dgx-h100 ||" in job.command
    assert main(["preflight", "--benchmark", "rgat", "--platform", "cpu-tiny"]) == 2
    assert "submission.platform is 'cpu-tiny', the tiny tier's CPU system" in capsys.readouterr().err
    assert main(["preflight", "--benchmark", "rgat", "--platform", "dgx-h100", "--image", f"reg/rgat@sha256:{'ab' * 32}"]) == 0


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"full_arguments": {"llama2_70b_lora": {"--max_step": 10}}}, "full_arguments.llama2_70b_lora: '--max_step' is not a flag of its reference command"),
        ({"full_mounts": {"rgat": ["/scratch"]}}, "full_mounts.rgat: '/scratch' is not HOST:CONTAINER[:ro|rw]"),
        ({"full_mounts": {"rgat": ["/scratch:/s:rx"]}}, "full_mounts.rgat: '/scratch:/s:rx' is not HOST:CONTAINER[:ro|rw]"),
        ({"full_workdir": {"nope": "/x"}}, "full_workdir.nope: names no benchmark"),
        ({"reference_logs": {"rgat": "/no/such/rcp_logs"}}, "reference_logs.rgat: '/no/such/rcp_logs' is not a folder"),
    ],
)
def test_site_overrides_of_the_full_command_are_checked_when_the_workflow_is_parsed(workdir, changes, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        make_plan(workdir, scale="full", **changes)


def test_the_folder_rgat_creates_before_reading_its_path_is_the_read_only_mount_itself(workdir):
    """train_rgnn_multi_gpu.py makes <script>/../../data/igbh before it reads --path; on a read-only mount that only
    works when the folder already exists, i.e. is the mount point (checked against the reference source)."""
    source = reference_source("retired_benchmarks/rgat/train_rgnn_multi_gpu.py")
    if source is None:
        pytest.skip("the shared reference source (mlcommons/training aa344c7) is not on this machine")
    text = source.read_text()
    assert "osp.join(osp.dirname(osp.dirname(osp.dirname(osp.realpath(__file__)))), 'data', 'igbh')" in text
    assert "glt.utils.ensure_dir(root)" in text
    bench = registry.load_benchmark("rgat")
    script = Path(bench.full.workdir) / "train_rgnn_multi_gpu.py"
    created = str(script.parent.parent.parent / "data" / "igbh")
    assert created == bench.full.mounts["prepared"]
    job = make_plan(workdir, scale="full").of("rgat").train_job(0)
    assert f"/prepared/rgat:{created}:ro" in job.command and f"--path {created}/dataset" in job.command


def test_common_smk_holds_no_branch_on_scale():
    text = (ROOT / "workflow" / "rules" / "common.smk").read_text()
    for needle in ("SCALE ==", "scale ==", '== "tiny"', '== "full"', "if SCALE", "if scale"):
        assert needle not in text, needle


def _open_tiny(monkeypatch, name: str) -> None:
    """Plans made after this take ``name``'s tiny tier as open."""
    load = registry.load_benchmark
    tiny = registry.TinyTier(division="open", closed_rules_not_met=["max_sequence_length 8192: the tiny model trains on 128"])
    monkeypatch.setattr(registry, "load_benchmark", lambda wanted: load(wanted).model_copy(update={"tiny": tiny}) if wanted == name else load(wanted))


def test_a_benchmark_whose_closed_rules_cannot_hold_at_tiny_size_runs_its_tiny_tier_open(workdir, monkeypatch):
    _open_tiny(monkeypatch, "rgat")
    tiny = make_plan(workdir, benchmarks=["llama2_70b_lora", "rgat"])
    assert (tiny.of("rgat").division(), tiny.of("llama2_70b_lora").division()) == ("open", "closed")
    assert " --division open " in tiny.of("rgat").train_job(0).command
    assert " --division closed " in tiny.of("llama2_70b_lora").train_job(0).command
    assert list(tiny.package_groups()) == ["5.1.0-open", "6.1.0-closed"]  # a package per round and division
    alone = make_plan(workdir, benchmarks=["rgat"])
    assert list(alone.package_groups()) == ["5.1.0-open"]
    full = make_plan(workdir, scale="full")
    assert full.of("rgat").division() == "closed" and "-e MLPERF_SUBMISSION_DIVISION=closed" in full.of("rgat").train_job(0).command
    assert make_plan(workdir, division="open").of("llama2_70b_lora").division() == "open"


@pytest.mark.parametrize(
    ("tiny", "message"),
    [
        ({"division": "open"}, "list each closed rule the tiny tier does not meet"),
        ({"closed_rules_not_met": ["x"]}, "a closed tiny tier meets every closed rule"),
        ({"division": "half-open", "closed_rules_not_met": ["x"]}, "Input should be 'closed' or 'open'"),
    ],
)
def test_the_tiny_division_says_why_it_is_open(tiny, message):
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=re.escape(message)):
        registry.TinyTier(**tiny)


def test_a_package_of_one_division_leaves_the_others_out_and_says_so(tmp_path, capsys, monkeypatch):
    from mlperf_wf.cli import main

    report = tmp_path / "report.json"
    report.write_text(json.dumps({"benchmark": "rgat", "ruleset": "5.1.0", "division": "open", "runs": []}))
    (tmp_path / "config" / "systems").mkdir(parents=True)
    shutil.copy(ROOT / "config" / "systems" / "cpu-tiny.yaml", tmp_path / "config" / "systems")
    argv = ["package", str(report), "--org", "o", "--system", "cpu-tiny", "--ruleset", "5.1.0", "--division", "closed"]
    monkeypatch.chdir(tmp_path)
    assert main([*argv, "--out", str(tmp_path / "pkg"), "--check-out", str(tmp_path / "check.json")]) == 2
    assert "no report was checked under ruleset 5.1.0 in the closed division; the reports have [('5.1.0', 'open')]" in capsys.readouterr().err


def test_each_round_and_division_of_the_benchmarks_has_its_package(workdir):
    """llama31_8b (6.1.0, open at tiny size) with bert (5.0.0, closed): a package each; llama2_70b_lora and llama31_8b
    (both 6.1.0, closed and open): a package each too, none left out."""
    plan = make_plan(workdir, benchmarks=["llama31_8b", "bert"], division="closed")
    assert plan.package_groups() == {
        "5.0.0-closed": (["results/tiny/bert/report.json"], []),
        "6.1.0-open": (["results/tiny/llama31_8b/report.json"], []),
    }
    plan = make_plan(workdir, benchmarks=["llama2_70b_lora", "llama31_8b"], division="closed")
    assert list(plan.package_groups()) == ["6.1.0-closed", "6.1.0-open"]
    assert plan.package_dir("6.1.0-open") == "results/tiny/submission/6.1.0-open/package"
    with pytest.raises(ConfigError, match=re.escape("package '5.1.0-closed': no benchmark of this invocation or finished in results/tiny")):
        plan.package_group("5.1.0-closed")


def test_a_finished_campaign_of_another_benchmark_keeps_its_package_and_summary_row(workdir):
    """rgat's report in the folder (an earlier campaign): a plan of llama2_70b_lora alone packages it as it is."""
    report = workdir / "results/tiny/rgat/report.json"
    report.parent.mkdir(parents=True)
    report.write_text(json.dumps({"benchmark": "rgat", "ruleset": "5.1.0", "division": "closed"}))
    broken = workdir / "results/tiny/bert/report.json"
    broken.parent.mkdir(parents=True)
    broken.write_text("{")
    plan = make_plan(workdir, benchmarks=["llama2_70b_lora"])
    assert plan.finished_reports() == ["results/tiny/rgat/report.json"]  # an unreadable report is left out
    assert plan.package_groups() == {
        "5.1.0-closed": ([], ["results/tiny/rgat/report.json"]),
        "6.1.0-closed": (["results/tiny/llama2_70b_lora/report.json"], []),
    }
    before = plan.finished_digests(plan.finished_reports())
    report.write_text(json.dumps({"benchmark": "rgat", "ruleset": "5.1.0", "division": "closed", "runs": []}))
    assert make_plan(workdir, benchmarks=["llama2_70b_lora"]).finished_digests(plan.finished_reports()) != before
    assert make_plan(workdir, benchmarks=["rgat"]).finished_reports() == []


def test_the_submission_variables_the_plan_sets_are_the_ones_the_round_patches_read(workdir):
    """The names live twice (the plan, and the hooks module inside images that lack mlperf_wf): they must agree."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("hooks_submission", ROOT / "containers" / "hooks" / "mlperf_wf_submission.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    assert set(make_plan(workdir, scale="full").of("rgat").submission_env()) == set(hooks.VARIABLES.values())


@pytest.mark.parametrize("succeeds", [True, False])
def test_per_run_scratch_goes_once_the_run_succeeded_and_stays_after_a_failure(workdir, succeeds):
    """llama31_8b's runs write a data index and NeMo's outputs to per-run scratch (hundreds of GB at full scale): the
    train job removes it after a successful run; a failed run keeps it (the next attempt starts from an emptied run
    folder). The plan's own line, with the launcher replaced by a stand-in that writes into the scratch and ends."""
    import subprocess

    settings = {"full_container": {}, "submission": {**DEFAULTS["submission"], "platform": "cpu-tiny"}, "node_check": {"enabled": False}}
    plan = make_plan(workdir, scale="full", launcher="local", **settings)
    command = plan.of("llama31_8b").train_job(0).command
    scratch = workdir / "results/llama31_8b/runs/0/scratch"
    assert f"&& rm -rf {Path('results/llama31_8b/runs/0/scratch')}" in command
    launcher = command[command.index("(cd ") : command.rindex(") && rm -rf")]
    assert "/scratch || exit $?) || run_status=$?; mlperf-wf merge-mllog " in command
    stand_in = f"(mkdir -p {scratch}/npy_index && touch {scratch}/npy_index/index.npy && {'true' if succeeds else 'false'})"
    line = command.split(" || exit 2; ", 2)[2].replace(launcher, stand_in, 1)  # without the preflight and the emptying
    # as the train rule runs it: the rule's next command (provenance) must not run after a failed run
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}  # the line's mlperf-wf
    ran = subprocess.run(["bash", "-c", f"set -euo pipefail; {{ {line}; }} 2>&1; echo next-command"], cwd=workdir, capture_output=True, text=True, env=env)
    assert (ran.returncode == 0) == succeeds and ("next-command" in ran.stdout) == succeeds, ran.stdout + ran.stderr
    assert scratch.exists() != succeeds


def test_definitions_are_checked_once_by_the_process_that_plans_not_again_in_each_job_step(monkeypatch, workdir):
    """``load`` refuses a broken definition in one line; a Snakemake job step (``check_definitions=False``: its main
    process checked the same files before it submitted the job) plans without reading them again."""
    checked: list[bool] = []

    def broken(read_imports: bool) -> list[str]:
        checked.append(read_imports)
        return ["config/datasets/x.yaml: source.url: missing"]

    monkeypatch.setattr(registry, "check_all", broken)
    with pytest.raises(ConfigError, match=re.escape("x.yaml: source.url: missing")):
        planning.load(DEFAULTS, project_root=ROOT, workdir=workdir)
    assert checked == [False]
    plan = planning.load(DEFAULTS, project_root=ROOT, workdir=workdir, check_definitions=False)
    assert checked == [False] and plan.settings.benchmarks


TARGET_WORDS = [("llama2_70b_lora", "--target_eval_loss {}"), ("deepseekv3_671b", "--target_log_ppl {}"), ("gpt_oss_20b", "MLLOG_TARGET_EVAL_LOSS={}")]
"""A benchmark whose reference reads its quality target, and how the target appears in its train job's command."""


@pytest.mark.parametrize(("name", "where"), [(name, where) for name, where in TARGET_WORDS if name in registry.benchmark_names()])
def test_the_quality_target_a_reference_reads_is_the_rules_for_the_run_s_round_and_division(workdir, monkeypatch, name, where):
    """One source for a target: the plan asks mlperf-logging's rules (through ``mlperf_rules.quality_target``) for the
    run's round and division; a rules file with another target changes the command."""
    from mlperf_wf.config import mlperf_rules

    asked = []

    def other_rules(benchmark: str, ruleset: str, division: str = "closed") -> mlperf_rules.QualityTarget:
        asked.append((benchmark, ruleset, division))
        return mlperf_rules.QualityTarget("<=", 0.5)

    monkeypatch.setattr(mlperf_rules, "quality_target", other_rules)
    plan = make_plan(workdir, scale="full", benchmarks=[name], division="open")
    command = plan.of(name).train_job(0).command
    assert where.format("0.5") in command.replace('"', "").replace("'", "")
    assert asked == [(name, plan.of(name).ruleset(), "open")]


def test_the_package_reads_the_system_description_by_a_path_that_moves_with_the_campaign(workdir):
    # an absolute path made a copied or moved campaign's package "a set of input files changed" and packaged it again
    plan = make_plan(workdir)
    assert plan.system_description_input() == "config/systems/cpu-tiny.yaml"
    assert (workdir / plan.system_description_input()).resolve() == plan.system_description().resolve()
