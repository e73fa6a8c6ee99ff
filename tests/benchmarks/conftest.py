"""Fixtures of the per-benchmark tests (``tests/benchmarks/scaffold.py``)."""

from __future__ import annotations

import pytest

from tests.benchmarks import scaffold


@pytest.fixture(scope="session")
def full_dry_runs(tmp_path_factory):
    """``name -> scaffold.FullDryRun``: each benchmark's full-scale dry run, made once per test process."""
    base = tmp_path_factory.mktemp("full_dry_runs")
    return lambda name: scaffold.full_dry_run(name, base)
