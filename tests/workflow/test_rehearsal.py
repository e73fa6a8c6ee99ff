"""The full-scale rehearsal: every benchmark's real full-scale train job on a SLURM cluster in a box, up to the GPU.

One campaign (``tests/rehearsal/campaign.py``) on a box of two nodes (``tests/rehearsal/cluster.py``) runs, for every
benchmark with a rehearsal (``tests/benchmarks/<name>/rehearsal.py``), the plan's exact train-job command through
``snakemake --profile slurm`` and the official executor plugin, with pyxis's container options honoured by the
stand-in (``tests/rehearsal/enroot.py``), on data in its published layout prepared by the workflow's own full-scale
preparation. Inside, the reference's entry process runs its benchmark's probe (``tests/rehearsal/probe.py``: the
reference's own parser and files at the pinned commit, every path opened, every variable read), then forms the world
with gloo. Run 0 of each benchmark must pass every check; run 1 has its last rank fail on purpose, so the job must
fail (and, retried by the profile, start again from a clean run folder).
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from mlperf_wf.config import registry
from mlperf_wf.results import compliance
from tests.rehearsal import campaign, cluster, spec
from tests.rehearsal.probe import FAILED_ON_PURPOSE

REHEARSALS = spec.rehearsals()
NAMES = sorted(REHEARSALS)
FAILING_RUN = campaign.FAILING_RUN


def _skip_reason() -> str | None:
    missing = cluster.missing_requirements()
    if missing:
        return missing
    absent = {name: spec.missing_sources(r) for name, r in REHEARSALS.items() if spec.missing_sources(r)}
    return f"the reference sources are not in {spec.REFERENCE_SOURCES}: {absent}" if absent else None


pytestmark = pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))


@pytest.fixture(scope="module")
def box(rehearsal_box):
    return rehearsal_box


@pytest.fixture(scope="module")
def pyxis_campaign(rehearsal_campaign) -> campaign.Campaign:
    """Runs 0 and 1 of every benchmark (run 1 has a failing rank), without the profile's retry (shown once, below)."""
    return rehearsal_campaign


RETRIED = "retinanet"
"""The benchmark whose failing run the profile retries (the retry is the plan's, the same for every benchmark)."""


@pytest.fixture(scope="module")
def retried_campaign(box, tmp_path_factory) -> campaign.Campaign:
    """Run 1 of one benchmark fails on purpose, with the SLURM profile's own retry."""
    rehearsals = [REHEARSALS[RETRIED]]
    workdir = tmp_path_factory.mktemp("retried") / "project"
    configfile = campaign.prepare(workdir, rehearsals, "pyxis", runs=2, fail=campaign.failing_ranks(rehearsals))
    return campaign.run_on_box(box, workdir, configfile, rehearsals, "pyxis", runs=2)


BAD_NODE, SLOW_NODE, BAD_NODE_RUN = "n2", "n1", 2
"""The nodes made bad on purpose (a file of the prepared data missing in one's view; the other's matrix multiply slowed
by a CPU quota below the expectation), both in the run's first allocation, and the run they spoil."""


def _one_core_tflops() -> float:
    """The node check's CPU matrix multiply per second of this process's CPU time: what one core does whatever else runs
    beside it (a wall-clock measure here would be the test suite's load)."""
    from mlperf_wf.run import node_check

    return node_check.cpu_matmul_tflops(node_check.CPU_MATRIX, 0.5, clock=time.process_time)


