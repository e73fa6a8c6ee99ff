"""bert's rehearsal: the two ``run_pretraining.py`` processes of retired_benchmarks/bert (aa344c7) on the box.

TensorFlow 2.4 and absl do not install here, so the probe reads the reference's own files at the pinned commit:
the absl flag definitions (``flags.DEFINE_*`` of ``run_pretraining.py`` and of the local modules it imports, e.g.
``optimization.py``'s LAMB flags) parse the job's arguments as absl does (unknown flags, types, enum values, the
three flags ``__main__`` marks required), and every input ``main`` opens before its first GPU step is checked with
the parsed values: ``--bert_config_file`` (``modeling.BertConfig.from_json_file``), the ``--input_file`` patterns
(``tf.gfile.Glob``, comma-separated), the ``--init_checkpoint`` prefix (TensorFlow's checkpoint reader opens
``<prefix>.index`` and ``<prefix>.data-00000-of-0000N``), and ``--output_dir`` (the Estimator's ``model_dir``: it
resumes from any checkpoint there, so an attempt must find none). The GPU geometry is checked as TensorFlow would
see it: the training process's ``--num_gpus`` against the GPUs the job gives it (``CUDA_VISIBLE_DEVICES``), the
global batch against ``distribution_utils.per_replica_batch_size`` (it must divide), the evaluation process on one
GPU, and both with ``TF_FORCE_GPU_ALLOW_GROWTH`` (``run_pretraining.py:540-542`` sets no ``gpu_options``, so
without it each process maps nearly all memory of every GPU it sees).

The two processes are emulated past their first GPU step as far as their interplay goes: the training process
writes a checkpoint at ``--num_train_steps`` into ``--output_dir`` (what ``estimator.train`` leaves at its end),
after its evaluation process started; the evaluation process loops, as ``run_pretraining.py:617-642`` does, until
the latest checkpoint's step reaches ``--num_train_steps`` (here: at most :data:`EVALUATION_WAIT_S`, after which it
reports that the reference would wait until walltime). A training process told to fail on purpose leaves the
first checkpoint only (a training that died after ``--save_checkpoints_steps``), as a killed attempt leaves it
for the retry. MLLOG lines: from the training process, to ``$COMPLIANCE_FILE`` (the round patch's ``result_file``).
"""

from __future__ import annotations

import ast
import bz2
import io
import json
import os
import re
import tarfile
import time
import zipfile
from pathlib import Path

from mlperf_wf.acquire.verify import md5_file
from tests.rehearsal.spec import Rehearsal

REHEARSAL = Rehearsal(
    benchmark="bert",
    image_files={"/workspace/bert": "mlcommons-training-aa344c7/retired_benchmarks/bert"},
    entry=("run_pretraining.py",),
    nodes=1,
    launchers=("pyxis", "docker"),
    one_world=False,
)

EVALUATION_WAIT_S = 90
"""How long the emulated evaluation loop waits for the last checkpoint (the reference: until walltime)."""
TRAIN_WAITS_FOR_EVALUATION_S = 90
"""How long the training process waits for its evaluation process to start before writing its last checkpoint."""
TEXT_PARTS = 500
"""results_text's published parts (``results/part-00000-of-00500`` ...)."""
CHECKPOINT_FILES = ("tf1_ckpt/model.ckpt-28252-003.data-00000-of-00001", "tf1_ckpt/model.ckpt-28252.index", "tf1_ckpt/model.ckpt-28252.meta")
"""The phase-1 checkpoint as bert/datasets/bert_wikipedia_input_files.yaml lists it (the published .md5 list)."""
RAW_DUMP = "enwiki-20200101-pages-articles-multistream.xml.bz2"
"""The Wikipedia dump the same .md5 list names (the published text was cleaned from it; no stage reads it)."""


def _words() -> list[str]:
    from mlperf_wf.benchmarks.bert import markov

    return [word for word in markov.vocabulary() if not word.startswith("[")]


