"""qwen35_397b_grpo's rehearsal: one ``mlperf_wf_qwen35_run.sh`` per node, a real Ray cluster, the GRPO driver on the head.

What runs for real (the rehearsal image's ``/opt/nemo_rl_venv/bin``, ``rehearsal_image/bin``, stands in for the
image's tools): our per-node launcher script, unchanged, with **Ray 2.55.1** (the version NeMo-RL's ``uv.lock``
pins; ``ray start --head`` on node rank 0, ``ray start --address ... --block`` on the others), and the driver
``/workspace/llm/run_grpo_nemo_gym.py`` started by ``uv run`` (a stand-in: the image's Python). NeMo-RL itself
(vLLM, Megatron, NeMo Gym) does not install here, so in the driver the probe runs what ``main()`` runs before
``init_ray()`` with the reference's own code at the pinned commit (``nemo-rl-3fca04c9``):

- the reference's ``parse_args`` (compiled from ``run_grpo_nemo_gym.py``) on the job's arguments;
- ``nemo_rl/utils/config.py`` (loaded from the image): ``register_omegaconf_resolvers``, ``load_config`` (the
  recipe's ``defaults`` chain), ``parse_hydra_overrides`` with the job's overrides, then
  ``OmegaConf.to_container(resolve=True)`` as ``run_grpo_nemo_gym.py:137`` does, with the job's environment
  (every ``${oc.env:NAME}`` without a default in the recipe chain is also checked by name and line);
- every input ``main()`` and ``setup()`` open before the first GPU step: the tokenizer and model config in
  ``policy.model_name`` (the HF checkpoint), the train and validation JSON-lines (``data.*.data_path``), each
  task's SIF through ``container_formatter``, the converted Megatron checkpoint NeMo-RL looks for
  (``nemo_rl/models/megatron/setup.py:405-419``: ``$NRL_MEGATRON_CHECKPOINT_DIR/model_<path>/iter_0000000``: read-only
  in a run; empty and writable in the workflow's one-off conversion job, where the probe writes what NeMo-RL's
  conversion leaves), and
  ``/dev/fuse`` mounted for the task sandboxes (``docker/mlperf/config_mounts.sh``);
- the reference's MLPerf logger (``nemo_rl/algorithms/mlperf_grpo_logging.py``, with the round patch) writes
  ``init_start`` to ``logger.mlperf.log_file``.

Then the world as NeMo-RL forms it: one Ray actor per GPU of the Ray cluster (``num_gpus=1``, as NeMo-RL's worker
groups are placed), ranked by node, each joining a gloo world and writing its rank record (the driver's checks
with it). The driver exits 0 when every actor did; a rank failing on purpose fails the driver, hence the head's
task, hence the job.

In ``mlperf-wf rehearse``'s job (``MLPERF_WF_REHEARSAL_STEPS`` set, with the framework's step limit appended to the
command: ``full.rehearsal_stop``), the driver checks that NeMo-RL's own loader read ``grpo.max_num_steps`` as the
rehearsal's steps; then the actors of the policy-training nodes (the nodes the generation leaves, as grpo.py:683-686
splits them) form the policy's world and take that many steps of a tiny model on CPU (gradients all-reduced, then
torch's optimizer step, which the images' rehearsal hook counts and records without ending the actor) and return;
the generation actors take none. The driver then shuts Ray down, which kills the actors as NeMo-RL's shutdown
does, and ends as a Python process returning from ``main`` (its ``atexit`` functions run).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import sys
from pathlib import Path

from mlperf_wf.benchmarks.qwen35_397b_grpo import megatron_checkpoint
from tests.rehearsal.probe import FAIL_VARIABLE, FAILED_ON_PURPOSE, PROBLEM_FOUND, ProbeFailure, seed
from tests.rehearsal.spec import Rehearsal

NEMO_RL = "nemo-rl-3fca04c9"
PYTHON = Path(sys.executable)
"""The image's Python in the rehearsal: the project's venv, which holds the Ray, OmegaConf and Hydra versions NeMo-RL's
``uv.lock`` pins (requirements-dev.txt) besides torch and mlperf-logging."""
DRIVER = "/workspace/llm/run_grpo_nemo_gym.py"

REHEARSAL = Rehearsal(
    benchmark="qwen35_397b_grpo",
    # NeMo-RL's docker/mlperf/Dockerfile: the source tree at /opt/nemo-rl (:256), the MLPerf logger, driver and recipes
    # copied into it (:150-152), docker/mlperf itself at /workspace/llm (:639-640).
    image_files={
        "/opt/nemo-rl": NEMO_RL,
        "/opt/nemo-rl/nemo_rl/algorithms/mlperf_grpo_logging.py": f"{NEMO_RL}/docker/mlperf/mlperf_grpo_logging.py",
        "/opt/nemo-rl/examples/nemo_gym/run_grpo_nemo_gym.py": f"{NEMO_RL}/docker/mlperf/run_grpo_nemo_gym.py",
        "/opt/nemo-rl/qwen_35/configs": f"{NEMO_RL}/docker/mlperf/conf",
        "/workspace/llm": f"{NEMO_RL}/docker/mlperf",
    },
    # the synced venv's tools (Dockerfile:238 puts /opt/nemo_rl_venv/bin first on PATH): the box's stand-ins for uv and
    # nvidia-smi, and the project venv's Python and Ray
    image_tools={"/opt/nemo_rl_venv/bin": "tests/benchmarks/qwen35_397b_grpo/rehearsal_image/bin"},
    entry=(DRIVER,),
    nodes=2,
    image_env={
        # docker/mlperf/Dockerfile:27,76-77,238 (PATH: the synced venv first)
        "NRL_CONTAINER": "1",
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",
        "PATH": "/opt/nemo_rl_venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "MLPERF_WF_REHEARSAL_PYTHON": str(PYTHON),
    },
)

HF_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "chat_template.jinja")
"""The Hugging Face snapshot's configuration and tokenizer files (get_tokenizer and vLLM read them)."""
WEIGHT_SHARDS = 2
"""Weight files of the tiny snapshot (named as the index names them)."""
TRAIN_IDS = ("scrapy__scrapy-6313b7ff4cf1b6df39fed2531682e1684e4e4023", "pandas-dev__pandas-bf375608c10a6021c8933939a00c3b733cfee287")
VALIDATION_IDS = ("python-pillow__Pillow-c3bf1e1c78591047c2cfeef9db75369a034da001", "numpy__numpy-1b3e6f1d8dad0b3b7d8a0891dcb2050cdc023075")
"""The first qualified IDs of tools/{train,val}-instance-ids.txt at the pinned commit."""


