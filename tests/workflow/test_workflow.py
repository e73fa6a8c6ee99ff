"""The tiny DAG end to end through Snakemake (llama2_70b_lora's campaign, ``tiny_project`` in tests/conftest.py, which
tests/benchmarks/llama2_70b_lora/ shares), caching and rerun behaviour, the report, the package and the profiles."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mlperf_wf.config import registry
from mlperf_wf.results.compliance import check
from tests.conftest import TINY_CAMPAIGN_RUNS

ROOT = Path(__file__).resolve().parents[2]
SNAKEFILE = ROOT / "workflow" / "Snakefile"
TINY_RUNS = TINY_CAMPAIGN_RUNS


def snakemake_env(cache: Path | None = None) -> dict[str, str]:
    """This venv first on PATH, the output cache when given, and no usable network proxy."""
    env = dict(os.environ)
    if cache:
        env["SNAKEMAKE_OUTPUT_CACHE"] = str(cache)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    # Any network use would fail: the DAG must not need it.
    env.update({"HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "NO_PROXY": ""})
    return env


def snakemake_argv(workdir: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "snakemake", "-s", str(SNAKEFILE), "-d", str(workdir), *args]


def snakemake(workdir: Path, *args: str, check_rc: bool = True, cache: Path | None = None, wrapped: bool = False) -> subprocess.CompletedProcess:
    """Snakemake's run in ``workdir``; its printed shell commands, which it wraps, joined on one line each (as a reader
    reads them) unless ``wrapped``."""
    proc = subprocess.run(snakemake_argv(workdir, *args), capture_output=True, text=True, env=snakemake_env(cache), check=False)
    if check_rc and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    if not wrapped:
        proc.stdout, proc.stderr = unwrapped(proc.stdout), unwrapped(proc.stderr)
    return proc


def unwrapped(output: str) -> str:
    """A Snakemake output with its printed shell commands, which it wraps, back on one line each; a train job's, which
    writes the run's spec and runs it (``mlperf-wf job run``), as the script the spec runs (:func:`spec_script`)."""
    from mlperf_wf.plan.shell_wrap import unwrap

    return "\n".join(spec_script(line) for line in unwrap(output).split("\n"))


def spec_script(line: str) -> str:
    """A printed ``Shell command:`` that writes a job spec and runs it, as the commands ``mlperf-wf job run`` runs
    (``mlperf_wf.run.job.script``, without its shell options); any other line as it is."""
    from mlperf_wf.run import job
    from mlperf_wf.run.job_spec import JobSpec

    head = "Shell command: printf '%s\\n' "
    if not line.startswith(head) or " mlperf-wf job run " not in line:
        return line
    words = shlex.split(line[len("Shell command: ") :])
    spec = JobSpec.parse(words[2])
    ran = line[line.index(" mlperf-wf job run ") :]
    after = ran.split(" 2>&1;", 1)[1] if " 2>&1;" in ran else ""  # what the rule runs after the job (seal)
    return "Shell command: " + job.script(spec).removeprefix("set -euo pipefail; ") + (f";{after}" if after else "")


def planned_launch_lines(output: str, benchmark: str = "") -> list[str]:
    """The shell lines of a ``snakemake -n -p`` output that launch a benchmark's image (for ``benchmark``, else all):
    its runs' train jobs and any one-off job of its image (make_in_image)."""
    start, launch = "Shell command: { mlperf-wf check-prepared ", f" || exit $?; mlperf-wf preflight --benchmark {benchmark}".rstrip()
    return [line for line in unwrapped(output).splitlines() if line.startswith(start) and launch in line]


def planned_train_lines(output: str, benchmark: str = "") -> list[str]:
    """The train jobs' shell lines of a ``snakemake -n -p`` output (for ``benchmark``, else all): a run's job records
    its provenance."""
    return [line for line in planned_launch_lines(output, benchmark) if " mlperf-wf provenance " in line]


def planned_image_job_lines(output: str, benchmark: str = "") -> list[str]:
    """The one-off jobs of a benchmark's image (make_in_image): they seal what they made."""
    return [line for line in planned_launch_lines(output, benchmark) if " mlperf-wf seal " in line]


def new_workdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    shutil.copytree(ROOT / "config", path / "config")
    return path