def _article(words: list[str], index: int, sentences: int = 3) -> str:
    lines = []
    for sentence in range(sentences):
        start = (index * 7 + sentence * 3) % len(words)
        lines.append(" ".join(words[(start + k) % len(words)] for k in range(8)) + " .")
    return "\n".join(lines)


def _text_files() -> dict[str, bytes]:
    words = _words()
    files = {f"results/part-{i:05d}-of-{TEXT_PARTS:05d}": (_article(words, i) + "\n").encode() for i in range(TEXT_PARTS)}
    # 10 duplicates of 1,100 short articles: more than the 10,000 records pick_eval_samples.py keeps
    files["results/eval.txt"] = ("\n\n".join(_article(words, i) for i in range(1100)) + "\n").encode()
    return files


def published(dataset_id: str, folder: Path) -> None:
    """bert_wikipedia_preprocessed (results_text.{tar.gz,zip} of 500 parts + eval.txt) and the input files."""
    if dataset_id == "bert_wikipedia_preprocessed":
        files = _text_files()
        with tarfile.open(folder / "results_text.tar.gz", "w:gz") as archive:
            for name, content in sorted(files.items()):
                info = tarfile.TarInfo(name)
                info.size = len(content)
                archive.addfile(info, io.BytesIO(content))
        with zipfile.ZipFile(folder / "results_text.zip", "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for name, content in sorted(files.items()):
                archive.writestr(name, content)
        (folder / "bert_reference_results_text_md5.txt").write_text("".join(f"{Path(n).name}\tabsent\n" for n in sorted(files)))
        (folder / "License.txt").write_text("rehearsal stand-in\n")
    elif dataset_id == "bert_wikipedia_input_files":
        from mlperf_wf.benchmarks.bert.input_files import write_vocabulary_and_config

        write_vocabulary_and_config(folder)
        for name in (
            "License.txt",
            "tf1_ckpt/License.txt",
            "tf2_ckpt/License.txt",
            *CHECKPOINT_FILES,
            "tf2_ckpt/model.ckpt-28252.data-00000-of-00001",
            "tf2_ckpt/model.ckpt-28252.index",
        ):
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(b"rehearsal stand-in\n")
        # the raw Wikipedia dump the published text was cleaned from (20 GB; no stage reads it) and its md5sum file
        dump = folder / RAW_DUMP
        dump.write_bytes(bz2.compress(b"<mediawiki>rehearsal stand-in</mediawiki>\n"))
        (folder / f"{RAW_DUMP}.md5sum").write_text(f"{md5_file(dump)}  {RAW_DUMP}\n")
    else:
        raise ValueError(f"bert does not read {dataset_id}")


def prepare_in_process(workdir: Path) -> None:
    """bert's full-scale preparation for a campaign in ``workdir``, its 502 shards made in this process.

    As Snakemake jobs the 502 shards (500 text parts, the evaluation file, the initial checkpoint) take about 40
    minutes on two cores, mostly starting ``mlperf-wf`` 502 times; here each is ``acquire.prepare.make_shard``, the
    function the ``preprocess_shard`` rule runs, after the workflow's own ``verify`` rule checked the published
    files. ``campaign.prepare`` then finds the shards done and assembles the tree."""
    import shutil

    from tests.rehearsal import campaign
    from tests.workflow.test_workflow import new_workdir

    new_workdir(workdir)
    campaign.write_published(workdir, REHEARSAL)
    make_shards(workdir)
    shutil.rmtree(workdir / "config")  # campaign.prepare copies it again


def make_shards(workdir: Path) -> None:
    """The published files verified by the workflow's own ``verify`` rule, then every shard made in this process by
    ``prepare.make_shard`` (see :func:`prepare_in_process`); ``campaign.prepare`` calls it for a combined campaign."""
    import subprocess
    import sys

    import yaml

    from mlperf_wf.acquire.prepare import make_shard
    from mlperf_wf.benchmarks.bert import prepare as preparation
    from mlperf_wf.config.registry import load_benchmark
    from mlperf_wf.kinds import DEFAULT_PREPARATION
    from tests.rehearsal import campaign
    from tests.rehearsal.spec import ROOT

    configfile = workdir / "verify.yaml"
    configfile.write_text(yaml.safe_dump({"benchmarks": ["bert"], "scale": "full"}))
    datasets = ["bert_wikipedia_preprocessed", "bert_wikipedia_input_files"]
    argv = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "workflow" / "Snakefile"), "-d", str(workdir)]
    argv += [f"resources/full/verified/{dataset}.json" for dataset in datasets]
    argv += ["--cores", "2", "--configfile", str(configfile), "--allowed-rules", "verify"]
    ran = subprocess.run(argv, capture_output=True, text=True, env=campaign.snakemake_env({}), check=False)
    if ran.returncode != 0:
        raise AssertionError(f"the published files did not verify:\n{ran.stderr[-3000:]}")
    folder = workdir / "resources" / "full" / "datasets"
    inputs = {"data": folder / datasets[0], "checkpoint": folder / datasets[1]}
    bench = load_benchmark("bert")
    for shard in preparation.shards("full"):
        make_shard(bench, DEFAULT_PREPARATION, shard, inputs, workdir / "resources" / "full" / "prepared" / "bert" / "shards" / shard, "full")


