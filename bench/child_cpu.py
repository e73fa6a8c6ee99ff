"""CPU seconds of a child process, for the benchmark scripts that compare what processes cost (imported from ``bench/``,
the script's folder, first on ``sys.path``)."""

from __future__ import annotations

import resource
import subprocess
from pathlib import Path


def child_cpu_seconds(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    """User and system CPU seconds of ``argv`` run to its end in ``cwd`` (and of the children it waited for); its
    output is dropped, and a failure raises with its stderr."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