@pytest.fixture(scope="module")
def bad_node_campaign(box, retried_campaign) -> dict:
    """Run 2 of the retried campaign's benchmark, in its folder, with the profile's retry and two nodes of its first
    allocation bad: :data:`BAD_NODE` sees one file of the prepared data missing (a stale mount there), and
    :data:`SLOW_NODE`'s check runs under a CPU quota (1 % of a core) once started (a throttled device), held to an expectation a healthy
    node meets. The node check must name both, fail the job, and the retry must run without them."""
    import yaml

    from tests import cpu_quota

    if not cpu_quota.available():
        pytest.skip("needs root and the cgroup v1 cpu controller")
    rehearsals = [REHEARSALS[RETRIED]]
    workdir = retried_campaign.workdir
    configfile = campaign.prepare(workdir, rehearsals, "pyxis", runs=BAD_NODE_RUN + 1, prepared=True)
    # a fifteenth of what one core does: a healthy node's probe (two threads, whatever else the test suite runs beside
    # it: about 40 % of this each under a full make test) stays five times above it, the slow node's 1 % of one core as
    # far below
    expected = _one_core_tflops() / 15
    settings = yaml.safe_load(configfile.read_text())
    configfile.write_text(yaml.safe_dump({**settings, "node_check": {"matmul_tflops_per_device": expected}}))
    prepared = workdir / "resources" / "full" / "prepared" / RETRIED / "dataset"
    stale = prepared.with_name(".stale-dataset")  # beside it: the tree's relative links resolve the same
    shutil.copytree(prepared, stale, symlinks=True)
    # a file the prepared tree's stamps list (its links into the shards count; Snakemake's hidden timestamp does not)
    missing = next(path for path in sorted(stale.rglob("*")) if path.is_file() and not path.name.startswith("."))
    missing.unlink()
    box.bind_on(BAD_NODE, stale, prepared)
    try:
        with cpu_quota.cpu_quota(1) as cgroup, box.slow_on(SLOW_NODE, ("node-check", "probe"), cgroup) as slowed:
            ran = campaign.run_on_box(box, workdir, configfile, rehearsals, "pyxis", runs=BAD_NODE_RUN + 1, runs_of={RETRIED: [BAD_NODE_RUN]})
    finally:
        box.unbind_on(BAD_NODE, prepared)
    # as the job names it: the plan's paths are relative to the workflow folder
    return {"campaign": ran, "missing": (prepared / missing.relative_to(stale)).relative_to(workdir), "expected": expected, "slowed": slowed}


def _explain(ran: campaign.Campaign, name: str, run: int) -> str:
    problems = [f"rank {r['rank']} on {r['host']}: {r['problem'][-2000:]}" for r in ran.ranks(name, run) if r["status"]]
    return "\n".join(problems) + f"\n--- train log:\n{ran.train_log(name, run)[-3000:]}\n--- snakemake:\n{ran.output[-1500:]}"


def first_attempt(records: list[dict]) -> list[dict]:
    """The rank records of the first attempt of a run (a retried run has several)."""
    by_job = defaultdict(list)
    for record in records:
        by_job[record["slurm"].get("SLURM_JOB_ID")].append(record)
    return by_job[min(by_job, key=lambda job: int(job or 0))] if by_job else []


@pytest.mark.parametrize("name", NAMES)
def test_the_full_scale_job_reaches_the_gpu_with_every_path_and_the_world_as_planned(pyxis_campaign, name):
    check_reached_the_gpu(pyxis_campaign, name, REHEARSALS[name].nodes)


def check_reached_the_gpu(ran: campaign.Campaign, name: str, nodes: int) -> None:
    """Run 0 exited 0 on every node with every probe check held, and the world is ``nodes`` x GPUs per node."""
    rehearsal = REHEARSALS[name]
    result = ran.run_folder(name, ran.planned_run) / "result.txt"
    ranks = ran.ranks(name, ran.planned_run)
    assert result.exists() and ranks and all(r["status"] == 0 for r in ranks), _explain(ran, name, ran.planned_run)
    # every check the probe made held, and it made some: paths opened, variables read
    checks = [check for r in ranks for check in r["checked"]]
    assert all(check["held"] for check in checks), [c for c in checks if not c["held"]]
    assert any(check["kind"] in ("path", "glob") for check in checks), "the probe opened no input of the reference"
    if any("left at" in check["detail"] for check in checks):
        # a limit the reference raises, where the box's hard limit is lower: the line tried, before the launch, and said so
        for limit, value in registry.load_benchmark(name).full.ulimits.items():
            assert f"could not raise the {limit} limit to {value}" in ran.train_log(name, ran.planned_run)
    if not rehearsal.one_world:
        assert len({r["host"] for r in ranks}) == nodes, "the reference's processes ran on every node"
        return
    # the world as the reference's launcher formed it
    gpus = rehearsal.gpus_per_node
    assert len(ranks) == nodes * gpus, [(r["host"], r["rank"]) for r in ranks]
    assert sorted(r["rank"] for r in ranks) == list(range(nodes * gpus)), "every rank once"
    per_host = Counter(r["host"] for r in ranks)
    assert len(per_host) == nodes and set(per_host.values()) == {gpus}, per_host
    for host in per_host:
        assert sorted(r["local_rank"] for r in ranks if r["host"] == host) == list(range(gpus)), host
    views = [r["world"] for r in ranks]
    assert all(view.get("world_size") == nodes * gpus for view in views), "each rank sees the whole world"
    assert len({rank["master"] for view in views for rank in view["ranks"]}) == 1, "one rendezvous address"
    if registry.load_benchmark(name).full.process_model == "per_node":
        for host in per_host:
            launchers = {r["ppid"] for r in ranks if r["host"] == host}
            assert len(launchers) == 1, f"one launcher per node, as the reference starts its ranks: {host} has {launchers}"


