"""absl's flag parsing, the real absl-py and bert's rehearsal stand-in (``bert.parse_flags``, ``bert.check_required``):
the same command lines accepted with the same values, the same refused.

TensorFlow 2.4 does not install here, so bert's probe parses the job's arguments against the reference's own
``flags.DEFINE_*`` calls with a re-typed absl parser. A command line the real ``run_pretraining.py`` refuses at start
(``absl.app.run`` ends it with status 1 before ``main``) must fail the rehearsal too. Each scenario runs through the real
absl (``.venv-reference``: absl-py, which TensorFlow's ``tf.compat.v1.flags`` is) with the reference's own DEFINE calls
and required flags, and through the stand-in.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.benchmarks.bert import rehearsal as bert
from tests.reference_venv import REFERENCE_PYTHON, reference_python_with
from tests.rehearsal import probe
from tests.rehearsal.spec import REFERENCE_SOURCES

BERT = REFERENCE_SOURCES / "mlcommons-training-aa344c7" / "retired_benchmarks" / "bert"

REAL_ABSL = """
import ast, json, sys
from absl import app, flags
files, required, argv = json.loads(sys.argv[1])
names = []
for path in files:
    source = open(path).read()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr.startswith("DEFINE_"):
            exec(ast.get_source_segment(source, node), {"flags": flags})  # the reference's own DEFINE call
            names.append(ast.literal_eval(node.args[0]))
for name in required:
    flags.mark_flag_as_required(name)
def main(_):
    print(json.dumps({name: flags.FLAGS[name].value for name in names}))
app.run(main, argv=["run_pretraining.py", *argv])
"""
"""run_pretraining.py's start as ``__main__`` runs it: its flags defined, three marked required, ``absl.app.run(main)``."""

GIVEN = ["--input_file=/data/part-0,/data/part-1", "--bert_config_file=/ckpt/bert_config.json", "--output_dir=/results"]
SCENARIOS = {
    "the-plan-s-kind-of-line": [*GIVEN, "--do_train", "--nodo_eval", "--optimizer=lamb", "--learning_rate=0.00035", "--train_batch_size", "24"],
    "booleans-with-values": [*GIVEN, "--do_train=true", "--do_eval=false", "--use_tpu=0", "--clip_by_global_norm_after_gradient_allreduce=1"],
    "single-dash-and-positional-words": ["-num_gpus=8", *GIVEN, "extra", "words"],
    "flags-after-a-double-dash": [*GIVEN, "--", "--no_such_flag=1"],
    "unknown-flag": [*GIVEN, "--num_gpu=8"],
    "enum-value-not-allowed": [*GIVEN, "--optimizer=sgd"],
    "integer-not-a-number": [*GIVEN, "--num_gpus=eight"],
    "float-not-a-number": [*GIVEN, "--learning_rate=fast"],
    "boolean-not-a-boolean": [*GIVEN, "--do_train=maybe"],
    "value-missing-at-the-end": [*GIVEN, "--num_gpus"],
    "required-flag-missing": GIVEN[:2],
}


def _context() -> probe.ProbeContext:
    return probe.ProbeContext(benchmark="bert", argv=[], env={}, cwd=BERT)


def _real() -> dict[str, tuple[int, dict | None]]:
    reference_python_with("absl.flags", "absl-py")
    ctx = _context()
    files = [str(path) for path in bert._local_modules(ctx, "run_pretraining.py")]
    outcomes = {}
    for name, argv in SCENARIOS.items():
        given = json.dumps([files, bert.required_flags(ctx), argv])
        done = subprocess.run([str(REFERENCE_PYTHON), "-c", REAL_ABSL, given], capture_output=True, text=True, timeout=60)
        outcomes[name] = (done.returncode, json.loads(done.stdout) if done.returncode == 0 else None)
    return outcomes


def _stand_in(argv: list[str]) -> tuple[int, dict | None]:
    ctx = _context()
    try:
        flags = bert.parse_flags(ctx, argv, bert.flag_definitions(ctx))
        bert.check_required(ctx, flags)
    except probe.ProbeFailure:
        return probe.PROBLEM_FOUND, None
    return 0, flags


def test_the_stand_in_parses_the_reference_s_flags_as_absl_does():
    if not BERT.is_dir():
        pytest.skip(f"bert's reference is not at {BERT}")
    real = _real()
    stand_in = {name: _stand_in(argv) for name, argv in SCENARIOS.items()}
    # absl.app.run ends a refused line with 1; the probe with PROBLEM_FOUND: both fail the job before any GPU step
    verdicts = {name: (real[name][0] == 0, stand_in[name][0] == 0) for name in SCENARIOS}
    assert all(r == s for r, s in verdicts.values()), "\n".join(f"{name}: real {real[name]}, stand-in {stand_in[name]}" for name in SCENARIOS)
    assert {real[name][0] for name in SCENARIOS if not verdicts[name][0]} == {1}, real
    for name in SCENARIOS:
        if verdicts[name][0]:
            assert real[name][1] == stand_in[name][1], name
    assert sum(accepted for accepted, _ in verdicts.values()) == 4, verdicts
