"""Every reader gives one verdict per run: the report, ``mlperf-wf score``, ``mlperf-wf status``, the package and the
summary judge a finished campaign's runs through :func:`mlperf_wf.results.verdict.run_verdict`, from the same files.

A finished tiny campaign of llama2_70b_lora (ten runs, each with its provenance, the official checker's verdict, its
train job's log and a node's power log, and the report) is made once; each fault breaks a copy of it as a user or a
cluster would, the workflow's own compliance check is applied where the workflow would rerun it (a refused log's
verdict removed, as Snakemake removes a failed job's output), then every reader is asked."""

from __future__ import annotations

import csv
import functools
import json
import os
import shutil
import time
from pathlib import Path

import pytest

from mlperf_wf import cli
from mlperf_wf.kinds import Outcome
from mlperf_wf.plan import plan as planning
from mlperf_wf.results import compliance, overview, plots, status
from mlperf_wf.results import package as submission_package
from mlperf_wf.results import report as report_mod
from mlperf_wf.results import verdict as run_verdicts
from mlperf_wf.run import identity
from tests.mllogs import T0, write_lora_log

ROOT = Path(__file__).resolve().parents[2]
LORA = "llama2_70b_lora"
BENCH = Path("results/tiny") / LORA
RUNS = 10
HOST = "node-a"
CONVERGED = [(1024, 0.95), (2048, 0.921)]


def run_dir(root: Path, index: int) -> Path:
    return root / BENCH / "runs" / str(index)


