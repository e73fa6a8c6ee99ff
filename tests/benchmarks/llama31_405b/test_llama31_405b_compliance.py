"""The verdict for a tiny tier's declared open rules (``tiny.open_rules_not_met``), shown on llama31_405b.

Ruleset 6.0.0 fixes ``max_sequence_length == 8192`` and ``eval_samples == 5760`` even in its open rules; the
tiny tier declares both. The official checker runs unmodified (its messages and exit code are kept); a log
whose only complaints are failed CHECKs of the declared keys gets ``passed_except_declared``, never
``passed``, and is timed as a run that reached the target; any other complaint keeps ``failed``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from mlperf_wf.config.registry import BENCHMARKS_DIR, load_benchmark, parse_benchmark_file
from mlperf_wf.errors import ConfigError
from mlperf_wf.results import compliance, report, scoring
from tests.mllogs import T0, _line

RULESET = "6.0.0"
DECLARED = dict(load_benchmark("llama31_405b").tiny.open_rules_not_met)


def write_405b_log(path: Path, seed: int = 1, minutes: float = 1.0, **changes: object) -> Path:
    """An open-division 6.0.0 llama31_405b log at tiny size (128-token sequences, 64 evaluation sequences)."""
    values = {
        "submission_benchmark": "llama31_405b",
        "submission_org": "test-org",
        "submission_platform": "test-platform",
        "submission_division": "open",
        "submission_status": "research",
        "seed": seed,
        "global_batch_size": 16,
        "gradient_accumulation_steps": 1,
        "max_sequence_length": 128,
        "opt_name": "adamw",
        "opt_base_learning_rate": 3e-3,
        "opt_end_learning_rate": 3e-5,
        "opt_learning_rate_warmup_steps": 20,
        "opt_learning_rate_decay_steps": 86_399_980,
        "opt_learning_rate_decay_schedule": "cosine with linear warmup",
        "opt_adamw_beta_1": 0.9,
        "opt_adamw_beta_2": 0.95,
        "opt_adamw_epsilon": 1e-5,
        "opt_adamw_weight_decay": 0.1,
        "opt_gradient_clip_norm": 1.0,
        "init_checkpoint_step": 0,
        "train_samples": 4600,
        "eval_samples": 64,
    }
    values.update(changes)
    t = T0
    lines = [_line(t, "POINT_IN_TIME", "cache_clear", True), _line(t, "INTERVAL_START", "init_start")]
    lines += [_line(t, "POINT_IN_TIME", key, value) for key, value in values.items()]
    lines += [_line(t + 1, "INTERVAL_END", "init_stop"), _line(t + 2, "INTERVAL_START", "run_start")]
    stop = t + 2 + int(minutes * 60_000)
    lines += [
        _line(t + 3, "INTERVAL_START", "block_start", metadata={"samples_count": 0}),
        _line(stop - 3, "INTERVAL_END", "block_stop", metadata={"samples_count": 768}),
        _line(stop - 2, "INTERVAL_START", "eval_start", metadata={"samples_count": 768}),
        _line(stop - 1, "POINT_IN_TIME", "eval_accuracy", 5.5, metadata={"samples_count": 768}),
        _line(stop - 1, "INTERVAL_END", "eval_stop", metadata={"samples_count": 768}),
        _line(stop, "INTERVAL_END", "run_stop", metadata={"samples_count": 768, "status": "success"}),
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_declared_keys_are_the_two_the_open_rules_fix():
    assert set(DECLARED) == {"max_sequence_length", "eval_samples"}


def test_a_log_failing_only_the_declared_checks_passes_except_declared(tmp_path):
    log = write_405b_log(tmp_path / "result.txt")
    plain = compliance.check(log, RULESET)
    assert plain.verdict == "failed" and plain.returncode == 1  # the unmodified checker fails it
    result = compliance.check(log, RULESET, declared=DECLARED)
    assert result.verdict == "passed_except_declared"
    assert result.returncode == plain.returncode and result.messages == plain.messages  # its exact messages, kept
    assert len(result.problems) == 2
    assert any("max_sequence_length is 128" in p and DECLARED["max_sequence_length"] in p for p in result.problems)
    assert any("eval_samples is 64" in p and DECLARED["eval_samples"] in p for p in result.problems)


def test_one_undeclared_complaint_keeps_the_verdict_failed(tmp_path):
    log = write_405b_log(tmp_path / "result.txt", init_checkpoint_step=5)
    result = compliance.check(log, RULESET, declared=DECLARED)
    assert result.verdict == "failed"
    assert any("init_checkpoint_step is 5" in p for p in result.problems)


def test_a_missing_key_keeps_the_verdict_failed(tmp_path):
    log = write_405b_log(tmp_path / "result.txt")
    log.write_text("".join(line + "\n" for line in log.read_text().splitlines() if '"key": "opt_name"' not in line))
    assert compliance.check(log, RULESET, declared=DECLARED).verdict == "failed"


def test_a_log_meeting_every_rule_is_passed_not_passed_except_declared(tmp_path):
    log = write_405b_log(tmp_path / "result.txt", max_sequence_length=8192, eval_samples=5760)
    assert compliance.check(log, RULESET, declared=DECLARED).verdict == "passed"


def test_classify_without_declarations_is_unchanged():
    messages = ["CHECK for 'eval_samples' failed in line 3:\n:::MLLOG {}\nfailed test: v['value'] == 5760"]
    assert compliance.classify(False, messages, ["success"]) == "failed"
    assert compliance.classify(False, messages, ["success"], {"eval_samples": "why"}) == "passed_except_declared"
    assert compliance.classify(False, messages, ["aborted"], {"eval_samples": "why"}) == "failed"


def test_the_report_scores_runs_passed_except_declared_and_says_the_checker_failed_on_them(tmp_path):
    files = [write_405b_log(tmp_path / f"r{i}.txt", seed=i, minutes=1.0 + i) for i in range(3)]
    run = scoring.score_file(str(files[0]), RULESET, DECLARED)
    assert run.verdict == "passed_except_declared" and run.minutes == pytest.approx(1.0, abs=1e-3)
    assert scoring.score_file(str(files[0]), RULESET).minutes is None  # without the declaration: not timed
    built = report.build(
        benchmark="llama31_405b",
        submission_benchmark="llama31_405b",
        ruleset=RULESET,
        division="open",
        scale="tiny",
        platform="test-platform",
        quality_target={"comparison": "<=", "value": 5.6},
        required=3,
        results=files,
        verdicts=["passed_except_declared"] * 3,
        declared=DECLARED,
    )
    assert built.score["time_to_train_minutes"] == pytest.approx(2.0, abs=1e-3)  # 3 runs: the median
    assert not built.valid_submission
    assert any("FAILED 3 scored runs on exactly the declared open rules (max_sequence_length, eval_samples)" in r for r in built.valid_submission_reasons)


def _definition(tmp_path: Path, **tiny: object) -> Path:
    data = yaml.safe_load((BENCHMARKS_DIR / "llama31_405b" / "benchmark.yaml").read_text())
    data["tiny"] = tiny
    path = tmp_path / "benchmark.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_declaration_for_a_closed_tiny_tier_is_a_config_error(tmp_path):
    path = _definition(tmp_path, division="closed", open_rules_not_met={"eval_samples": "too many tokens"})
    with pytest.raises(ConfigError, match=r"open_rules_not_met is given .* but tiny.division is closed"):
        parse_benchmark_file(path, "llama31_405b")


def test_a_declared_key_the_open_rules_do_not_check_is_a_config_error(tmp_path):
    path = _definition(tmp_path, division="open", closed_rules_not_met=["x: y"], open_rules_not_met={"opt_base_learning_rate": "why"})
    with pytest.raises(ConfigError, match=r"'opt_base_learning_rate' is not a key the 6.0.0 open rules of llama31_405b check; allowed: .*eval_samples"):
        parse_benchmark_file(path, "llama31_405b")


def test_the_compliance_check_of_a_run_applies_the_declaration_only_at_tiny_scale(tmp_path):
    from mlperf_wf.errors import UserError
    from mlperf_wf.results.compliance import check_run

    log = write_405b_log(tmp_path / "result.txt")
    check_run(log, RULESET, tmp_path / "tiny.json", "llama31_405b", "tiny")
    assert json.loads((tmp_path / "tiny.json").read_text())["verdict"] == "passed_except_declared"
    with pytest.raises(UserError, match="FAILED"):
        check_run(log, RULESET, tmp_path / "full.json", "llama31_405b", "full")
    assert json.loads((tmp_path / "full.json").read_text())["verdict"] == "failed"
