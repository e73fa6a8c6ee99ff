"""The rehearsal hook (``containers/hooks/mlperf_wf_rehearsal_steps.py``) with the real TensorFlow Estimator: a tiny
``tf.estimator.Estimator`` (and ``TPUEstimator`` with ``use_tpu=False``, which runs on the CPU) trained in a process of
``.venv-tensorflow`` (``make .venv-tensorflow/bin/activate``) started with the images' start-up hooks on
``PYTHONPATH``, as bert's image runs its reference (TensorFlow's Estimator API, ``run_pretraining.py``)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HOOKS = ROOT / "containers" / "hooks"
TENSORFLOW_PYTHON = ROOT / ".venv-tensorflow" / "bin" / "python"
MAX_STEPS = 50

# Every training step appends a line to steps.txt (a py_func in the train op), so the test counts the steps the
# process really ran; evaluate and predict run first and must not count as training steps.
TRAINING = """
import sys
import numpy as np
import tensorflow
import tensorflow.compat.v1 as tf  # as bert's run_pretraining.py imports it

kind, folder, max_steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
tf.logging.set_verbosity(tf.logging.ERROR)


def count_step():
    with open(folder + "/steps.txt", "a") as steps:
        steps.write("step\\n")
    if kind == "failing":
        raise RuntimeError("the reference fails at its first step")
    return np.int64(0)


