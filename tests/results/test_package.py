"""System descriptions for the submission package."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mlperf_wf.errors import ConfigError
from mlperf_wf.results import package
from mlperf_wf.results.package import build, load_system

ROOT = Path(__file__).resolve().parents[2]


def test_shipped_system_description_passes_the_official_checker(tmp_path):
    system = load_system("cpu-tiny", ROOT)
    org = build(tmp_path, "org", "closed", "cpu-tiny", system, {}, {})
    desc = json.loads((org / "systems/cpu-tiny.json").read_text())
    assert desc["number_of_nodes"] == "1" and desc["accelerator_on-chip_memories"] == ""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mlperf_logging.system_desc_checker",
            str(org / "systems/cpu-tiny.json"),
            "training",
            "6.1.0",
            "--log_output",
            str(tmp_path / "log"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_bad_status_and_missing_system_are_clear_errors(tmp_path):
    (tmp_path / "config/systems").mkdir(parents=True)
    text = (ROOT / "config/systems/cpu-tiny.yaml").read_text().replace("status: Research, Development, or Internal (RDI)", "status: lab")
    (tmp_path / "config/systems/cpu-tiny.yaml").write_text(text)
    with pytest.raises(ConfigError, match=r"cpu-tiny\.yaml: status is 'lab'; allowed: Available on-premise"):
        load_system("cpu-tiny", tmp_path)
    with pytest.raises(ConfigError, match=r"system 'dgx' has no description .*; known systems: cpu-tiny"):
        load_system("dgx", tmp_path)


def test_full_scale_package_names_the_reference_commit_image_and_launch_command():
    from mlperf_wf.results.package import implementation_of

    digest = "sha256:" + "cd" * 32
    command = f"mlperf-wf preflight --benchmark rgat --image reg/rgat@{digest} || exit 2; docker run ... python train_rgnn_multi_gpu.py"
    made_with = {"scale": "full", "launcher": "docker", "image": f"reg/rgat@{digest}", "command": command, "workflow_git": {"commit": "f" * 40}}
    report = {
        "benchmark": "rgat",
        "scale": "full",
        "runs": [{"in_scored_window": True, "made_with": made_with}, {"in_scored_window": False, "made_with": {**made_with, "command": "other"}}],
    }
    made_by = implementation_of(report)
    assert made_by.name == "training-aa344c7fb900" and made_by.source_files == ()
    record = made_by.record
    assert record["reference"]["repository"] == "https://github.com/mlcommons/training"
    assert record["reference"]["commit"] == "aa344c7fb900e82ed19fb94aebfed50c63ab2204" and record["reference"]["path"] == "retired_benchmarks/rgat"
    assert record["images"] == [f"reg/rgat@{digest}"] and record["commands"] == [command], "only the scored runs' commands"
    assert record["container"]["dockerfile"] == "src/mlperf_wf/benchmarks/rgat/container/Dockerfile" and record["workflow_commits"] == ["f" * 40]


def test_a_package_file_edited_removed_or_added_after_its_check_is_named(tmp_path):
    org = tmp_path / "package" / "acme"  # beside the check, as the workflow places them
    (org / "results").mkdir(parents=True)
    (org / "results" / "result_0.txt").write_text(":::MLLOG {}\n")
    (org / "systems").mkdir()
    (org / "systems" / "cpu-tiny.json").write_text("{}\n")
    check = tmp_path / "package_check.json"
    check.write_text(json.dumps({"package": str(org), "files": package.manifest(org, tmp_path)}))
    assert package.changed_since_checked(check) is None
    (org / "results" / "result_0.txt").write_text(":::MLLOG {} edited\n")
    assert (
        package.changed_since_checked(check)
        == f"{tmp_path / 'package/acme/results/result_0.txt'}: changed since the package check (package_check.json) was made"
    )
    check.write_text(json.dumps({"package": str(org), "files": package.manifest(org, tmp_path)}))
    (org / "systems" / "cpu-tiny.json").unlink()
    assert "acme/systems/cpu-tiny.json: removed since" in package.changed_since_checked(check)
    check.write_text(json.dumps({"package": str(org), "files": package.manifest(org, tmp_path)}))
    (org / "results" / "result_1.txt").write_text("x")
    assert "acme/results/result_1.txt: added since" in package.changed_since_checked(check)
    check.write_text(json.dumps({"package": str(org)}))  # a check made before the manifest was recorded
    assert "records no digest" in package.changed_since_checked(check)
