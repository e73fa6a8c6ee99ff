"""llama31_405b on two nodes of the cluster in a box: one torchrun world over both nodes, the data index built once.

The plan starts ``pretrain_llama31.py`` in one container per node; the round patch runs its NeMo-Run tasks through
``LocalExecutor``. At NeMo-Run 34259bd (the commit the nemo:24.12 image pins) that executor's torchrun command is
``--nnodes 1 --rdzv-endpoint localhost:0 --node-rank 0``: each node formed its own world and Lightning refuses the
trainer's geometry; and every node built the data index into the one shared folder. The rehearsal
(tests/benchmarks/llama31_405b/rehearsal.py) makes each task's torchrun command with NeMo-Run's own code at that
commit plus the image's patch, starts the real torchrun, and checks the world and the index in every process.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tests.rehearsal import campaign, cluster, spec
from tests.rehearsal import llama31 as _llama31

REHEARSAL = spec.module("llama31_405b").REHEARSAL


def _skip_reason() -> str | None:
    return cluster.missing_requirements() or (f"reference sources absent: {spec.missing_sources(REHEARSAL)}" if spec.missing_sources(REHEARSAL) else None)


pytestmark = pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))


@pytest.fixture(scope="module")
def ran(rehearsal_campaign) -> campaign.Campaign:
    """Run 0 of the session's rehearsal campaign (every benchmark on the box)."""
    if REHEARSAL.benchmark not in rehearsal_campaign.rehearsals:
        pytest.skip(f"{REHEARSAL.benchmark} is not rehearsed in this session")
    return rehearsal_campaign


def test_the_training_ranks_form_one_world_over_both_nodes(ran):
    ranks = ran.ranks(REHEARSAL.benchmark, 0)
    problems = [f"rank {r['rank']} on {r['host']}: {r['problem'][-600:]}" for r in ranks if r["status"]]
    assert ranks and not problems, "\n".join(problems) + ran.train_log(REHEARSAL.benchmark, 0)[-3000:]
    world = REHEARSAL.nodes * REHEARSAL.gpus_per_node
    assert sorted(r["rank"] for r in ranks) == list(range(world))
    per_host = Counter(r["host"] for r in ranks)  # any two of the box's nodes
    assert len(per_host) == REHEARSAL.nodes and set(per_host.values()) == {REHEARSAL.gpus_per_node}
    assert all(r["world"]["world_size"] == world for r in ranks if r["world"])
    run_0 = ran.workdir / "rehearsal" / REHEARSAL.benchmark / f"seed-{campaign.SEED_BASE}"
    launchers = [json.loads(p.read_text()) for p in sorted(run_0.glob("launcher-*.json"))]
    training = [record["torchrun"] for record in launchers if record["task"] != "build_data_index"]
    assert len(training) == REHEARSAL.nodes
    for argv in training:  # NeMo-Run's command with the workflow's rendezvous, the same id on every node
        assert argv[argv.index("--nnodes") + 1] == str(REHEARSAL.nodes) and argv[argv.index("--rdzv-endpoint") + 1] != "localhost:0"
    assert len({argv[argv.index("--rdzv-id") + 1] for argv in training}) == 1
    assert sorted(argv[argv.index("--node-rank") + 1] for argv in training) == [str(n) for n in range(REHEARSAL.nodes)]


def test_the_data_index_is_built_once_into_the_shared_folder(ran):
    index = ran.run_folder(REHEARSAL.benchmark, 0) / "npy_index"
    assert (index / ".mlperf-wf-index-built").is_file()
    node_0 = next(r["host"] for r in ran.ranks(REHEARSAL.benchmark, 0) if r["rank"] == 0)
    assert (index / "rehearsal-index-built-by").read_text().startswith(node_0)  # node 0 built it; node 1 waited


def test_megatron_core_builds_the_index_and_every_rank_reads_through_it(ran):
    """Past start-up, for real: node 0's ``build_data_index`` builds megatron-core's GPTDataset index of the prepared
    tiny datasets (read-only mount) into the run folder's ``npy_index``; every rank on both nodes reads through it."""
    records = ran.records(REHEARSAL.benchmark, 0)
    problems = _llama31.data_stage_problems(records, REHEARSAL.nodes * REHEARSAL.gpus_per_node)
    assert not problems, "\n".join(problems) + ran.train_log(REHEARSAL.benchmark, 0)[-3000:]
    index = ran.run_folder(REHEARSAL.benchmark, 0) / "npy_index"
    assert sorted(index.glob("*-GPTDataset-train-shuffle_index.npy")), sorted(path.name for path in index.iterdir())