@pytest.mark.parametrize("name", NAMES)
def test_the_reference_s_log_lines_reach_the_run_s_result_file_from_rank_0_and_the_checker_reads_them(pyxis_campaign, name):
    check_log_lines(pyxis_campaign, name)


def check_log_lines(ran: campaign.Campaign, name: str) -> None:
    """Run 0's result file holds the reference's start-of-run lines, written once, and the checker reads them."""
    result = ran.run_folder(name, ran.planned_run) / "result.txt"
    assert result.exists(), _explain(ran, name, ran.planned_run)
    facts = compliance.read_facts(result)
    assert "cache_clear" in facts.values and "init_start" in facts.values, facts.values
    # cache_clear is what the launch line did on the run's nodes before the reference started, not a constant
    job_log = ran.train_log(name, ran.planned_run)
    dropped = "mlperf-wf: page cache dropped on" in job_log
    assert dropped or "mlperf-wf: the page cache was not dropped on" in job_log, f"the launch line did not drop the page cache:\n{job_log[-2000:]}"
    assert facts.values["cache_clear"] is dropped, (facts.values["cache_clear"], job_log[-1000:])
    lines = [line for line in result.read_text().splitlines() if '"key": "init_start"' in line]
    assert len(lines) == 1, "one rank writes the log"
    # the submission lines, where the reference writes them before its first GPU step (qwen's NeMo-RL logger writes
    # them after it): the workflow's values, once
    if "submission_benchmark" in facts.values:
        assert facts.values["submission_benchmark"] == registry.load_benchmark(name).submission_benchmark, facts.values
        assert facts.values.get("submission_org") == campaign.ORG and facts.values.get("submission_platform") == campaign.PLATFORM
        assert result.read_text().count('"key": "submission_benchmark"') == 1
    verdict = compliance.check(result, _ruleset(name))
    if hasattr(spec.module(name), "at_the_target"):
        # the end of a converged run ran too: one run_stop, success, from one rank, and the reference's end-of-run keys
        assert facts.run_stops == ["success"], facts.run_stops
        keys = [record["key"] for record in map(compliance.mllog_record, result.read_text().splitlines()) if record]
        assert keys[keys.index("run_stop") :] == ["run_stop", "trained_samples", "epoch_stop"], keys
        assert verdict.verdict == "failed", verdict  # no training between init_start and run_stop
    else:
        # the log ends where the probe took over: the checker reads it and misses only what a run logs later
        assert verdict.verdict == "failed" and any("run_stop" in problem for problem in verdict.problems), verdict
    if "submission_benchmark" in facts.values:
        assert not any("submission_" in message for message in verdict.messages), verdict.messages


def _ruleset(name: str) -> str:
    from mlperf_wf.config import mlperf_rules

    return mlperf_rules.resolve_ruleset(registry.load_benchmark(name).submission_benchmark, "latest")


@pytest.mark.parametrize("name", NAMES)
def test_a_failing_rank_fails_the_job_and_the_job_s_log_says_so(pyxis_campaign, name):
    check_failing_rank_fails(pyxis_campaign, name)


def check_failing_rank_fails(ran: campaign.Campaign, name: str) -> None:
    """Run 1, whose last rank exits non-zero, is a failed job whose own log says why."""
    records = ran.ranks(name, ran.failing_run)
    assert any(r["status"] == FAILED_ON_PURPOSE for r in records), _explain(ran, name, ran.failing_run)
    assert not (ran.run_folder(name, ran.failing_run) / "result.txt").exists(), "a run with a failed rank is not a finished run"
    log = ran.train_log(name, ran.failing_run)
    # the rank's own words, or its launcher's account of it (flux1's torchrun shows local rank 0's output only)
    assert "fails on purpose" in log or re.search(r"exitcode\s*:\s*5|exit code 5", log), f"the job's own log says why it failed:\n{log[-2000:]}"
    assert f"results/{name}/runs/{ran.failing_run}/result.txt" in ran.output and "Error in rule train" in ran.output


@pytest.mark.skipif(RETRIED not in REHEARSALS, reason=f"{RETRIED} is not rehearsed in this session")
def test_a_retried_run_starts_in_a_clean_run_folder(retried_campaign):
    """The profile's retry (retries: 1) reruns the failed job; the plan's train job empties the run folder first, so
    nothing the failed attempt wrote (checkpoints a reference would resume from) is there."""
    records = retried_campaign.ranks(RETRIED, FAILING_RUN)
    attempts = {r["slurm"].get("SLURM_JOB_ID") for r in records}
    assert len(attempts) == 2, f"the profile retries a failed run once: attempts {attempts}"
    first = first_attempt(records)
    retried = [r for r in records if r not in first]
    clean = [check for r in retried for check in r["checked"] if check["kind"] == "clean"]
    assert clean and all(check["held"] for check in clean), f"the retry started beside the failed attempt's files: {clean}"
    assert "removed what an earlier attempt left: .rehearsal-failed-attempt" in retried_campaign.train_log(RETRIED, FAILING_RUN)


