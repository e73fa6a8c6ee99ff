"""What the llama31_405b and llama31_8b rehearsals share (tests only): both references are a ``pretrain_llama31.py``
that builds NeMo-Run tasks (``build_data_index``, then the training) and runs them through torchrun.

The script's process (one per node) is NeMo-Run's launcher, not a rank: the probe runs the reference's own parser
and executor functions there, makes each task's torchrun command with NeMo-Run's code at its pinned commit (with
the image's round patches applied, :mod:`tests.rehearsal.nemo_run`), and starts the real torchrun with
it. torchrun's children are ``python -m nemo_run.core.runners.fdl_runner -n <task> ...``: the probe takes over in
them (the rehearsal's entry ``-m``), checks what the task opens (datasets, index folder, tokenizer, checkpoint), and
the training task's processes are the ranks whose world the rehearsal checks.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import typing
from pathlib import Path
from types import ModuleType, SimpleNamespace

from tests.rehearsal import nemo_run as _nemo_run
from tests.rehearsal import probe as probing
from tests.rehearsal.spec import ROOT

LAUNCHER_VARIABLE = "MLPERF_WF_REHEARSAL_NEMO_RUN_LAUNCHER"
"""JSON the launcher hands its tasks: its argv, host and the checks it made (the tasks' records carry them)."""
INDEX_BUILT_BY = "rehearsal-index-built-by"
"""What the data-index stand-in writes in ``index_mapping_dir``: which host built the index there."""
INDEX_WRITTEN = "build_data_index: megatron-core wrote the sample index (index_mapping_dir)"
DATA_INDEX_TASK = "build_data_index"
"""The task name both scripts give the data-index builder (``exp.add(..., name="build_data_index")``)."""
MEGATRON_CORE_IMPORTED = "the megatron-core the data stage imports (first on the image's PYTHONPATH)"
SHUFFLE_INDEX = "build_data_index: the order megatron-core's GPTDataset gives the split's samples (shuffle_index.npy)"


def megatron_core_folder(version: str) -> Path:
    """Where ``make test`` installs megatron-core ``version`` as the reference's image holds it (the Makefile's
    ``$(REFERENCE_VENV)/megatron-core-<version>`` rules; llama31_405b's with the reference's ``mcore.patch`` applied)."""
    return ROOT / ".venv-reference" / f"megatron-core-{version}"


def megatron_core_env(version: str) -> dict[str, str]:
    """The image ENV that puts the reference image's megatron-core first on ``PYTHONPATH`` (before the project venv's,
    which stands for the rest of the base image's packages)."""
    return {"PYTHONPATH": str(megatron_core_folder(version))}


def require_megatron_core(version: str) -> Path:
    """The folder of :func:`megatron_core_folder`; the test skips without it, or fails under
    ``MLPERF_WF_REQUIRE_REFERENCE`` (``make test`` makes it)."""
    import pytest

    folder = megatron_core_folder(version)
    if not (folder / ".installed").is_file():
        message = f"megatron-core {version} is not installed in {folder}: make {folder.relative_to(ROOT)}/.installed"
        if os.environ.get("MLPERF_WF_REQUIRE_REFERENCE"):
            pytest.fail(message)
        pytest.skip(message)
    return folder


def is_task_process() -> bool:
    """A process torchrun started for a NeMo-Run task (``python -m nemo_run.core.runners.fdl_runner ...``)."""
    original = getattr(sys, "orig_argv", [])
    return bool(sys.argv) and sys.argv[0] == "-m" and _nemo_run.RUNNER_MODULE in original


def parse(ctx, argv: list[str]) -> argparse.Namespace:
    """The reference's own ``get_parser()`` (compiled from pretrain_llama31.py at the pinned commit) on ``argv``."""
    get_parser = ctx.reference_function("pretrain_llama31.py", "get_parser", {"argparse": argparse})
    sys.argv = ["pretrain_llama31.py", *argv]
    return get_parser().parse_args(argv)


def run_tasks(ctx, nemo_run: SimpleNamespace, tasks: list[tuple[str, object]]) -> typing.NoReturn:
    """Run the experiment's tasks as ``exp.run(sequential=True, detach=True)`` does with local executors (NeMo-Run's
    own behaviour, :func:`_nemo_run.run_experiment`: a failed task does not stop it, and the script then exits 0), each
    task the torchrun command NeMo-Run makes for it; only the image's round patch can end the launcher at a failure."""
    for name, executor in tasks:
        serializable(ctx, name, executor)
    handed = json.dumps({"argv": ctx.argv, "host": probing.host(), "checked": ctx.checked})
    experiment = []
    for name, executor in tasks:
        argv, env = _nemo_run.task_command(nemo_run, name, executor)
        print(f"rehearsal ({ctx.benchmark}) on {probing.host()}: NeMo-Run starts task {name}: {' '.join(argv)}", flush=True)
        _write_launcher(ctx, name, argv, env)
        experiment.append(nemo_run.task.ExperimentTask(name, argv, {**env, LAUNCHER_VARIABLE: handed}))
    sys.stdout.flush()
    try:
        _nemo_run.run_experiment(experiment)
    except SystemExit as stop:  # the round patch ends the launcher at a failed task (the probe runs in start-up: exit here)
        sys.stderr.flush()
        os._exit(stop.code if isinstance(stop.code, int) else 1)
    sys.stderr.flush()
    os._exit(0)


def serializable(ctx, task: str, executor: object) -> None:
    """``Experiment.run`` saves each task with fiddle (run/experiment.py:534 ``_save_tasks``, run/task.py:113-118),
    which names the executor's class by its import path: the class must be importable under that name."""
    cls = type(executor)
    found: object = sys.modules.get(cls.__module__)
    for part in cls.__qualname__.split("."):
        found = getattr(found, part, None)
    what = f"{cls.__module__}.{cls.__qualname__}"
    ctx.equal(f"executor class of {task}", found is cls, True, f"fiddle serializes the task's executor by its import path {what}")


def _write_launcher(ctx, task: str, argv: list[str], env: dict[str, str]) -> None:
    record = {"host": probing.host(), "pid": os.getpid(), "task": task, "torchrun": argv, "env": env, "checked": ctx.checked}
    (probing.records() / f"launcher-{probing.host()}-{os.getpid()}-{task}.json").write_text(json.dumps(record, indent=1))


def launcher_handed(ctx) -> dict:
    """What the launcher handed its tasks; its checks join this process's (the rank record carries them)."""
    handed = json.loads(ctx.variable(LAUNCHER_VARIABLE, "the NeMo-Run launcher's hand-over to its tasks"))
    for check in handed["checked"]:
        ctx.checked.append({**check, "why": f"launcher on {handed['host']}: {check['why']}"})
    return handed


REHEARSED_TRAINER = {"trainer_max_steps": 1, "trainer_val_check_interval": 1, "trainer_limit_val_batches": 1, "trainer_limit_test_batches": 1}
"""The trainer values ``build_data_index`` and the training's data stage get in the rehearsal (the recipe's own
max_steps and eval batches would ask megatron-core for millions of 8192-token samples of the tiny datasets)."""


class MegatronTokenizer:
    """NeMo's ``AutoTokenizer(pretrained_model_name=...)`` as far as megatron-core's GPTDataset reads it (``eod`` and
    ``pad``, nemo/collections/common/tokenizers/huggingface/auto_tokenizer.py): transformers' tokenizer of the folder."""

    def __init__(self, pretrained_model_name: str) -> None:
        from transformers import AutoTokenizer

        loaded = AutoTokenizer.from_pretrained(pretrained_model_name)
        self.eod = loaded.eos_token_id
        self.pad = loaded.pad_token_id if loaded.pad_token_id is not None else loaded.eos_token_id
        self.vocab_size = len(loaded)
        # what megatron-core's datasets name the tokenizer by in their index's description (megatron_dataset.py)
        self.unique_identifiers = {"class": "AutoTokenizer", "pretrained_model_name": pretrained_model_name}


def data_classes(ctx) -> ModuleType:
    """``nemo.collections.llm.gpt.data.pre_training`` as far as the tasks use it, with the image's import hooks
    applied (the round patches wrap ``PreTrainingDataModule.__init__`` and ``build_pretraining_datamodule``).

    NeMo does not install here, so its data module is re-typed from nemo/collections/llm/gpt/data/pre_training.py
    (``PreTrainingDataModule.__init__``'s blend, ``build``'s sample counts, ``gpt_dataset_config``,
    ``build_pretraining_datamodule``); everything under it is megatron-core's own: ``get_blend_from_list``,
    ``BlendedMegatronDatasetBuilder``, ``GPTDatasetConfig``, ``GPTDataset`` and its C++ ``helpers``, reading the
    mounted datasets and writing the sample index into ``index_mapping_dir`` under the job's real mount flags. The
    index builder also leaves :data:`INDEX_BUILT_BY` (one builder per folder: two builders of one shared folder
    write the same files at once, non-atomically)."""
    import megatron.core
    from megatron.core import package_info
    from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
    from megatron.core.datasets.utils import get_blend_from_list

    ctx.record("value", "megatron.core.__version__", MEGATRON_CORE_IMPORTED, True, package_info.__version__)
    ctx.record("path", "megatron.core.__file__", MEGATRON_CORE_IMPORTED, True, str(megatron.core.__file__))

    class PreTrainingDataModule:
        def __init__(
            self,
            paths: dict,
            seq_length: int = 2048,
            tokenizer: object = None,
            global_batch_size: int = 8,
            reset_position_ids: bool = False,
            create_attention_mask: bool = False,
            reset_attention_mask: bool = False,
            eod_mask_loss: bool = False,
            seed: int = 1234,
            index_mapping_dir: str | None = None,
            num_dataset_builder_threads: int = 1,
            **others: object,
        ) -> None:
            self.__dict__.update(others)
            for prefix in dataset_prefixes(paths):  # validate_dataset_asset_accessibility
                ctx.opens(f"{prefix}.idx", "megatron-core IndexedDataset index")
                ctx.opens(f"{prefix}.bin", "megatron-core IndexedDataset data")
            # a dict of paths: one blend per split (the recipe's split is then ignored)
            self.build_kwargs = {"blend_per_split": [get_blend_from_list(paths[split]) for split in ("train", "validation", "test")]}
            self.paths = paths
            self.seq_length, self.tokenizer, self.global_batch_size, self.seed = seq_length, tokenizer, global_batch_size, seed
            self.reset_position_ids, self.reset_attention_mask, self.eod_mask_loss = reset_position_ids, reset_attention_mask, eod_mask_loss
            self.create_attention_mask = create_attention_mask  # `or not HAVE_TE`: the reference's image has Transformer Engine
            self.index_mapping_dir = index_mapping_dir
            self.num_dataset_builder_threads = num_dataset_builder_threads

        def build(self, trainer_max_steps: int, trainer_val_check_interval: int, trainer_limit_val_batches: int, trainer_limit_test_batches: int) -> None:
            num_train_samples = int(trainer_max_steps * self.global_batch_size)
            eval_iters = (trainer_max_steps // trainer_val_check_interval + 1) * trainer_limit_val_batches
            samples = [num_train_samples, int(eval_iters * self.global_batch_size), int(trainer_limit_test_batches * self.global_batch_size)]
            built = BlendedMegatronDatasetBuilder(GPTDataset, samples, is_built_on_rank=lambda: True, config=self.gpt_dataset_config).build()
            self._train_ds, self._validation_ds, self._test_ds = built

        @property
        def gpt_dataset_config(self) -> GPTDatasetConfig:
            return GPTDatasetConfig(
                random_seed=self.seed,
                sequence_length=self.seq_length,
                tokenizer=MegatronTokenizer(**self.tokenizer.kwargs),
                path_to_cache=self.index_mapping_dir,
                reset_position_ids=self.reset_position_ids,
                create_attention_mask=self.create_attention_mask,
                reset_attention_mask=self.reset_attention_mask,
                eod_mask_loss=self.eod_mask_loss,
                num_dataset_builder_threads=self.num_dataset_builder_threads,
                **self.build_kwargs,
            )

    def build_pretraining_datamodule(datamodule: PreTrainingDataModule, **trainer: int) -> None:
        import torch.distributed as dist

        assert not dist.is_initialized(), "This function cannot be called inside an existing torch.distributed job."
        dist.init_process_group("gloo", world_size=1, rank=0)  # NeMo: "the indices in Megatron are built on rank 0"
        datamodule.build(**trainer)
        # after the build, so that megatron-core itself meets the folder's mount (a read-only one fails its cache write)
        folder = Path(datamodule.index_mapping_dir)
        try:
            descriptor = os.open(folder / INDEX_BUILT_BY, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            other = (folder / INDEX_BUILT_BY).read_text().strip()
            ctx.fail(
                f"the data index is built twice into one folder: {folder} was built by {other}, and {probing.host()} builds it again "
                "(every node's build_data_index writes the same index files, non-atomically, while others may read them)"
            )
        with os.fdopen(descriptor, "w") as stream:
            stream.write(f"{probing.host()} (seed {datamodule.seed})\n")
        written = sorted(path.name for path in folder.iterdir() if path.name != INDEX_BUILT_BY)
        ctx.record("path", str(folder), INDEX_WRITTEN, bool(written), f"on {probing.host()}: {written}")
        if not written:
            ctx.fail(f"build_data_index wrote no sample index into {folder}")
        _record_sample_order(ctx, folder)

    made = _nemo_run.module(
        "nemo.collections.llm.gpt.data.pre_training",
        PreTrainingDataModule=PreTrainingDataModule,
        build_pretraining_datamodule=build_pretraining_datamodule,
    )
    return _nemo_run.fire_import_hooks("nemo.collections.llm.gpt.data.pre_training", made)


TRAINING_DATA: dict[str, object] = {}
"""The training rank's data module, made in its probe, read in :func:`past_start_up` once the world formed."""


def past_start_up(ctx) -> None:
    """The training ranks' data stage (the probe's ``past_start_up`` hook): :func:`read_through_the_index`."""
    if "module" in TRAINING_DATA:
        read_through_the_index(ctx, TRAINING_DATA["module"])


def read_through_the_index(ctx, module: object) -> None:
    """The training's data stage on every rank of the formed world (``PreTrainingDataModule.setup``: megatron-core
    builds the datasets on rank 0 first, then on the others, from the index ``build_data_index`` left), then a sample
    of each split read through it (tokens of ``seq_length``)."""
    module.build(**REHEARSED_TRAINER)
    for split, dataset in (("train", module._train_ds), ("validation", module._validation_ds), ("test", module._test_ds)):
        sample = dataset[0]
        tokens = sample["tokens"]
        ctx.equal(f"{split} sample tokens", tuple(tokens.shape), (module.seq_length,), f"megatron-core's GPTDataset reads a {split} sample through the index")
        ctx.record("value", f"{split} dataset", "samples megatron-core built for the split", len(dataset) > 0, f"{len(dataset)} samples")


def _record_sample_order(ctx, folder: Path) -> None:
    """Whether each split's shuffle index megatron-core wrote is the identity (samples in order) or shuffled: the
    reference's ``mcore.patch`` (llama31_405b) keeps the validation and test splits in order."""
    import numpy

    for split in ("train", "valid", "test"):
        for path in sorted(folder.glob(f"*GPTDataset-{split}-shuffle_index.npy")):
            order = numpy.load(path, allow_pickle=True)
            in_order = bool((order == numpy.arange(len(order))).all())
            ctx.record("value", f"{split} sample order", SHUFFLE_INDEX, True, f"{'in order' if in_order else 'shuffled'} ({len(order)} samples)")


def megatron_core_problems(records: list[dict], folder: Path, version: str) -> list[str]:
    """What the records of a run's data stage (the ``build_data_index`` task and every training rank) show of the
    megatron-core they imported that is not ``version`` from ``folder``."""
    problems = []
    # the build_data_index task's own record (its launcher's record, with the task's torchrun command, names it too)
    stages = [
        record for record in records if (record.get("task") == DATA_INDEX_TASK and "torchrun" not in record) or ("status" in record and record.get("world"))
    ]
    if not stages:
        problems.append("no data-stage record (build_data_index task or training rank)")
    for record in stages:
        where = f"{record.get('task') or 'rank ' + str(record.get('rank'))} on {record['host']}"
        found = {check["what"]: check["detail"] for check in record["checked"] if check["why"] == MEGATRON_CORE_IMPORTED}
        if found.get("megatron.core.__version__") != version:
            problems.append(f"{where} imported megatron-core {found.get('megatron.core.__version__')}, expected {version}")
        imported = found.get("megatron.core.__file__")
        if imported is None or not Path(imported).resolve().is_relative_to(folder.resolve()):
            problems.append(f"{where} imported megatron.core from {imported}, expected it from {folder}")
    return problems


def sample_orders(records: list[dict]) -> dict[str, str]:
    """``split -> "in order (N samples)" | "shuffled (N samples)"`` of the ``build_data_index`` task's records."""
    return {
        check["what"].removesuffix(" sample order"): check["detail"]
        for record in records
        if record.get("task") == DATA_INDEX_TASK and "torchrun" not in record
        for check in record["checked"]
        if check["why"] == SHUFFLE_INDEX
    }


def dataset_prefixes(paths: dict) -> list[str]:
    """The dataset prefixes of NeMo's ``paths`` (train: weight, prefix, weight, prefix ...; validation; test)."""
    found: list[str] = []
    for split in ("train", "validation", "test"):
        values = list(paths.get(split) or [])
        if split == "train" and len(values) > 1 and _is_number(values[0]):
            values = values[1::2]
        found += [str(value) for value in values if str(value) not in found]
    return found


def _is_number(value: object) -> bool:
    try:
        float(str(value))
    except ValueError:
        return False
    return True


def run_config_namespace(data_module: ModuleType) -> dict:
    """What ``get_data`` reads from the modules the reference imports (``run.Config``, ``llm``, ``AutoTokenizer``)."""
    return {
        "run": SimpleNamespace(Config=lambda target, **kwargs: SimpleNamespace(target=target, kwargs=kwargs)),
        "llm": SimpleNamespace(PreTrainingDataModule=data_module.PreTrainingDataModule),
        "AutoTokenizer": "nemo.collections.common.tokenizers.AutoTokenizer",
        "Optional": typing.Optional,
        "os": os,
    }


def data_index_task(ctx, built) -> typing.NoReturn:
    """The ``build_data_index`` task's process: builds (or, patched, waits for) the index; it is not a rank."""
    data_module = data_classes(ctx)
    module = built(data_module)
    data_module.build_pretraining_datamodule(datamodule=module, **REHEARSED_TRAINER)
    record = {"host": probing.host(), "pid": os.getpid(), "task": DATA_INDEX_TASK, "checked": ctx.checked}
    (probing.records() / f"task-{probing.host()}-{os.getpid()}-{DATA_INDEX_TASK}.json").write_text(json.dumps(record, indent=1))
    sys.stdout.flush()
    os._exit(0)


def index_was_built(ctx, folder: str) -> None:
    """The training task reads the index build_data_index left in ``index_mapping_dir`` (a cache hit)."""
    marker = Path(folder) / INDEX_BUILT_BY
    ctx.path(marker, "the sample index build_data_index wrote (index_mapping_dir), read by the training task", kind="file")
    ctx.record("value", str(folder), "index builder", True, marker.read_text().strip())


def tokenizer(ctx, path: str) -> None:
    """NeMo's ``AutoTokenizer(pretrained_model_name=path)`` loads ``transformers.AutoTokenizer.from_pretrained(path)``."""
    ctx.path(path, "the tokenizer folder (AutoTokenizer pretrained_model_name)", kind="dir")
    from transformers import AutoTokenizer

    loaded = AutoTokenizer.from_pretrained(path)
    ctx.record("path", path, "transformers.AutoTokenizer.from_pretrained loads it", True, type(loaded).__name__)


def world(ctx, nodes: int, gpus_per_node: int) -> None:
    """Lightning's check (TorchElasticEnvironment.validate_settings): the recipe's trainer ``devices x num_nodes``
    (pretrain_recipe(num_nodes=--nodes, num_gpus_per_node=--gpus_per_node)) must equal torchrun's world size."""
    found = int(ctx.variable("WORLD_SIZE", "torchrun's world size"))
    ctx.equal(
        "WORLD_SIZE",
        found,
        nodes * gpus_per_node,
        f"Lightning refuses devices={gpus_per_node} x num_nodes={nodes} in a torchrun world of {found} (one world per node?)",
    )
    ctx.equal("LOCAL_WORLD_SIZE", int(ctx.variable("LOCAL_WORLD_SIZE", "torchrun's processes on this node")), gpus_per_node, "devices per node")


LIGHTNING_STAND_INS = {
    "lightning": {},
    "lightning.pytorch": {"Callback": type("Callback", (), {})},
    "nemo": {},
    "nemo.utils": {"logging": __import__("logging").getLogger("nemo")},
    "pytorch_lightning": {},
    "pytorch_lightning.loggers": {"Logger": type("Logger", (), {"__init__": lambda self, *args, **kwargs: None})},
    "pytorch_lightning.utilities": {"rank_zero_only": lambda function: function},
}
"""The names callbacks.py imports from Lightning and NeMo (base classes and a decorator), which do not install here."""


def reference_logger(ctx, script_dir: Path) -> ModuleType:
    """The reference's own ``callbacks.py`` as module ``callbacks`` (Lightning's and NeMo's names it imports are
    stand-ins), with the image's hooks applied (the round patches' log file and submission values)."""
    for name, attributes in LIGHTNING_STAND_INS.items():
        if name not in sys.modules:
            sys.modules[name] = _nemo_run.module(name, **attributes)
    path = ctx.path(script_dir / "callbacks.py", "the reference's MLLogger and MLPerfCallback (callbacks.py)", kind="file")
    made = _nemo_run.module("callbacks")
    made.__file__ = str(path)
    sys.modules["callbacks"] = made
    exec(compile(path.read_text(), str(path), "exec"), made.__dict__)  # the reference's own callbacks
    return _nemo_run.fire_import_hooks("callbacks", made)


def log_init(ctx, callbacks: ModuleType, **callback: object) -> None:
    """What the reference logs before its first step: ``MLPerfCallback.__init__`` (cache_clear, init_start), made
    as the trainer is built in each task process. torch.distributed is not initialized then, so the reference's
    rank-0 test passes on every rank; the rehearsal makes it on rank 0 only (see the README)."""
    import os

    if int(os.environ.get("RANK", "0")) == 0:
        callbacks.MLPerfCallback(**callback)
        callbacks.mllogger.submission_info()
    target = os.environ.get("COMPLIANCE_FILE", "")
    ctx.record("log", target, "callbacks.py's MLLogger writes $COMPLIANCE_FILE (round patch)", bool(target))


def wait_for(path: Path, seconds: float) -> bool:
    deadline = time.time() + seconds
    while time.time() < deadline:
        if path.exists():
            return True
        time.sleep(0.5)
    return path.exists()


DATA_STAGE_CHECKS = ("train sample tokens", "validation sample tokens", "test sample tokens")
"""What every training rank checks after it read a sample of each split through megatron-core's index."""


def data_stage_problems(records: list[dict], ranks: int) -> list[str]:
    """What the rehearsal's records of a run lack of the real data stage (for the benchmarks' rehearsal tests): a
    ``build_data_index`` task whose megatron-core build wrote the GPTDataset index of the three splits, and ``ranks``
    training ranks that each read a sample of every split through it."""
    problems = []
    built = [check for record in records if record.get("task") == DATA_INDEX_TASK for check in record["checked"] if check["why"] == INDEX_WRITTEN]
    written = " ".join(check["detail"] for check in built if check["held"])
    for split in ("train", "valid", "test"):
        if f"GPTDataset-{split}-sample_index.npy" not in written:
            problems.append(f"build_data_index wrote no GPTDataset {split} sample index (its checks: {built})")
    training = [record for record in records if "status" in record and record.get("world")]
    for record in training:
        held = {check["what"] for check in record["checked"] if check["held"]}
        missing = [what for what in DATA_STAGE_CHECKS if what not in held]
        if missing:
            problems.append(f"rank {record['rank']} on {record['host']} did not read {missing} through the index")
    if len(training) != ranks:
        problems.append(f"{len(training)} training ranks recorded, expected {ranks}")
    return problems
