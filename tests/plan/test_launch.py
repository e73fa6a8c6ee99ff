"""Golden command lines of every launch backend, and the scheduler request of a run."""

from __future__ import annotations

import shlex

import pytest

from mlperf_wf.config.registry import Container, load_benchmark
from mlperf_wf.errors import ConfigError
from mlperf_wf.plan.launch import HostHooks, Launch, RunPaths, drop_page_cache, raise_limits, tiny_command
from tests.conftest import ROOT
from tests.plan.launch_line import full_scale

IMAGE = "mlperf-workflow/llama2_70b_lora:ref-aa344c7-pytorch24.01-patches1"
DIGEST = "sha256:" + "ab" * 32
PINNED = Container(image="registry.example:5000/mlperf/llama2_70b_lora:ref-1", digest=DIGEST)
REFERENCE = (
    "accelerate launch --num_processes 8 --config_file configs/default_config.yaml scripts/train.py"
    " --dataset_path /data/dataset --model_path /ckpt --max_seq_len 8192 --bf16 True --logging_steps 24 --eval_steps 48"
    " --output_dir /results/run_3 --per_device_train_batch_size 1 --gradient_accumulation_steps 1"
    " --lr_scheduler_type cosine --learning_rate 0.0004 --weight_decay 0.0001 --warmup_ratio 0 --max_grad_norm 0.3"
    " --use_gradient_checkpointing True --target_eval_loss 0.925 --use_peft_lora True --lora_r 16 --lora_alpha 32"
    " --lora_dropout 0.1 --max_steps 1024 --use_flash_attn --seed 1237 --lora_target_modules qkv_proj,o_proj"
)


@pytest.fixture
def run(tmp_path):
    bench = load_benchmark("llama2_70b_lora")
    paths = RunPaths(prepared=tmp_path / "prep" / "dataset", inputs={"checkpoint": tmp_path / "ckpt"}, result_file=tmp_path / "runs" / "3" / "result.txt")
    return bench, paths, tmp_path


SUBMISSION = (("MLPERF_SUBMISSION_ORG", "acme"), ("MLPERF_SUBMISSION_PLATFORM", "dgx-h100"))
DROP = drop_page_cache()
"""Every full-scale line starts by dropping the page cache on this host (tests/plan/test_page_cache.py runs it)."""


def test_docker(run):
    bench, paths, tmp = run
    line = full_scale(bench, 3, 1237, paths, Launch("docker", env_passthrough=("NCCL_DEBUG",), env=SUBMISSION))
    assert line == (
        f"{DROP}; docker run --rm --gpus all --network=host --ipc=host --ulimit memlock=-1 --ulimit stack=67108864"
        f" -v {tmp}/prep:/data:ro -v {tmp}/ckpt:/ckpt:ro -v {tmp}/runs/3:/results"
        " -e COMPLIANCE_FILE=/results/result.txt -e HF_HUB_OFFLINE=1 -e MLPERF_SUBMISSION_ORG=acme -e MLPERF_SUBMISSION_PLATFORM=dgx-h100"
        " -e MLPERF_WF_MLLOG_PARTS=/results/mllog-parts"
        " -e SEED=1237 -e NCCL_DEBUG -e MLPERF_WF_CACHE_CLEARED"
        f" -w /workspace/ft-llm {IMAGE} {REFERENCE}"
    )
    pinned = full_scale(bench, 3, 1237, paths, Launch("docker"), image=PINNED)
    assert f" registry.example:5000/mlperf/llama2_70b_lora:ref-1@{DIGEST} accelerate launch" in pinned


