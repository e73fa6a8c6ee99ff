"""NeMo-Run's ``Experiment.run``, the real one at the llama31 references' pin and the rehearsal's stand-in, with and
without the round patches: the same exit status and the same tasks started.

The llama31 references run ``build_data_index`` and then the training as one experiment
(``exp.run(sequential=True, detach=True)`` with local executors). NeMo-Run itself (run/experiment.py:588-612 at
34259bd) starts the second task when the first failed and lets the script exit 0, so a failed run would pass as a
finished job. The images' round patches (``containers/hooks/mlperf_wf_nemo_run.py``, loaded by both llama31 patch
modules) end the launcher with 1 at the first failed task. The rehearsal's stand-in
(``tests/rehearsal/nemo_run.py``: ``ExperimentTask``, ``run_experiment``) must be no kinder than NeMo-Run:
each scenario runs through both, in a process of its own with the images' start-up hooks, and must end alike.

The real NeMo-Run is installed from ``../shared/reference-src/nemo-run-34259bd`` into ``.venv-reference`` by ``make``
(``make .venv-reference/bin/activate``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.reference_venv import reference_python_with
from tests.rehearsal.spec import REFERENCE_SOURCES, ROOT

NEMO_RUN_SOURCE = REFERENCE_SOURCES / "nemo-run-34259bd" / "src" / "nemo_run"

REAL_EXPERIMENT = """
import sys
import nemo_run as run
marker, first = sys.argv[1], sys.argv[2]
with run.Experiment("contract") as exp:
    exp.add(run.Script(inline=f"echo first task; exit {first}"), executor=run.LocalExecutor(), name="first")
    exp.add(run.Script(inline=f"touch {marker}"), executor=run.LocalExecutor(), name="second")
    exp.run(sequential=True, detach=True)
print("script ended", flush=True)
"""
"""What the references' ``pretrain_llama31.py`` does with NeMo-Run (pretrain_llama31.py:488-566), two tasks."""

STAND_IN_EXPERIMENT = f"""
import sys
from pathlib import Path
from tests.rehearsal import nemo_run as _nemo_run
nemo_run = _nemo_run.load(Path({str(NEMO_RUN_SOURCE)!r}))
marker, first = sys.argv[1], sys.argv[2]
tasks = [
    nemo_run.task.ExperimentTask("first", ["bash", "-c", f"echo first task; exit {{first}}"], {{}}),
    nemo_run.task.ExperimentTask("second", ["touch", marker], {{}}),
]
_nemo_run.run_experiment(tasks)
print("script ended", flush=True)
"""


def _experiment(python: Path, script: str, patches: str | None, first_status: int, folder: Path) -> tuple[int, bool, str]:
    """(exit status, whether the second task ran, stderr) of one experiment whose first task exits ``first_status``."""
    marker = folder / "second-task-ran"
    # as the image starts every process: the start-up hooks, and the benchmark's round patches where given
    # (<benchmark folder>/container/Dockerfile); without them, the start-up hooks load nothing
    folders = [ROOT / "containers" / "hooks", *([ROOT / "src/mlperf_wf/benchmarks" / patches / "container" / "patches"] if patches else []), ROOT]
    env = {**os.environ, "NEMORUN_HOME": str(folder / "nemo_run_home"), "PYTHONPATH": ":".join(map(str, folders))}
    env.pop("MLPERF_WF_HOOKS", None)
    if patches:
        env["MLPERF_WF_HOOKS"] = f"mlperf_wf_{patches}"
    path = folder / "experiment.py"  # a file, as the reference's script: NeMo-Run inspects __main__'s source
    path.write_text(script)
    done = subprocess.run([str(python), str(path), str(marker), str(first_status)], cwd=folder, env=env, capture_output=True, text=True, timeout=180)
    return done.returncode, marker.exists(), done.stderr


SCENARIOS = [(None, 3), (None, 0), ("llama31_8b", 3), ("llama31_8b", 0), ("llama31_405b", 3), ("llama31_405b", 0)]


@pytest.mark.parametrize(("patches", "first_status"), SCENARIOS, ids=[f"{p or 'unpatched'}-first-exits-{s}" for p, s in SCENARIOS])
def test_the_stand_in_experiment_ends_as_nemo_run_s_own(tmp_path, patches, first_status):
    if not NEMO_RUN_SOURCE.is_dir():
        pytest.skip(f"NeMo-Run's source is not at {NEMO_RUN_SOURCE}")
    real_python = reference_python_with("nemo_run", "NeMo-Run at its pin", required=NEMO_RUN_SOURCE.is_dir(), how=" with ../shared beside")
    (tmp_path / "real").mkdir()
    (tmp_path / "stand-in").mkdir()
    real = _experiment(real_python, REAL_EXPERIMENT, patches, first_status, tmp_path / "real")
    stand_in = _experiment(Path(sys.executable), STAND_IN_EXPERIMENT, patches, first_status, tmp_path / "stand-in")
    assert real[:2] == stand_in[:2], f"real NeMo-Run: {real}\nstand-in: {stand_in}"
    if first_status == 0:
        assert real[:2] == (0, True), real
    elif patches is None:
        # NeMo-Run's own behaviour, the defect the round patch mends: the next task runs and the script exits 0
        assert real[:2] == (0, True), real
    else:
        assert real[:2] == (1, False), real
        for _, _, stderr in (real, stand_in):
            assert "NeMo-Run task first ended FAILED: the experiment stops here and the job fails" in stderr, stderr
