"""One writer per file: each process of a full-scale run writes its MLLOG lines into a file of its own (the images'
start-up hooks, ``containers/hooks/mlperf_wf_mllog.py``), and the train job merges them into the run's result file in
time order after the run (``mlperf_wf.run.mllog_parts``). The same on several nodes of the cluster in a box:
``tests/workflow/test_rehearsal.py::test_several_nodes_logging_into_one_result_file_leave_whole_lines_in_time_order``."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from mlperf_wf.plan import launch
from mlperf_wf.results.status import read_progress
from mlperf_wf.run import mllog_parts

ROOT = Path(__file__).resolve().parents[2]
HOOKS = ROOT / "containers" / "hooks"


def line(key: str, time_ms: int, value: object = None) -> str:
    record = {"namespace": "", "time_ms": time_ms, "event_type": "POINT_IN_TIME", "key": key, "value": value, "metadata": {}}
    return f":::MLLOG {json.dumps(record)}\n"


def test_the_parts_and_the_result_file_s_own_lines_merge_in_time_order_and_the_parts_go(tmp_path):
    result = tmp_path / "result.txt"
    result.write_text(line("submission_org", 5))  # a line a reference wrote straight into the result file
    parts = mllog_parts.parts_folder(result)
    parts.mkdir()
    (parts / "result.txt.n1.10").write_text(line("init_start", 1) + line("run_start", 10) + "a line without a time\n" + line("eval_stop", 30))
    (parts / "result.txt.n2.20").write_text(line("eval_accuracy", 29, 2.5) + line("run_stop", 40) + ':::MLLOG {"time_ms": 41, "key"')
    assert mllog_parts.merge(result) == 8
    keys = [json.loads(text[len(":::MLLOG ") :]).get("key") if text.startswith(':::MLLOG {"n') else text for text in result.read_text().splitlines()]
    assert keys == [
        "init_start",
        "submission_org",
        "run_start",
        "a line without a time",
        "eval_accuracy",
        "eval_stop",
        "run_stop",
        ':::MLLOG {"time_ms": 41, "key"',
    ]
    assert not parts.exists()
    # a torn last line stays torn (compliance reads it as what it is), and the file ends with a newline
    assert result.read_text().endswith('"key"\n')


def test_without_parts_the_result_file_is_left_as_it_is(tmp_path):
    result = tmp_path / "result.txt"
    result.write_text(line("run_start", 10) + line("init_start", 1))
    before = result.read_bytes()
    assert mllog_parts.merge(result) == 2
    assert result.read_bytes() == before


def test_status_reads_a_running_run_s_parts(tmp_path):
    result = tmp_path / "result.txt"
    parts = mllog_parts.parts_folder(result)
    parts.mkdir()
    (parts / "result.txt.n1.10").write_text(line("init_start", 1) + line("run_start", 10))
    (parts / "result.txt.n2.20").write_text(line("eval_accuracy", 20, 2.5))
    progress = read_progress(result)
    assert (progress.first_ms, progress.run_start_ms, progress.last_eval, progress.evals) == (1.0, 10.0, 2.5, 1)


def _log_through_the_hooks(tmp_path: Path, parts: bool) -> Path:
    """One process that logs three lines into the run's result file through mlperf-logging, with the images' hooks."""
    result = tmp_path / "run" / "result.txt"
    result.parent.mkdir()  # as the round patches make it before configuring mllog
    env = {**os.environ, "PYTHONPATH": str(HOOKS), "COMPLIANCE_FILE": str(result)}
    env.pop(launch.MLLOG_PARTS_VARIABLE, None)
    if parts:
        env[launch.MLLOG_PARTS_VARIABLE] = str(mllog_parts.parts_folder(result))
    script = "from mlperf_logging import mllog; import os; mllog.config(filename=os.environ['COMPLIANCE_FILE']); logger = mllog.get_mllogger()\n"
    script += "for i in range(3): logger.event(key='tracked_stats', value=i)\n"
    subprocess.run([sys.executable, "-c", script], env=env, check=True, cwd=tmp_path)
    return result


def test_with_the_launch_s_parts_folder_the_hooks_give_the_process_its_own_file(tmp_path):
    result = _log_through_the_hooks(tmp_path, parts=True)
    (own,) = sorted(mllog_parts.parts_folder(result).iterdir())
    assert not result.exists() and own.name.startswith("result.txt.") and own.read_text().count("tracked_stats") == 3
    done = subprocess.run(
        ["mlperf-wf", "merge-mllog", str(result)],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
    )
    assert done.returncode == 0, done.stderr
    assert result.read_text().count("tracked_stats") == 3 and not mllog_parts.parts_folder(result).exists()


def test_without_it_the_hooks_write_the_result_file_itself(tmp_path):
    result = _log_through_the_hooks(tmp_path, parts=False)
    assert result.read_text().count("tracked_stats") == 3 and not mllog_parts.parts_folder(result).exists()


def test_the_job_merges_after_a_failed_run_too_and_fails_with_the_run_s_status(tmp_path):
    """The plan's wrapping of a run's command: merged whether the run succeeded or not; the run's status is the job's."""
    from mlperf_wf.plan.plan import merged_after_the_run

    result = tmp_path / "result.txt"
    parts = mllog_parts.parts_folder(result)
    parts.mkdir()
    (parts / "result.txt.n1.1").write_text(line("run_start", 10))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    line_of_job = merged_after_the_run("exit 7", result)
    done = subprocess.run(["bash", "-c", f"set -euo pipefail; {line_of_job}; echo went on"], capture_output=True, text=True, env=env)
    assert done.returncode == 7 and "went on" not in done.stdout and "run_start" in result.read_text(), (done, shlex.quote(line_of_job))
    parts.mkdir()
    (parts / "result.txt.n1.2").write_text(line("run_stop", 20))
    done = subprocess.run(["bash", "-c", f"set -euo pipefail; {merged_after_the_run('true', result)}; echo went on"], capture_output=True, text=True, env=env)
    assert done.returncode == 0 and "went on" in done.stdout and "run_stop" in result.read_text()