def test_apptainer_pulls_by_digest_alone_and_gives_the_read_only_image_somewhere_to_write(run):
    bench, paths, tmp = run
    line = full_scale(bench, 3, 1237, paths, Launch("apptainer", env_passthrough=("NCCL_DEBUG",)), image=PINNED)
    assert line == (
        f"{DROP}; mkdir -p {tmp}/runs/3/home && "
        f"apptainer exec --nv --cleanenv --writable-tmpfs --home {tmp}/runs/3/home:/home/mlperf-wf"
        f" --bind {tmp}/prep:/data:ro,{tmp}/ckpt:/ckpt:ro,{tmp}/runs/3:/results:rw"
        " --env COMPLIANCE_FILE=/results/result.txt --env HF_HUB_OFFLINE=1 --env MLPERF_WF_MLLOG_PARTS=/results/mllog-parts"
        ' --env SEED=1237 --env "NCCL_DEBUG=${NCCL_DEBUG}"'
        ' --env "MLPERF_WF_CACHE_CLEARED=${MLPERF_WF_CACHE_CLEARED}"'
        f" --pwd /workspace/ft-llm docker://registry.example:5000/mlperf/llama2_70b_lora@{DIGEST} {REFERENCE}"
    )
    assert "--no-home" not in line and ":ref-1@" not in line  # Apptainer refuses a tag beside a digest


def test_image_references_per_runtime():
    assert PINNED.reference == f"registry.example:5000/mlperf/llama2_70b_lora:ref-1@{DIGEST}"
    assert PINNED.apptainer_reference == f"docker://registry.example:5000/mlperf/llama2_70b_lora@{DIGEST}"
    assert PINNED.enroot_reference == f"registry.example:5000#mlperf/llama2_70b_lora:{DIGEST}"
    hub = Container(image="mlperf-workflow/rgat:ref-1")
    assert (hub.reference, hub.apptainer_reference, hub.enroot_reference) == (
        "mlperf-workflow/rgat:ref-1", "docker://mlperf-workflow/rgat:ref-1", "mlperf-workflow/rgat:ref-1",
    )  # fmt: skip
    assert Container(image="nvcr.io/nvidia/pytorch:24.01-py3").enroot_reference == "nvcr.io#nvidia/pytorch:24.01-py3"


def test_pyxis_single_node(run):
    bench, paths, tmp = run
    line = full_scale(bench, 3, 1237, paths, Launch("pyxis"), image=PINNED)
    assert line == (
        f"{drop_page_cache(1, srun=True)}; "
        'export MASTER_ADDR="$(scontrol show hostnames "${SLURM_JOB_NODELIST:-$(squeue -h -j "$SLURM_JOB_ID" -o %N)}" | head -n 1)";'
        " export COMPLIANCE_FILE=/results/result.txt; export HF_HUB_OFFLINE=1; export MASTER_PORT=29500;"
        " export MLPERF_WF_MLLOG_PARTS=/results/mllog-parts; export SEED=1237;"
        " srun --nodes=1 --ntasks-per-node=1 --mpi=none --kill-on-bad-exit=1 --overlap"
        f" '--container-image=registry.example:5000#mlperf/llama2_70b_lora:{DIGEST}'"
        f" --container-mounts={tmp}/prep:/data:ro,{tmp}/ckpt:/ckpt:ro,{tmp}/runs/3:/results:rw"
        " --container-writable --container-remap-root --no-container-mount-home --container-workdir=/workspace/ft-llm"
        " --container-env=COMPLIANCE_FILE,HF_HUB_OFFLINE,MASTER_ADDR,MASTER_PORT,MLPERF_WF_CACHE_CLEARED,MLPERF_WF_MLLOG_PARTS,SEED"
        f" bash -c '{REFERENCE}'"
    )


def test_pyxis_multi_node_gives_accelerate_the_machine_layout_and_the_standard_deepspeed_launcher(run):
    bench, paths, _ = run
    line = full_scale(bench, 3, 1237, paths, Launch("pyxis", nodes=4, gpus_per_node=8))
    assert "srun --nodes=4 --ntasks-per-node=1 " in line
    inner = shlex.split(line.rsplit(" bash -c ", 1)[1])[0]
    assert inner.startswith(
        'accelerate launch --num_machines 4 --machine_rank "${SLURM_NODEID}"'
        ' --main_process_ip "${MASTER_ADDR}" --main_process_port "${MASTER_PORT}"'
        " --deepspeed_multinode_launcher standard --num_processes 32 --config_file configs/default_config.yaml"
    )


