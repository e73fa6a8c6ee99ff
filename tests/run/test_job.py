"""``mlperf-wf job run SPEC`` (mlperf_wf.run.job): the job's exit status is the command's, exactly (a failed launch,
a refusal, a launch ended by a signal), the provenance is recorded only after a launch that succeeded, and a bad spec
is one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from mlperf_wf.kinds import Scale
from mlperf_wf.plan import plan as planning
from mlperf_wf.run import job
from mlperf_wf.run.job_spec import JobSpec, Process, Provenance, Resources, Steps


def job_run(spec: JobSpec, folder: Path) -> subprocess.CompletedProcess:
    """``mlperf-wf job run`` of ``spec`` written in ``folder``, run there."""
    spec.write(folder / "spec.json")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    argv = [sys.executable, "-m", "mlperf_wf", "job", "run", "spec.json"]
    return subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, timeout=120, check=False)


def host_job(script: str, folder: Path) -> JobSpec:
    """A tiny job on the host whose launch is ``script`` (bash), recording its provenance once it succeeded."""
    recorded = Provenance(out=str(folder / "provenance.json"), result=str(folder / "result.txt"), consumed=(str(folder / "input.txt"),), scale="tiny")
    (folder / "input.txt").write_text("read by the run\n")
    process = Process(command=("bash", "-c", script))
    return JobSpec(scale="tiny", launcher="local", process=process, resources=Resources(runtime=1), steps=Steps(provenance=recorded))


def test_a_job_that_succeeds_records_its_provenance_with_its_line(tmp_path):
    spec = host_job("echo ':::MLLOG {}' > result.txt; echo launched", tmp_path)
    done = job_run(spec, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "launched" in done.stdout
    record = json.loads((tmp_path / "provenance.json").read_text())
    assert record["command"] == planning.train_job_of(spec).command == "bash -c 'echo '\"'\"':::MLLOG {}'\"'\"' > result.txt; echo launched'"
    assert record["launcher"] == "local"


def test_the_job_exits_with_its_launchs_status_and_records_nothing_after_a_failure(tmp_path):
    failed = job_run(host_job("echo partial > result.txt; exit 7", tmp_path), tmp_path)
    assert failed.returncode == 7, failed.stderr
    assert not (tmp_path / "provenance.json").exists()
    killed = job_run(host_job("kill -9 $$", tmp_path), tmp_path)
    assert killed.returncode == 128 + 9, killed.stderr
    assert not (tmp_path / "provenance.json").exists()


def test_a_job_the_config_cannot_plan_is_refused_with_status_2_and_its_reason(tmp_path):
    spec = planning.unplannable_spec("gpt3: 2 nodes need the pyxis launcher", Scale.FULL)
    assert spec.scale == "full", "a full-scale campaign's refused job says its scale"
    refused = job_run(spec, tmp_path)
    assert refused.returncode == 2
    assert refused.stderr.strip() == "gpt3: 2 nodes need the pyxis launcher"


def test_a_bad_spec_is_one_line_naming_the_file(tmp_path):
    (tmp_path / "spec.json").write_text('{"spec_version": 1, "scale": "tiny"')
    argv = [sys.executable, "-m", "mlperf_wf", "job", "run", "spec.json"]
    bad = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert bad.returncode == 2
    assert bad.stderr.startswith("mlperf-wf: error: job spec spec.json: not JSON") and bad.stderr.count("\n") == 1


def test_the_script_runs_the_gate_and_the_prepared_check_before_the_line_and_the_provenance_after(tmp_path):
    spec = host_job("true", tmp_path)
    gated = spec.model_copy(update={"steps": spec.steps.model_copy(update={"check_prepared": "resources/tiny/prepared/x/dataset"})})
    text = job.script(gated)
    assert text.startswith("set -euo pipefail; { mlperf-wf check-prepared resources/tiny/prepared/x/dataset || exit $?; bash -c true; }; ")
    assert text.index("bash -c true") < text.index("mlperf-wf provenance")