def job_counts(output: str) -> dict[str, int]:
    """The 'Job stats' table of a Snakemake run or dry run."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Job stats:")) + 3
    counts = {}
    for line in lines[start:]:
        parts = line.split()
        if len(parts) != 2 or parts[0] == "total":
            break
        counts[parts[0]] = int(parts[1])
    return counts


@pytest.fixture(scope="module")
def output_cache(tmp_path_factory) -> Path:
    """A Snakemake output cache shared by the workflow directories of these tests."""
    return tmp_path_factory.mktemp("output_cache")


@pytest.mark.slow
def test_tiny_chain_reaches_the_target_and_every_run_is_compliant(tiny_project):
    report = json.loads((tiny_project / "results/tiny/llama2_70b_lora/report.json").read_text())
    assert report["benchmark"] == "llama2_70b_lora" and report["ruleset"] == "6.1.0" and report["scale"] == "tiny"
    assert report["required_runs"] == 10
    runs = report["runs"]
    assert [r["index"] for r in runs] == list(range(TINY_RUNS))
    assert [r["seed"] for r in runs] == [1234 + i for i in range(TINY_RUNS)]
    for run in runs:
        assert run["status"] == "success" and run["compliance"] == "passed"
        assert run["final_eval_accuracy"] <= 0.925
        # The official checker, run again here, agrees.
        assert check(tiny_project / run["result_file"], "6.1.0").verdict == "passed"
    # The olympic score of 3 runs is the median run, recomputed from the logs' timestamps.
    minutes = sorted(r["minutes"] for r in runs)
    assert report["score"]["olympic_minutes"] == pytest.approx(minutes[1], rel=1e-12)
    assert report["valid_submission"] is False
    assert any("tiny" in reason for reason in report["valid_submission_reasons"])


@pytest.mark.slow
def test_status_during_the_campaign_and_after_it_matches_the_report(tiny_project):
    from tests.conftest import TINY_CAMPAIGN_STATUS
    from tests.results.test_status import check_watched

    check_watched(TINY_CAMPAIGN_STATUS[tiny_project], tiny_project, [f"runs={TINY_RUNS}"], forecast_steps=2)


@pytest.mark.slow
def test_a_second_workflow_directory_reuses_the_prepared_data_from_the_cache(tiny_project, tiny_project_cache, tmp_path):
    other = new_workdir(tmp_path / "second_checkout")
    proc = snakemake(other, "--cores", "2", "resources/tiny/prepared/llama2_70b_lora/dataset", "--cache", cache=tiny_project_cache)
    out = proc.stdout + proc.stderr
    for path in (
        "resources/tiny/mirror/llama2_70b_fused_qkv",
        "resources/tiny/datasets/scrolls_gov_report_8k",
        "resources/tiny/prepared/llama2_70b_lora/shards/govreport",
    ):
        assert f"Symlinking output file {path}" in out, path
    assert "Moving output file" not in out, "nothing was computed again"
    for rule in ("generate_tiny_mirror", "download", "preprocess"):
        ran = [log for log in (other / "logs" / "tiny" / rule).rglob("*.log") if log.stat().st_size]
        assert not ran, f"{rule} ran in the second directory: {ran}"
    prepared = other / "resources/tiny/prepared/llama2_70b_lora/dataset"
    assert (prepared / "train-00000-of-00001.parquet").read_bytes() == (
        tiny_project / "resources/tiny/prepared/llama2_70b_lora/dataset/train-00000-of-00001.parquet"
    ).read_bytes()


@pytest.mark.slow
def test_a_byte_flipped_in_a_cached_shard_is_refused_by_the_next_checkout_and_made_again(tiny_mirrors, tmp_path):
    """A shard's own file corrupted in the shared output cache (in place, its mtime kept): the next checkout that
    restores it refuses it at assembly naming the file, before any run reads it, and sets the entry aside whole; the
    same command again makes the shard anew, and the tree holds the bytes the shard was made with."""
    tiny_mirrors.make("llama2_70b_lora")
    cache = tmp_path / "output-cache"
    shutil.copytree(tiny_mirrors.cache, cache, symlinks=True)  # this test breaks its own copy of the cache
    target = "resources/tiny/prepared/llama2_70b_lora/dataset"
    first = new_workdir(tmp_path / "first")
    snakemake(first, "--cores", "2", target, "--cache", cache=cache)
    shard = first / "resources/tiny/prepared/llama2_70b_lora/shards/govreport"
    name = max((p for p in shard.rglob("*") if p.is_file() and not p.name.startswith(".")), key=lambda p: p.stat().st_size)
    cached = name.resolve()
    assert cached.is_relative_to(cache), "the shard is a cache entry"
    made = cached.read_bytes()
    stat = cached.stat()
    with cached.open("r+b") as handle:
        handle.seek(len(made) // 2)
        handle.write(bytes([made[len(made) // 2] ^ 0xFF]))
    os.utime(cached, ns=(stat.st_atime_ns, stat.st_mtime_ns))

    second = new_workdir(tmp_path / "second")
    proc = snakemake(second, "--cores", "2", target, "--cache", check_rc=False, cache=cache)
    assert proc.returncode != 0
    said = (second / "logs/tiny/assemble_prepared/llama2_70b_lora.log").read_text()
    relative = name.relative_to(shard).as_posix()
    assert f"govreport/{relative}: md5 mismatch" in said and "set aside whole" in said and "rerun" in said, said
    assert not (second / target).exists()

    snakemake(second, "--cores", "2", target, "--cache", cache=cache)
    assert (second / "logs/tiny/preprocess/llama2_70b_lora/govreport.log").stat().st_size, "the shard was made again"
    remade = second / "resources/tiny/prepared/llama2_70b_lora/shards/govreport" / relative
    assert remade.read_bytes() == made


@pytest.mark.slow
def test_figures_and_summary(tiny_project):
    """The figures and the summary (the browsable report made from them: tests/workflow/test_readme.py's make report)."""
    for name in ("time_to_train", "convergence"):
        for suffix in (".png", ".svg"):
            assert (tiny_project / f"results/tiny/llama2_70b_lora/plots/{name}{suffix}").stat().st_size > 1000
    summary = (tiny_project / "results/tiny/summary.csv").read_text().splitlines()
    assert summary[0].startswith("benchmark,scale,ruleset") and summary[1].startswith("llama2_70b_lora,tiny,6.1.0")


@pytest.mark.slow
def test_submission_package_is_built_and_checked_by_the_official_checkers(tiny_project):
    org = tiny_project / "results/tiny/submission/6.1.0-closed/package/mlperf-workflow"
    # what a submitter uploads holds only the package (no .snakemake_timestamp of Snakemake's directory output)
    assert [path.name for path in org.rglob(".*")] == []
    results = sorted(p.name for p in (org / "results/cpu-tiny/llama2_70b_lora").iterdir())
    assert results == [f"result_{i}.txt" for i in range(TINY_RUNS)]
    assert json.loads((org / "systems/cpu-tiny.json").read_text())["division"] == "closed"
    made_by = org / "benchmarks/llama2_70b_lora/implementations/mlperf-workflow-tiny"
    record = json.loads((made_by / "implementation.json").read_text())
    assert record["made_by"].startswith("mlperf-workflow's tiny-tier CPU trainer") and record["launchers"] == ["local"]
    assert all("mlperf-wf train --benchmark llama2_70b_lora" in command for command in record["commands"])
    assert {"trainer.py", "hyperparameters.py", "harness.py"} <= {p.name for p in made_by.iterdir()}
    check = json.loads((tiny_project / "results/tiny/submission/6.1.0-closed/package_check.json").read_text())
    assert check["system_descriptions"]["cpu-tiny"]["passed"] is True
    package_log = (tiny_project / check["package_checker"]["log"]).read_text()
    assert "Running compliance checks in dir" in package_log, "the package checker really ran"
    errors = " ".join(check["package_checker"]["errors"])
    assert "found 3, expected 10" in errors and "RCP Test Failed" in errors
    assert check["valid_for_submission"] is False
    assert "tiny" in (tiny_project / "results/tiny/submission/6.1.0-closed/package/NOT_FOR_SUBMISSION.txt").read_text()
    summary = (tiny_project / "results/tiny/summary.csv").read_text()
    assert "package_checker" in summary.splitlines()[0] and "RCP Test Failed" in summary


@pytest.mark.slow
def test_score_reads_a_workflow_results_folder_with_its_rcp_check(tiny_project, tmp_path):
    from mlperf_wf.cli import main

    out = tmp_path / "score.json"
    # tiny runs converge in far fewer samples than the real benchmark's reference: the RCP check fails, so exit 1
    assert main(["score", str(tiny_project / "results/tiny/llama2_70b_lora"), "--ruleset", "6.1.0", "--json", str(out)]) == 1
    (score,) = json.loads(out.read_text())
    assert score["rcp"]["verdict"] == "Fail" and score["rcp"]["reference_mean"] > score["rcp"]["samples_to_converge"]
    assert len(score["runs"]) == TINY_RUNS and all(r["compliant"] for r in score["runs"])


@pytest.mark.slow
def test_second_run_does_nothing_and_a_deleted_run_reruns_alone(tiny_project):
    again = snakemake(tiny_project, "-n", "--config", f"runs={TINY_RUNS}")
    assert "Nothing to be done" in again.stdout + again.stderr

    (tiny_project / "results/tiny/llama2_70b_lora/runs/1/result.txt").unlink()
    plan = snakemake(tiny_project, "-n", "--config", f"runs={TINY_RUNS}")
    assert job_counts(plan.stdout) == {
        "train": 1,
        "check_compliance": 1,
        "report": 1,
        "plot_benchmark": 1,
        "benchmark_page": 1,
        "package": 1,
        "summarize": 1,
        "all": 1,
    }
    assert "results/tiny/llama2_70b_lora/runs/1/result.txt" in plan.stdout

    other_run = tiny_project / "results/tiny/llama2_70b_lora/runs/0/result.txt"
    before = other_run.stat().st_mtime_ns
    snakemake(tiny_project, "--cores", "2", "--config", f"runs={TINY_RUNS}")
    assert other_run.stat().st_mtime_ns == before
    assert (tiny_project / "results/tiny/llama2_70b_lora/runs/1/result.txt").is_file()


@pytest.mark.slow
def test_corrupted_dataset_fails_verify_and_training_never_starts(tiny_project, tmp_path):
    workdir = tmp_path / "corrupt"
    shutil.copytree(tiny_project, workdir)  # dereferences links into the shared cache, which must stay intact
    shutil.rmtree(workdir / "results")
    victim = workdir / "resources/tiny/datasets/scrolls_gov_report_8k/train-00000-of-00001.parquet"
    data = bytearray(victim.read_bytes())
    data[100] ^= 0xFF
    victim.write_bytes(bytes(data))
    proc = snakemake(workdir, "--cores", "2", "--forcerun", "verify", "--config", f"runs={TINY_RUNS}", check_rc=False)
    assert proc.returncode != 0
    log = (workdir / "logs/tiny/verify/scrolls_gov_report_8k.log").read_text()
    assert "scrolls_gov_report_8k/train-00000-of-00001.parquet: md5 mismatch: expected " in log
    assert ", actual " in log
    assert not (workdir / "results/tiny/llama2_70b_lora/runs").exists(), "no run may start on unverified data"


def test_bad_config_is_one_clear_line(tmp_path):
    workdir = new_workdir(tmp_path / "bad")
    proc = snakemake(workdir, "-n", "--config", "ruleset=9.9.9", check_rc=False)
    assert proc.returncode != 0
    assert "ruleset '9.9.9' is not known to mlperf-logging; known rounds:" in proc.stdout + proc.stderr
    proc = snakemake(workdir, "-n", "--config", "ruleset=6.1.0", "benchmarks=[rgat]", check_rc=False)
    assert proc.returncode != 0
    assert "ruleset 6.1.0: benchmark 'rgat' is not part of this round; allowed:" in proc.stdout + proc.stderr
    proc = snakemake(workdir, "-n", "--config", "benchmarks=[resnet]", check_rc=False)
    assert proc.returncode != 0
    known = ", ".join(registry.benchmark_names())
    assert f"benchmarks: ['resnet'] has no folder in src/mlperf_wf/benchmarks/; known: {known}" in proc.stdout + proc.stderr


def train_resources_line(output: str) -> str:
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("rule train:"))
    return next(line for line in lines[start:] if line.strip().startswith("resources:"))


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (
            ["results/llama2_70b_lorra/report.json", "--config", "scale=full"],
            "target results/llama2_70b_lorra/report.json ('llama2_70b_lorra') names no benchmark; known: bert, ",
        ),
        (["results/llama2_70b_lora/report.json"], "is a full-scale path (results/<benchmark>/... at full scale, results/tiny/<benchmark>/... at tiny scale)"),
    ],
)
def test_a_target_snakemake_cannot_make_is_one_line_naming_what_it_can(tmp_path, argv, needle):
    """A typo in a benchmark's name (`make dryrun-full BENCH=llama2_70b_lorra`) or the other scale's path, which
    Snakemake alone reports as a MissingRuleException."""
    proc = snakemake(new_workdir(tmp_path / "w"), "-n", *argv, check_rc=False)
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0 and needle in said and "MissingRuleException" not in said, said[-2000:]