def _sif_name(instance_id: str) -> str:
    """create_r2e_gym_easy_subset_jsonl.py:226-227 (expected_container_id): the image name of a task."""
    return re.sub(r"[^_]+__([^-]+)-", lambda match: match.group(1).lower() + "_final_", instance_id)


def published(dataset_id: str, folder: Path) -> None:
    """The three published inputs: the HF snapshot, the R2E-Gym-Subset repository and the task SIF folder (the Megatron
    conversion is made on the box by the workflow's one-off job of the image: :func:`_convert_as_nemo_rl_does`)."""
    if dataset_id == "qwen35_397b_a17b_checkpoint":
        for name in HF_FILES:
            (folder / name).write_text(json.dumps({"rehearsal": name}) + "\n")
        shards = [f"model-{i:05d}-of-{WEIGHT_SHARDS:05d}.safetensors" for i in range(1, WEIGHT_SHARDS + 1)]
        (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {f"w{i}": s for i, s in enumerate(shards)}}) + "\n")
        for shard in shards:
            (folder / shard).write_bytes(b"\0" * 16)
    elif dataset_id == "r2e_gym_subset":
        (folder / "data").mkdir()
        (folder / "README.md").write_text("R2E-Gym-Subset (rehearsal stand-in)\n")
        (folder / "data" / "train-00000-of-00001.parquet").write_bytes(b"PAR1 rehearsal PAR1")
    elif dataset_id == "r2e_gym_task_images":
        (folder / "r2egym").mkdir()
        for instance_id in (*TRAIN_IDS, *VALIDATION_IDS):
            (folder / "r2egym" / f"{_sif_name(instance_id)}.sif").write_bytes(b"SIF rehearsal")
    else:
        raise ValueError(f"qwen35_397b_grpo does not read {dataset_id}")


