"""Golden test of the full-scale command of one run."""

from __future__ import annotations

from pathlib import Path

from mlperf_wf.launch import RunPaths, full_scale_argv
from mlperf_wf.registry import load_benchmark

ROOT = Path(__file__).resolve().parents[1]


def test_llama2_full_scale_command_is_the_reference_launch(tmp_path):
    bench = load_benchmark("llama2_70b_lora", ROOT)
    paths = RunPaths(data=tmp_path / "prep", checkpoint_dir=tmp_path / "ckpt", result_file=tmp_path / "runs" / "3" / "result.txt")
    argv = full_scale_argv(bench, run=3, seed=1237, paths=paths)
    image = argv.index("mlperf-workflow/llama2_70b_lora:ref-aa344c7-pytorch24.01")
    assert argv[:image] == [
        "docker", "run", "--rm", "--gpus", "all", "--ipc=host", "--ulimit", "memlock=-1", "--ulimit", "stack=67108864",
        "-v", f"{tmp_path}/prep:/data:ro",
        "-v", f"{tmp_path}/ckpt:/ckpt:ro",
        "-v", f"{tmp_path}/runs/3:/results",
        "-e", "COMPLIANCE_FILE=/results/result.txt",
        "-e", "HF_HUB_OFFLINE=1",
        "-e", "SEED=1237",
        "-w", "/workspace/ft-llm",
    ]  # fmt: skip
    command = " ".join(argv[image + 1 :])
    assert command == (
        "accelerate launch --config_file configs/default_config.yaml scripts/train.py"
        " --dataset_path /data --model_path /ckpt --max_seq_len 8192 --bf16 True --logging_steps 24 --eval_steps 48"
        " --output_dir /results/run_3 --per_device_train_batch_size 1 --gradient_accumulation_steps 1"
        " --lr_scheduler_type cosine --learning_rate 4e-4 --weight_decay 0.0001 --warmup_ratio 0 --max_grad_norm 0.3"
        " --use_gradient_checkpointing True --target_eval_loss 0.925 --use_peft_lora True --lora_r 16 --lora_alpha 32"
        " --lora_dropout 0.1 --max_steps 1024 --use_flash_attn --seed 1237 --lora_target_modules qkv_proj,o_proj"
    )