def model_fn(features, labels, mode, params):
    prediction = tf.layers.dense(features["x"], 1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        spec = {"mode": mode, "predictions": {"y": prediction}}
        return tf.estimator.tpu.TPUEstimatorSpec(**spec) if kind == "tpu" else tf.estimator.EstimatorSpec(**spec)
    loss = tf.reduce_mean(tf.square(prediction - labels))
    train_op = None
    if mode == tf.estimator.ModeKeys.TRAIN:
        counted = tf.py_func(count_step, [], tf.int64)
        with tf.control_dependencies([counted]):
            train_op = tf.train.GradientDescentOptimizer(0.01).minimize(loss, tf.train.get_global_step())
    return (tf.estimator.tpu.TPUEstimatorSpec if kind == "tpu" else tf.estimator.EstimatorSpec)(mode=mode, loss=loss, train_op=train_op)


def input_fn(params=None):
    batch = (params or {}).get("batch_size", 4)
    x = np.ones((64, 2), np.float32)
    return tf.data.Dataset.from_tensor_slices(({"x": x}, x[:, :1])).repeat().batch(batch, drop_remainder=True)


if kind == "tpu":
    config = tf.estimator.tpu.RunConfig(model_dir=folder + "/model", tpu_config=tf.estimator.tpu.TPUConfig(iterations_per_loop=1))
    estimator = tf.estimator.tpu.TPUEstimator(
        model_fn=model_fn, config=config, use_tpu=False, train_batch_size=4, eval_batch_size=4, predict_batch_size=4
    )
else:  # the API's v1 Estimator (the reference's), or the v2 one, a subclass of it
    estimator_class = tensorflow.estimator.Estimator if kind == "estimator_v2" else tf.estimator.Estimator
    estimator = estimator_class(model_fn=model_fn, model_dir=folder + "/model")
estimator.evaluate(input_fn=input_fn, steps=5)
for _, _ in zip(range(5), estimator.predict(input_fn=input_fn)):
    pass
if kind == "evaluation":  # bert's evaluation process: evaluate only
    sys.exit(7)
print("training starts", flush=True)
estimator.train(input_fn=input_fn, max_steps=max_steps)
print("training ended by itself", flush=True)
sys.exit(7)
"""


def _tensorflow_python() -> Path:
    """``.venv-tensorflow``'s Python; without it the test skips, or fails under ``MLPERF_WF_REQUIRE_REFERENCE``."""
    found = subprocess.run([str(TENSORFLOW_PYTHON), "-c", "import tensorflow_estimator"], capture_output=True) if TENSORFLOW_PYTHON.exists() else None
    if found is None or found.returncode != 0:
        message = f"TensorFlow with its Estimator API is not installed in {TENSORFLOW_PYTHON.parent.parent}: make .venv-tensorflow/bin/activate"
        if os.environ.get("MLPERF_WF_REQUIRE_REFERENCE"):
            pytest.fail(message)
        pytest.skip(message)
    return TENSORFLOW_PYTHON


def _train(tmp_path: Path, kind: str, steps: str, extra_env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, list[dict], int]:
    python = _tensorflow_python()
    tmp_path.mkdir(parents=True, exist_ok=True)
    ranks = tmp_path / "ranks"
    env = {key: value for key, value in os.environ.items() if not key.startswith(("SLURM_", "MLPERF_WF_", "TF_CONFIG"))}
    env = {key: value for key, value in env.items() if key not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    env.update(
        {
            "PYTHONPATH": str(HOOKS),
            "MLPERF_WF_REHEARSAL_STEPS": steps,
            "MLPERF_WF_REHEARSAL_RANKS": str(ranks),
            "CUDA_VISIBLE_DEVICES": "",
            "TF_CPP_MIN_LOG_LEVEL": "2",
            **(extra_env or {}),
        }
    )
    proc = subprocess.run([str(python), "-c", TRAINING, kind, str(tmp_path), str(MAX_STEPS)], env=env, capture_output=True, text=True, timeout=300)
    records = [json.loads(path.read_text()) for path in sorted(ranks.glob("rank-*.json"))] if ranks.is_dir() else []
    steps_file = tmp_path / "steps.txt"
    taken = len(steps_file.read_text().splitlines()) if steps_file.exists() else 0
    return proc, records, taken


@pytest.mark.parametrize("kind", ["estimator", "tpu"])
def test_the_hook_stops_an_estimator_s_training_after_n_steps(tmp_path, kind):
    proc, records, taken = _train(tmp_path, kind, "3")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    # evaluate and predict ran before training and were not counted; training stopped long before its max_steps
    assert "training starts" in proc.stdout and "training ended by itself" not in proc.stdout
    assert taken == 3
    [record] = records
    assert record["framework"] == "tensorflow"
    assert record["steps"] == 3 and len(record["step_seconds"]) == 3 and all(s >= 0 for s in record["step_seconds"])
    assert record["status"] == 0 and record["how"] == "stopped after 3 training steps"
    # one process drives the node's GPUs: it is its node's only rank, in a world of one process
    assert (record["rank"], record["local_rank"], record["world_size"]) == (0, 0, 1)
    assert record["cuda"] is False and record["peak_gpu_memory_bytes"] is None


def test_a_tensorflow_process_is_its_node_s_rank_under_slurm(tmp_path):
    """Two nodes of one task each (bert's launch: one process per node): the second node's process is rank 1 of 2."""
    slurm = {"SLURM_PROCID": "1", "SLURM_LOCALID": "0", "SLURM_NTASKS": "2", "MASTER_ADDR": "node-a", "MASTER_PORT": "29500"}
    proc, records, taken = _train(tmp_path, "estimator_v2", "2", slurm)
    assert proc.returncode == 0, proc.stderr[-4000:]
    [record] = records
    assert (record["rank"], record["local_rank"], record["world_size"], record["steps"], taken) == (1, 0, 2, 2, 2)
    assert record["rendezvous"] == ""  # the launch line's MASTER_ADDR is torch's: TensorFlow joins a world through TF_CONFIG only


def test_an_evaluation_process_is_no_rank_and_a_training_that_fails_at_its_first_step_is_one(tmp_path):
    proc, records, taken = _train(tmp_path / "evaluation", "evaluation", "3")
    assert proc.returncode == 7 and records == [] and taken == 0, proc.stderr[-4000:]
    proc, records, taken = _train(tmp_path / "failing", "failing", "3")
    assert proc.returncode == 1 and taken == 1, proc.stderr[-4000:]
    [record] = records
    assert record["framework"] == "tensorflow" and record["status"] == 1 and record["steps"] == 0
    assert record["how"].startswith("ended after 0 of 3 training steps (") and "the reference fails at its first step" in record["how"]


def test_without_the_variable_the_estimator_trains_all_its_steps(tmp_path):
    proc, records, taken = _train(tmp_path, "estimator", "")
    assert proc.returncode == 7 and "training ended by itself" in proc.stdout, proc.stderr[-4000:]
    assert taken == MAX_STEPS and records == []
