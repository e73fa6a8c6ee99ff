"""The suite's own start-up: a session that starts (the suite's, or one a test starts, as
``tests/config/test_remove_a_benchmark.py`` does) unmounts what killed sessions left mounted in their temporary
folders, and nothing of a session still running (a test's tmpfs, a Docker engine's namespace)."""

from __future__ import annotations

import getpass
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs: needs root")


def _start_another_session() -> None:
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only", str(Path(__file__).relative_to(ROOT))]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def _mounted(point: Path) -> Path:
    point.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(point)], check=True)
    return point


def test_another_session_starting_leaves_this_session_s_mounts(tmp_path):
    point = _mounted(tmp_path / "disk")
    try:
        _start_another_session()
        assert os.path.ismount(point), f"a session starting unmounted {point}, which this running session mounted"
    finally:
        if os.path.ismount(point):
            subprocess.run(["umount", str(point)], check=True)


def test_a_killed_session_s_mounts_are_unmounted_when_the_next_starts():
    sessions = Path(tempfile.gettempdir()) / f"pytest-of-{getpass.getuser()}"
    killed = Path(tempfile.mkdtemp(prefix="pytest-killed-", dir=sessions))  # no session runs in it
    point = _mounted(killed / "exec" / "netns")
    try:
        _start_another_session()
        assert not os.path.ismount(point), f"{point} of a session no longer running is still mounted"
    finally:
        if os.path.ismount(point):
            subprocess.run(["umount", str(point)], check=True)
        shutil.rmtree(killed, ignore_errors=True)  # (the session it started may have removed it as an old one)
