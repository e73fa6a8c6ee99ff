"""The llama2_70b_lora reference implementation itself, run through the workflow's full-scale plan.

Our tiny trainer logs what we tell it, so it cannot show that a GPU campaign would pass. Here the
reference's own ``scripts/train.py`` (mlcommons/training aa344c7, from ``../shared/reference-src``,
unmodified, with its own pinned packages in ``.venv-reference``) runs as a full-scale job: the same
plan, command builder, mounts (data read-only), environment (``COMPLIANCE_FILE``,
``MLPERF_SUBMISSION_*``), seed, round patches and ruleset (``latest``: 6.1.0) as on GPUs, through
Snakemake's train, compliance, report and package rules. Only what a CPU needs differs, through the
config keys a site would use: ``full_arguments`` gives the reference's own single-process accelerate
config (``configs/demo_config.yaml``), sequence length 512, small step counts, a learning rate that
converges in tens of steps, and the tiny checkpoint's projection names (separate q/k/v);
``tests/reference_shims`` (test-only) swaps flash-attention for SDPA and shortens transformers 4.38's
causal-mask cache. With the docker launcher the image is the test's Debian userland plus the
reference source and exactly the patch block of ``src/mlperf_wf/benchmarks/llama2_70b_lora/container/Dockerfile``, pushed to
a loopback registry so that it is pinned by digest like a real one.

A campaign resumes under ``--rerun-triggers mtime`` (as the SLURM profile runs): run 0 converges,
then run 1 is made with fewer steps and a small learning rate, ends at ``max_steps`` short of the
target, and must come out ``non_converged`` and dropped by the scoring rules, not fail the campaign; the report,
made with the second campaign's ``full_arguments``, refuses run 0 by name as made with other arguments (one campaign,
one identity: :mod:`mlperf_wf.run.identity`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import DOCKER_IMAGE, needs_docker, reference_source
from tests.oci_registry import LoopbackRegistry
from tests.workflow.test_workflow import ROOT, new_workdir, snakemake, snakemake_argv, snakemake_env, unwrapped

BENCH = "llama2_70b_lora"
REFERENCE = reference_source(BENCH) or ROOT.parent / "shared" / "reference-src" / "mlcommons-training-aa344c7" / BENCH
REFERENCE_VENV = ROOT / ".venv-reference"
SHIMS = ROOT / "tests" / "reference_shims"
PLATFORM = "reference-cpu"
ORG = "mlperf-workflow-ci"
SMALL = {
    "--config_file": "configs/demo_config.yaml",
    "--num_processes": "1",  # the demo config's one process (the plan passes nodes x gpus_per_node: 8)
    "--max_seq_len": "512",
    "--eval_steps": "10",
    "--logging_steps": "5",
    "--lora_target_modules": "q_proj,k_proj,v_proj,o_proj",
}
CONVERGES = {**SMALL, "--max_steps": "200", "--learning_rate": "1.5e-4"}
"""The target (eval loss 0.925) is met after a few evaluations."""
STOPS_SHORT = {**SMALL, "--max_steps": "30", "--learning_rate": "1e-6"}
"""Eval loss stays near its start (1.3): the run ends at max_steps without reaching the target."""


def _require_reference() -> None:
    if not REFERENCE.is_dir():
        pytest.skip(f"the reference source is not at {REFERENCE} (set MLPERF_WF_REFERENCE_SRC)")
    if not (REFERENCE_VENV / "bin" / "accelerate").exists():
        message = f"the reference's packages are not in {REFERENCE_VENV}: make .venv-reference/bin/activate"
        if os.environ.get("MLPERF_WF_REQUIRE_REFERENCE"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="module")
def tiny_inputs(tmp_path_factory, tiny_mirrors) -> Path:
    """The tiny tier's prepared GovReport data and fine-tuning base (its tokenizer is Llama's format)."""
    _require_reference()
    workdir = tiny_mirrors.seed(new_workdir(tmp_path_factory.mktemp("tiny_inputs")), BENCH)
    snakemake(workdir, "--cores", "2", f"resources/tiny/prepared/{BENCH}/dataset", "resources/tiny/verified/llama2_70b_fused_qkv.json")
    return workdir


def full_scale_workdir(path: Path, tiny: Path) -> Path:
    """A workflow folder whose full-scale datasets are already downloaded, verified and prepared (the tiny ones)."""
    workdir = new_workdir(path)
    source, target = tiny / "resources" / "tiny", workdir / "resources" / "full"
    shutil.copytree(source / "prepared" / BENCH, target / "prepared" / BENCH, symlinks=True)
    shutil.copytree(source / "datasets" / "llama2_70b_fused_qkv", target / "datasets" / "llama2_70b_fused_qkv")
    (target / "verified").mkdir(parents=True)
    shutil.copy(source / "verified" / "llama2_70b_fused_qkv.json", target / "verified")
    system = yaml.safe_load((ROOT / "config" / "systems" / "cpu-tiny.yaml").read_text())
    system["system_name"] = "reference implementation on the CI CPU"
    (workdir / "config" / "systems" / f"{PLATFORM}.yaml").write_text(yaml.safe_dump(system))
    return workdir


def campaign(workdir: Path, runs: int, arguments: dict, env: dict[str, str], **config: object) -> subprocess.CompletedProcess:
    """The default target at full scale with ``runs`` runs: train, check, report, plot and package them. Only
    those rules may run: the datasets are taken as they are (download, verify and preparation never run)."""
    settings = {
        "scale": "full",
        "runs": runs,
        "submission": {"org": ORG, "platform": PLATFORM, "status": "onprem"},
        "full_arguments": {BENCH: arguments},
        **config,
    }
    configfile = workdir / f"campaign_{runs}.yaml"
    configfile.write_text(yaml.safe_dump(settings))
    argv = snakemake_argv(
        workdir, "--cores", "1", "--configfile", str(configfile), "--rerun-triggers", "mtime",
        "--allowed-rules", "all", "train", "check_compliance", "campaign_identity", "report", "plot_benchmark", "benchmark_page", "package", "summarize",
    )  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        logs = "\n".join(f"--- {log}\n{log.read_text()[-3000:]}" for log in sorted((workdir / "logs").rglob("*.log")))
        raise AssertionError(f"campaign of {runs} runs failed:\n{proc.stderr[-3000:]}\n{logs}")
    proc.stderr = unwrapped(proc.stderr)  # its printed shell commands, which Snakemake wraps, on one line each
    return proc


def mllog(result: Path) -> list[dict]:
    return [json.loads(line.split(":::MLLOG ", 1)[1]) for line in result.read_text().splitlines() if ":::MLLOG " in line]


def check_campaign(workdir: Path, launcher: str) -> None:
    """Run 0 passed 6.1.0 as the reference logged it; run 1 is non-converged and dropped; report and package exist."""
    runs = workdir / "results" / BENCH / "runs"
    first = mllog(runs / "0" / "result.txt")
    keys = {line["key"]: line for line in first}
    # written by the reference's own callback, patched where 6.1.0 needs it
    assert keys["run_start"]["metadata"]["file"].endswith("mlperf_logging_utils.py")
    assert keys["config_filename"]["value"] == "configs/demo_config.yaml"
    assert keys["lowest_numerical_precision_in_linear"]["value"] == "bfloat16"
    assert keys["micro_batch_size"]["value"] == 1
    assert (keys["submission_org"]["value"], keys["submission_platform"]["value"]) == (ORG, PLATFORM)
    assert keys["seed"]["value"] == 1234 and keys["run_stop"]["metadata"]["status"] == "success"
    verdicts = [json.loads((runs / str(run) / "compliance.json").read_text()) for run in (0, 1)]
    assert [v["ruleset"] for v in verdicts] == ["6.1.0", "6.1.0"]
    assert verdicts[0]["verdict"] == "passed", verdicts[0]
    assert verdicts[1]["verdict"] == "non_converged", verdicts[1]
    second = {line["key"]: line for line in mllog(runs / "1" / "result.txt")}
    assert second["run_stop"]["metadata"]["status"] == "aborted" and second["seed"]["value"] == 1235
    report = json.loads((workdir / "results" / BENCH / "report.json").read_text())
    assert (report["ruleset"], report["scale"]) == ("6.1.0", "full")
    by_index = {run["index"]: run for run in report["runs"]}
    assert by_index[1]["compliance"] == "non_converged"
    # run 0 was made with the first campaign's arguments: not scored with run 1's, and named
    assert by_index[0]["compliance"] == "failed" and by_index[0]["minutes"] is None
    assert [line.split(": ", 1)[1].split(" ", 1)[0] for line in by_index[0]["identity_problems"]] == ["config.arguments"]
    assert by_index[0]["identity_problems"][0].startswith(f"results/{BENCH}/runs/0/provenance.json: config.arguments ")
    assert by_index[1]["dropped"] and "converge" in by_index[1]["dropped"]
    assert by_index[0]["made_with"]["launcher"] == launcher
    package = json.loads((workdir / "results/submission/6.1.0-closed/package_check.json").read_text())
    assert package["valid_for_submission"] is False  # two runs of the ten the rules require


def test_the_reference_runs_through_the_local_launcher(tiny_inputs, tmp_path):
    workdir = full_scale_workdir(tmp_path / "local", tiny_inputs)
    env = snakemake_env()
    # The reference's packages first (its accelerate, transformers 4.38); mlperf-wf still resolves to this venv.
    env["PATH"] = f"{REFERENCE_VENV / 'bin'}{os.pathsep}{env['PATH']}"
    env["HF_HOME"] = str(tmp_path / "hf_home")
    env["PYTHONPATH"] = str(SHIMS)  # the plan puts the round patches before it
    env["MLPERF_WF_HOOKS"] = "mlperf_wf_cpu_shims"  # and appends this after its own patch module
    local = {"launcher": "local", "full_workdir": {BENCH: str(REFERENCE)}}
    first = campaign(workdir, 1, CONVERGES, env, **local)
    assert "env COMPLIANCE_FILE=" in first.stderr and f"cd {REFERENCE}" in first.stderr
    campaign(workdir, 2, STOPS_SHORT, env, **local)
    check_campaign(workdir, "local")


def _patch_block() -> str:
    """The lines every benchmark Dockerfile ends with (after the marker)."""
    lines = (ROOT / "src/mlperf_wf/benchmarks" / BENCH / "container" / "Dockerfile").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("# --- mlperf-workflow patches"))
    return "\n".join(lines[start:]) + "\n"


@pytest.fixture(scope="module")
def reference_image(docker_host, tmp_path_factory):
    """The test's userland + the reference at the Dockerfile's path + the real patch block, pushed and pinned."""
    _require_reference()
    context = tmp_path_factory.mktemp("reference_image")
    shutil.copytree(REFERENCE, context / "reference")
    # the patch block copies from the repository root, the images' build context
    for copied in ("containers/hooks", f"src/mlperf_wf/benchmarks/{BENCH}/container/patches"):
        shutil.copytree(ROOT / copied, context / copied)
    shutil.copytree(SHIMS, context / "shims")
    venv_bin = REFERENCE_VENV.resolve() / "bin"
    (context / "Dockerfile").write_text(
        f"FROM {DOCKER_IMAGE}\n"
        "COPY reference/ /workspace/ft-llm/\n"
        "WORKDIR /workspace/ft-llm\n"
        + _patch_block()
        + "# test only: CPU shims after the patches; the reference's venv is mounted at its host path (full_mounts)\n"
        "COPY shims/ /opt/mlperf-wf-test/shims/\n"
        "ENV PYTHONPATH=${PYTHONPATH}:/opt/mlperf-wf-test/shims MLPERF_WF_HOOKS=${MLPERF_WF_HOOKS},mlperf_wf_cpu_shims\n"
        f"ENV PATH={venv_bin}:/usr/local/bin:/usr/bin:/bin\n"
    )
    with LoopbackRegistry() as registry:
        image = f"{registry.host}/mlperf-workflow/{BENCH}:reference-cpu"
        for command in (["docker", "build", "-q", "-t", image, str(context)], ["docker", "push", image]):
            done = subprocess.run(command, env=docker_host, capture_output=True, text=True)
            assert done.returncode == 0, done.stdout + done.stderr
        inspect = ["docker", "inspect", "--format", "{{index .RepoDigests 0}}", image]
        digest = subprocess.run(inspect, env=docker_host, capture_output=True, text=True, check=True).stdout.strip().split("@")[1]
        yield {"image": image, "digest": digest}


@needs_docker
def test_the_reference_runs_through_the_docker_launcher(tiny_inputs, reference_image, docker_host, tmp_path):
    workdir = full_scale_workdir(tmp_path / "docker", tiny_inputs)
    env = {**snakemake_env(), "DOCKER_HOST": docker_host["DOCKER_HOST"]}
    # The reference's venv and the Python it was made from, read-only at their host paths.
    python_home = Path(os.path.realpath(REFERENCE_VENV / "bin" / "python")).parents[1]
    mounts = [f"{REFERENCE_VENV.resolve()}:{REFERENCE_VENV.resolve()}:ro", f"{python_home}:{python_home}:ro"]
    docker = {"launcher": "docker", "full_container": {BENCH: reference_image}, "full_mounts": {BENCH: mounts}}
    first = campaign(workdir, 1, CONVERGES, env, **docker)
    pinned = f"{reference_image['image']}@{reference_image['digest']}"
    flags = "--gpus all --network=host --ipc=host --ulimit memlock=-1 --ulimit stack=67108864"
    assert f"{flags} -v {workdir.resolve()}/resources/full/prepared/{BENCH}:/data:ro" in first.stderr
    assert f"-w /workspace/ft-llm {pinned} accelerate launch --num_processes 1 --config_file configs/demo_config.yaml scripts/train.py" in first.stderr
    campaign(workdir, 2, STOPS_SHORT, env, **docker)
    check_campaign(workdir, "docker")
    record = json.loads((workdir / "results" / BENCH / "runs" / "0" / "provenance.json").read_text())
    assert record["image"] == pinned
