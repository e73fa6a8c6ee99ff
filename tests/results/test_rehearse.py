"""``mlperf-wf rehearse``: the rehearsal job the plan makes, and the verdicts read from what a job left."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mlperf_wf.plan import plan as planning
from mlperf_wf.results import rehearse
from tests.plan.test_plan import make_plan, workdir  # noqa: F401 - the fixture

PINNED = {"image": "registry.example:5000/mlperf/gpt3:ref-1", "digest": "sha256:" + "ab" * 32}


def test_the_rehearsal_job_is_the_full_scale_job_on_two_nodes_outside_the_results(workdir):  # noqa: F811
    plan = make_plan(workdir, scale="full", launcher="pyxis", full_container={"flux1": PINNED})
    campaign_nodes, gpus = plan.of("flux1").run_geometry()
    assert campaign_nodes > 2
    job = plan.of("flux1").rehearsal_job(3)
    run = plan.of("flux1").train_job(0)
    assert (job.resources.nodes, job.resources.gres) == (2, f"gpu:{gpus}") and job.image == run.image
    for variable in ("MLPERF_WF_REHEARSAL_STEPS=3", "MLPERF_WF_REHEARSAL_RANKS=/logdir/rehearsal-ranks", "MLPERF_WF_REHEARSAL_INPUTS=prepared=/dataset"):
        assert f"export {variable}" in job.command
    assert (
        f"{workdir}/rehearsal/flux1/run:/logdir:rw" in job.command
        and "--parallelism.data_parallel_replicate_degree=2" in job.command
        and "--out rehearsal/flux1/node-check" not in job.command
    )
    assert "rehearsal/flux1/node-check/" in job.command and "--excluded rehearsal/flux1/excluded-nodes" in job.command
    assert not re.search(r"(?<![\w/])results/", job.command), "the rehearsal writes nothing under the campaign's results"
    assert "--container-image=" in job.command and "mlperf-wf node-check probe" in job.command  # the run's launcher and node check
    # the run's own reference command, on the rehearsal's geometry
    entry = "--nproc_per_node 8 --local-ranks-filter 0 --role rank --tee 3 -m torchtitan.experiments.flux.train --job.config_file"
    assert entry in run.command and entry in job.command and "torchrun --nnodes 2 " in job.command


def test_a_benchmark_whose_model_spans_more_than_two_nodes_is_rehearsed_on_the_fewest_that_hold_one_replica(workdir):  # noqa: F811
    plan = make_plan(workdir, scale="full", launcher="pyxis")
    assert plan.of("llama31_405b").run_geometry() == (288, 8) and plan.of("llama31_405b").rehearsal_geometry() == (16, 8)  # 128 GPUs a replica
    assert plan.of("stable_diffusion").rehearsal_geometry() == (2, 8)


def test_a_benchmark_whose_nodes_split_into_roles_in_nvlink_segments_is_rehearsed_on_two_nodes_one_role_each(workdir):  # noqa: F811
    """qwen35_397b_grpo's runs split 1:3 in whole 8-node segments; its rehearsal on 2 nodes is a rehearsal geometry
    (one node a role) inside one segment, with the config as the campaign's (no rehearsal flag, segments on)."""
    plan = make_plan(workdir, scale="full", launcher="pyxis")
    name = "qwen35_397b_grpo"
    assert plan.of(name).segment_nodes() == 8 and f"--segment={plan.of(name).segment_nodes()}" in plan.of(name).train_slurm_extra()
    job = plan.of(name).rehearsal_job(3)
    assert job.resources.nodes == 2 and "++cluster.segment_size=null" in job.command and "++grpo.max_num_steps=3" in job.command
    assert plan.of(name).rehearsal_rank_nodes() == 1 and "--segment" not in plan.of(name).train_slurm_extra(rehearsal=True)


def test_a_one_node_benchmark_is_rehearsed_on_one_node(workdir):  # noqa: F811
    plan = make_plan(workdir, scale="full", launcher="docker", full_container={"retinanet": {**PINNED, "image": "r/retinanet:1"}})
    assert plan.of("retinanet").run_geometry()[0] == 1 and plan.of("retinanet").rehearsal_job(2).resources.nodes == 1