# --- absl flags, from the reference's own definitions -------------------------------------------------------------


def _local_modules(ctx, script: str) -> list[Path]:
    """``script`` and the modules of the working folder it imports, transitively (their DEFINE_* calls register flags)."""
    seen: list[Path] = []
    pending = [ctx.cwd / script]
    while pending:
        path = pending.pop()
        if path in seen or not path.is_file():
            continue
        seen.append(path)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            pending += [ctx.cwd / f"{name.split('.')[0]}.py" for name in names]
    return seen


def flag_definitions(ctx, script: str = "run_pretraining.py") -> dict[str, dict]:
    """name -> {kind, default, values} of every ``flags.DEFINE_<kind>(name, default, ...)`` the process registers."""
    definitions = {}
    for path in _local_modules(ctx, script):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr.startswith("DEFINE_"):
                kind = node.func.attr.removeprefix("DEFINE_")
                name, default = ast.literal_eval(node.args[0]), ast.literal_eval(node.args[1])
                values = ast.literal_eval(node.args[2]) if kind == "enum" else None
                definitions[name] = {"kind": "bool" if kind == "boolean" else kind, "default": default, "values": values, "defined_in": path.name}
    return definitions


def required_flags(ctx, script: str = "run_pretraining.py") -> list[str]:
    text = (ctx.cwd / script).read_text()
    return re.findall(r"flags\.mark_flag_as_required\(\s*\"(\w+)\"", text)


def parse_flags(ctx, argv: list[str], definitions: dict[str, dict]) -> dict:
    """absl's parsing of ``argv``: ``--name=value``, ``--name value``, ``--[no]name`` for booleans; unknown flags fail."""
    converters = {"string": str, "integer": int, "float": float, "enum": str}
    values = {name: spec["default"] for name, spec in definitions.items()}
    words = list(argv)
    while words:
        word = words.pop(0)
        if word == "--":
            break
        if not word.startswith("-"):
            continue  # absl.app hands positional arguments to main, which ignores them
        name, has_value, value = word.lstrip("-").partition("=")
        spec = definitions.get(name)
        if spec is None and name.startswith("no") and definitions.get(name[2:], {}).get("kind") == "bool" and not has_value:
            values[name[2:]] = False
            continue
        if spec is None:
            ctx.fail(f"absl: unknown command line flag {name!r} (run_pretraining.py and the modules it imports define no such flag)")
        if spec["kind"] == "bool":
            if has_value and value.lower() not in ("true", "false", "1", "0"):
                ctx.fail(f"absl: --{name}={value}: not a boolean")
            values[name] = value.lower() in ("true", "1") if has_value else True
            continue
        if not has_value:
            if not words:
                ctx.fail(f"absl: flag --{name} needs a value")
            value = words.pop(0)
        try:
            values[name] = converters[spec["kind"]](value)
        except ValueError:
            ctx.fail(f"absl: --{name}={value}: not a {spec['kind']} (defined in {spec['defined_in']})")
        if spec["kind"] == "enum" and value not in spec["values"]:
            ctx.fail(f"absl: --{name}={value}: allowed {spec['values']}")
    ctx.record(
        "flags", "run_pretraining.py flags", "absl parses the job's arguments against the reference's definitions", True, f"{len(definitions)} flags defined"
    )
    return values