def prepared(folder: Path) -> None:
    """The prepared tree as the full preparation leaves it (``resources/full/prepared/qwen35_397b_grpo``): the
    converter's two renamed JSON-lines files and its metrics in the shard, linked from ``dataset/``. The full
    preparation itself verifies the real files' sha256 (verify_dataset.sh), which tiny contents cannot pass."""
    from mlperf_wf.benchmarks.qwen35_397b_grpo import prepare

    shard = folder / "shards" / prepare.SHARD
    shard.mkdir(parents=True, exist_ok=True)
    for name, ids in ((prepare.TRAIN_FILENAME, TRAIN_IDS), (prepare.VALIDATION_FILENAME, VALIDATION_IDS)):
        rows = [
            {"instance_id": i, "container_formatter": f"{prepare.CONTAINER_IMAGE_DIR}/r2egym/{_sif_name(i)}.sif", "responses_create_params": {"input": []}}
            for i in ids
        ]
        (shard / name).write_text("".join(json.dumps(row) + "\n" for row in rows))
    (shard / prepare.METRICS_FILENAME).write_text("{}\n")
    (shard / "prepared.json").write_text(json.dumps({"scale": "full", "rehearsal": True}) + "\n")
    dataset = folder / "dataset"
    dataset.mkdir(parents=True, exist_ok=True)
    for name, source in prepare.layout("full").items():
        (dataset / name).symlink_to(Path("..") / "shards" / source)