def test_a_benchmark_whose_one_process_drives_its_node_s_gpus_expects_a_rank_per_launcher_task(workdir):  # noqa: F811
    plan = make_plan(workdir, scale="full", launcher="pyxis", full_container={"bert": {**PINNED, "image": "r/bert:1"}, "flux1": PINNED})
    assert plan.of("bert").rehearsal_geometry() == (1, 8) and plan.of("bert").rehearsal_job(3).resources.tasks == 1
    assert plan.of("bert").rehearsal_ranks_per_node(3) == 1  # TensorFlow's MirroredStrategy: one process drives the 8 GPUs
    assert plan.of("flux1").rehearsal_ranks_per_node(3) == 8  # torchrun, one task a node, starts a rank per GPU
    assert plan.of("stable_diffusion").rehearsal_ranks_per_node(3) == 8  # srun's per_gpu tasks are the ranks


def test_zero_steps_is_refused_in_one_line(workdir):  # noqa: F811
    plan = make_plan(workdir, scale="full", launcher="pyxis", full_container={"gpt3": PINNED})
    with pytest.raises(planning.ConfigError, match=r"rehearsal steps: 0 is not allowed; give a whole number of training steps >= 1"):
        plan.of("gpt3").rehearsal_job(0)


QWEN = "qwen35_397b_grpo"
QWEN_ON_TWO_NODES = {"nodes": 2, "gpus_per_node": 4, "nvlink_segments": False, "rehearsal": True}
"""A two-node geometry of qwen35_397b_grpo: one policy-training node and one generation node."""


def test_a_framework_stopped_benchmark_s_rehearsal_appends_its_step_limit_and_the_campaign_s_runs_do_not(workdir):  # noqa: F811
    pinned = {QWEN: {**PINNED, "image": "r/qwen:1"}, "flux1": PINNED}
    plan = make_plan(workdir, scale="full", launcher="pyxis", full_geometry={QWEN: QWEN_ON_TWO_NODES}, full_container=pinned)
    job, run = plan.of(QWEN).rehearsal_job(3), plan.of(QWEN).train_job(0)
    # appended after the reference's own value, which NeMo-RL's Hydra overrides apply in order: the last one holds
    assert re.search(r" \+\+grpo\.max_num_steps=30 .* \+\+grpo\.max_num_steps=3'", job.command), job.command[-600:]
    assert "export MLPERF_WF_REHEARSAL_STOP=framework" in job.command and "export MLPERF_WF_REHEARSAL_STEPS=3" in job.command
    assert "max_num_steps=3'" not in run.command and "MLPERF_WF_REHEARSAL" not in run.command
    # the policy-training node's GPUs are the ranks that step; the generation node's take no optimizer step
    assert plan.of(QWEN).rehearsal_rank_nodes() == 1 and plan.of(QWEN).rehearsal_stop(3) == "++grpo.max_num_steps=3"
    # a benchmark the hook stops keeps the default mode, every node's GPUs its ranks
    torch_job = plan.of("flux1").rehearsal_job(3)
    assert "MLPERF_WF_REHEARSAL_STOP" not in torch_job.command and plan.of("flux1").rehearsal_stop(3) == ""
    assert plan.of("flux1").rehearsal_rank_nodes() == 2


def test_a_rehearsal_stop_without_its_steps_is_refused_in_one_line():
    from mlperf_wf.config.registry import load_benchmark

    full = load_benchmark(QWEN).full
    assert full.rehearsal_stop is not None and full.rehearsal_stop.override == "++grpo.max_num_steps={steps}"
    stop = {**full.rehearsal_stop.model_dump(), "override": "++grpo.max_num_steps=3"}
    with pytest.raises(ValueError, match=r"full.rehearsal_stop.override: '\+\+grpo.max_num_steps=3' must hold \{steps\} once and no other placeholder"):
        type(full).model_validate({**full.model_dump(), "rehearsal_stop": stop})


EXPECTED = rehearse.Expected("gpt3", nodes=2, gpus_per_node=2, steps=3, inputs=("checkpoint", "prepared"), campaign_nodes=8)