def check_required(ctx, flags: dict) -> None:
    """absl's validators of ``flags.mark_flag_as_required`` (run_pretraining.py's ``__main__``)."""
    for name in required_flags(ctx):
        if flags.get(name) is None:
            ctx.fail(f"absl: flag --{name} must be given (run_pretraining.py marks it required)")


# --- the probe ---------------------------------------------------------------------------------------------------


def checkpoints(folder: Path) -> list[str]:
    """What the Estimator would restore from in ``folder`` (its ``checkpoint`` state file and ``model.ckpt-*``)."""
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if p.name == "checkpoint" or p.name.startswith("model.ckpt-"))


def write_checkpoint(folder: Path, step: int) -> None:
    """A checkpoint as tf.train.Saver leaves it: the data and index files, then the ``checkpoint`` state file."""
    folder.mkdir(parents=True, exist_ok=True)
    for suffix in ("data-00000-of-00001", "index", "meta"):
        (folder / f"model.ckpt-{step}.{suffix}").write_bytes(b"rehearsal\n")
    (folder / "checkpoint").write_text(f'model_checkpoint_path: "model.ckpt-{step}"\nall_model_checkpoint_paths: "model.ckpt-{step}"\n')


def latest_step(folder: Path) -> int | None:
    """The step of the checkpoint ``tf.train.latest_checkpoint`` names (None without one)."""
    try:
        found = re.search(r'model_checkpoint_path: "[^"]*model\.ckpt-(\d+)"', (folder / "checkpoint").read_text())
    except OSError:
        return None
    return int(found.group(1)) if found else None


def _evaluation_marker(ctx) -> Path:
    from tests.rehearsal import probe as probing

    # both processes are children of the job's one shell: its pid names this attempt
    return probing.records() / f"bert-evaluation-started-{probing.host()}-{os.getppid()}"


def _memory_growth(ctx, role: str) -> None:
    ctx.equal(
        f"TF_FORCE_GPU_ALLOW_GROWTH of the {role} process",
        ctx.env.get("TF_FORCE_GPU_ALLOW_GROWTH", ""),
        "true",
        "two TensorFlow processes share the node's GPUs and run_pretraining.py:540-542 sets no gpu_options: "
        "without it each maps nearly all memory of every GPU it sees",
    )