@pytest.mark.skipif(RETRIED not in REHEARSALS, reason=f"{RETRIED} is not rehearsed in this session")
def test_bad_nodes_are_named_the_job_fails_and_the_retry_runs_without_them(bad_node_campaign):
    from mlperf_wf.run import node_check

    ran, missing = bad_node_campaign["campaign"], bad_node_campaign["missing"]
    assert ran.returncode == 0, ran.output[-3000:]
    assert bad_node_campaign["slowed"], f"no node-check probe on {SLOW_NODE} was slowed"
    attempts = node_check.attempts(ran.workdir / "results" / RETRIED / "node-check" / str(BAD_NODE_RUN))
    assert [attempt["passed"] for attempt in attempts] == [False, True], attempts
    first, retry = attempts
    assert {BAD_NODE, SLOW_NODE} <= set(first["hosts"]) and sorted(first["bad"]) == sorted([BAD_NODE, SLOW_NODE]), first
    assert first["bad"][BAD_NODE] == f"data: prepared data: {missing} is missing on this node"
    slow = first["records"][SLOW_NODE]["checks"]["matmul"]
    expected = bad_node_campaign["expected"]
    assert slow["expected_tflops"] == pytest.approx(expected, rel=1e-5) and slow["tflops"]["cpu"] < expected, slow  # as the plan wrote it
    assert first["bad"][SLOW_NODE] == f"matmul: {slow['problem']}" and "is below the expected" in slow["problem"]
    assert first["message"].startswith("node check failed on ") and "the retry excludes them" in first["message"]
    assert not {BAD_NODE, SLOW_NODE} & set(retry["hosts"]) and len(retry["hosts"]) == REHEARSALS[RETRIED].nodes
    # the retry's healthy nodes met the same expectation, measured at the same time
    for host, record in retry["records"].items():
        assert record["checks"]["matmul"]["ok"] and record["checks"]["matmul"]["tflops"]["cpu"] >= expected, (host, record)
    # every node of each attempt ran the checks: the all-reduce across the job's nodes (TCP over the box's bridge)
    for attempt in attempts:
        for host, record in attempt["records"].items():
            assert record["checks"]["collective"]["ok"] and record["checks"]["collective"]["backend"] == "tcp", (host, record)
    assert node_check.excluded_nodes(ran.workdir / "results" / node_check.EXCLUDED_FILE) == sorted([BAD_NODE, SLOW_NODE])
    provenance = json.loads((ran.run_folder(RETRIED, BAD_NODE_RUN) / "provenance.json").read_text())
    assert [(a["attempt"], a["passed"]) for a in provenance["node_checks"]] == [(a["attempt"], a["passed"]) for a in attempts]
    # the reference started only once, on the retry's nodes
    ranks = ran.ranks(RETRIED, BAD_NODE_RUN)
    assert ranks and {r["host"] for r in ranks} == set(retry["hosts"]), ranks


REHEARSED = tuple(NAMES)
"""Benchmarks ``mlperf-wf rehearse`` runs on the box, in one invocation: one-node launches (accelerate, torchrun) and
two-node ones (torchrun per node, srun per GPU, NeMo-Run, qwen35_397b_grpo's Ray cluster). The probe's stand-in for the
training loop takes torch optimizer steps on CPU (``probe._train_until_stopped``; bert's: a small Estimator's steps
with the real TensorFlow), which the images' rehearsal hook counts and stops; where the framework's own step limit
ends the run (``full.rehearsal_stop``: qwen35_397b_grpo's ``grpo.max_num_steps``), the benchmark's probe takes that
many steps on its training ranks and the hook only counts and records them."""
REHEARSED_STEPS = 2


def _tree(folder: Path) -> dict[str, int]:
    return {str(path): path.lstat().st_mtime_ns for path in sorted(folder.rglob("*"))}