def _rank(rank: int, **changes) -> dict:
    record = {
        "rank": rank, "local_rank": rank % 2, "node": f"n{rank // 2 + 1}", "pid": 100 + rank, "world_size": 4,
        "rendezvous": "n1:29500", "steps_wanted": 3, "steps": 3, "step_seconds": [5.0 + rank, 0.5, 0.25],
        "opened": {"prepared": {"count": 2, "files": []}, "checkpoint": {"count": rank, "files": []}},
        "status": 0, "how": "stopped after 3 training steps", "cuda": True, "peak_gpu_memory_bytes": (rank + 1) * 2**30,
    }  # fmt: skip
    return {**record, **changes}


def _found(tmp_path: Path, ranks: list[dict], log: str = "", mllog: str | None = None) -> rehearse.Found:
    folder = tmp_path / "rehearsal" / "gpt3"
    (folder / "run" / "rehearsal-ranks").mkdir(parents=True)
    for record in ranks:
        (folder / "run" / "rehearsal-ranks" / f"rank-{record['node']}-{record['pid']}.json").write_text(json.dumps(record))
    (folder / "3-steps.log").write_text(log)
    if mllog is not None:
        (folder / "run" / "result.txt").write_text(mllog)
    return rehearse.read(folder, 3)


START = "".join(
    f':::MLLOG {{"key": "{key}", "value": true, "time_ms": 1, "event_type": "POINT_IN_TIME"}}\n' for key in ("cache_clear", "submission_org", "init_start")
)


def test_a_good_rehearsal_passes_every_check_with_its_figures(tmp_path):
    judged = rehearse.verdicts(_found(tmp_path, [_rank(r) for r in range(4)], log="step 1\n", mllog=START), EXPECTED)
    assert [v.outcome for v in judged] == [rehearse.PASSED] * 6, [v.line() for v in judged]
    world, inputs, _jit, steps, mllog, exits = judged
    assert world.detail == "4 ranks on 2 node(s) (n1, n2), local ranks 0-1 on each, rendezvous n1:29500"
    assert inputs.detail == "opened by the ranks: checkpoint 6 file(s), prepared 8 file(s)"
    assert steps.detail == "steps (slowest rank; the first from the process's start): 8.00 s, 0.50 s, 0.25 s; peak GPU memory 4.00 GiB (largest rank)"
    assert "cache_clear, init_start once each" in mllog.detail and exits.detail == "all 4 ranks exited 0 after 3 steps"


def test_the_inputs_an_entry_process_read_before_spawning_its_ranks_count_and_it_is_no_rank(tmp_path):
    ranks = [_rank(r, opened={"prepared": {"count": 0, "files": []}}) for r in range(4)]
    entry = {**_rank(0, node="n1", pid=99, steps=0, step_seconds=[]), "rank": None, "local_rank": None, "world_size": None}
    entry["how"] = "no rank: read the inputs and ended with status 0"
    entry["opened"] = {"prepared": {"count": 5, "files": []}, "checkpoint": {"count": 1, "files": []}}
    found = _found(tmp_path, [*ranks, entry], log="step 1\n", mllog=START)
    assert [record["rank"] for record in found.ranks] == [0, 1, 2, 3] and [record["pid"] for record in found.entries] == [99]
    judged = rehearse.verdicts(found, EXPECTED)
    assert [v.outcome for v in judged] == [rehearse.PASSED] * 6, [v.line() for v in judged]
    assert judged[1].detail == "opened by the ranks and their entry process: checkpoint 1 file(s), prepared 5 file(s)"
    without_entry = rehearse.verdicts(rehearse.Found(found.ranks, [], found.log, found.result_file), EXPECTED)
    assert without_entry[1].outcome == rehearse.FAILED, "the ranks alone opened nothing"


def test_a_tensorflow_process_s_reads_are_not_seen_and_its_input_check_is_not_reached(tmp_path):
    tensorflow = [_rank(r, framework="tensorflow", opened={"prepared": {"count": 0, "files": []}, "checkpoint": {"count": 0, "files": []}}) for r in range(4)]
    inputs = rehearse.verdicts(_found(tmp_path, tensorflow, mllog=START), EXPECTED)[1]
    assert (inputs.outcome, inputs.detail) == (
        rehearse.NOT_REACHED,
        "TensorFlow reads its inputs through its own file system, which Python's open audit does not see",
    )
    torch = [{**record, "framework": "torch"} for record in tensorflow]
    assert rehearse.verdicts(_found(tmp_path / "torch", torch, mllog=START), EXPECTED)[1].outcome == rehearse.FAILED


