"""mlperf-wf score equals mlperf-logging's result summarizer on a real published submission."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from mlperf_wf.results import scoring, verdict

FIXTURES = Path(os.environ.get("MLPERF_WF_FIXTURES", Path(__file__).resolve().parents[3] / "shared" / "fixtures"))
LENOVO = FIXTURES / "mlperf_training_v5.1" / "Lenovo"
EXPECTED = FIXTURES / "mlperf_training_v5.1" / "expected_lenovo_5.1.0_detailed.csv"

pytestmark = pytest.mark.skipif(not LENOVO.is_dir() or not EXPECTED.is_file(), reason="shared Lenovo v5.1 fixture not present")


def expected_rows() -> list[tuple[str, str, dict]]:
    table = pd.read_csv(EXPECTED)
    rows = []
    for _, row in table.iterrows():
        for column in table.columns:
            if column.endswith(":time_to_train") and pd.notna(row[column]):
                benchmark = column.split(":")[0]
                fields = {name: row[f"{benchmark}:{name}"] for name in ("time_to_train", "GBS", "samples_to_converge", "RCP", "rcp_scaling_factor")}
                rows.append((row["system"], benchmark, fields))
    return rows


@pytest.fixture(scope="module")
def ours():
    before = {p: p.stat().st_mtime_ns for p in LENOVO.rglob("*")}
    scores = scoring.score_paths(LENOVO, "5.1.0", verdict.judged_score, jobs=2)
    assert {p: p.stat().st_mtime_ns for p in LENOVO.rglob("*")} == before, "scoring must not write into the results"
    return {(s.system_name, s.benchmark): s for s in scores}


def test_every_official_score_is_reproduced(ours):
    expected = expected_rows()
    assert len(expected) == 11
    assert {(system, benchmark) for system, benchmark, _ in expected} == set(ours)
    for system, benchmark, fields in expected:
        score = ours[(system, benchmark)]
        assert score.time_to_train == pytest.approx(fields["time_to_train"], rel=1e-9, abs=0), (system, benchmark)
        assert score.scaling_factor == pytest.approx(fields["rcp_scaling_factor"], rel=1e-12), (system, benchmark)
        assert score.rcp.verdict == fields["RCP"], (system, benchmark)
        assert score.rcp.global_batch_size == fields["GBS"], (system, benchmark)
        assert score.rcp.samples_to_converge == pytest.approx(fields["samples_to_converge"], rel=1e-12), (system, benchmark)
        assert score.valid, score.reasons


def test_explanations_are_consistent(ours):
    for score in ours.values():
        dropped = [r for r in score.runs if r.dropped]
        assert sorted(r.dropped for r in dropped) == ["fastest", "slowest"]
        counted = [r.minutes for r in score.runs if not r.dropped]
        assert score.olympic_minutes == pytest.approx(sum(counted) / len(counted), rel=1e-12)
        assert score.rcp.min_allowed_mean <= score.rcp.samples_to_converge
