"""The dlrm_dcnv2 image's patch against the real reference module (mlcommons/training aa344c7).

``dlrm_main.py`` itself needs TorchRec, whose fbgemm kernels do not load with this torch (see the
benchmark's README), so the script below does with mllog and the reference's unmodified
``mlperf_logging_utils.py`` what dlrm_main.py does (dlrm_main.py:78, :660-661, :704-716): take the
logger at import, log ``cache_clear``/``init_start`` on every rank, then, on rank 0 only, the
submission keys and the batch size. Without the hooks the reference writes to standard output only,
so these tests fail when the patch does nothing.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import reference_source

ROOT = Path(__file__).resolve().parents[3]
HOOKS = ROOT / "containers" / "hooks"
PATCHES = ROOT / "src/mlperf_wf/benchmarks" / "dlrm_dcnv2" / "container" / "patches"
SUBMISSION = {
    "MLPERF_SUBMISSION_BENCHMARK": "dlrm_dcnv2",
    "MLPERF_SUBMISSION_ORG": "Example Org",
    "MLPERF_SUBMISSION_PLATFORM": "example-8xH100",
    "MLPERF_SUBMISSION_DIVISION": "closed",
    "MLPERF_SUBMISSION_STATUS": "onprem",
}
SCRIPT = """
import os
import mlperf_logging.mllog as mllog
import mlperf_logging.mllog.constants as mllog_constants
from mlperf_logging_utils import submission_info

mllogger = mllog.get_mllogger()
mllogger.event(key=mllog_constants.CACHE_CLEAR, value=True)
mllogger.start(key=mllog_constants.INIT_START)
if os.environ["RANK"] == "0":
    submission_info(mllogger, mllog_constants.DLRM_DCNv2, "reference_implementation")
    mllogger.event(key=mllog_constants.GLOBAL_BATCH_SIZE, value=65536)
"""


def reference_dir() -> Path | None:
    return reference_source("recommendation_v2/torchrec_dlrm")


needs_reference = pytest.mark.skipif(reference_dir() is None, reason="shared reference source (mlcommons/training aa344c7) not present")


def run_ranks(tmp_path: Path, hooked: bool, submission: dict[str, str]) -> tuple[Path, list[str]]:
    """The script as two torchrun ranks; the result file and each rank's standard output."""
    result_file = tmp_path / "results" / "result.txt"
    outputs = []
    for rank in ("0", "1"):
        env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "MLPERF_WF_HOOKS", "COMPLIANCE_FILE", *SUBMISSION}}
        env.update({"RANK": rank, "COMPLIANCE_FILE": str(result_file), "PYTHONDONTWRITEBYTECODE": "1", **submission})
        paths = [str(HOOKS), str(PATCHES)] if hooked else []
        env["PYTHONPATH"] = os.pathsep.join([*paths, str(reference_dir())])
        if hooked:
            env["MLPERF_WF_HOOKS"] = "mlperf_wf_dlrm_dcnv2"
        done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout + done.stderr)
    return result_file, outputs


def logged(path: Path) -> list[dict]:
    return [json.loads(line.split(":::MLLOG ", 1)[1]) for line in path.read_text().splitlines() if ":::MLLOG " in line]


@needs_reference
def test_hooked_reference_logs_rank_zero_and_the_config_to_the_result_file(tmp_path):
    result_file, outputs = run_ranks(tmp_path, hooked=True, submission=SUBMISSION)
    lines = logged(result_file)
    keys = [line["key"] for line in lines]
    assert keys.count("cache_clear") == 1 and keys.count("init_start") == 1, "rank 1's lines stay out of the file"
    values = {line["key"]: line["value"] for line in lines}
    assert values["submission_org"] == "Example Org" and values["submission_platform"] == "example-8xH100"
    assert values["submission_benchmark"] == "dlrm_dcnv2" and values["submission_status"] == "onprem"
    assert values["global_batch_size"] == 65536
    assert all(line["metadata"]["file"].endswith("mlperf_logging_utils.py") for line in lines if line["key"].startswith("submission_"))
    assert ":::MLLOG" in outputs[0], "standard output keeps the reference's lines"


@needs_reference
def test_without_variables_the_reference_values_stay(tmp_path):
    result_file, _ = run_ranks(tmp_path, hooked=True, submission={})
    values = {line["key"]: line["value"] for line in logged(result_file)}
    assert values["submission_org"] == "reference_implementation" and values["submission_division"] == "closed"


@needs_reference
def test_without_the_hooks_the_reference_logs_to_standard_output_only(tmp_path):
    result_file, outputs = run_ranks(tmp_path, hooked=False, submission=SUBMISSION)
    assert not result_file.exists()
    assert '"submission_org", "value": "reference_implementation"' in outputs[0]


def test_the_patch_parses_as_python_3_8():
    source = PATCHES / "mlperf_wf_dlrm_dcnv2.py"
    ast.parse(source.read_text(), filename=str(source), feature_version=(3, 8))