def _reference_module(path: Path, name: str):
    """A module of the reference at the pinned commit, loaded from its file in the image (not its package, whose
    ``__init__`` needs the GPU stack)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _environment_variables_without_default(ctx, config_file: Path) -> None:
    """Every ``${oc.env:NAME}`` without a default in the recipe and its ``defaults`` chain must be set in the job."""
    chain = [config_file]
    while True:
        found = re.search(r"^defaults:\s*(\S+)", chain[-1].read_text(), re.MULTILINE)
        if not found:
            break
        chain.append(chain[-1].parent / found.group(1))
    for path in chain:
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            for name in re.findall(r"\$\{oc\.env:(\w+)\}", line):
                ctx.variable(name, f"{path.relative_to(ctx.cwd)}:{number} reads ${{oc.env:{name}}} (no default), resolved at run_grpo_nemo_gym.py:137")


def probe(ctx) -> None:
    ctx.world_from_launcher = False  # the driver is one process; Ray's actors are the ranks (below)
    sys.argv = [DRIVER, *ctx.argv]
    parse_args = ctx.reference_function(DRIVER, "parse_args", {"argparse": argparse})
    args, overrides = parse_args()
    recipe = ctx.path(args.config, "run_grpo_nemo_gym.py:130 load_config(--config)", kind="file")
    _environment_variables_without_default(ctx, recipe)
    from omegaconf import OmegaConf

    config_module = _reference_module(ctx.path("nemo_rl/utils/config.py", "NeMo-RL's config loader", kind="file"), "nemo_rl_utils_config")
    config_module.register_omegaconf_resolvers()
    config = config_module.parse_hydra_overrides(config_module.load_config(args.config), overrides)
    try:
        config = OmegaConf.to_container(config, resolve=True)
    except Exception as error:  # OmegaConf's interpolation errors name the key and the variable
        ctx.fail(f"run_grpo_nemo_gym.py:137 OmegaConf.to_container(resolve=True) of {args.config}: {type(error).__name__}: {error}")
    # Every later check runs even when one fails, so one rehearsal shows every problem; the driver fails at the end.
    problems = []
    for stage in (_inputs, _megatron_checkpoint, _geometry, _log_init_start, _dev_fuse, _launch_environment, _rehearsal_step_limit):
        try:
            stage(ctx, config)
        except ProbeFailure as error:
            problems.append(str(error))
    _form_world_with_ray(ctx, config, problems)


def _inputs(ctx, config: dict) -> None:
    policy = config["policy"]
    ctx.equal("policy.tokenizer.name", policy["tokenizer"]["name"], policy["model_name"], "the tokenizer is the checkpoint's")
    model = ctx.path(policy["model_name"], "policy.model_name: the HF checkpoint (get_tokenizer, AutoConfig, vLLM)", kind="dir")
    for name in ("config.json", "tokenizer_config.json", "tokenizer.json", "model.safetensors.index.json"):
        ctx.opens(model / name, f"policy.model_name/{name}")
    rows = {}
    for split in ("train", "validation"):
        path = config["data"][split]["data_path"]
        ctx.opens(path, f"data.{split}.data_path (setup_response_data: NemoGymDataset)")
        rows[split] = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
        ctx.equal(f"rows of data.{split}.data_path", bool(rows[split]), True, "a split with tasks")
    sif_dir = ctx.path(config["sif_dir"], "sif_dir: the task SIF images", kind="dir")
    formatters = config["env"]["nemo_gym"]["swe_agents_train"]["responses_api_agents"]["swe_agents"]["container_formatter"]
    for split, split_rows in rows.items():
        instance_id = split_rows[0]["instance_id"]
        candidates = [pattern.format(instance_id=_sif_name(instance_id)) for pattern in formatters]
        found = [c for c in candidates if Path(c).is_file()]
        ctx.record("path", " | ".join(candidates), f"the SIF of {split} task {instance_id} (container_formatter, first match)", bool(found))
        if not found:
            ctx.fail(f"no SIF for {split} task {instance_id} under {sif_dir}: tried {candidates}")
        ctx.opens(found[0], f"the SIF of {split} task {instance_id} is readable (Apptainer reads it to start the task's sandbox)")


def _geometry(ctx, config: dict) -> None:
    ctx.equal(
        "cluster.num_nodes",
        config["cluster"]["num_nodes"],
        int(ctx.env.get("SLURM_JOB_NUM_NODES", ctx.env.get("SLURM_NNODES", "0"))),
        "the recipe's cluster is the job's nodes",
    )
    ctx.equal(
        "cluster.gpus_per_node", config["cluster"]["gpus_per_node"], int(ctx.env.get("SLURM_GPUS_ON_NODE", "0")), "the recipe's GPUs per node are the job's"
    )
    # nemo_rl/algorithms/grpo.py:626-686: non-colocated generation on more than one node trains on the nodes the
    # generation leaves, and asserts that each role has at least one (the reference's 48 on 2 nodes fails there)
    total, generation = config["cluster"]["num_nodes"], config["policy"]["generation"]["colocated"]["resources"]["num_nodes"]
    if total > 1 and not config["policy"]["generation"]["colocated"]["enabled"]:
        ctx.equal("policy-training and generation nodes > 0", (total - generation > 0, generation > 0), (True, True), f"grpo.py:683-686 on {total} nodes")


def _megatron_checkpoint(ctx, config: dict) -> None:
    """nemo_rl/models/megatron/setup.py:405-419: NeMo-RL converts the HF checkpoint into
    ``$NRL_MEGATRON_CHECKPOINT_DIR/model_<path>/iter_0000000`` unless it is there (handle_model_import, :1390). A 397B
    conversion inside a timed run must not happen: in a run the conversion the one-off job made must be there,
    read-only, shared by every run. The one-off job (the workflow's make_in_image, as convert_ckpt.sh: the run's config
    for one step) finds the folder empty and writable, and NeMo-RL converts into it (:func:`_convert_as_nemo_rl_does`)."""
    policy = config["policy"]
    root = ctx.variable("NRL_MEGATRON_CHECKPOINT_DIR", "nemo_rl/models/policy/utils.py:247 get_megatron_checkpoint_dir")
    subdir = policy["model_name"]
    if os.path.exists(subdir):  # setup.py:410-412
        subdir = f"model_{subdir.replace('/', '_')}"
    ctx.equal("policy.hf_config_overrides", bool(policy.get("hf_config_overrides")), False, "setup.py:414-416 adds __hfovr_<hash> to the folder otherwise")
    ctx.equal("policy.megatron_cfg.force_reconvert_from_hf", bool(policy["megatron_cfg"].get("force_reconvert_from_hf")), False, "no reconversion in the run")
    ctx.equal("the converted folder's name", subdir, megatron_checkpoint.CONVERTED_FOLDER, "the folder the catalog entry holds")
    converted = Path(root) / subdir / megatron_checkpoint.ITERATION_FOLDER
    writable = os.access(root, os.W_OK)
    if not converted.is_dir():  # setup.py:418: NeMo-RL converts now
        steps = config["grpo"]["max_num_steps"]
        ctx.record("mount", root, "NeMo-RL converts into NRL_MEGATRON_CHECKPOINT_DIR: the one-off job's, read-write", writable)
        ctx.equal("grpo.max_num_steps", steps, 1, "only the one-step conversion job converts (convert_ckpt.sh: MAX_STEPS=1), never a run")
        ctx.equal("entries of NRL_MEGATRON_CHECKPOINT_DIR", sorted(os.listdir(root)), [], "the conversion starts from an empty folder")
        if not writable:
            ctx.fail(f"NRL_MEGATRON_CHECKPOINT_DIR={root} has no {subdir}/{megatron_checkpoint.ITERATION_FOLDER} and is read-only: NeMo-RL would convert here")
        _convert_as_nemo_rl_does(Path(root) / subdir)
        return
    for name in megatron_checkpoint.REQUIRED_FILES:
        ctx.opens(converted / name, f"the converted Megatron checkpoint NeMo-RL loads instead of converting (setup.py:416-419, 450): {name}")
    ctx.record("mount", root, "the Megatron checkpoint is a shared, read-only input (not a per-run scratch)", not writable)
    if writable:
        ctx.fail(f"NRL_MEGATRON_CHECKPOINT_DIR={root} is writable in the run: a per-run scratch, not the shared converted checkpoint")


def _convert_as_nemo_rl_does(folder: Path) -> None:
    """The box's stand-in for handle_model_import's GPU work (setup.py:1390): what a Megatron-Bridge torch_dist save
    of iteration 0 leaves, tiny contents (the rank-dependent ``__<rank>_<n>.distcp`` shards, one here, and the tracker)."""
    iteration = folder / megatron_checkpoint.ITERATION_FOLDER
    iteration.mkdir(parents=True)
    for name in megatron_checkpoint.REQUIRED_FILES:
        (iteration / name).write_text(json.dumps({"rehearsal": name}) + "\n")
    (iteration / "__0_0.distcp").write_bytes(b"\0" * 16)
    (folder / "latest_checkpointed_iteration.txt").write_text("0\n")


def _log_init_start(ctx, config: dict) -> None:
    """run_grpo_nemo_gym.py:140-142 with the reference's own logger module (and the round patch at its import)."""
    from mlperf_logging import mllog

    logging_module = _reference_module(
        ctx.path("nemo_rl/algorithms/mlperf_grpo_logging.py", "the reference's MLPerf logger", kind="file"), "mlperf_grpo_logging"
    )
    mllogger = mllog.get_mllogger()
    mllogger.constants = mllog.constants  # what mlperf_common's MLLoggerWrapper (not installed here) adds
    logger = logging_module.create_mlperf_logger(config, mllogger=mllogger)
    if logger is None:
        ctx.fail("logger.mlperf_enabled is false: the reference would log nothing")
    logger.log_init_start()
    ctx.log_file = config["logger"]["mlperf"]["log_file"]
    ctx.record(
        "log", ctx.log_file, "logger.mlperf.log_file: the reference's logger writes the run's result file", ctx.log_file == ctx.env.get("COMPLIANCE_FILE")
    )