@pytest.fixture(scope="module")
def rehearse_command(box, pyxis_campaign) -> dict:
    """``mlperf-wf rehearse`` of :data:`REHEARSED` in the pyxis campaign's folder (its data prepared, its images built),
    through the SLURM profile as the campaign ran."""
    import os
    import subprocess
    import sys

    from tests.rehearsal import enroot

    workdir = pyxis_campaign.workdir
    results = _tree(workdir / "results")
    env = campaign.snakemake_env({**box.env, enroot.IMAGES_VARIABLE: str(workdir / "box-images")})
    env["PATH"] = f"{workdir / 'box-bin'}{os.pathsep}{env['PATH']}"
    argv = [sys.executable, "-m", "mlperf_wf", "--root", str(workdir), "rehearse", *REHEARSED, "--steps", str(REHEARSED_STEPS)]
    argv += ["--profile", str(spec.ROOT / "profiles" / "slurm"), "--configfile", str(workdir / "rehearsal-pyxis.yaml")]
    argv += ["--snakemake=--slurm-status-command squeue --slurm-init-seconds-before-status-checks 3 --latency-wait 5"]
    proc = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=1200, start_new_session=True, check=False)
    return {"proc": proc, "workdir": workdir, "results_before": results, "results_after": _tree(workdir / "results")}


def _rehearsal_explained(workdir: Path, name: str) -> str:
    """A rehearsal's job log and the probe's problems in its job (its records' folder of the rehearsal's seed)."""
    from mlperf_wf.results import rehearse

    job_log = rehearse.job_log(workdir / "rehearsal" / name, REHEARSED_STEPS)
    problems = [
        f"rank {record.get('rank')} on {record.get('host')}: {record['problem'][-1500:]}"
        for path in sorted((workdir / "rehearsal" / name).glob(f"seed-{campaign.SEED_BASE - 1}/rank-*.json"))
        for record in [json.loads(path.read_text())]
        if record.get("problem")
    ]
    return f"--- {name}: probe problems:\n" + "\n".join(problems) + f"\n--- job log:\n{job_log.read_text()[-3000:] if job_log.exists() else ''}"


def test_rehearse_passes_and_writes_nothing_into_the_campaign_s_results(rehearse_command):
    from mlperf_wf.results import rehearse

    proc = rehearse_command["proc"]
    explained = "\n".join(_rehearsal_explained(rehearse_command["workdir"], name) for name in REHEARSED)
    failed = "\n".join(line for line in proc.stdout.splitlines() if line.startswith("rehearsal of ") or line.strip().startswith(rehearse.FAILED))
    assert proc.returncode == 0, failed + "\n---\n" + proc.stdout[-3000:] + proc.stderr[-1500:] + explained
    assert rehearse_command["results_after"] == rehearse_command["results_before"], "the rehearsal changed the campaign's results"


@pytest.mark.parametrize("name", REHEARSED)
def test_rehearse_runs_the_full_scale_job_stops_it_after_its_steps_and_says_each_check(rehearse_command, name):
    from mlperf_wf.results import rehearse

    proc, workdir = rehearse_command["proc"], rehearse_command["workdir"]
    rehearsal = REHEARSALS[name]
    job_log = rehearse.job_log(workdir / "rehearsal" / name, REHEARSED_STEPS)
    log = job_log.read_text(errors="replace")[-3000:] if job_log.exists() else ""
    assert f"rehearsal of {name} (job log" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    block = proc.stdout.split(f"rehearsal of {name} (job log")[1].split("\nrehearsal of ")[0]
    lines = block.strip().splitlines()[1:]
    outcomes = [line.strip().split("  ")[0] for line in lines]
    from mlperf_wf.config import registry

    # one TensorFlow process per node (bert): its reads go through TensorFlow's own file system, unseen by Python's audit
    tensorflow = registry.load_benchmark(name).full.gpus_per_process == "node"
    # no GPU in the box: the kernels' check is not reached, the rest holds
    inputs = "not reached" if tensorflow else "passed"
    assert outcomes == ["passed", inputs, "not reached", "passed", "passed", "passed"], f"{block}\n--- job log:\n{log}"
    if registry.load_benchmark(name).full.rehearsal_stop is not None:
        check_stopped_by_the_framework(proc.stdout, lines, job_log.read_text(errors="replace"), workdir, name)
        return
    per_node = 1 if tensorflow else rehearsal.gpus_per_node
    ranks = rehearsal.nodes * per_node
    assert f"{ranks} ranks on {rehearsal.nodes} node(s)" in lines[0] and "peak GPU memory: not reached (no CUDA)" in lines[3]
    assert lines[5].endswith(f"all {ranks} ranks exited 0 after {REHEARSED_STEPS} steps")
    records = rehearse.rank_records(workdir / "rehearsal" / name / "run")
    assert [(r["steps"], r["status"], r["how"]) for r in records] == [(REHEARSED_STEPS, 0, f"stopped after {REHEARSED_STEPS} training steps")] * ranks
    assert f"rehearsal of {name}: {rehearsal.nodes} node(s) x {rehearsal.gpus_per_node} GPUs" in proc.stdout
    assert f" = {ranks} ranks, {REHEARSED_STEPS} training steps" in proc.stdout.split(f"rehearsal of {name}: ")[1].splitlines()[0]