def test_single_node_backends_refuse_several_nodes(run):
    bench, paths, _ = run
    for launcher in ("docker", "apptainer", "local"):
        with pytest.raises(ConfigError, match=f"2 nodes need the pyxis launcher; {launcher} runs on one node"):
            full_scale(bench, 3, 1237, paths, Launch(launcher, nodes=2))


def test_local_full_scale_uses_host_paths_in_a_subshell_with_the_round_patches(run):
    bench, paths, tmp = run
    hooks = HostHooks(folders=("/p/containers/hooks", "/p/src/mlperf_wf/benchmarks/llama2_70b_lora/container/patches"), modules=("mlperf_wf_llama2_70b_lora",))
    line = full_scale(bench, 3, 1237, paths, Launch("local", workdir="/opt/training/llama2_70b_lora", hooks=hooks))
    # a subshell, so the job's `> log` and later commands stay in the workflow's folder
    assert line.startswith(
        f"{DROP}; (cd /opt/training/llama2_70b_lora && exec env COMPLIANCE_FILE={tmp}/runs/3/result.txt HF_HUB_OFFLINE=1"
        f" MLPERF_WF_MLLOG_PARTS={tmp}/runs/3/mllog-parts SEED=1237"
    )
    assert line.endswith(")")
    assert ' "PYTHONPATH=/p/containers/hooks:/p/src/mlperf_wf/benchmarks/llama2_70b_lora/container/patches${PYTHONPATH:+:$PYTHONPATH}"' in line
    assert ' "MLPERF_WF_HOOKS=mlperf_wf_llama2_70b_lora${MLPERF_WF_HOOKS:+,$MLPERF_WF_HOOKS}" accelerate launch' in line
    assert f"--dataset_path {tmp}/prep/dataset --model_path {tmp}/ckpt" in line


def test_site_arguments_replace_the_reference_values_and_unknown_flags_are_refused(run):
    bench, paths, _ = run
    line = full_scale(bench, 3, 1237, paths, Launch("docker", arguments=(("--max_seq_len", "4096"), ("--config_file", "configs/site.yaml"))))
    assert "--config_file configs/site.yaml scripts/train.py" in line and "--max_seq_len 4096 " in line and "8192" not in line
    with pytest.raises(ConfigError, match=r"full_arguments.llama2_70b_lora: '--max_step' is not a flag of its reference command; its flags: "):
        full_scale(bench, 3, 1237, paths, Launch("docker", arguments=(("--max_step", "800"),)))


def test_site_mounts_are_added_to_every_container(run):
    bench, paths, _ = run
    extra = (("/scratch/hf", "/hf", "ro"),)
    assert " -v /scratch/hf:/hf:ro " in full_scale(bench, 3, 1237, paths, Launch("docker", extra_mounts=extra))
    assert ",/scratch/hf:/hf:ro " in full_scale(bench, 3, 1237, paths, Launch("apptainer", extra_mounts=extra))
    assert ",/scratch/hf:/hf:ro " in full_scale(bench, 3, 1237, paths, Launch("pyxis", extra_mounts=extra))


def test_tiny_commands():
    assert tiny_command(["--run-index", "0"], Launch("local")) == ["mlperf-wf", "train", "--run-index", "0"]
    assert tiny_command(["--run-index", "0"], Launch("local", tiny_processes=2)) == [
        "torchrun", "--standalone", "--nproc-per-node=2", "-m", "mlperf_wf", "train", "--run-index", "0",
    ]  # fmt: skip


def test_pyxis_per_gpu_process_model_starts_one_task_per_gpu_with_slurm_ranks(run):
    bench, paths, _ = run
    per_gpu = bench.model_copy(update={"full": bench.full.model_copy(update={"process_model": "per_gpu"})})
    line = full_scale(per_gpu, 3, 1237, paths, Launch("pyxis", nodes=2, gpus_per_node=4))
    # no --mpi unless the definition names the reference's (srun.sh, run_gpt3.sh pass none: a site without PMIx runs them)
    assert "srun --nodes=2 --ntasks-per-node=4 --kill-on-bad-exit=1 --overlap " in line and "--mpi" not in line
    with_pmix = per_gpu.model_copy(update={"full": per_gpu.full.model_copy(update={"srun_mpi": "pmix"})})
    pmix_line = full_scale(with_pmix, 3, 1237, paths, Launch("pyxis", nodes=2, gpus_per_node=4))
    assert "srun --nodes=2 --ntasks-per-node=4 --mpi=pmix --kill-on-bad-exit=1 --overlap " in pmix_line
    assert "bash -c 'RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS exec accelerate launch" in line