def test_each_problem_is_its_check_s_failure_with_what_was_found(tmp_path):
    ranks = [_rank(0), _rank(1, rendezvous="n2:29500"), _rank(2, local_rank=1, opened={}), _rank(3, status=1, steps=1, how="ended after 1 of 3 training steps")]
    ranks[1]["opened"]["checkpoint"]["count"] = 0
    for record in ranks:
        record["opened"].setdefault("checkpoint", {"count": 0})
        record["opened"]["checkpoint"]["count"] = 0
    log = "W: CUDA kernels will be jit-compiled from PTX, which could take 30 minutes or longer.\n"
    judged = rehearse.verdicts(_found(tmp_path, ranks, log=log, mllog=START + START.splitlines()[-1] + "\n"), EXPECTED)
    assert [v.outcome for v in judged] == [rehearse.FAILED] * 6, [v.line() for v in judged]
    world, inputs, jit, steps, mllog, exits = judged
    assert "2 rendezvous addresses: n1:29500, n2:29500" in world.detail and "n2 has local ranks 1, 1, expected 0-1" in world.detail
    assert inputs.detail.startswith("no process of the job opened a file of checkpoint")
    assert "jit-compiled from PTX" in jit.detail and steps.detail.startswith("ranks 3 took fewer than 3 steps")
    assert mllog.detail == "written more than once: init_start x2"
    assert exits.detail == "rank 3 on n2: 1 (ended after 1 of 3 training steps)"


def test_a_job_that_never_started_fails_or_is_not_reached_check_by_check(tmp_path):
    judged = rehearse.verdicts(_found(tmp_path, []), EXPECTED)
    assert [v.outcome for v in judged] == [rehearse.FAILED, rehearse.NOT_REACHED, rehearse.NOT_REACHED, rehearse.NOT_REACHED, rehearse.FAILED, rehearse.FAILED]
    assert judged[-1].detail == "4 rank(s) left no record (killed, or never started)"


def test_without_a_gpu_the_kernel_check_and_memory_are_not_reached(tmp_path):
    ranks = [_rank(r, cuda=False, peak_gpu_memory_bytes=None) for r in range(4)]
    judged = rehearse.verdicts(_found(tmp_path, ranks, mllog=START), EXPECTED)
    assert judged[2].outcome == rehearse.NOT_REACHED and judged[2].detail == "no rank ran on a CUDA GPU"
    assert judged[3].outcome == rehearse.PASSED and judged[3].detail.endswith("peak GPU memory: not reached (no CUDA)")


BERT = rehearse.Expected("bert", nodes=1, gpus_per_node=8, steps=3, inputs=("checkpoint", "prepared"), campaign_nodes=1, ranks_per_node=1)


def _tensorflow_process(**changes) -> dict:
    """What the hook records of bert's training process: one process on its node, no torch.distributed world."""
    opened = {"prepared": {"count": 2, "files": []}, "checkpoint": {"count": 3, "files": []}}
    return _rank(0, framework="tensorflow", node="n1", world_size=1, rendezvous=":", opened=opened, **changes)


def test_bert_s_one_tensorflow_process_a_node_is_its_whole_world(tmp_path):
    judged = rehearse.verdicts(_found(tmp_path, [_tensorflow_process()], mllog=START), BERT)
    assert [v.outcome for v in judged] == [rehearse.PASSED] * 6, [v.line() for v in judged]
    world, _inputs, _jit, steps, _mllog, exits = judged
    assert world.detail == "1 ranks on 1 node(s) (n1), local rank 0 on each, no rendezvous (a world of one process)"
    assert steps.detail.endswith("peak GPU memory 1.00 GiB (largest rank)") and exits.detail == "all 1 ranks exited 0 after 3 steps"
    assert rehearse.geometry_line(BERT) == "rehearsal of bert: 1 node(s) x 8 GPUs, one process per node driving all its GPUs = 1 ranks, 3 training steps"


