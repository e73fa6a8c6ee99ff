"""A node made slow on purpose: a CPU cgroup (v1 ``cpu`` controller) with a quota, for the node check's tests."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

CPU_CONTROLLER = Path("/sys/fs/cgroup/cpu")
PERIOD_US = 100_000


def available() -> bool:
    """Root and the cgroup v1 ``cpu`` controller (this machine, CI's)."""
    return os.geteuid() == 0 and (CPU_CONTROLLER / "cgroup.procs").is_file()


@contextlib.contextmanager
def cpu_quota(percent: float) -> Iterator[Path]:
    """A new cgroup whose processes together get ``percent`` of one CPU; a process joins it by writing its PID to
    ``<cgroup>/cgroup.procs``. On exit, what still runs in it goes back to the root group and the cgroup is removed."""
    cgroup = CPU_CONTROLLER / f"mlperf-wf-test-{os.getpid()}-{secrets.token_hex(2)}"
    cgroup.mkdir()
    try:
        (cgroup / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (cgroup / "cpu.cfs_quota_us").write_text(str(max(1000, int(PERIOD_US * percent / 100))))
        yield cgroup
    finally:
        for pid in (cgroup / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):
                (CPU_CONTROLLER / "cgroup.procs").write_text(pid)
        cgroup.rmdir()