def test_rgat_mounts_the_prepared_folder_at_the_folder_it_creates_and_the_output_cache(tmp_path):
    bench = load_benchmark("rgat")
    paths = RunPaths(
        prepared=tmp_path / "prepared" / "rgat" / "dataset",
        result_file=tmp_path / "runs" / "0" / "result.txt",
        output_cache=tmp_path / "cache",
    )
    line = full_scale(bench, 0, 1234, paths, Launch("docker"))
    assert f"-v {tmp_path}/prepared/rgat:/data/igbh:ro -v {tmp_path}/runs/0:/results -v {tmp_path}/cache:{tmp_path}/cache:ro" in line
    assert "/ckpt" not in line
    assert "python train_rgnn_multi_gpu.py --path /data/igbh/dataset --dataset_size full" in line and line.endswith("--random_seed 1234")
    assert "mlperf_gnn.log" not in line  # the round patch writes the log to $COMPLIANCE_FILE
    with pytest.raises(ConfigError, match=r"rgat: 2 nodes requested, but its reference command runs on one node"):
        full_scale(bench, 0, 1234, paths, Launch("pyxis", nodes=2))


@pytest.mark.parametrize(
    ("launcher", "amd", "nvidia"),
    [
        ("docker", "docker run --rm --device=/dev/kfd --device=/dev/dri --network=host --ipc=host --ulimit memlock=-1", "--gpus all"),
        ("apptainer", "apptainer exec --rocm --cleanenv", "--nv"),
        ("pyxis", ",/dev/kfd:/dev/kfd,/dev/dri:/dev/dri --container-writable", None),
    ],
)
def test_an_amd_image_gets_the_rocm_devices_instead_of_nvidia_s_flags(tmp_path, launcher, amd, nvidia):
    """dlrmv4's reference image is ROCm; its README starts it with --device=/dev/kfd --device=/dev/dri."""
    bench = load_benchmark("dlrmv4")
    assert bench.full.accelerator == "amd"
    paths = RunPaths(prepared=tmp_path / "prep" / "dataset", inputs={}, result_file=tmp_path / "runs" / "0" / "result.txt")
    line = full_scale(bench, 0, 1234, paths, Launch(launcher), image=PINNED)
    assert amd in line
    if nvidia:
        assert f" {nvidia} " not in line
    cuda = full_scale(
        load_benchmark("llama2_70b_lora"),
        3,
        1237,
        RunPaths(prepared=tmp_path / "p" / "dataset", inputs={"checkpoint": tmp_path / "c"}, result_file=tmp_path / "r.txt"),
        Launch(launcher),
        image=PINNED,
    )
    assert "/dev/kfd" not in cuda and "--rocm" not in cuda


@pytest.mark.parametrize(
    ("launcher", "expected"),
    [
        ("docker", "docker run --rm --gpus all --device=/dev/fuse "),
        ("apptainer", ":/results:rw,/dev/fuse --env"),
        ("pyxis", ":/results:rw,/dev/fuse:/dev/fuse --container-writable"),
    ],
)
def test_full_devices_reach_the_container_with_every_launcher(run, launcher, expected):
    """qwen35_397b_grpo's reference mounts /dev/fuse (its task sandboxes are Apptainer inside the container)."""
    bench, paths, _ = run
    assert "/dev/fuse" not in full_scale(bench, 3, 1237, paths, Launch(launcher), image=PINNED)
    with_fuse = bench.model_copy(update={"full": bench.full.model_copy(update={"devices": ["/dev/fuse"]})})
    line = full_scale(with_fuse, 3, 1237, paths, Launch(launcher), image=PINNED)
    assert expected in line and line.count("/dev/fuse") == (2 if launcher == "pyxis" else 1)  # once, at its own path
    amd = load_benchmark("dlrmv4")
    amd_with_fuse = amd.model_copy(update={"full": amd.full.model_copy(update={"devices": ["/dev/fuse"]})})
    amd_paths = RunPaths(prepared=paths.prepared, inputs={}, result_file=paths.result_file)
    amd_line = full_scale(amd_with_fuse, 3, 1237, amd_paths, Launch(launcher), image=PINNED)
    assert "/dev/fuse" in amd_line and ("/dev/kfd" in amd_line or launcher == "apptainer")


