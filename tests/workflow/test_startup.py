"""What a parse, ``status`` and ``check`` load: the heavy libraries only where a job needs them.

Every Snakemake invocation parses the plan, and so does every job the SLURM executor starts (a Snakemake of its
own on the node); the registry reads each benchmark's hyperparameter model and each preparation's shard names
there. torch and transformers (3-4 s of CPU on a 2-vCPU Intel Xeon VM) belong to the jobs that train or tokenize, scipy and
pandas to scoring.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mlperf_wf.config import registry
from tests.process_start.sitecustomize import YOUNG_COLLECTION_THRESHOLD

ROOT = Path(__file__).resolve().parents[2]
TRAINING_LIBRARIES = ("torch", "transformers", "tokenizers")
SCORING_LIBRARIES = ("scipy", "pandas")

AFTER = """
import gc, json, sys
sys.argv = {argv!r}
try:
    {call}
except SystemExit:
    pass
finally:
    print("AFTER " + json.dumps({expression}))
"""


def after(tmp_path: Path, call: str, argv: list[str], expression: str, env: dict[str, str] | None = None) -> object:
    """The value of ``expression`` in a fresh process once ``call`` returned (or exited); ``env`` replaces some of
    the suite's environment variables."""
    code = AFTER.format(argv=argv, call=call, expression=expression)
    environment = {**os.environ, **(env or {})}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=environment, check=False)
    line = next((line for line in proc.stdout.splitlines() if line.startswith("AFTER ")), None)
    assert line, proc.stderr[-3000:]
    return json.loads(line.removeprefix("AFTER "))


def loaded(tmp_path: Path, call: str, argv: list[str], libraries: tuple[str, ...]) -> list[str]:
    """Which of ``libraries`` a process had imported when ``call`` returned."""
    return after(tmp_path, call, argv, f"sorted(name for name in {libraries!r} if name in sys.modules)")


def checkout(folder: Path) -> Path:
    shutil.copytree(ROOT / "config", folder / "config")
    return folder


BARE_SNAKEFILE = 'rule all:\n    input: expand("out/{i}.txt", i=range(3))\n\nrule job:\n    output: "out/{i}.txt"\n    shell: "touch {output}"\n'


@pytest.mark.parametrize("scale", ["tiny", "full"])
def test_parsing_every_benchmark_s_plan_loads_no_training_or_scoring_library(tmp_path, scale, monkeypatch):
    """With the RCP numbers cached by an earlier parse (sizing.RCP_CACHE_VARIABLE), as every parse after the first on a
    machine: no torch, no scipy; pandas only because Snakemake itself loads it (its SLURM executor plugin), which a
    bare Snakefile shows."""
    monkeypatch.setenv("MLPERF_WF_RCP_CACHE", str(tmp_path / "rcp-cache"))
    workdir = checkout(tmp_path / "project")
    names = ",".join(registry.benchmark_names())
    argv = ["snakemake", "-s", str(ROOT / "workflow/Snakefile"), "-d", str(workdir), "-n", "-q", "--config", f"scale={scale}", f"benchmarks=[{names}]"]
    call = "from snakemake.cli import main; main()"
    loaded(workdir, call, argv, ())  # the first parse on this machine fills the RCP cache
    assert loaded(workdir, call, argv, (*TRAINING_LIBRARIES, "scipy")) == []
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "Snakefile").write_text(BARE_SNAKEFILE)
    snakemakes_own = loaded(bare, call, ["snakemake", "-n", "-q", "--cores", "1"], SCORING_LIBRARIES)
    assert loaded(workdir, call, argv, SCORING_LIBRARIES) == snakemakes_own


@pytest.mark.parametrize("command", ["status", "check"])
def test_status_and_check_on_an_empty_checkout_load_neither_training_nor_scoring_libraries(tmp_path, command):
    workdir = checkout(tmp_path)
    call = "from mlperf_wf import cli; sys.exit(cli.main())"
    assert loaded(workdir, call, ["mlperf-wf", command], TRAINING_LIBRARIES + SCORING_LIBRARIES) == []


CATALOG_LIBRARIES = ("pydantic", "yaml", "jsonschema")
"""What reading the catalog or the config costs (about 0.2 s of a process's start)."""


def test_the_commands_every_job_runs_load_no_catalog_library(tmp_path):
    """verify, check-prepared and fresh-run-folder run in hundreds of jobs of a campaign (every shard, every train
    job) and read only files: they start without the registry, the config model or their libraries."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.bin").write_bytes(b"abc")
    (tmp_path / "data" / "manifest.md5").write_text("900150983cd24fb0d6963f7d28e17f72  a.bin\n")
    (tmp_path / "results/x/runs/0").mkdir(parents=True)
    call = "from mlperf_wf import cli; sys.exit(cli.main())"
    for argv in (
        ["mlperf-wf", "verify", "data", "--out", "verified.json"],
        ["mlperf-wf", "check-prepared", "data"],
        ["mlperf-wf", "fresh-run-folder", "results/x/runs/0"],
    ):
        assert loaded(tmp_path, call, argv, CATALOG_LIBRARIES) == [], argv
    # each ran to its end: the verification record, the prepared tree's stamps, the emptied run folder
    assert json.loads((tmp_path / "verified.json").read_text())
    assert (tmp_path / "data.stamps.json.gz").is_file() and (tmp_path / "results/x/runs/0").is_dir()


@pytest.mark.parametrize("entry", ["cli", "snakefile"])
def test_the_suite_s_processes_walk_the_imported_libraries_less_often_and_the_package_leaves_the_collector_alone(tmp_path, entry):
    """Each process the suite starts raises the garbage collector's threshold (tests/process_start/sitecustomize.py)
    before it imports torch, transformers or Snakemake; the CLI and the Snakefile themselves keep Python's default."""
    workdir = checkout(tmp_path)
    if entry == "cli":
        call, argv = "from mlperf_wf import cli; sys.exit(cli.main())", ["mlperf-wf", "check"]
    else:
        call = "from snakemake.cli import main; main()"
        argv = ["snakemake", "-s", str(ROOT / "workflow/Snakefile"), "-n", "-q", "--config", "benchmarks=[llama2_70b_lora]"]
    assert after(workdir, call, argv, "gc.get_threshold()[0]") == YOUNG_COLLECTION_THRESHOLD
    outside_the_suite = {"PYTHONPATH": str(ROOT / "src")}
    assert after(workdir, call, argv, "gc.get_threshold()[0]", env=outside_the_suite) == 700  # Python's default
