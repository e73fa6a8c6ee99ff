"""Style gates CI enforces: snakemake --lint, snakefmt and ruff stay clean."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def run(*argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, env=env, check=False)


def test_snakemake_lint_is_clean():
    proc = run(str(BIN / "snakemake"), "--lint")
    assert proc.returncode == 0 and "Congratulations" in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def test_snakefmt_is_clean():
    proc = run(str(BIN / "snakefmt"), "--check", "workflow")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_is_clean():
    for argv in (("check", "src", "tests", "bench", "containers"), ("format", "--check", "src", "tests", "bench", "containers")):
        proc = run(str(BIN / "ruff"), *argv)
        assert proc.returncode == 0, proc.stdout + proc.stderr