_TRAINING_OUTPUT: list[Path] = []
"""The training process's --output_dir, where :func:`train_until_stopped` trains (the evaluation process: none)."""
TENSORFLOW_PYTHON = Path(__file__).resolve().parents[3] / ".venv-tensorflow" / "bin" / "python"
"""The real TensorFlow with its Estimator API (``make .venv-tensorflow/bin/activate``): the box's stand-in for the image's."""
STAND_IN_STEPS_AT_MOST = 1000
ESTIMATOR_TRAINING = """
import sys
import numpy as np
import tensorflow.compat.v1 as tf  # as run_pretraining.py imports it

tf.logging.set_verbosity(tf.logging.ERROR)


def model_fn(features, labels, mode, params):
    loss = tf.reduce_mean(tf.square(tf.layers.dense(features, 1) - labels))
    train_op = tf.train.GradientDescentOptimizer(0.01).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode=mode, loss=loss, train_op=train_op)


def input_fn():
    x = np.ones((64, 16), np.float32)
    return tf.data.Dataset.from_tensor_slices((x, x[:, :1])).repeat().batch(8)


tf.estimator.Estimator(model_fn, model_dir=sys.argv[1]).train(input_fn, max_steps=int(sys.argv[2]))
print("rehearsal probe (bert): the Estimator trained every step: the rehearsal hook did not stop it", file=sys.stderr)
sys.exit(3)
"""
"""The box's stand-in for run_pretraining.py's ``estimator.train`` past its checks: a small Estimator's training steps
on CPU, in ``--output_dir`` as the reference's, until the images' rehearsal hook stops the process."""


def train_until_stopped(ctx) -> int:
    """In ``mlperf-wf rehearse``'s job, the training process's stand-in for its TensorFlow training loop: the real
    Estimator API (``TENSORFLOW_PYTHON``) trains in a process of the job's environment, with the images' start-up hooks
    but not the probe's, until the rehearsal hook ends it after its steps (status 0). The evaluation process has no
    training loop: 0."""
    import subprocess
    import sys

    from tests.rehearsal import probe as probing

    if not _TRAINING_OUTPUT:
        return 0
    if not TENSORFLOW_PYTHON.exists():
        print(f"rehearsal probe (bert): {TENSORFLOW_PYTHON} is missing: make .venv-tensorflow/bin/activate", file=sys.stderr, flush=True)
        return probing.PROBLEM_FOUND
    env = dict(os.environ)
    env["MLPERF_WF_HOOKS"] = ",".join(hook for hook in env.get("MLPERF_WF_HOOKS", "").split(",") if hook and hook != "mlperf_wf_rehearsal")
    argv = [str(TENSORFLOW_PYTHON), "-c", ESTIMATOR_TRAINING, str(_TRAINING_OUTPUT[0]), str(STAND_IN_STEPS_AT_MOST)]
    return subprocess.run(argv, env=env, check=False).returncode