def test_the_data_stage_imports_the_patched_megatron_core_of_the_reference_s_image(request):
    """The reference's image is nemo:24.12-rc0 with ``mcore.patch`` applied to its megatron-core ("Fixes the validation
    dataset order": no shuffle of the validation and test splits). The patch's ``index`` lines name the files of
    megatron-core 0.10.0, which ``make test`` installs into .venv-reference and patches with the reference's own file;
    the rehearsal's image puts it before the project venv's on PYTHONPATH. Every process of the data stage records the
    megatron-core it imported, and the validation split's samples come in order as the patch makes them."""
    import subprocess

    from tests.benchmarks.llama31_405b import rehearsal as llama31_405b

    folder = _llama31.require_megatron_core(llama31_405b.MEGATRON_CORE)
    patch = spec.REFERENCE_SOURCES / llama31_405b.REFERENCE / "mcore.patch"
    applied = subprocess.run(["patch", "--dry-run", "--reverse", "--force", "-p1", f"--directory={folder}", f"--input={patch}"], capture_output=True, text=True)
    assert applied.returncode == 0, f"{patch} is not applied to {folder}: {applied.stdout}{applied.stderr}"
    ran = request.getfixturevalue("ran")
    records = ran.records(REHEARSAL.benchmark, 0)
    problems = _llama31.megatron_core_problems(records, folder, llama31_405b.MEGATRON_CORE)
    assert not problems, "\n".join(problems)
    orders = _llama31.sample_orders(records)
    assert orders.get("valid", "").startswith("in order") and orders.get("test", "").startswith("in order"), orders


NODE_0_KILLED = """
import os, signal, sys, time
from types import SimpleNamespace
from mlperf_wf_llama31_405b import build_once

def build_killed_on_node_0(datamodule):
    # node 0 dies mid-build as the OOM killer or a lost node leaves it: no failure note is written
    time.sleep(3)
    os.kill(os.getpid(), signal.SIGKILL)

build_once(build_killed_on_node_0)(datamodule=SimpleNamespace(index_mapping_dir=sys.argv[1]))
"""


def test_a_node_0_that_dies_without_its_failure_note_ends_the_waiting_node_s_task_at_once(rehearsal_box, tmp_path):
    """The other nodes wait up to an hour for node 0's data index or its failure note; a node 0 killed mid-build writes
    neither. The plan's srun step (NeMo-Run's Slurm executor, which the reference uses, passes the same flag) ends every
    task when one exits with a failure, so the job fails within seconds and the profile's retry comes."""
    import os
    import shlex
    import subprocess
    import sys
    import time

    from mlperf_wf.config import registry
    from mlperf_wf.plan import launch

    bench = registry.load_benchmark(REHEARSAL.benchmark)
    step = launch.srun_step_flags(bench, nodes=2, gpus_per_node=1)
    patches = spec.ROOT / "src/mlperf_wf/benchmarks" / REHEARSAL.benchmark / "container" / "patches"
    env = {
        **os.environ,
        **rehearsal_box.env,
        "PYTHONPATH": f"{spec.ROOT / 'containers' / 'hooks'}:{patches}",
        "MLPERF_WF_NNODES": "2",
        "MLPERF_WF_INDEX_WAIT_SECONDS": "90",  # a task left behind by a failing check ends on its own
    }
    index = tmp_path / "npy_index"
    command = f"MLPERF_WF_NODE_RANK=$SLURM_NODEID exec {shlex.join([sys.executable, '-c', NODE_0_KILLED, str(index)])}"
    started = time.monotonic()
    try:
        ended = subprocess.run([*step, "bash", "-c", command], env=env, timeout=60, capture_output=True, text=True)
    except subprocess.TimeoutExpired as waited:
        pytest.fail(f"node 1 still waits for node 0's index {time.monotonic() - started:.0f} s after node 0 died: {(waited.stderr or b'')[-800:]!r}")
    assert ended.returncode != 0 and "task 0: Killed" in ended.stderr, ended.stderr  # node 0's death, nothing else
    assert not (index / ".mlperf-wf-index-failed").exists()  # node 0 could not say why: the step's end says it failed