def _dev_fuse(ctx, config: dict) -> None:
    """config_mounts.sh: "apptainer needs /dev/fuse for the SIF sandboxes" (the reference mounts /dev/fuse:/dev/fuse)."""
    mounted = any(line.split()[4] == "/dev/fuse" for line in Path("/proc/self/mountinfo").read_text().splitlines())
    ctx.record("mount", "/dev/fuse", "config_mounts.sh mounts /dev/fuse for the per-task Apptainer sandboxes", mounted)
    if not mounted:
        ctx.fail("/dev/fuse is not mounted into the container (config_mounts.sh mounts it for the per-task Apptainer sandboxes)")


LAUNCH_SCRIPTS = ("/workspace/llm/run.sub", "/workspace/llm/run_and_time.sh")
"""The reference's launch (docker/mlperf, at /workspace/llm in the image): run.sub starts run_and_time.sh in the container."""
LAUNCH_VARIABLES = (
    "CUDA_DEVICE_MAX_CONNECTIONS",
    "NCCL_LAUNCH_ORDER_IMPLICIT",
    "RAY_ENABLE_UV_RUN_RUNTIME_ENV",
    "OMP_NUM_THREADS",
    "NEMO_GYM_SWE_WORKSPACE_ROOT",
    "HF_HOME",
    "TRANSFORMERS_OFFLINE",
    "RAY_CGRAPH_get_timeout",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    "VLLM_USE_RAY_V2_EXECUTOR_BACKEND",
)
"""What the reference's launch exports for every process with a fixed value (the rest are paths and secrets the plan
sets from its mounts, or run.sub's own bookkeeping)."""