def test_a_gpu_process_without_a_peak_memory_figure_says_so(tmp_path):
    judged = rehearse.verdicts(_found(tmp_path, [_tensorflow_process(peak_gpu_memory_bytes=None)], mllog=START), BERT)
    assert judged[2].outcome == rehearse.PASSED and judged[3].outcome == rehearse.PASSED
    assert judged[3].detail.endswith("peak GPU memory: not recorded (the framework reports none: TensorFlow before 2.5 has no get_memory_info)")
    without_gpu = rehearse.verdicts(_found(tmp_path / "cpu", [_tensorflow_process(cuda=False, peak_gpu_memory_bytes=None)], mllog=START), BERT)
    assert without_gpu[2].outcome == rehearse.NOT_REACHED and without_gpu[3].detail.endswith("peak GPU memory: not reached (no CUDA)")


def test_the_geometry_line_says_the_smaller_data_parallel_world():
    assert rehearse.geometry_line(EXPECTED) == (
        "rehearsal of gpt3: 2 node(s) x 2 GPUs = 4 ranks, 3 training steps (the campaign's runs: 8 nodes = 16 ranks; the rehearsal's "
        "data-parallel size is smaller, its batch planned for 4 ranks)"
    )


def test_a_rehearsal_s_retry_excludes_the_nodes_its_node_check_named_and_the_campaign_does_not(workdir):  # noqa: F811
    plan = make_plan(workdir, scale="full", launcher="pyxis", full_container={"flux1": PINNED})
    named = workdir / "rehearsal" / "flux1" / "excluded-nodes.txt"
    named.parent.mkdir(parents=True)
    named.write_text("n7\tmatmul: 3.1 TFLOPS is below the expected 400\n")
    (workdir / "results").mkdir()
    (workdir / "results" / "excluded-nodes.txt").write_text("n2\tdata: missing\n")
    assert plan.of("flux1").train_slurm_extra(rehearsal=True).endswith("--exclude=n2,n7")
    assert plan.of("flux1").train_slurm_extra().endswith("--exclude=n2")


def test_the_command_runs_the_campaign_s_profile_and_config_for_the_rehearsal_targets_and_passes_the_rest_on(tmp_path):
    from mlperf_wf.cli import build_parser

    args = build_parser().parse_args(
        ["rehearse", "gpt3", "flux1", "--steps", "2", "--profile", "slurm", "--config", "launcher=pyxis", "--snakemake=--latency-wait 5"]
    )
    assert (args.benchmark, args.steps, args.profile, args.config, args.snakemake) == (
        ["gpt3", "flux1"],
        2,
        "slurm",
        ["launcher=pyxis"],
        "--latency-wait 5",
    )
    argv = rehearse.snakemake_argv(tmp_path, ["gpt3", "flux1"], 2, "slurm", [tmp_path / "c.yaml"], ["launcher=pyxis"], ["--latency-wait", "5"])
    assert argv[argv.index("-d") + 1 :] == [
        str(tmp_path), "rehearsal/gpt3/2-steps.done", "rehearsal/flux1/2-steps.done", "--forcerun", "rehearse", "--profile", "slurm",
        "--configfile", str(tmp_path / "c.yaml"), "--latency-wait", "5", "--config", "scale=full", "launcher=pyxis",
    ]  # fmt: skip


def test_an_unknown_benchmark_or_zero_steps_is_one_line(tmp_path, capsys):
    from mlperf_wf.cli import main

    (tmp_path / "config").symlink_to(Path(__file__).resolve().parents[2] / "config")
    assert main(["--root", str(tmp_path), "rehearse", "gtp3"]) == 2
    assert capsys.readouterr().err.startswith("mlperf-wf: error: rehearse: benchmark 'gtp3' does not exist; known: bert, ")
    assert main(["--root", str(tmp_path), "rehearse", "gpt3", "--steps", "0"]) == 2
    assert "rehearse --steps: 0 is not allowed; give a whole number of training steps >= 1" in capsys.readouterr().err