def power_log(path: Path, begin: int, end: int, watts: float, host: str, node: int = 0) -> None:
    """A node's power log as the sampler writes it (start with host and node, a reading a second, stop)."""

    def line(time_ms: int, event: str, key: str, value: object, metadata: dict) -> str:
        record = {"namespace": "", "time_ms": time_ms, "event_type": event, "key": key, "value": value, "metadata": metadata}
        return ":::MLLOG " + json.dumps(record)

    lines = [line(begin, "INTERVAL_START", "power_measurement_start", None, {"host": host, "node": node, "source": "gpus"})]
    lines += [line(t, "POINT_IN_TIME", "power_reading", watts + (t // 1000) % 3, {"host": host}) for t in range(begin + 500, end, 1000)]
    lines.append(line(end, "INTERVAL_END", "power_measurement_stop", None, {"host": host}))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


@functools.cache
def campaign_plan() -> planning.Plan:
    """The plan the readers make of the campaign's config (its runs' identity is this plan's)."""
    return planning.load(status.load_config(ROOT, [f"runs={RUNS}", f"benchmarks=[{LORA}]"]), project_root=ROOT)


def record_provenance(folder: Path) -> None:
    """What the train job records: the host and the sha256 of the log it wrote."""
    made_with = identity.CampaignIdentity(config=identity.config_of(campaign_plan(), LORA))  # as its train job records it
    record = {"scale": "tiny", "launcher": "local", "host": HOST, **identity.provenance_fields(made_with)}
    record["workflow_git"] = {**record.get("workflow_git", {}), "commit": "0" * 40, "dirty": False}
    record["result_sha256"] = compliance.file_sha256(folder / "result.txt")
    (folder / "provenance.json").write_text(json.dumps(record))


def check_as_the_workflow(root: Path, index: int) -> compliance.ComplianceResult:
    """The compliance job (``mlperf-wf compliance`` with the run's identity): a failed verdict is not kept (Snakemake
    removes a failed job's output)."""
    folder = run_dir(root, index)
    written = json.loads((folder / "provenance.json").read_text()).get("result_sha256")
    identity = compliance.RunIdentity(LORA, "closed", 1234 + index, written)
    verdict = compliance.check(folder / "result.txt", "6.1.0", identity=identity)
    compliance.write(verdict, folder / "compliance.json")
    if verdict.verdict == "failed":
        (folder / "compliance.json").unlink()
    return verdict


def make_report(root: Path) -> dict:
    """``report.json`` as the report rule makes it (every run's files), read back."""
    runs = [run_dir(root, i) for i in range(RUNS)]
    argv = ["report", "--benchmark", LORA, "--ruleset", "6.1.0", "--division", "closed", "--scale", "tiny", "--platform", "cpu-tiny"]
    for folder in runs:
        argv += ["--result", str(folder / "result.txt"), "--compliance", str(folder / "compliance.json"), "--provenance", str(folder / "provenance.json")]
    assert cli.main([*argv, "--out", str(root / BENCH / "report.json")]) == 0
    return json.loads((root / BENCH / "report.json").read_text())


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """The finished campaign, made once."""
    root = tmp_path_factory.mktemp("finished") / "campaign"
    root.mkdir()
    shutil.copytree(ROOT / "config", root / "config")
    for i in range(RUNS):
        start_ms = T0 + i * 3_600_000
        folder = run_dir(root, i)
        train_log = root / "logs/tiny/train" / LORA / f"{i}.log"  # the train job's log, older than what it made
        train_log.parent.mkdir(parents=True, exist_ok=True)
        train_log.write_text(f"INFO:mlperf_wf.run.harness:run {i} finished\n")
        write_lora_log(folder / "result.txt", seed=1234 + i, minutes=2.0 + 0.1 * i, evals=CONVERGED, start_ms=start_ms)
        record_provenance(folder)
        power_log(folder / "power/result/node_0.txt", start_ms + 500, start_ms + 1000 + round((2.0 + 0.1 * i) * 60_000) + 800, 100.0, HOST)
        assert check_as_the_workflow(root, i).verdict == "passed"
    make_report(root)
    return root


@pytest.fixture
def campaign(finished, tmp_path) -> Path:
    """A copy of the finished campaign for one test to break."""
    copy = tmp_path / "campaign"
    shutil.copytree(finished, copy)
    for report in copy.rglob("report.json"):  # the report's paths are the copy's, as in a campaign made there
        report.write_text(report.read_text().replace(str(finished), str(copy)))
    return copy


class Readers:
    """What each reader says of every run of the campaign in ``root``."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture):
        self.root = root
        monkeypatch.chdir(root)  # the package reads config/systems/<platform>.yaml of the campaign
        # the report: what `mlperf-wf report` makes of the run files now
        target = {"comparison": "<=", "value": 0.925}
        files = [run_dir(root, i) / "result.txt" for i in range(RUNS)]
        self.report = report_mod.build(LORA, LORA, "6.1.0", "closed", "tiny", "cpu-tiny", target, RUNS, files)
        report_mod.write(self.report, root / "rebuilt/report.json")  # the figures of the report as made now
        self.figures = plots.benchmark_figures(root / "rebuilt/report.json", root / "rebuilt/plots")
        self.page = overview.page(json.loads((root / "rebuilt/report.json").read_text()), {})
        # `mlperf-wf score` on the benchmark's folder
        self.score_rc = cli.main(["score", str(root / BENCH), "--ruleset", "6.1.0", "--json", str(root / "score.json"), "--jobs", "1"])
        self.score_text = capsys.readouterr().out
        (self.score,) = json.loads((root / "score.json").read_text())
        # `mlperf-wf status`
        config = status.load_config(root, [f"runs={RUNS}", f"benchmarks=[{LORA}]"])
        plan = planning.load(config, project_root=ROOT, workdir=root)
        self.status = status.campaign_status(root, config, [LORA], runs_given=True, plan=plan)
        self.config, self.plan = config, plan
        self.status_text = status.render(self.status)
        # the package and the summary, from the campaign's report.json as it is
        reports = [root / BENCH / "report.json"]
        check = root / BENCH.parent / "submission/package_check.json"
        check.parent.mkdir(parents=True, exist_ok=True)
        submission_package.package_reports(reports, "org", "cpu-tiny", "6.1.0", "closed", check.parent / "package", check)
        self.package = json.loads(check.read_text())
        plots.summary(reports, root / "summary.csv", root / "summary", [check])
        with (root / "summary.csv").open() as handle:
            (self.summary,) = list(csv.DictReader(handle))

    def outcomes(self) -> dict[str, list[str]]:
        """Each reader's verdict of each run, in run order."""
        by_index = {int(Path(run["file"]).parent.name): run["outcome"] for run in self.score["runs"]}
        return {
            "report": [run.verdict for run in self.report.runs],
            "score": [by_index.get(i) for i in range(RUNS)],
            "status": [str(run.state) for run in self.status.benchmarks[0].runs],
            "package": [run["verdict"] for run in self.package["runs"][LORA]],
        }

    def agree(self, expected: list[str]) -> None:
        """Every reader gives ``expected``, and the summary counts them the same."""
        for reader, said in self.outcomes().items():
            assert said == expected, f"{reader}: {said}"
        counted = run_verdicts.outcome_counts([_Judged(Outcome(outcome)) for outcome in expected])
        assert self.summary["run_verdicts"] == counted


class _Judged:
    def __init__(self, outcome: Outcome):
        self.outcome = outcome


@pytest.fixture
def readers(monkeypatch, capsys):
    return lambda root: Readers(root, monkeypatch, capsys)


def test_the_finished_campaign_passes_in_every_reader(campaign, readers):
    seen = readers(campaign)
    seen.agree(["passed"] * RUNS)
    assert seen.report.score["energy_joules"] is not None and all(run.power_problems == [] for run in seen.report.runs)
    assert not [reason for reason in seen.package["not_valid_because"] if "run " in reason or "power" in reason], seen.package["not_valid_because"]
    assert "refused" not in seen.status_text and "missing" not in seen.status_text


def edit_log(path: Path, key: str, change) -> None:
    """Rewrite the first ``key`` line of an mllog file with ``change(record)``."""
    lines = path.read_text().splitlines(keepends=True)
    for i, line in enumerate(lines):
        if f'"key": "{key}"' in line:
            record = json.loads(line.split(":::MLLOG ", 1)[1])
            change(record)
            lines[i] = ":::MLLOG " + json.dumps(record) + "\n"
            break
    path.write_text("".join(lines))


def test_a_run_that_stops_before_it_starts_is_refused_by_every_reader(campaign, readers):
    """run_stop moved before run_start and the provenance updated to match: the compliance job refuses it by name;
    no reader times it (never a negative time to train or energy)."""
    folder = run_dir(campaign, 4)
    edit_log(folder / "result.txt", "run_stop", lambda record: record.update(time_ms=T0 + 4 * 3_600_000 + 1000 - 30_000))
    record_provenance(folder)
    verdict = check_as_the_workflow(campaign, 4)
    assert verdict.verdict == "failed" and any("s before run_start" in problem for problem in verdict.problems)
    seen = readers(campaign)
    expected = ["passed"] * RUNS
    expected[4] = "refused"
    seen.agree(expected)
    said = next(run for run in seen.report.runs if run.index == 4)
    assert said.minutes is None and said.energy_joules is None and "run_stop" in said.verdict_reason and "before run_start" in said.verdict_reason
    assert str(folder / "result.txt") in said.verdict_reason
    assert all((run["minutes"] or 0) >= 0 and (run["energy_joules"] or 0) >= 0 for run in seen.score["runs"])
    assert "run 4: refused: " in seen.status_text and "before run_start" in seen.status_text
    assert '<td class="refused">refused</td><td>run_stop (time_ms' in seen.page
    assert "run 4 is refused now, report.json says passed" in seen.summary["reasons"]
    assert "report.json is out of date (the next snakemake remakes it): run 4 is refused now, report.json says passed" in seen.status_text


def test_a_log_the_workflow_refused_is_not_counted_by_score_or_status(campaign, readers):
    """Another campaign's log (compliant, another seed) copied into run 0's folder: the compliance job refuses it;
    status does not list it as passed ("scored here") nor forecast with it as converged, `score` on the folder does not count it."""
    write_lora_log(run_dir(campaign, 0) / "result.txt", seed=4321, minutes=1.5, evals=CONVERGED, start_ms=T0 - 3_600_000)
    verdict = check_as_the_workflow(campaign, 0)
    assert verdict.verdict == "failed" and not (run_dir(campaign, 0) / "compliance.json").exists()
    assert "the log is not the one its train job wrote" in verdict.problems[0]
    seen = readers(campaign)
    expected = ["refused"] + ["passed"] * (RUNS - 1)
    seen.agree(expected)
    line = next(line for line in seen.status_text.splitlines() if line.strip().startswith("run 0:"))
    assert "refused" in line and "the log is not the one its train job wrote" in line and "scored here" not in line
    assert seen.status.benchmarks[0].counts["passed"] == RUNS - 1 and seen.status.benchmarks[0].validity.not_counting == 1
    assert "run 0 (runs/0/result.txt): refused: " in seen.score_text
    scored = next(run for run in seen.score["runs"] if Path(run["file"]).parent.name == "0")
    assert scored["minutes"] is None and scored["dropped"] == "refused"


def test_score_refuses_another_benchmarks_log_in_a_workflow_run_folder(campaign, capsys):
    """A llama2_70b_lora log copied into a dlrmv4 run folder (with that run's provenance): `score` on the folder does
    not count it as a compliant dlrmv4 run."""
    folder = campaign / "results/tiny/dlrmv4/runs/0"
    folder.mkdir(parents=True)
    (folder / "provenance.json").write_text(json.dumps({"scale": "tiny", "result_sha256": "0" * 64}))
    shutil.copyfile(run_dir(campaign, 1) / "result.txt", folder / "result.txt")
    assert cli.main(["score", str(folder.parent.parent), "--ruleset", "6.1.0", "--jobs", "1"]) == 1
    said = capsys.readouterr().out
    assert "run 0 (runs/0/result.txt): refused: " in said and "submission_benchmark 'llama2_70b_lora', this run's is 'dlrmv4'" in said


def test_seeds_duplicated_by_a_rerun_make_the_set_invalid_in_every_reader(campaign, readers):
    """Run 9 redone with run 8's seed (its provenance and verdict made again): every run passes its check, and the
    set is not valid: the report says so, and so do status, score, the package and the summary."""
    folder = run_dir(campaign, 9)
    write_lora_log(folder / "result.txt", seed=1234 + 8, minutes=2.9, evals=CONVERGED, start_ms=T0 + 9 * 3_600_000)
    record_provenance(folder)
    written = json.loads((folder / "provenance.json").read_text())["result_sha256"]
    checked = compliance.check(folder / "result.txt", "6.1.0", identity=compliance.RunIdentity(LORA, "closed", 1242, written))
    compliance.write(checked, folder / "compliance.json")
    make_report(campaign)
    seen = readers(campaign)
    seen.agree(["passed"] * RUNS)
    said = "seeds used by more than one run: [1242]"
    assert said in seen.report.valid_submission_reasons and said in "; ".join(seen.score["reasons"]) and said in seen.summary["reasons"]
    bench = seen.status.benchmarks[0]
    assert not bench.validity.can_still_be_valid and said in bench.validity.message
    assert bench.forecast["valid"] == 0.0 and "valid 100%" not in seen.status_text and f"result: INVALID: {said}" in seen.status_text
    assert any(said in reason for reason in seen.package["not_valid_because"])


def test_a_run_whose_log_is_gone_is_missing_in_every_reader(campaign, readers):
    """Run 3's result.txt deleted: it is missing (naming the file), not failed quoting its train job's INFO line."""
    (run_dir(campaign, 3) / "result.txt").unlink()
    seen = readers(campaign)
    expected = ["passed"] * RUNS
    expected[3] = "missing"
    seen.agree(expected)
    line = next(line for line in seen.status_text.splitlines() if line.strip().startswith("run 3:"))
    assert line.strip().startswith("run 3: missing:") and str(run_dir(campaign, 3) / "result.txt") in line and "INFO" not in line
    assert "run 3 (runs/3/result.txt): missing" in seen.score_text
    assert '<td class="missing">missing</td><td>the run&#x27;s log is gone' in seen.page
    # redone, its train job failed (a log newer than the run's records): that failure is shown, not the old records
    train_log = campaign / "logs/tiny/train" / LORA / "3.log"
    train_log.write_text("RuntimeError: out of memory (stand-in)\n")
    os.utime(train_log, (time.time() + 5,) * 2)
    again = status.render(status.campaign_status(campaign, seen.config, [LORA], runs_given=True, plan=seen.plan))
    assert "run 3: failed: training job failed: RuntimeError: out of memory (stand-in)" in again


def test_another_campaigns_power_log_is_refused_by_name_and_not_packaged(campaign, readers):
    """Run 2's node_0.txt replaced by another campaign's (ten times the watts, its window eight minutes from the run,
    another host): the run still counts; its energy is not computed from that log, the problem is named in the report,
    score and status, and the package does not carry the log."""
    start_ms = T0 + 2 * 3_600_000
    power_log(run_dir(campaign, 2) / "power/result/node_0.txt", start_ms + 480_000, start_ms + 480_000 + 130_000, 1000.0, "node-x")
    seen = readers(campaign)
    seen.agree(["passed"] * RUNS)
    run = next(entry for entry in seen.report.runs if entry.index == 2)
    assert run.energy_joules is None and any("node_0.txt: its window" in problem and "does not cover the run" in problem for problem in run.power_problems)
    assert any("sampled on host 'node-x', the run ran on 'node-a'" in problem for problem in run.power_problems)
    assert seen.report.score["energy_joules"] is None and any("power logs refused" in reason for reason in seen.report.valid_submission_reasons)
    scored = next(r for r in seen.score["runs"] if Path(r["file"]).parent.name == "2")
    assert scored["energy_joules"] is None and any("does not cover the run" in problem for problem in scored["power_problems"])
    assert "power logs refused (no energy from them): node_0.txt: its window" in seen.status_text, seen.status_text
    package = campaign / BENCH.parent / "submission/package/org/results/cpu-tiny/llama2_70b_lora"
    assert (package / "power/result_1").is_dir() and not (package / "power/result_2").exists()
    assert any("run 2's power logs left out" in reason for reason in seen.package["not_valid_because"])


def test_a_problem_a_further_run_check_finds_refuses_the_run_in_every_reader(campaign, readers, monkeypatch):
    """A check added to RUN_CHECKS (as the campaign identity check adds its own) is applied by every reader."""

    def another_identity(result: Path, provenance: dict) -> list[str]:
        return ["made by another campaign (stand-in check)"] if result.parent.name == "6" and provenance.get("host") == HOST else []

    monkeypatch.setattr(run_verdicts, "RUN_CHECKS", [another_identity])
    seen = readers(campaign)
    expected = ["passed"] * RUNS
    expected[6] = "refused"
    seen.agree(expected)
    assert f"{run_dir(campaign, 6) / 'result.txt'}: made by another campaign (stand-in check)" in seen.status_text


def test_a_power_log_changed_added_or_removed_since_the_report_makes_the_workflow_report_again(campaign):
    """The report rule's inputs are the run logs: a power log replaced after the report (another campaign's), one
    removed or one added is found by what the report recorded of the logs it read, so the workflow makes it again
    and it judges the logs `score` reads."""
    made = campaign / BENCH / "report.json"
    assert report_mod.changed_since_made(made) is None
    node = run_dir(campaign, 2) / "power/result/node_0.txt"
    start_ms = T0 + 2 * 3_600_000
    power_log(node, start_ms + 480_000, start_ms + 480_000 + 130_000, 1000.0, "node-x")
    assert report_mod.changed_since_made(made) == f"{node}: changed since the report (report.json) was made"
    assert report_mod.record_changed_power_logs(made) == f"{node}: changed since the report (report.json) was made"
    record = json.loads((made.parent / report_mod.POWER_RECORD).read_text())  # the report rule's input, newer than it
    assert record[str(run_dir(campaign, 2) / "result.txt")] == {str(node): compliance.file_sha256(node)}
    node.unlink()
    assert report_mod.changed_since_made(made) == f"{node}: removed since the report (report.json) was made"
    shutil.copy(run_dir(campaign, 1) / "power/result/node_0.txt", node)
    second = run_dir(campaign, 1) / "power/result/node_1.txt"
    shutil.copy(run_dir(campaign, 1) / "power/result/node_0.txt", second)
    assert report_mod.changed_since_made(made) == f"{second}: added since the report (report.json) was made"