def _launch_environment(ctx, config: dict) -> None:
    """Each of :data:`LAUNCH_VARIABLES` has the value the reference's own launch lines give it (``export NAME=VALUE``,
    ``export NAME="${NAME:-VALUE}"``, or ``: "${NAME:=VALUE}"`` then ``export NAME``), and the open-files limit is
    run.sub's ``ulimit -Sn`` (its hard limit allows it here), as the driver and every Ray worker inherit them."""
    import resource

    exported: dict[str, tuple[str, str]] = {}
    defaults: dict[str, tuple[str, str]] = {}
    wanted_limit = None
    for script in LAUNCH_SCRIPTS:
        text = ctx.path(script, "the reference's launch script", kind="file").read_text()
        for number, line in enumerate(text.splitlines(), start=1):
            found = re.match(r'\s*export (\w+)="?(?:\$\{\1:-)?([^"}$]*)\}?"?\s*$', line)
            if found:
                exported[found.group(1)] = (found.group(2), f"{Path(script).name}:{number}")
            default = re.match(r'\s*: "\$\{(\w+):=([^"}$]*)\}"\s*$', line)
            if default:
                defaults[default.group(1)] = (default.group(2), f"{Path(script).name}:{number}")
            bare = re.match(r"\s*export (\w+)\s*$", line)
            if bare and bare.group(1) in defaults:  # run.sub:65-66 `: "${OMP_NUM_THREADS:=16}"` then `export OMP_NUM_THREADS`
                exported[bare.group(1)] = defaults[bare.group(1)]
            limit = re.search(r"ulimit -Sn (\d+)", line)
            if limit:
                wanted_limit = (int(limit.group(1)), f"{Path(script).name}:{number}")
    for name in LAUNCH_VARIABLES:
        if name not in exported:
            ctx.fail(f"{name} is no longer exported by {', '.join(LAUNCH_SCRIPTS)}: update LAUNCH_VARIABLES")
        value, where = exported[name]
        ctx.equal(f"${name}", os.environ.get(name), value, f"{where} exports it")
    if wanted_limit is None:
        ctx.fail(f"no `ulimit -Sn` in {', '.join(LAUNCH_SCRIPTS)}")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard >= wanted_limit[0]:
        ctx.equal("the open-files soft limit", soft, wanted_limit[0], f"{wanted_limit[1]} ulimit -Sn")
    else:
        # run.sub raises it only where the hard limit allows; so does the plan's line, saying so in the job's log (the
        # test reads that line there)
        ctx.record("value", "the open-files soft limit", f"{wanted_limit[1]} ulimit -Sn", True, f"hard limit {hard} < {wanted_limit[0]}: left at {soft}")