def test_named_slurm_profile_requests_the_benchmark_geometry(tmp_path):
    """`make profiles` links the profile where Snakemake looks, so `--profile slurm` works by name."""
    config_home = tmp_path / "xdg"
    subprocess.run(["make", "-s", "profiles", f"PROFILE_HOME={config_home}/snakemake"], cwd=ROOT, check=True, capture_output=True)
    workdir = new_workdir(tmp_path / "cluster")
    env_home = {"XDG_CONFIG_HOME": str(config_home)}
    old = {k: os.environ.get(k) for k in env_home}
    os.environ.update(env_home)
    try:
        single = snakemake(workdir, "--profile", "slurm", "-n", "results/llama2_70b_lora/report.json", "--config", "scale=full")
        multi = snakemake(
            workdir, "--profile", "slurm", "-n", "results/llama2_70b_lora/report.json",
            "--config", "scale=full", "launcher=pyxis", "full_geometry={llama2_70b_lora: {nodes: 2}}",
        )  # fmt: skip
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    line = train_resources_line(single.stdout)
    for expected in ("runtime=240", "nodes=1", "gres=gpu:8", "tasks_per_gpu=0", "cpus_per_gpu=8", "slurm_extra=--exclusive"):
        assert expected in line, (expected, line)
    assert "mpi=" not in line, "a one-node, one-launcher run lets the jobstep place it"
    assert "mem_mb=0" in line, "llama2 declares no host memory: the partition's whole-node default"
    line = train_resources_line(multi.stdout)
    for expected in ("nodes=2", "gres=gpu:8", "tasks=2", "mpi=srun"):
        assert expected in line, (expected, line)
    assert "srun --nodes=2 --ntasks-per-node=1 --mpi=none --kill-on-bad-exit=1 --overlap --container-image=" in multi.stdout
    assert "accelerate launch --num_machines 2 --machine_rank" in multi.stdout and "--num_processes 16 --config_file" in multi.stdout