def test_full_devices_must_be_device_paths():
    full = load_benchmark("qwen35_397b_grpo").full
    assert full.devices == ["/dev/fuse"]
    with pytest.raises(ValueError, match=r"full.devices: 'fuse' is not a device path; allowed: an absolute path under /dev/"):
        type(full).model_validate({**full.model_dump(), "devices": ["fuse"]})


def test_the_limits_the_reference_raises_are_raised_before_the_launch_and_a_lower_hard_limit_is_said(run, tmp_path):
    import subprocess

    bench, paths, _ = run
    raising = bench.model_copy(update={"full": bench.full.model_copy(update={"ulimits": {"nofile": 4096}})})
    limits = raise_limits(raising.full.ulimits)
    for launcher in ("pyxis", "apptainer", "local"):
        assert f"{drop_page_cache(1, srun=launcher == 'pyxis')}; {limits}; " in full_scale(raising, 3, 1237, paths, Launch(launcher), image=PINNED)
    assert " --ulimit nofile=4096 " in full_scale(raising, 3, 1237, paths, Launch("docker"), image=PINNED)  # the engine's, not the shell's
    raised = subprocess.run(["bash", "-c", f"ulimit -Sn 1024; ulimit -Hn 8192; {limits}; ulimit -Sn"], capture_output=True, text=True, check=True)
    assert raised.stdout.strip() == "4096" and not raised.stderr
    # a hard limit under the reference's: said in the job's log, and the run goes on as the reference's launch does
    lower = subprocess.run(["bash", "-c", f"ulimit -Sn 1024; ulimit -Hn 2048; {limits}; echo went on"], capture_output=True, text=True, check=True)
    assert "went on" in lower.stdout and "could not raise the nofile limit to 4096 (hard limit 2048)" in lower.stderr


def test_a_site_argument_replacing_a_value_the_plan_derives_from_the_batch_is_a_named_deviation(tmp_path, monkeypatch):
    """The batch split and the RCP's values are the plan's, shown in the dry run's table and checked against the rules:
    a site flag that replaces one (a toy run's learning rate, step counts) is listed there as a deviation with the key
    that would keep the table in charge, never replaced behind it."""
    import yaml

    from mlperf_wf.config.workflow_config import WorkflowConfig
    from mlperf_wf.plan import plan as planning
    from mlperf_wf.plan import preflight

    (tmp_path / "config").symlink_to(ROOT / "config")
    monkeypatch.chdir(tmp_path)
    defaults = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    arguments = {"--learning_rate": "1.5e-4", "--eval_steps": "10", "--max_seq_len": "512"}
    config = {**defaults, "scale": "full", "full_arguments": {"llama2_70b_lora": arguments}}
    plan = planning.Plan(WorkflowConfig.parse(config), project_root=ROOT, workdir=tmp_path)
    assert "--learning_rate 1.5e-4 " in plan.of("llama2_70b_lora").train_job(0).command
    table = preflight.batch_tables(plan, ["llama2_70b_lora"])
    assert (
        "  --learning_rate 1.5e-4  DEVIATION: full_arguments replaces the plan's {hp[opt_base_learning_rate]} "
        "(full_hyperparameters.llama2_70b_lora.opt_base_learning_rate sets it and keeps this table in charge)"
    ) in table
    assert "  --eval_steps 10  DEVIATION: full_arguments replaces the plan's {gbs://384} (full_hyperparameters.llama2_70b_lora.global_batch_size" in table
    assert "--max_seq_len" not in table  # a literal of the reference's command, not the plan's
