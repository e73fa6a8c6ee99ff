"""Writes llama2_70b_lora mllog result files with chosen times, seeds and outcomes."""

from __future__ import annotations

import json
from pathlib import Path

T0 = 1_800_000_000_000


def _line(time_ms: int, event_type: str, key: str, value: object = None, metadata: dict | None = None, lineno: int = 1) -> str:
    meta = {"file": "tests/mllogs.py", "lineno": lineno, **(metadata or {})}
    record = {"namespace": "", "time_ms": time_ms, "event_type": event_type, "key": key, "value": value, "metadata": meta}
    return ":::MLLOG " + json.dumps(record)


def write_lora_log(
    path: Path,
    seed: int,
    minutes: float,
    evals: list[tuple[int, float]],
    status: str = "success",
    drop_keys: tuple[str, ...] = (),
    start_ms: int = T0,
) -> Path:
    """A closed-division 6.1.0 llama2_70b_lora log: ``evals`` are (samples_count, eval loss)."""
    points = [
        ("cache_clear", True),
        ("submission_benchmark", "llama2_70b_lora"),
        ("submission_org", "test-org"),
        ("submission_platform", "test-platform"),
        ("submission_division", "closed"),
        ("submission_status", "research"),
        ("seed", seed),
        ("global_batch_size", 8),
        ("micro_batch_size", 1),
        ("gradient_accumulation_steps", 1),
        ("train_samples", 3901),
        ("eval_samples", 173),
        ("opt_base_learning_rate", 4e-4),
        ("opt_learning_rate_training_steps", 1024),
        ("opt_adamw_weight_decay", 1e-4),
        ("opt_gradient_clip_norm", 0.3),
        ("lora_alpha", 32),
        ("lora_rank", 16),
        ("lowest_numerical_precision_in_linear", "bfloat16"),
        ("lowest_numerical_precision_in_attn", "bfloat16"),
        ("lowest_numerical_precision_in_comm", "bfloat16"),
        ("tensor_parallelism", 1),
        ("pipeline_parallelism", 1),
        ("context_parallelism", 1),
        ("expert_parallelism", 1),
        ("config_filename", "config.yaml"),
    ]
    lines = [_line(start_ms, "INTERVAL_START", "init_start", lineno=1)]
    for offset, (key, value) in enumerate(points):
        if key not in drop_keys:
            lines.append(_line(start_ms + 1, "POINT_IN_TIME", key, value, lineno=10 + offset))
    run_start = start_ms + 1000
    run_stop = run_start + round(minutes * 60_000)
    lines.append(_line(start_ms + 2, "INTERVAL_END", "init_stop", lineno=2))
    lines.append(_line(run_start, "INTERVAL_START", "run_start", lineno=3))
    lines.append(_line(run_start, "INTERVAL_START", "block_start", metadata={"samples_count": 0}, lineno=4))
    for i, (samples, loss) in enumerate(evals):
        at = run_start + (i + 1) * (run_stop - run_start) // (len(evals) + 1)
        lines.append(_line(at, "INTERVAL_END", "block_stop", metadata={"samples_count": samples}, lineno=5))
        lines.append(_line(at, "POINT_IN_TIME", "eval_accuracy", loss, metadata={"samples_count": samples}, lineno=6))
        lines.append(_line(at, "INTERVAL_START", "block_start", metadata={"samples_count": samples}, lineno=7))
    last = evals[-1][0] if evals else 0
    lines.append(_line(run_stop, "INTERVAL_END", "run_stop", metadata={"samples_count": last, "status": status}, lineno=8))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def tiny_run_spec(benchmark: str, ruleset: str, result_file: Path, data_dir: Path, target: float = 0.0, inputs: dict | None = None):
    """The RunSpec the train command would build for a tiny run of ``benchmark`` (seed 1234)."""
    from mlperf_wf.config.registry import load_benchmark
    from mlperf_wf.run.harness import RunSpec
    from mlperf_wf.run.mllog_utils import Submission

    return RunSpec(
        benchmark=benchmark,
        submission_benchmark=load_benchmark(benchmark).submission_benchmark,
        data_dir=data_dir,
        result_file=result_file,
        seed=1234,
        target=target,
        ruleset=ruleset,
        submission=Submission(org="t", platform="t", division="closed", status="research"),
        config_filename="test",
        inputs=inputs or {},
    )