@pytest.mark.slow
def test_two_process_torchrun_run_is_compliant_and_logged_by_rank_zero_only(tiny_project, tmp_path):
    from mlperf_wf.plan.launch import Launch, shell_join, tiny_command

    result = tmp_path / "ddp" / "result.txt"
    args = [
        "--benchmark", "llama2_70b_lora", "--run-index", "0", "--seed", "4242",
        "--data", str(tiny_project / "resources/tiny/prepared/llama2_70b_lora/dataset"),
        "--input", f"checkpoint={tiny_project / 'resources/tiny/datasets/llama2_70b_fused_qkv'}",
        "--result", str(result), "--ruleset", "6.1.0", "--division", "closed",
        "--org", "test", "--platform", "cpu", "--status", "research",
    ]  # fmt: skip
    command = shell_join(tiny_command(args, Launch("local", tiny_processes=2)))
    assert command.startswith("torchrun --standalone --nproc-per-node=2 -m mlperf_wf train")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(command, shell=True, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.count('"status": "success"') + proc.stderr.count('"status": "success"') >= 2, "both ranks finished"
    keys = [json.loads(line.removeprefix(":::MLLOG "))["key"] for line in result.read_text().splitlines()]
    assert keys.count("run_start") == 1 and keys.count("seed") == 1, "only rank 0 writes the log"
    logged = {
        json.loads(line.removeprefix(":::MLLOG "))["key"]: json.loads(line.removeprefix(":::MLLOG "))["value"] for line in result.read_text().splitlines()
    }
    assert (logged["global_batch_size"], logged["micro_batch_size"], logged["gradient_accumulation_steps"]) == (8, 4, 1)
    assert check(result, "6.1.0").verdict == "passed"


@pytest.mark.slow
def test_each_run_records_what_it_was_made_with(tiny_project):
    record = json.loads((tiny_project / "results/tiny/llama2_70b_lora/runs/0/provenance.json").read_text())
    assert record["scale"] == "tiny" and record["launcher"] == "local" and record["image"] is None
    assert record["packages"]["torch"].startswith("2.13.0") and record["packages"]["mlperf-logging"] == "4.1.68"
    assert "mlperf-wf train --benchmark llama2_70b_lora --run-index 0 --seed 1234" in record["command"]
    assert record["workflow_git"]["commit"] is None or len(record["workflow_git"]["commit"]) == 40
    report = json.loads((tiny_project / "results/tiny/llama2_70b_lora/report.json").read_text())
    assert report["runs"][0]["made_with"]["launcher"] == "local"
    assert report["runs"][0]["made_with"]["host"] == record["host"]


STAND_IN_POWER = "power={enabled: true, interval_ms: 200, gpu_command: 'python -m mlperf_wf.run.stand_in_nvidia_smi --gpus 2 -lms {interval_ms}'}"
"""Energy measurement on, reading the stand-in for nvidia-smi (this machine has no power sensor)."""


@pytest.mark.slow
def test_a_campaign_with_the_stand_in_power_sampler_reports_energy_as_the_official_summarizer(tiny_project, tiny_project_cache, tmp_path):
    import contextlib
    import io

    from mlperf_logging.result_summarizer import result_summarizer as official

    from mlperf_wf.results import scoring, verdict

    other = new_workdir(tmp_path / "energy")  # the prepared data comes from the cache; the three runs are made again
    targets = ("results/tiny/llama2_70b_lora/plots/time_to_train.png", "results/tiny/submission/6.1.0-closed/package_check.json")
    snakemake(other, "--cores", "2", *targets, "--cache", "--config", f"runs={TINY_RUNS}", STAND_IN_POWER, cache=tiny_project_cache)
    report = json.loads((other / "results/tiny/llama2_70b_lora/report.json").read_text())
    for run in report["runs"]:
        node = other / f"results/tiny/llama2_70b_lora/runs/{run['index']}/power/result/node_0.txt"
        keys = [json.loads(line.removeprefix(":::MLLOG "))["key"] for line in node.read_text().splitlines()]
        assert keys[0] == "power_measurement_start" and keys[-1] == "power_measurement_stop" and keys.count("power_reading") >= 5
        assert run["energy_joules"] > 0 and run["power_problems"] == []
    assert report["score"]["energy_joules"] > 0 and report["score"]["energy_reasons"] == []
    assert "energy to train" in (other / "results/tiny/llama2_70b_lora/plots/time_to_train.svg").read_text()
    # the package carries power/result_<i>/node_0.txt; the package checker's power checks find nothing wrong
    check = json.loads((other / "results/tiny/submission/6.1.0-closed/package_check.json").read_text())
    package_log = (other / check["package_checker"]["log"]).read_text()
    assert "power" not in package_log.lower() and not any("power" in error.lower() for error in check["package_checker"]["errors"])
    folder = other / "results/tiny/submission/6.1.0-closed/package/mlperf-workflow/results/cpu-tiny/llama2_70b_lora"
    assert sorted(p.name for p in (folder / "power").iterdir()) == [f"result_{i}" for i in range(TINY_RUNS)]
    # the official summarizer on the package gives each run the energy the report shows, and the same olympic energy
    (folder / "scaling.json").unlink(missing_ok=True)  # left by the package checker (logging#278); the report used none
    with contextlib.redirect_stdout(io.StringIO()):
        _, energies, _, energy_score, _ = official._compute_strong_score_standalone(
            "llama2_70b_lora", "cpu-tiny", True, str(folder), "training", "6.1.0", return_full_scores=True
        )
    assert {Path(file).name: joules for file, joules in energies.items()} == pytest.approx(
        {f"result_{i}.txt": run["energy_joules"] for i, run in enumerate(report["runs"])}, rel=1e-12
    )
    # The olympic energy of three runs is the energy of the middle one by time (a stable sort). Tiny runs take under a
    # second, timed to the ms, so two may tie: the summarizer sorts the runs in its folder listing's (glob) order, we in
    # run order, and each counts the tied run its order puts in the middle. Without a tie there is one answer.
    runs = report["runs"]
    middle = runs[sorted(range(TINY_RUNS), key=lambda i: runs[i]["minutes"])[TINY_RUNS // 2]]
    answers = [run["energy_joules"] for run in runs if run["minutes"] == middle["minutes"]]
    assert report["score"]["energy_joules"] / report["score"]["scaling_factor"] == pytest.approx(middle["energy_joules"], rel=1e-12)
    assert any(energy_score == pytest.approx(answer, rel=1e-12) for answer in answers), (energy_score, answers)
    (ours,) = scoring.score_paths(folder, "6.1.0", verdict.judged_score, jobs=1)
    assert ours.energy_joules == pytest.approx(middle["energy_joules"] * ours.scaling_factor, rel=1e-12)
    # Run 1's power log replaced by one from eight minutes later (another run's): the same command reports again,
    # refuses that log by name and packages without it, as `mlperf-wf score` on the run folder judges it.
    node = Path("results/tiny/llama2_70b_lora/runs/1/power/result/node_0.txt")  # as the report names it
    shifted = [json.loads(line.removeprefix(":::MLLOG ")) for line in (other / node).read_text().splitlines()]
    (other / node).write_text("".join(f":::MLLOG {json.dumps({**record, 'time_ms': record['time_ms'] + 480_000})}\n" for record in shifted))
    again = snakemake(other, "--cores", "2", *targets, "--cache", "--config", f"runs={TINY_RUNS}", STAND_IN_POWER, cache=tiny_project_cache)
    assert f"mlperf-wf: {node}: changed since the report (report.json) was made: reporting again" in again.stderr, again.stderr[-3000:]
    remade = json.loads((other / "results/tiny/llama2_70b_lora/report.json").read_text())
    assert remade["runs"][1]["energy_joules"] is None and any("does not cover the run" in p for p in remade["runs"][1]["power_problems"])
    assert remade["score"]["energy_joules"] is None
    assert sorted(p.name for p in (folder / "power").iterdir()) == [f"result_{i}" for i in range(TINY_RUNS) if i != 1]
    (scored,) = scoring.score_paths(other / "results/tiny/llama2_70b_lora", "6.1.0", verdict.judged_score, jobs=1)
    assert scored.energy_joules is None


def test_the_plot_job_draws_the_reference_logs_the_config_names(tmp_path):
    workdir = new_workdir(tmp_path / "rcp")
    folder = tmp_path / "rcp_logs"
    folder.mkdir()
    figure = "results/tiny/llama2_70b_lora/plots/convergence.png"
    plot_lines = [
        line
        for line in snakemake(workdir, "-n", "-p", figure, "--config", f"reference_logs={{llama2_70b_lora: {folder}}}").stdout.splitlines()
        if "mlperf-wf plot" in line
    ]
    assert len(plot_lines) == 1 and f"--reference-logs {folder} " in plot_lines[0]
    assert "--reference-logs" not in snakemake(workdir, "-n", "-p", figure).stdout


@pytest.mark.slow
def test_a_second_benchmark_demoed_after_the_first_leaves_it_in_the_summary_and_its_package(tiny_project, tiny_mirrors, tmp_path):
    """llama2_70b_lora's campaign finished (round 6.1.0); rgat (round 5.1.0) is demoed alone in the same folder after
    it: the summary has both benchmarks, each round has its package with its benchmark's runs, and nothing of the first
    campaign is made again."""
    workdir = tmp_path / "both"
    shutil.copytree(tiny_project, workdir, symlinks=True)
    tiny_mirrors.seed(workdir, "rgat")
    first = workdir / "results/tiny/llama2_70b_lora"
    kept = {path: path.read_bytes() for path in [first / "report.json", *sorted(first.glob("runs/*/result.txt"))]}
    snakemake(workdir, "--cores", "2", "--config", "benchmarks=[rgat]", "runs=1")
    assert {path: path.read_bytes() for path in kept} == kept, "the first campaign's report and runs are as they were"
    rows = (workdir / "results/tiny/summary.csv").read_text().splitlines()[1:]
    assert sorted(row.split(",")[0] for row in rows) == ["llama2_70b_lora", "rgat"]
    packages = workdir / "results/tiny/submission"
    lora = sorted(p.name for p in (packages / "6.1.0-closed/package/mlperf-workflow/results/cpu-tiny/llama2_70b_lora").iterdir())
    assert lora == [f"result_{i}.txt" for i in range(TINY_RUNS)]
    rgat = packages / "5.1.0-closed/package/mlperf-workflow/results/cpu-tiny/rgat"
    assert sorted(p.name for p in rgat.iterdir()) == ["result_0.txt"]
    assert not (packages / "5.1.0-closed/package/mlperf-workflow/results/cpu-tiny/llama2_70b_lora").exists()