def test_the_command_expects_the_ranks_the_plan_launches(tmp_path):
    """bert's one TensorFlow process per node (its launcher's one task a node) against flux1's torchrun rank per GPU."""
    (tmp_path / "config").symlink_to(Path(__file__).resolve().parents[2] / "config")
    settings = rehearse.load_settings(tmp_path, [], ["launcher=pyxis"])
    bert, flux1 = (rehearse.expected_of(tmp_path, settings, name, 3) for name in ("bert", "flux1"))
    assert (bert.nodes, bert.gpus_per_node, bert.ranks) == (1, 8, 1) and (flux1.nodes, flux1.gpus_per_node, flux1.ranks) == (2, 8, 16)


GRPO = rehearse.Expected(
    QWEN, nodes=2, gpus_per_node=2, steps=3, inputs=("checkpoint", "prepared"), campaign_nodes=64, rank_nodes=1,
    stopped_by="++grpo.max_num_steps=3", step="one GRPO step (generation, then one policy update)",
)  # fmt: skip
FRAMEWORK_HOW = "took 3 training steps; the run is ended by the framework's own step limit"


def _policy_rank(rank: int, **changes) -> dict:
    return _rank(rank, node="n1", local_rank=rank, world_size=2, how=FRAMEWORK_HOW, **changes)


def _framework_found(tmp_path: Path, ranks: list[dict], mllog: str | None = START) -> rehearse.Found:
    _found(tmp_path, ranks, mllog=mllog)
    driver = {**_rank(0, pid=7, steps=0, step_seconds=[], how="no rank: read the inputs and ended with status 0"), "rank": None, "world_size": None}
    driver["opened"] = {"prepared": {"count": 2, "files": []}}
    (tmp_path / "rehearsal" / "gpt3" / "run" / "rehearsal-ranks" / "rank-n1-7.json").write_text(json.dumps(driver))
    return rehearse.read(tmp_path / "rehearsal" / "gpt3", 3)


def test_where_the_framework_stops_the_run_its_policy_ranks_are_the_world_and_their_steps_the_exit_check(tmp_path):
    judged = rehearse.verdicts(_framework_found(tmp_path, [_policy_rank(0), _policy_rank(1)]), GRPO)
    assert [v.outcome for v in judged] == [rehearse.PASSED] * 6, [v.line() for v in judged]
    world, inputs, _jit, _steps, _mllog, exits = judged
    assert world.detail == "2 ranks on 1 node(s) (n1), local ranks 0-1 on each, rendezvous n1:29500"
    # the driver, no rank, read the prepared data: its opens count
    assert inputs.detail == "opened by the ranks and their entry process: checkpoint 1 file(s), prepared 6 file(s)"
    assert exits.detail == (
        "all 2 training ranks recorded 3 steps, then the framework's own step limit (++grpo.max_num_steps=3) ended the run:"
        " its ranks are ended by its driver, whose exit status is the job's (Snakemake's, above)"
    )


def test_where_the_framework_stops_the_run_a_rank_short_of_its_steps_or_missing_fails_the_exit_check(tmp_path):
    short = rehearse.verdicts(_framework_found(tmp_path, [_policy_rank(0), _policy_rank(1, steps=2)]), GRPO)[-1]
    assert (
        short.outcome == rehearse.FAILED
        and short.detail == "rank 1 on n1 recorded 2 of 3 steps (took 3 training steps; the run is ended by the framework's own step limit)"
    )
    missing = rehearse.verdicts(_framework_found(tmp_path / "again", [_policy_rank(0)]), GRPO)[-1]
    assert missing.outcome == rehearse.FAILED and missing.detail == "1 rank(s) left no record (killed before a step, or never started)"


def test_the_geometry_line_of_a_framework_stopped_rehearsal_says_which_nodes_step_and_what_a_step_is():
    assert rehearse.geometry_line(GRPO) == (
        f"rehearsal of {QWEN}: 2 node(s) x 2 GPUs, of which the 1 training node(s)' 2 ranks take training steps, 3 training steps"
        " (the campaign's runs: 64 nodes = 128 GPUs; the rehearsal's data-parallel size is smaller, its batch planned for 4 GPUs);"
        " a training step is one GRPO step (generation, then one policy update), ended by the framework's own step limit (++grpo.max_num_steps=3)"
    )
