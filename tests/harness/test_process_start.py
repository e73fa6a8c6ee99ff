"""The start-up hook of every process the suite starts (``tests/process_start/sitecustomize.py``): in a Snakemake
process pandas, and in a CLI process ``scipy.stats``, is imported when first used, and then it is the real module."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROCESS_START = ROOT / "tests" / "process_start"

SNAKEFILE = """
import sys

rule all:
    output: "seen.txt"
    run:
        before = type(sys.modules.get("pandas")).__name__
        import pandas as pd
        frame = pd.DataFrame({"a": [1, 2, 3]})
        after = type(sys.modules["pandas"]).__name__
        with open(output[0], "w") as out:
            out.write(f"{before} {after} {int(frame['a'].sum())} {isinstance(frame, pd.DataFrame)}")
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(PROCESS_START)}


def test_snakemake_starts_without_pandas_and_a_rule_that_uses_it_gets_the_real_module(tmp_path):
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    argv = [sys.executable, "-m", "snakemake", "-s", "Snakefile", "--cores", "1", "--quiet"]
    proc = subprocess.run(argv, cwd=tmp_path, env=_env(), capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the SLURM plugin's module-level import left the stand-in; the rule's first use imported pandas in its place
    assert (tmp_path / "seen.txt").read_text() == "_ImportedWhenFirstUsed module 6 True"


def test_other_processes_import_pandas_as_python_does():
    code = "import sys, pandas; print(type(sys.modules['pandas']).__name__, pandas.DataFrame.__name__)"
    proc = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True, text=True, check=True)
    assert proc.stdout.split() == ["module", "DataFrame"]


SCORER = """
import sys

from mlperf_logging.rcp_checker import rcp_checker

before = type(sys.modules["scipy.stats"]).__name__
result = rcp_checker.scipy.stats.ttest_ind_from_stats(1.0, 1.0, 10, 2.0, 1.0, 10)
from scipy.stats import norm

print(before, type(sys.modules["scipy.stats"]).__name__, round(float(result.pvalue), 4), norm.cdf(0.0))
"""


def test_a_cli_process_imports_the_rcp_checker_without_scipy_stats_and_its_t_test_gets_the_real_module(tmp_path):
    script = tmp_path / "mlperf-wf"  # started as the CLI's script is
    script.write_text(SCORER)
    proc = subprocess.run([sys.executable, str(script)], env=_env(), capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["_ImportedWhenFirstUsed", "module", "0.0382", "0.5"]


def test_other_processes_import_scipy_stats_as_python_does():
    proc = subprocess.run([sys.executable, "-c", SCORER], env=_env(), capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split()[:2] == ["module", "module"]