def check_stopped_by_the_framework(stdout: str, lines: list[str], log: str, workdir: Path, name: str) -> None:
    """A rehearsal the framework's own step limit ends: its training role's ranks (not the generation nodes') each
    recorded the steps, the appended limit reached the framework, and the job exited 0 through its driver."""
    from mlperf_wf.plan import node_roles
    from mlperf_wf.results import rehearse

    rehearsal, stop = REHEARSALS[name], registry.load_benchmark(name).full.rehearsal_stop
    split = registry.load_benchmark(name).full.geometry.node_split
    train_nodes = node_roles.split_nodes(name, split, rehearsal.nodes, None, rehearsal=True).train if split else rehearsal.nodes
    ranks, limit = train_nodes * rehearsal.gpus_per_node, stop.override.format(steps=REHEARSED_STEPS)
    assert train_nodes < rehearsal.nodes or not split, "a generation node takes no training step"
    assert f"{ranks} ranks on {train_nodes} node(s)" in lines[0] and "peak GPU memory: not reached (no CUDA)" in lines[3]
    assert lines[5].endswith(
        f"all {ranks} training ranks recorded {REHEARSED_STEPS} steps, then the framework's own step limit ({limit}) ended the run:"
        " its ranks are ended by its driver, whose exit status is the job's (Snakemake's, above)"
    ), lines[5]
    records = rehearse.rank_records(workdir / "rehearsal" / name / "run")
    how = f"took {REHEARSED_STEPS} training steps; the run is ended by the framework's own step limit"
    assert [(r["steps"], r["status"], r["how"]) for r in records] == [(REHEARSED_STEPS, 0, how)] * ranks
    # the driver read the appended limit through the framework's own config loader, and its training ranks took it
    assert f"took {[REHEARSED_STEPS] * ranks} steps ({limit.lstrip('+')})" in log, log[-3000:]
    geometry = f"{rehearsal.nodes} node(s) x {rehearsal.gpus_per_node} GPUs, of which the {train_nodes} training node(s)' {ranks} ranks take training steps"
    assert f"{geometry}, {REHEARSED_STEPS} training steps" in stdout and f"a training step is {stop.step}" in stdout


BUNDLED = tuple(name for name in ("retinanet", "bert") if name in REHEARSALS)
"""Benchmarks rehearsed from an offline bundle: a two-node and a one-node one."""


@pytest.fixture(scope="module")
def bundle_campaign(box, pyxis_campaign, tmp_path_factory) -> dict:
    """The offline bundle of :data:`BUNDLED`, exported from the pyxis campaign's folder (its datasets verified there)
    with their images pushed to a loopback registry and pinned, then imported inside a network namespace with no
    interface up into a new site folder, which prepares its data with the workflow's rules and runs each benchmark's
    full-scale job on the box from the imported enroot images; the registry is gone before anything is imported."""
    import subprocess
    import sys

    import yaml

    from tests.oci_registry import LoopbackRegistry, folder_layer, push_image
    from tests.rehearsal import images

    if not (shutil.which("skopeo") and shutil.which("mksquashfs") and shutil.which("unsquashfs")):
        pytest.skip("needs skopeo and squashfs-tools (bash .ci/run installs them)")
    rehearsals = [REHEARSALS[name] for name in BUNDLED]
    base = tmp_path_factory.mktemp("bundled")
    site = base / "site"
    (site / "config").mkdir(parents=True)
    connected, out = pyxis_campaign.workdir, base / "bundle"
    with LoopbackRegistry() as registry_server:
        pins = {}
        for rehearsal in rehearsals:
            records = site / "rehearsal" / rehearsal.benchmark
            folder = images.build_image(rehearsal, f"bundle-{rehearsal.benchmark}", base / "image-folders", records)
            described = json.loads((folder / "image.json").read_text())
            repository = f"mlperf-workflow/{rehearsal.benchmark}"
            digest = push_image(registry_server.host, repository, "rehearsal", [folder_layer(folder / "layer")], described["env"], described["workdir"])
            pins[rehearsal.benchmark] = (f"{registry_server.host}/{repository}:rehearsal", digest)
        export_config = connected / "bundle-export.yaml"
        export_config.write_text(yaml.safe_dump({"full_container": {name: {"image": image, "digest": digest} for name, (image, digest) in pins.items()}}))
        argv = [sys.executable, "-m", "mlperf_wf", "--root", str(connected), "bundle", "export", *(f"--benchmark={name}" for name in BUNDLED)]
        argv += ["--configfile", str(connected / "rehearsal-pyxis.yaml"), "--configfile", str(export_config), "--out", str(out)]
        exported = subprocess.run(argv, capture_output=True, text=True)
    assert exported.returncode == 0, exported.stderr[-3000:]
    expect = exported.stdout.split("bundle.json ", 1)[1].split(")", 1)[0]
    shutil.copytree(campaign.ROOT / "config", site / "config", dirs_exist_ok=True)
    argv = ["unshare", "--net", sys.executable, "-m", "mlperf_wf", "--root", str(site), "bundle", "import", str(out), "--images", str(site / "images")]
    imported = subprocess.run([*argv, "--expect", expect], capture_output=True, text=True)
    assert imported.returncode == 0, imported.stderr[-3000:]
    configfile = campaign.prepare(site, rehearsals, "pyxis", runs=1, site=pins)
    ran = campaign.run_on_box(box, site, configfile, rehearsals, "pyxis", runs=1, retries=0)
    return {"campaign": ran, "pins": pins, "site_config": yaml.safe_load((site / "config" / "site.yaml").read_text())}


