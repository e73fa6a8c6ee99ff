"""`pip install .` gives a working CLI: the wheel carries every file the commands read (the benchmarks' definitions, the
published results and accelerator peaks), and `mlperf-wf report`, `plot`, `score` and `status` run from a fresh venv
that has the wheel and nothing of this checkout."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.results.test_compliance_and_report import make_runs

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory) -> Path:
    """A venv with only the project's wheel installed in it; its dependencies are this environment's site-packages,
    put on its path (not this checkout's src/, nor the editable install's finder, which only a site folder's .pth runs)."""
    folder = tmp_path_factory.mktemp("install")
    source = folder / "source"  # a clean copy: the wheel is built from what git tracks, not from build leftovers here
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, tracked):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    wheels = folder / "wheels"
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), str(source)]
    subprocess.run(build, capture_output=True, text=True, check=True)
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    ask = [venv / "bin/python", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]
    site = Path(subprocess.run(ask, capture_output=True, text=True, check=True).stdout.strip())
    (site / "dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    (wheel,) = wheels.glob("mlperf_workflow-*.whl")
    install = [sys.executable, "-m", "pip", "--python", str(venv / "bin/python"), "install", "--no-deps", "-q", str(wheel)]
    subprocess.run(install, capture_output=True, text=True, check=True)
    return venv


def run(venv: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(cwd), "MPLBACKEND": "Agg"}
    return subprocess.run([str(venv / "bin/mlperf-wf"), *argv], cwd=cwd, capture_output=True, text=True, env=env, check=False)


@pytest.mark.slow
def test_the_wheel_in_a_fresh_venv_reports_plots_scores_and_reads_a_campaign(fresh_venv, tmp_path):
    ask = [fresh_venv / "bin/python", "-c", "import mlperf_wf; print(mlperf_wf.__file__)"]
    where = subprocess.run(ask, cwd=tmp_path, capture_output=True, text=True, check=True)
    assert where.stdout.startswith(str(fresh_venv)), f"mlperf_wf came from {where.stdout.strip()}, not the wheel"
    folder = tmp_path / "results/full/llama2_70b_lora"
    args = make_runs(folder, [20.0, 21.0, 19.0, 25.0, 22.0, 18.0, 23.0, 24.0, 20.5, 21.5])
    report = folder / "report.json"
    argv = ["report", "--benchmark", "llama2_70b_lora", "--ruleset", "6.1.0", "--division", "closed", "--scale", "full", "--platform", "cpu-tiny"]
    made = run(fresh_venv, *argv, *args, "--out", str(report), cwd=tmp_path)
    assert made.returncode == 0 and report.is_file(), made.stderr[-2000:]
    plotted = run(fresh_venv, "plot", str(report), "--out-dir", str(folder / "plots"), cwd=tmp_path)
    assert plotted.returncode == 0 and (folder / "plots/time_to_train.png").is_file(), plotted.stderr[-2000:]
    scored = run(fresh_venv, "score", str(folder), "--ruleset", "6.1.0", "--jobs", "1", cwd=tmp_path)
    assert scored.returncode == 0 and "llama2_70b_lora" in scored.stdout, scored.stderr[-2000:]
    shutil.copytree(ROOT / "config", tmp_path / "config")  # a workflow folder's own config, as a clone has it
    status = run(fresh_venv, "status", "--config", "benchmarks=[llama2_70b_lora]", "scale=full", "runs=10", cwd=tmp_path)
    assert status.returncode == 0 and "llama2_70b_lora" in status.stdout, status.stderr[-2000:]


@pytest.mark.slow
def test_the_wheel_carries_each_benchmark_s_catalog_entries_and_flops_and_not_its_image_definitions(fresh_venv):
    """A benchmark's own catalog entries (``<its folder>/datasets/``) and model FLOPs are read by the installed commands; its image
    definitions and round patches (``<its folder>/container/``) are built and mounted from the checkout, not installed."""
    ask = [fresh_venv / "bin/python", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]
    installed = Path(subprocess.run(ask, capture_output=True, text=True, check=True).stdout.strip()) / "mlperf_wf" / "benchmarks"
    source = ROOT / "src" / "mlperf_wf" / "benchmarks"
    for pattern in ("*/datasets/*.yaml", "*/model_flops.yaml"):  # the catalog entries; the models' FLOPs (time estimates)
        in_wheel = sorted(str(path.relative_to(installed)) for path in installed.glob(pattern))
        assert in_wheel and in_wheel == sorted(str(path.relative_to(source)) for path in source.glob(pattern)), pattern
    assert sorted(installed.glob("*/container")) == []