def probe(ctx) -> None:
    from tests.rehearsal import probe as probing

    ctx.world_from_launcher = False  # a TensorFlow process drives the node's GPUs itself (MirroredStrategy)
    definitions = flag_definitions(ctx)
    flags = parse_flags(ctx, ctx.argv, definitions)
    check_required(ctx, flags)
    if not flags["do_train"] and not flags["do_eval"]:
        ctx.fail("run_pretraining.py:478: at least one of --do_train and --do_eval must be true")
    training = flags["do_train"]
    role = "training" if training else "evaluation"
    if not training:
        os.environ.pop(probing.FAIL_VARIABLE, None)  # the rank told to fail is the training process (rank 0 of the job)

    json.loads(ctx.opens(flags["bert_config_file"], "modeling.BertConfig.from_json_file(--bert_config_file)", size=1 << 20))
    for pattern in flags["input_file"].split(","):
        ctx.glob(pattern, f"tf.gfile.Glob(--input_file) of the {role} process")
    prefix = flags["init_checkpoint"]
    ctx.opens(f"{prefix}.index", "the checkpoint reader of tf.train.init_from_checkpoint(--init_checkpoint) reads <prefix>.index")
    ctx.glob(f"{prefix}.data-00000-of-*", "and its data shards <prefix>.data-00000-of-N (TensorFlow's BundleReader)")
    output = Path(flags["output_dir"])
    ctx.path(output.parent, "tf.gfile.MakeDirs(--output_dir) needs its parent", kind="dir")
    if not training:
        _evaluation_marker(ctx).write_text(str(os.getpid()))  # started (its checks below may still fail it)
    ctx.equal(
        f"checkpoints in --output_dir={output} when the {role} process starts",
        checkpoints(output),
        [],
        "the Estimator (model_dir=--output_dir, run_pretraining.py:549-556) resumes from any checkpoint there: a retried run would not start from step 0",
    )
    visible = [device for device in ctx.env.get("CUDA_VISIBLE_DEVICES", "").split(",") if device]
    if training:
        _memory_growth(ctx, role)
        if visible:
            ctx.equal(
                "--num_gpus of the training process", flags["num_gpus"], len(visible), "MirroredStrategy over the GPUs the job gives it (CUDA_VISIBLE_DEVICES)"
            )
        ctx.equal(
            "--train_batch_size modulo --num_gpus",
            flags["train_batch_size"] % max(flags["num_gpus"], 1),
            0,
            "distribution_utils.per_replica_batch_size raises unless the global batch divides over the GPUs",
        )
        ctx.variable("TF_XLA_FLAGS", "README.md:184 trains with XLA (--tf_xla_auto_jit=2)")
        from mlperf_wf_mllog import result_file  # the round patch's log destination (containers/hooks)

        ctx.mllog_to(result_file(), "mlp_logging.get_mlperf_logger('', 'bert.log') goes to $COMPLIANCE_FILE (round patch)")
        # one process holds every GPU's replica (MirroredStrategy): the rank told to fail, among them, fails it
        replicas = {f"{probing.seed()}:{rank}" for rank in range(max(flags["num_gpus"], 1))}
        failing = os.environ.get(probing.FAIL_VARIABLE, "") in replicas
        # training takes hours: its checkpoints come after its evaluation process has started
        marker = _evaluation_marker(ctx)
        deadline = time.time() + TRAIN_WAITS_FOR_EVALUATION_S
        while not marker.exists() and time.time() < deadline:
            time.sleep(0.5)
        if not marker.exists():
            ctx.fail(f"no evaluation process started beside the training within {TRAIN_WAITS_FOR_EVALUATION_S} s (README.md:207: a separate invocation)")
        if failing:
            os.environ[probing.FAIL_VARIABLE] = f"{probing.seed()}:0"  # the probe's take-over fails rank 0, this process
            write_checkpoint(output, flags["save_checkpoints_steps"])  # died after its first checkpoint
            return
        if os.environ.get(probing.REHEARSAL_STEPS_VARIABLE):
            # in mlperf-wf rehearse's job the training is stopped after its steps (train_until_stopped, below): no
            # last checkpoint, so the evaluation loop is still waiting when the launch line ends it
            _TRAINING_OUTPUT.append(output)
            return
        write_checkpoint(output, flags["num_train_steps"])
        ctx.record("emulated", f"checkpoint model.ckpt-{flags['num_train_steps']}", "estimator.train's last checkpoint", True)
        return
    deadline = time.time() + EVALUATION_WAIT_S
    while time.time() < deadline:
        step = latest_step(output)
        if step is not None and step >= flags["num_train_steps"]:
            ctx.record("emulated", f"evaluated model.ckpt-{step}", "run_pretraining.py:641: the loop ends at --num_train_steps", True)
            # the GPU checks last, so that a rehearsal of a wrong launch line also shows how its loop ends
            ctx.equal("--num_gpus of the evaluation process", flags["num_gpus"], 1, "README.md:211-232 evaluates on one GPU")
            ctx.equal("GPUs the evaluation process sees (CUDA_VISIBLE_DEVICES)", len(visible), 1, "its own GPU, not every GPU of the node")
            _memory_growth(ctx, role)
            return
        time.sleep(1)
    ctx.fail(
        f"the evaluation loop (run_pretraining.py:617-642) saw no checkpoint at step {flags['num_train_steps']} in {output} "
        f"after {EVALUATION_WAIT_S} s (latest: {latest_step(output)}): the reference would wait until walltime"
    )