@pytest.mark.parametrize("name", BUNDLED)
def test_from_an_offline_bundle_the_full_scale_job_starts_the_imported_image_and_reaches_the_gpu(bundle_campaign, name):
    ran, local = bundle_campaign["campaign"], bundle_campaign["site_config"]["full_container"][name]
    assert ran.returncode == 0, _explain(ran, name, 0)
    image, digest = bundle_campaign["pins"][name]
    assert (local["image"], local["digest"]) == (image, digest) and Path(local["squashfs"]).is_file()
    ranks = ran.ranks(name, 0)
    rehearsal = REHEARSALS[name]
    assert ranks and all(r["status"] == 0 for r in ranks), _explain(ran, name, 0)
    assert len({r["host"] for r in ranks}) == rehearsal.nodes
    provenance = json.loads((ran.run_folder(name, 0) / "provenance.json").read_text())
    assert provenance["image"] == f"{image}@{digest}" and all(a["passed"] for a in provenance["node_checks"])
    # the line the job ran (rendered from the spec it wrote beside its log, and recorded in its provenance)
    assert f"--container-image={local['squashfs']}" in provenance["command"], "the job starts the site's image file, not a registry's"


DOCKER_NAMES = sorted(
    name
    for name, r in REHEARSALS.items()
    # an AMD image needs /dev/kfd and /dev/dri, which Docker checks on the host before any runtime starts: not in the box
    if "docker" in r.launchers or (registry.load_benchmark(name).full.geometry.nodes == 1 and registry.load_benchmark(name).full.accelerator != "amd")
)
"""Benchmarks rehearsed with the docker launcher too: the full-scale default of every one-node benchmark."""


DOCKER_FAILING = ("bert", "retinanet")
"""One-node benchmarks whose failing run is made with docker too: `docker run` hands back the container's status the
same way for every image (the pyxis campaign fails a rank of every benchmark); bert's two processes, retinanet's torchrun."""


DOCKER_RUNS = (2, 3)
"""The docker campaign's planned and failing runs: made after the pyxis campaign's runs 0 and 1, in its folder."""


@pytest.fixture(scope="module")
def docker_campaign(box, docker_host, pyxis_campaign) -> campaign.Campaign:
    """Run 2 of every one-node benchmark (and run 3, with a failing rank, of ``DOCKER_FAILING``), each in its image
    pushed to a loopback registry and pinned by digest, through the plan's `docker run` on the box's Docker node; in
    the pyxis campaign's folder, whose datasets its own rules verified and prepared (the launcher does not change them)."""
    from tests.oci_registry import LoopbackRegistry

    rehearsals = [REHEARSALS[name] for name in DOCKER_NAMES]
    planned, failing = DOCKER_RUNS
    runs = failing + 1
    with LoopbackRegistry() as registry_server:
        docker = campaign.DockerRegistry(docker_host, registry_server.host)
        fail = campaign.failing_ranks(rehearsals, nodes=1, run=failing)
        configfile = campaign.prepare(pyxis_campaign.workdir, rehearsals, "docker", runs=runs, fail=fail, docker=docker, prepared=True)
        runs_of = {name: [planned, failing] if name in DOCKER_FAILING else [planned] for name in DOCKER_NAMES}
        docker_env = {"DOCKER_HOST": docker_host["DOCKER_HOST"]}
        yield campaign.run_on_box(
            box, pyxis_campaign.workdir, configfile, rehearsals, "docker", runs=runs, retries=0, docker_env=docker_env, runs_of=runs_of,
            planned_run=planned, failing_run=failing,
        )  # fmt: skip


