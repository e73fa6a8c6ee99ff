"""bert's evaluation process scores each checkpoint once (round patch 7, src/mlperf_wf/benchmarks/bert/container/patches/mlperf_wf_bert.py).

The reference's evaluation loop (run_pretraining.py:617-642) calls ``estimator.evaluate`` back to back, each time on
the latest checkpoint, on the GPU it shares with a training replica. Here the loop runs as the reference writes it,
with TensorFlow's estimator replaced by a stand-in that scores whatever checkpoint the model folder's ``checkpoint``
file names (as ``Estimator.evaluate`` does with no ``checkpoint_path``), while a "training" thread writes a checkpoint
every 0.4 s; with the image's hooks, every checkpoint is scored exactly once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
HOOKS = ROOT / "containers" / "hooks"
PATCHES = ROOT / "src/mlperf_wf/benchmarks" / "bert" / "container" / "patches"

ESTIMATOR_STAND_IN = '''
import os


class Estimator:
    def __init__(self, model_dir):
        self.model_dir = model_dir

    def evaluate(self, input_fn=None, steps=None, hooks=None, checkpoint_path=None, name=None):
        """The latest checkpoint's step (what TensorFlow's evaluate scores without a checkpoint_path), or 0 before any
        (the starting checkpoint)."""
        try:
            with open(os.path.join(self.model_dir, "checkpoint")) as handle:
                path = handle.readline().split(":", 1)[1].strip().strip('"')
        except OSError:
            return {"global_step": 0}
        return {"global_step": int(path.rsplit("-", 1)[1])}
'''

EVALUATION_LOOP = """
import json, os, sys, threading, time
model_dir, steps = sys.argv[1], [586, 1172, 1758]
patched = os.environ.get("MLPERF_WF_HOOKS") == "mlperf_wf_bert"
if patched:
    import mlperf_wf_bert
    mlperf_wf_bert.NEW_CHECKPOINT_POLL_SECONDS = 0.02
from tensorflow_estimator.python.estimator.estimator import Estimator


def train():
    for step in steps:
        time.sleep(0.4)
        with open(os.path.join(model_dir, "checkpoint.partial"), "w") as handle:
            handle.write(f'model_checkpoint_path: "model.ckpt-{step}"\\n')
        os.replace(os.path.join(model_dir, "checkpoint.partial"), os.path.join(model_dir, "checkpoint"))


threading.Thread(target=train, daemon=True).start()
estimator, scored = Estimator(model_dir), []
while True:  # run_pretraining.py:617-642
    result = estimator.evaluate(input_fn=lambda: None, steps=1250)
    scored.append(result["global_step"])
    if result["global_step"] >= steps[-1]:
        break
print(json.dumps(scored))
"""


@pytest.mark.parametrize("patched", [True, False], ids=["with-the-round-patch", "the-reference-alone"])
def test_the_evaluation_scores_each_checkpoint_once(tmp_path, patched):
    stand_in = tmp_path / "stand_in" / "tensorflow_estimator" / "python" / "estimator"
    stand_in.mkdir(parents=True)
    for folder in (stand_in, stand_in.parent, stand_in.parent.parent):
        (folder / "__init__.py").write_text("")
    (stand_in / "estimator.py").write_text(ESTIMATOR_STAND_IN)
    model_dir = tmp_path / "run_0"
    model_dir.mkdir()
    env = {key: value for key, value in os.environ.items() if key not in ("MLPERF_WF_HOOKS", "COMPLIANCE_FILE", "SEED")}
    env["PYTHONPATH"] = os.pathsep.join([str(HOOKS), str(PATCHES), str(tmp_path / "stand_in")])
    if patched:
        env["MLPERF_WF_HOOKS"] = "mlperf_wf_bert"
    done = subprocess.run([sys.executable, "-c", EVALUATION_LOOP, str(model_dir)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    scored = json.loads(done.stdout.strip().splitlines()[-1])
    if patched:
        assert scored == [0, 586, 1172, 1758]
    else:
        # the reference's loop alone: the same checkpoint over and over (what the patch mends)
        assert len(scored) > 10 and len(set(scored)) < len(scored)
