"""Fixtures of the per-benchmark tests (``tests/benchmarks/scaffold.py``)."""

from __future__ import annotations

import pytest

from tests.benchmarks import scaffold
from tests.conftest import shared_folder


@pytest.fixture(scope="session")
def full_dry_runs(tmp_path_factory):
    """``name -> scaffold.FullDryRun``: each benchmark's full-scale dry run, made once per session."""
    return lambda name: scaffold.full_dry_run(name, shared_folder(tmp_path_factory) / "full-dry-runs")