@pytest.mark.parametrize("name", DOCKER_NAMES)
def test_the_docker_job_reaches_the_gpu_with_every_path_and_its_log_lines(docker_campaign, name):
    check_reached_the_gpu(docker_campaign, name, nodes=1)
    check_log_lines(docker_campaign, name)
    if name in DOCKER_FAILING:
        check_failing_rank_fails(docker_campaign, name)


def test_the_box_has_two_nodes_with_their_own_names(box):
    import os
    import subprocess

    proc = subprocess.run(
        ["srun", "--nodes=2", "--ntasks-per-node=1", "sh", "-c", 'echo "$(hostname) $SLURM_NODEID $(getent hosts n1 | cut -d" " -f1)"'],
        capture_output=True,
        text=True,
        env={**os.environ, **box.env},
        timeout=60,
        check=True,
    )
    lines = sorted(proc.stdout.split("\n"))[1:]
    assert [line.split()[1] for line in lines] == ["0", "1"] and len({line.split()[0] for line in lines}) == 2, lines
    assert len({line.split()[2] for line in lines}) == 1 and not lines[0].split()[2].startswith("127.")


@pytest.mark.skipif(bool(spec.os.environ.get(spec.ONLY_VARIABLE)), reason="a chosen subset is rehearsed")
def test_every_benchmark_has_a_rehearsal():
    assert NAMES == sorted(registry.benchmark_names()), (
        f"benchmarks without tests/benchmarks/<name>/rehearsal.py: {set(registry.benchmark_names()) - set(NAMES)}"
    )


WRITERS_PER_NODE, LINES_PER_WRITER = 4, 200


def test_several_nodes_logging_into_one_result_file_leave_whole_lines_in_time_order(box, tmp_path):
    """Eight processes on two nodes log into one run's result file at once, through mlperf-logging with the images'
    start-up hooks and the launch line's parts folder (as gpt3's last pipeline rank and rank 0, or deepseekv3_671b's
    last stage every step): each writes a file of its own, and the merge the train job runs after the run leaves every
    line whole, every writer's lines in their order, the whole in time order."""
    import os
    import subprocess
    import sys

    from mlperf_wf.plan import launch
    from mlperf_wf.run import mllog_parts

    result = tmp_path / "run" / "result.txt"
    result.parent.mkdir()
    script = (
        "import os\nfrom mlperf_logging import mllog\n"
        "mllog.config(filename=os.environ['COMPLIANCE_FILE'])\nlogger = mllog.get_mllogger()\n"
        f"for i in range({LINES_PER_WRITER}):\n"
        "    logger.event(key='tracked_stats', value={'step': i, 'padding': 'x' * 3000}, metadata={'rank': int(os.environ['SLURM_PROCID'])})\n"
    )
    env = {
        **os.environ,
        **box.env,
        "PYTHONPATH": str(spec.ROOT / "containers" / "hooks"),
        "COMPLIANCE_FILE": str(result),
        launch.MLLOG_PARTS_VARIABLE: str(mllog_parts.parts_folder(result)),
    }
    srun = ["srun", "--nodes=2", f"--ntasks-per-node={WRITERS_PER_NODE}", sys.executable, "-c", script]
    subprocess.run(srun, env=env, timeout=300, check=True, capture_output=True)
    folder = mllog_parts.parts_folder(result)
    parts = sorted(folder.iterdir()) if folder.is_dir() else []
    assert len(parts) == 2 * WRITERS_PER_NODE and not result.exists(), f"one file per writer in {folder}: {[p.name for p in parts]}"
    assert len({part.name.split(".")[2] for part in parts}) == 2  # <result name>.<host>.<pid>: the two nodes'
    mllog_parts.merge(result)
    records = [compliance.mllog_record(text) for text in result.read_text().splitlines()]
    assert len(records) == 2 * WRITERS_PER_NODE * LINES_PER_WRITER and all(records), "a torn or interleaved line"
    times = [record["time_ms"] for record in records]
    assert times == sorted(times)
    steps = defaultdict(list)
    for record in records:
        steps[record["metadata"]["rank"]].append(record["value"]["step"])
    assert all(found == list(range(LINES_PER_WRITER)) for found in steps.values()) and len(steps) == 2 * WRITERS_PER_NODE
