"""The first `make demo` says what it is doing at every step that takes more than a few seconds: the install names
each stage with the time it has taken so far and lets pip name every package, and the tiny base model's pretraining
prints its steps and loss to the terminal while its log file keeps everything."""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def fake_python(folder: Path) -> Path:
    """A `python3` whose `-m venv DIR` makes a venv with a `pip` that prints how it was called."""
    pip = folder / "pip"
    pip.write_text('#!/bin/sh\necho "pip $*"\n')
    pip.chmod(pip.stat().st_mode | stat.S_IXUSR)
    python = folder / "python3"
    python.write_text(f'#!/bin/sh\n[ "$1 $2" = "-m venv" ] || exit 9\nmkdir -p "$3/bin" && cp {pip} "$3/bin/pip"\n')
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    return python


def test_the_first_install_names_each_stage_with_its_time_and_lets_pip_name_each_package(tmp_path):
    venv = tmp_path / "venv"
    env = {**os.environ, "MAKEFLAGS": ""}
    argv = ["make", "--no-print-directory", f"PYTHON={fake_python(tmp_path)}", f"VENV={venv}", f"{venv}/bin/activate"]
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, env=env, check=True).stdout
    lines = out.splitlines()
    pips = [i for i, line in enumerate(lines) if line.startswith("pip install")]
    assert len(pips) == 3, out
    for i in pips:
        assert not {"-q", "--quiet"} & set(lines[i].split()), f"pip shows each package it fetches: {lines[i]}"
    stages = [i for i, line in enumerate(lines) if re.match(r"^make: install, step \d of 3 \(\d+ s so far\): .+$", line)]
    assert len(stages) == 3, out
    order = sorted([(i, "stage") for i in stages] + [(i, "pip") for i in pips])
    assert [kind for _, kind in order] == ["stage", "pip"] * 3, "each stage's line comes before its pip"
    assert re.match(r"^make: installing into .+ \(the first run only: about .+ on a 2-vCPU .+\)$", lines[0]), lines[0]
    assert re.match(r"^make: installed in \d+ s$", lines[-1]), lines[-1]
    assert (venv / "bin/activate").is_file()


# The rule's command (workflow/rules/download.smk, generate_tiny_mirror) with the pretraining cut to a few small steps
# and its naming check off, so that it runs in seconds: stdout and stderr to the log, the terminal's stderr as fd 3.
PRETRAIN = """
import sys
from mlperf_wf import cli
from mlperf_wf.benchmarks.llama2_70b_lora import base_checkpoint
base_checkpoint.generate.__defaults__ = (12, 4, 5e-3)  # steps, batch size, learning rate
base_checkpoint.MAX_NAMING_LOSS = float("inf")
sys.exit(cli.main(["--progress-fd", "3", "mirror", "--dataset", "llama2_70b_fused_qkv", "--out", sys.argv[1]]))
"""


def test_the_base_model_s_pretraining_prints_steps_and_loss_to_the_terminal_and_keeps_its_log(tmp_path):
    import shlex
    import sys

    log = tmp_path / "mirror.log"
    command = f"{shlex.quote(sys.executable)} -c {shlex.quote(PRETRAIN)} {tmp_path / 'mirror'} 3>&2 > {log} 2>&1"
    proc = subprocess.run(["bash", "-c", command], cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, log.read_text()[-3000:]
    assert proc.stdout == ""
    terminal = proc.stderr.splitlines()
    steps = [re.fullmatch(r"mlperf-wf: pretraining the tiny base model \(seed \d+\): step (\d+) of 12, loss (\d+\.\d{4}) \(\d+ s\)", line) for line in terminal]
    assert steps and all(steps), proc.stderr
    assert [int(step.group(1)) for step in steps][:: len(steps) - 1] == [1, 12], "the first and the last step"
    logged = log.read_text()
    for line in terminal:
        assert line.removeprefix("mlperf-wf: ") in logged, "the log keeps every progress line"
    assert "mirror of llama2_70b_fused_qkv written" in logged and "mirror of" not in proc.stderr, "the rest only in the log"


def test_a_step_s_progress_is_one_line_every_few_seconds_and_at_its_first_and_last_step(caplog):
    from mlperf_wf.progress import Progress

    now = [0.0]
    progress = Progress("pretraining", 100, every_s=5.0, clock=lambda: now[0])
    with caplog.at_level("INFO", logger="mlperf_wf.progress"):
        for step in range(1, 101):
            now[0] += 0.5  # ten steps in five seconds
            progress.step(step, loss=1.0 / step)
    lines = [record.getMessage() for record in caplog.records]
    assert [int(line.split()[2]) for line in lines] == [1, 11, 21, 31, 41, 51, 61, 71, 81, 91, 100]
    assert lines[0] == "pretraining: step 1 of 100, loss 1.0000 (0 s)" and lines[-1] == "pretraining: step 100 of 100, loss 0.0100 (50 s)"


def test_a_progress_descriptor_that_is_not_open_is_one_line():
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "mlperf_wf", "--progress-fd", "97", "mirror", "--dataset", "x", "--out", "y"], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 2 and proc.stderr == "mlperf-wf: error: --progress-fd 97: Bad file descriptor; give a descriptor the shell opened (3>&2)\n"