def _rehearsal_step_limit(ctx, config: dict) -> None:
    """In ``mlperf-wf rehearse``'s job, the step limit it appended reached NeMo-RL's config: the framework ends the run."""
    wanted = os.environ.get(REHEARSAL_STEPS_VARIABLE)
    if wanted:
        ctx.equal("grpo.max_num_steps", config["grpo"]["max_num_steps"], int(wanted), f"the rehearsal's step limit ({REHEARSAL_STEPS_VARIABLE}={wanted})")


REHEARSAL_STEPS_VARIABLE = "MLPERF_WF_REHEARSAL_STEPS"
POLICY_PORT = 29513
"""The policy world's rendezvous port in a rehearsal (the whole world's is 29512)."""


class _Rank:
    """One rank of the world NeMo-RL's worker groups form: a Ray actor holding one GPU."""

    def where(self) -> tuple[str, int, str]:
        import socket

        import ray

        return socket.gethostname(), int(ray.get_gpu_ids()[0]), ray.util.get_node_ip_address()

    def join(self, rank: int, local_rank: int, world_size: int, master: str, checked: list) -> int:
        os.environ.update({"RANK": str(rank), "LOCAL_RANK": str(local_rank), "WORLD_SIZE": str(world_size)})
        os.environ.update({"MASTER_ADDR": master, "MASTER_PORT": "29512"})
        from tests.rehearsal import probe as rehearsal_probe

        ctx = rehearsal_probe.ProbeContext(benchmark=REHEARSAL.benchmark, argv=[], env=dict(os.environ), cwd=Path.cwd(), checked=checked)
        status, problem, world = 0, "", {}
        try:
            world = rehearsal_probe._form_world(ctx)
            failing = os.environ.get(rehearsal_probe.FAIL_VARIABLE, "")
            if failing and failing == f"{rehearsal_probe.seed()}:{rank}":
                status, problem = rehearsal_probe.FAILED_ON_PURPOSE, f"rank {rank} fails on purpose ({rehearsal_probe.FAIL_VARIABLE}={failing})"
            else:
                import torch.distributed as dist

                dist.barrier()
        except Exception as error:
            status, problem = rehearsal_probe.PROBLEM_FOUND, repr(error)
        rehearsal_probe._write_rank(ctx, world, status, problem)
        if status == rehearsal_probe.FAILED_ON_PURPOSE:
            # a failing rank's process ends, as a crashed NeMo-RL worker's does: its peers' collective breaks and the
            # driver sees the actor die (a rank that returned would leave them in the barrier until gloo's timeout)
            sys.stdout.flush()
            os._exit(status)
        return status

    def train(self, rank: int, local_rank: int, world_size: int, master: str, steps: int) -> int:
        """A policy worker's training steps in a rehearsal: the policy's own world (its ranks only), a tiny model's
        data-parallel steps on CPU, each ending in torch's optimizer step; returns the steps taken."""
        import datetime

        import torch
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
        os.environ.update({"RANK": str(rank), "LOCAL_RANK": str(local_rank), "WORLD_SIZE": str(world_size)})
        os.environ.update({"MASTER_ADDR": master, "MASTER_PORT": str(POLICY_PORT)})
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
        model = torch.nn.Linear(16, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        for _ in range(steps):
            model(torch.ones(8, 16)).sum().backward()
            for parameter in model.parameters():
                dist.all_reduce(parameter.grad)
            optimizer.step()
            optimizer.zero_grad()
        return steps


def _form_world_with_ray(ctx, config: dict, problems: list[str]) -> None:
    """Connect to the Ray cluster the launcher built (init_ray), check it holds every node and GPU, and form the
    world of one actor per GPU; end the driver with the worst status of the ranks (3 when a check failed)."""
    import ray

    ray.init(address="auto", logging_level="ERROR")
    nodes = [node for node in ray.nodes() if node["Alive"]]
    expected_gpus = config["cluster"]["num_nodes"] * config["cluster"]["gpus_per_node"]
    ctx.equal("alive Ray nodes", len(nodes), config["cluster"]["num_nodes"], "every node joined the Ray cluster (init_ray)")
    ctx.equal("Ray cluster GPUs", int(ray.cluster_resources().get("GPU", 0)), expected_gpus, "one Ray GPU per GPU of the allocation")
    actor = ray.remote(num_gpus=1, num_cpus=0)(_Rank)
    ranks = [actor.remote() for _ in range(expected_gpus)]
    places = ray.get([rank.where.remote() for rank in ranks])
    order = sorted(range(len(ranks)), key=lambda i: (places[i][0], places[i][1]))
    master = places[order[0]][2]
    joined = [ranks[i].join.remote(r, places[i][1], len(ranks), master, ctx.checked) for r, i in enumerate(order)]
    statuses = []
    for rank, future in enumerate(joined):
        try:
            statuses.append(ray.get(future))
        except ray.exceptions.RayActorError as error:  # the rank's process ended without returning
            # its own words may not reach the job's log (Ray stops forwarding a dead worker's output): the driver's do
            on_purpose = os.environ.get(FAIL_VARIABLE, "") == f"{seed()}:{rank}"
            why = f"fails on purpose ({FAIL_VARIABLE})" if on_purpose else "ended without returning"
            print(f"rehearsal driver: rank {rank} {why}: its process died ({type(error).__name__})", file=sys.stderr, flush=True)
            statuses.append(FAILED_ON_PURPOSE if on_purpose else PROBLEM_FOUND)
    worst = max(statuses)
    print(f"rehearsal driver: ranks ended {statuses}", flush=True)
    rehearsed = bool(os.environ.get(REHEARSAL_STEPS_VARIABLE))
    if rehearsed and not worst and not problems:
        worst = _train_policy(config, [ranks[i] for i in order], [places[i] for i in order])
    for problem in problems:
        print(f"rehearsal probe (qwen35_397b_grpo driver): {problem}", file=sys.stderr, flush=True)
    if problems and not worst:
        worst = PROBLEM_FOUND
    ray.shutdown()  # the actors are killed, as NeMo-RL's shutdown ray.kills its workers: no atexit of theirs runs
    sys.stdout.flush()
    if rehearsed:
        import atexit

        atexit._run_exitfuncs()  # the driver's own end, as run_grpo_nemo_gym.py's return from main (the hook records its inputs)
    os._exit(worst)


def _train_policy(config: dict, ranks: list, places: list) -> int:
    """The policy-training nodes' actors (the first hosts, by name: the nodes the generation leaves) take
    ``grpo.max_num_steps`` steps in their own world; 0 when each returned them, else PROBLEM_FOUND."""
    cluster_config = config["cluster"]
    train_nodes = cluster_config["num_nodes"] - config["policy"]["generation"]["colocated"]["resources"]["num_nodes"]
    hosts = sorted({place[0] for place in places})[:train_nodes]
    policy = [(rank, place) for rank, place in zip(ranks, places, strict=True) if place[0] in hosts]
    steps = config["grpo"]["max_num_steps"]
    master = policy[0][1][2]
    futures = [rank.train.remote(r, place[1], len(policy), master, steps) for r, (rank, place) in enumerate(policy)]
    import ray

    try:
        taken = ray.get(futures)
    except Exception as error:  # a policy actor died or raised
        print(f"rehearsal driver: the policy's training steps failed: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
        return PROBLEM_FOUND
    print(f"rehearsal driver: {len(policy)} policy ranks on {', '.join(hosts)} took {taken} steps (grpo.max_num_steps={steps})", flush=True)
    return 0 if taken == [steps] * len(policy) else PROBLEM_FOUND
