"""Every benchmark's tiny tier keeps converging for the seeds its demo runs: the slowest recorded demo seed
of each reaches the real target under another CPU's rounding within its recorded evaluations (``demo_seeds.py``).
Benchmarks whose own module already runs a tiny campaign check it there, on that campaign's inputs; the others here,
through Snakemake's inputs and the package's train command."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mlperf_wf.config import registry
from tests.benchmarks.demo_seeds import allowed_evaluations, check_the_slowest_demo_seed, demo_seeds, recorded, slowest_seed, train_inputs

ROOT = Path(__file__).resolve().parents[2]


def checked_on_their_campaign() -> dict[str, str]:
    """Benchmark -> the module of its tests whose tiny campaign (the demo's configuration) runs its slowest demo seed
    (``check_the_slowest_demo_seed(<campaign>, "<name>")``), found in its tests' folder."""
    found = {}
    for module in sorted((ROOT / "tests" / "benchmarks").glob("*/test_*.py")):
        name = module.parent.name
        if re.search(rf'check_the_slowest_demo_seed\(\w+, "{name}"\)', module.read_text()):
            found[name] = str(module.relative_to(ROOT))
    return found


CHECKED_ON_THEIR_CAMPAIGN = checked_on_their_campaign()
"""Benchmark -> the module whose tiny campaign its slowest demo seed runs beside."""

NOT_YET_RECORDED: dict[str, str] = {}
"""Benchmark -> why its demo seeds are not in the record yet."""


def test_the_record_holds_every_demo_seed_of_each_benchmark():
    record = recorded()
    for name, entry in record.items():
        assert sorted(map(int, entry["evaluations"])) == demo_seeds(name), f"{name}: the demo runs seeds {demo_seeds(name)}"
        assert all(count >= 1 for count in entry["evaluations"].values())
    benchmarks = set(registry.benchmark_names())
    assert set(record) | set(NOT_YET_RECORDED) == benchmarks and not set(record) & set(NOT_YET_RECORDED), (
        f"every benchmark's demo seeds are recorded (python -m tests.benchmarks.demo_seeds <name>): missing "
        f"{sorted(benchmarks - set(record) - set(NOT_YET_RECORDED))}"
    )


def test_each_benchmark_checked_on_its_campaign_has_a_record_and_is_not_run_again_here():
    assert CHECKED_ON_THEIR_CAMPAIGN, "no benchmark's tests run its slowest demo seed on their campaign"
    for name, module in CHECKED_ON_THEIR_CAMPAIGN.items():
        assert name in recorded(), f"{module} runs {name}'s slowest demo seed, which has no record"
    assert not set(CHECKED_ON_THEIR_CAMPAIGN) & set(OTHERS)


OTHERS = sorted(set(recorded()) - set(CHECKED_ON_THEIR_CAMPAIGN))
"""Benchmarks whose slowest demo seed runs here (no campaign of their own tests runs it)."""


def test_the_slowest_seed_is_the_one_that_needed_most_and_a_shrunk_margin_is_told_apart_from_rounding():
    assert slowest_seed({"1234": 4, "1235": 6, "1236": 6}) == 1235
    assert allowed_evaluations(1) == 2 and allowed_evaluations(4) == 6 and allowed_evaluations(5) == 8


@pytest.mark.slow
@pytest.mark.parametrize("name", OTHERS)
def test_the_slowest_demo_seed_reaches_the_target_within_its_recorded_evaluations_under_other_rounding(name, tmp_path, tiny_mirrors):
    check_the_slowest_demo_seed(train_inputs(tmp_path / name, name, tiny_mirrors.cache), name)
