"""gpt3's end of a converged run with pipeline parallelism: the reference's own ``evaluate_and_print_results``
(megatron/training.py at aa344c7, compiled alone from the pinned tree) in a gloo world of two pipeline stages on CPU,
rank 0 in the first stage and the last rank in the last.

The reference's ``evaluate`` fills the validation loss on the last stage only (training.py:879-885), so its target
check (:962-966) and ``log_run_stop`` run there only; mlperf-common's ``MLLoggerWrapper`` (the ``mllogger`` of
megatron/__init__.py) enters a barrier of the whole world before ``run_stop`` (``sync=True``) and writes it from global
rank 0 only (``unique=True``). The logger here has those two properties (mlperf-common does not install here). Without
the round patch rank 0 logs no ``run_stop`` and the last stage waits in a barrier nobody else enters; with it every
rank sees the loss, rank 0 logs ``run_stop`` ``success`` and every rank stops.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import types
from pathlib import Path

import pytest

from tests.benchmarks.gpt3.rehearsal import CONVERGED_ITERATION, MLLoggerLikeMLPerfCommon, converged_run_args, fill_training_module
from tests.conftest import reference_source

ROOT = Path(__file__).resolve().parents[3]
REFERENCE = "retired_benchmarks/gpt3/megatron-lm"
COLLECTIVE_TIMEOUT_S = 8


def _json_lines(out: Path):
    """``emit`` of :class:`MLLoggerLikeMLPerfCommon`: one JSON line per logged line, with the rank that wrote it."""

    def emit(kind: str, key: str | None, value: object, metadata: dict | None) -> None:
        import torch.distributed as dist

        with open(out, "a") as stream:
            stream.write(json.dumps({"rank": dist.get_rank(), "kind": kind, "key": key, "value": value, "metadata": metadata}) + "\n")

    return emit


def _training_module(reference: Path, logger: object) -> types.ModuleType:
    """``megatron.training`` with the reference's own ``evaluate_and_print_results`` (the rehearsal's stand-in)."""
    module = types.ModuleType("megatron.training")
    fill_training_module(module, reference / "megatron" / "training.py", logger, converged_run_args())
    return module


def _rank(rank: int, world: int, port: int, reference: str, patched: bool, out: str) -> None:
    """One rank: the evaluation at which the run reaches the target, then the next step's gradient all-reduce."""
    import datetime

    import torch
    import torch.distributed as dist

    record = Path(out) / f"rank{rank}.json"
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=COLLECTIVE_TIMEOUT_S))
    logger: object = MLLoggerLikeMLPerfCommon(_json_lines(Path(out) / "result.txt"))
    outcome = "trained on"
    try:
        if patched:
            for folder in (ROOT / "containers" / "hooks", ROOT / "src/mlperf_wf/benchmarks" / "gpt3" / "container" / "patches"):
                sys.path.insert(0, str(folder))
            sys.modules.pop("sitecustomize", None)  # the image's hooks' one, not this venv's
            import mlperf_wf_gpt3

            logger = mlperf_wf_gpt3.RoundLogger(logger, {})
        module = _training_module(Path(reference), logger)
        if patched:
            mlperf_wf_gpt3._patch_training(module)
        module.evaluate_and_print_results(f"iteration {CONVERGED_ITERATION}", None, None, [], CONVERGED_ITERATION, None, False)
        dist.all_reduce(torch.ones(4))  # the next training step
        dist.barrier()
    except SystemExit as stop:
        outcome = f"exited {stop.code}"
    except Exception as error:  # a collective that timed out or mismatched
        outcome = f"failed: {type(error).__name__}: {str(error)[:200]}"
    record.write_text(json.dumps({"rank": rank, "outcome": outcome}))
    os._exit(0)


def _run(tmp_path: Path, patched: bool) -> tuple[list[dict], dict[int, str]]:
    import socket

    reference = reference_source(REFERENCE)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_rank, args=(rank, 2, port, str(reference), patched, str(tmp_path))) for rank in range(2)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(COLLECTIVE_TIMEOUT_S * 6)
        if process.is_alive():
            process.kill()
    result = tmp_path / "result.txt"
    lines = [json.loads(line) for line in result.read_text().splitlines()] if result.exists() else []
    outcomes = {}
    for rank in range(2):
        record = tmp_path / f"rank{rank}.json"
        outcomes[rank] = json.loads(record.read_text())["outcome"] if record.exists() else "hung"
    return lines, outcomes


@pytest.fixture(scope="module", autouse=True)
def _reference():
    if reference_source(REFERENCE) is None:
        pytest.skip("the gpt3 reference source at aa344c7 is not on this machine")


def test_unpatched_reference_logs_no_success_on_rank_0_and_its_stages_disagree(tmp_path):
    lines, outcomes = _run(tmp_path, patched=False)
    assert not [line for line in lines if line["key"] == "run_stop"], lines
    assert any(outcome.startswith(("failed", "hung")) for outcome in outcomes.values()), outcomes


def test_round_patch_logs_success_from_rank_0_and_stops_every_rank(tmp_path):
    lines, outcomes = _run(tmp_path, patched=True)
    stops = [line for line in lines if line["key"] == "run_stop"]
    assert stops == [{"rank": 0, "kind": "end", "key": "run_stop", "value": None, "metadata": {"status": "success"}}], lines
    assert outcomes == {0: "exited 0", 1: "exited 0"}
    ends = [line["key"] for line in lines if line["rank"] == 0]
    assert ends[-2:] == ["trained_samples", "epoch_stop"], ends
