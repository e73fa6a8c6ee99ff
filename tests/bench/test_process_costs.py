"""bench/process_costs.py: what it attributes to a process is what that process used while the sampler ran."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "process_costs.py"


def _burn_then_sleep(seconds: float) -> subprocess.Popen:
    """A process that uses ``seconds`` of CPU, says so on stdout, then sleeps."""
    code = f"import time\nend = time.process_time() + {seconds}\nwhile time.process_time() < end: pass\nprint('burnt', flush=True)\ntime.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "burnt"
    return proc


def _burners(out: Path) -> list[dict]:
    """The burners the sampler's last write holds."""
    if not out.exists():
        return []
    return [p for p in json.loads(out.read_text())["processes"] if "time.process_time() + 1.0" in p["command"]]


def test_a_process_already_running_counts_only_the_cpu_it_uses_while_sampled(tmp_path):
    out = tmp_path / "processes.json"
    before = _burn_then_sleep(1.0)  # like the machine's init or a daemon: CPU used before the run measured
    sampler = subprocess.Popen([sys.executable, str(SCRIPT), "sample", str(out), "--flush-every", "0.5"])
    try:
        time.sleep(1.0)
        during = _burn_then_sleep(1.0)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any(p["cpu"] >= 0.9 for p in _burners(out)):
            time.sleep(0.5)  # until a write of the sampler has seen a burner's second
        time.sleep(0.7)  # and the next write
        sampled = json.loads(out.read_text())
    finally:
        for proc in (sampler, before, during):
            proc.kill()
            proc.wait()
    burners = _burners(out)
    assert len(burners) == 2, burners
    cpu = sorted(p["cpu"] for p in burners)
    assert cpu[0] < 0.3, f"the process that burnt its CPU before the sampling began is charged {cpu[0]} s"
    assert cpu[1] >= 0.8, f"the process that burnt 1 s while sampled is charged {cpu[1]} s"
    machine = sampled["machine"]
    assert 0 < machine["busy"] <= machine["all"] and machine["wall"] > 0


def test_the_report_says_how_busy_the_machine_was(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("process_costs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path = tmp_path / "processes.json"
    path.write_text(json.dumps({"machine": {"busy": 190.0, "all": 200.0, "wall": 100.0}, "processes": [{"command": "snakemake -m snakemake", "cpu": 3.0}]}))
    module.report(path, top=5)
    said = capsys.readouterr().out
    assert said.splitlines()[0] == "machine: 190 of 200 CPU s busy (95%) in 100 s", said
