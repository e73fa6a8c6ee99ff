"""Command lines of one training run, tiny or full scale.

Full scale runs the reference implementation inside its container with the
reference's launch command (for llama2_70b_lora: ``accelerate launch`` with the
DeepSpeed ZeRO-3 config over 8 GPUs), the prepared data, checkpoint and result
folder mounted where the command expects them. The reference's mllog writer
honours ``COMPLIANCE_FILE``, so the run's log lands directly in the result file.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from mlperf_wf.registry import BenchmarkDef


@dataclass(frozen=True)
class RunPaths:
    """Host paths one run reads and writes."""

    data: Path
    """Prepared data folder."""
    checkpoint_dir: Path
    """Model checkpoint folder."""
    result_file: Path
    """The run's mllog result file."""


def container_command(bench: BenchmarkDef, run: int, seed: int, paths: RunPaths) -> list[str]:
    """The reference command for one run, with container paths filled in."""
    mounts = bench.full.mounts
    values = {
        "seed": str(seed),
        "run": str(run),
        "data": mounts["data"],
        "checkpoint": mounts["checkpoint"],
        "results": mounts["results"],
        "result_file": f"{mounts['results']}/{paths.result_file.name}",
    }
    return [part.format(**values) for part in bench.full.command]


def full_scale_argv(bench: BenchmarkDef, run: int, seed: int, paths: RunPaths) -> list[str]:
    """``docker run`` of the pinned image with the reference command."""
    mounts = bench.full.mounts
    env = dict(bench.full.env)
    env["COMPLIANCE_FILE"] = f"{mounts['results']}/{paths.result_file.name}"
    env["SEED"] = str(seed)
    argv = ["docker", "run", "--rm", "--gpus", "all", "--ipc=host", "--ulimit", "memlock=-1", "--ulimit", "stack=67108864"]
    argv += ["-v", f"{paths.data.resolve()}:{mounts['data']}:ro"]
    argv += ["-v", f"{paths.checkpoint_dir.resolve()}:{mounts['checkpoint']}:ro"]
    argv += ["-v", f"{paths.result_file.parent.resolve()}:{mounts['results']}"]
    for key, value in sorted(env.items()):
        argv += ["-e", f"{key}={value}"]
    argv += ["-w", bench.full.workdir, bench.full.container.reference]
    return argv + container_command(bench, run, seed, paths)


def shell_join(argv: list[str]) -> str:
    """Quote an argv for a shell command line."""
    return shlex.join(argv)
