"""retinanet against the reference itself (mlcommons/training aa344c7, retired_benchmarks/retinanet).

Its train.py needs torchvision and CUDA, which this project cannot install (torchvision breaks
transformers/diffusers here), so instead: every file and flag the full-scale command names exists in the
reference tree; the round patch runs against the reference's real ``ssd_logger.py`` (with and without the
hooks, so the test fails when the patch does nothing); and a submitter's real logs (Lenovo, v5.1) go through
the project's compliance and scoring with a verdict.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mlperf_wf.cli import main
from mlperf_wf.config.registry import load_benchmark
from tests.conftest import reference_source

ROOT = Path(__file__).resolve().parents[3]
CONTAINERS = ROOT / "containers"
FIXTURES = Path(os.environ.get("MLPERF_WF_FIXTURES", ROOT.parent / "shared" / "fixtures"))
LENOVO = FIXTURES / "mlperf_training_v5.1" / "Lenovo" / "results" / "SR680aV3-8xB200_SXM_180GB" / "retinanet"
BENCH = load_benchmark("retinanet")


def reference() -> Path:
    folder = reference_source("retired_benchmarks/retinanet")
    if folder is None:
        pytest.skip("the reference source (../shared/reference-src) is not on this machine")
    return folder


def test_every_file_and_flag_of_the_full_command_is_the_references():
    ref = reference()
    workdir = ref / "ssd"  # the image's WORKDIR /workspace/single_stage_detector/ssd is the folder's ssd/
    assert BENCH.full.workdir == "/workspace/single_stage_detector/ssd"
    assert "WORKDIR /workspace/single_stage_detector/ssd" in (ref / "Dockerfile").read_text()
    command = BENCH.full.command
    script = command[command.index("train.py")]
    assert (workdir / script).is_file()
    parser_lines = [line for line in (workdir / "train.py").read_text().splitlines() if "add_argument(" in line]
    parser_flags = {flag for line in parser_lines for flag in re.findall(r"['\"](--[a-z-]+)['\"]", line)}
    flags = [word.split("=", 1)[0] for word in command[command.index("train.py") + 1 :] if word.startswith("--")]
    assert flags and set(flags) <= parser_flags, set(flags) - parser_flags
    config = (workdir / "config_DGXA100_001x08x032.sh").read_text()
    assert "BATCHSIZE=32" in config and "NUMEPOCHS:-8" in config and "--lr 0.0001 --output-dir=/results" in config
    assert "DGXNGPU=8" in config and BENCH.full.geometry.gpus_per_node == 8 and BENCH.full.geometry.walltime_minutes == 8 * 60
    assert 'DATASET_DIR="/datasets/open-images-v6-mlperf"' in config and BENCH.full.mounts["prepared"] == "/datasets/open-images-v6-mlperf"
    # The fetch command of the catalog is the reference's script, and the labels file is the one the reader opens.
    from mlperf_wf.config.registry import load_dataset

    source = load_dataset("openimages_mlperf").source
    assert (ref / "scripts" / "download_openimages_mlperf.sh").is_file() and "./download_openimages_mlperf.sh" in source.instructions
    assert f'--output-labels="{source.labels_file}"' in (ref / "scripts" / "download_openimages_mlperf.sh").read_text()
    assert 'f"{name}.json"' in (workdir / "coco_utils.py").read_text() and source.labels_file == "openimages-mlperf.json"
    backbone = (ref / "scripts" / "download_backbone.sh").read_text()
    assert "https://download.pytorch.org/models/resnext50_32x4d-7cdf4587.pth" in backbone
    sha512 = re.search(r"SHA512='([0-9a-f]{128})'", backbone).group(1)
    assert sha512 in load_dataset("resnext50_32x4d_backbone").source.instructions


# train.py's first events (train.py:120-123), through the reference's own SSDLogger.
SCRIPT = """
from mlperf_logging.mllog.constants import CLOSED, INIT_START, ONPREM, SSD, SUBMISSION_BENCHMARK, SUBMISSION_DIVISION, SUBMISSION_STATUS
from ssd_logger import mllogger

mllogger.event(key=SUBMISSION_BENCHMARK, value=SSD)
mllogger.event(key=SUBMISSION_DIVISION, value=CLOSED)
mllogger.event(key=SUBMISSION_STATUS, value=ONPREM)
mllogger.start(key=INIT_START, sync=True)
"""


def logged(tmp_path: Path, hooks: bool) -> list[dict]:
    result = tmp_path / ("patched" if hooks else "plain") / "result.txt"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLPERF_")}
    paths = [str(reference() / "ssd")]
    if hooks:
        paths = [str(CONTAINERS / "hooks"), str(ROOT / "src/mlperf_wf/benchmarks" / "retinanet" / "container" / "patches"), *paths]
        env.update(
            MLPERF_WF_HOOKS="mlperf_wf_retinanet", MLPERF_SUBMISSION_ORG="Example Org", MLPERF_SUBMISSION_PLATFORM="example-8xB200", MLPERF_WF_CACHE_CLEARED="1"
        )
    env.update(PYTHONPATH=os.pathsep.join(paths), COMPLIANCE_FILE=str(result))
    result.parent.mkdir(parents=True)
    subprocess.run([sys.executable, "-c", SCRIPT], env=env, check=True, cwd=tmp_path, capture_output=True, timeout=120)
    return [json.loads(line.split(":::MLLOG ", 1)[1]) for line in result.read_text().splitlines()]


def test_the_patch_names_the_benchmark_and_adds_the_keys_the_reference_never_logs(tmp_path):
    plain = {e["key"]: e["value"] for e in logged(tmp_path, hooks=False)}
    assert plain["submission_benchmark"] == "ssd" and "submission_org" not in plain and "cache_clear" not in plain
    events = logged(tmp_path, hooks=True)
    keys = [e["key"] for e in events]
    values = {e["key"]: e["value"] for e in events}
    assert values["submission_benchmark"] == "retinanet"
    assert values["submission_org"] == "Example Org" and values["submission_platform"] == "example-8xB200"
    assert values["cache_clear"] is True and keys.index("cache_clear") < keys.index("init_start")
    assert keys.count("submission_org") == 1


def test_lenovo_v5_1_logs_pass_compliance_and_score_with_a_verdict(tmp_path, capsys):
    if not LENOVO.is_dir():
        pytest.skip(f"real logs fixture not present: {LENOVO}")
    assert main(["score", str(LENOVO), "--ruleset", "5.1.0", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert "Traceback" not in out and re.search(r"SR680aV3-8xB200_SXM_180GB/retinanet: [0-9.]+ min, RCP Pass, 5 runs", out)
    verdict = tmp_path / "compliance.json"
    assert main(["compliance", str(LENOVO / "result_01.txt"), "--ruleset", "5.1.0", "--out", str(verdict), "--benchmark", "retinanet", "--scale", "full"]) == 0
    assert json.loads(verdict.read_text())["verdict"] == "passed"
