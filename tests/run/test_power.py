"""Energy to train (MLPerf Power): the sampler with a stand-in for nvidia-smi, its launch lines (golden), and
energy scores equal to mlperf-logging's result summarizer on generated power logs of several nodes and a switch.

No power sensor exists on the CPU machines this suite runs on: the sampler reads
``mlperf_wf.run.stand_in_nvidia_smi`` (named as the stand-in it is) or ``echo``, never a real nvidia-smi.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from mlperf_logging.compliance_checker.mlp_parser import parse_file
from mlperf_logging.result_summarizer import result_summarizer as official

from mlperf_wf.config.workflow_config import PowerConfig
from mlperf_wf.errors import ConfigError
from mlperf_wf.results import scoring, verdict
from mlperf_wf.run import power
from tests.mllogs import T0, _line, write_lora_log
from tests.plan.test_plan import LAUNCHERS, SPEC_GOLDEN, make_plan, matches_golden, portable, workdir  # noqa: F401 - fixture

ROOT = Path(__file__).resolve().parents[2]
STAND_IN = f"{sys.executable} -m mlperf_wf.run.stand_in_nvidia_smi --gpus 2 -lms {{interval_ms}}"
"""The stand-in for nvidia-smi: the same CSV lines, watts from this host's CPU load (not a measurement)."""


def keys_of(path: Path) -> list[str]:
    loglines, errors = parse_file(str(path), "6.1.0")
    assert not errors, errors
    return [line.key for line in loglines]


# ---- readers ----


def test_gpu_lines_of_nvidia_smi_and_dcgmi_are_read_with_their_own_timestamps():
    smi = power.parse_gpu_line("2026/11/30 09:21:40.123, 3, 301.25\n")
    assert smi is not None and smi[1:] == ("3", 301.25)
    import datetime

    assert smi[0] == int(datetime.datetime(2026, 11, 30, 9, 21, 40, 123000).timestamp() * 1000)
    assert power.parse_gpu_line("0, 250.5") == (None, "0", 250.5)
    assert power.parse_gpu_line("GPU 1    199.0") == (None, "1", 199.0)
    for ignored in ("# Entity  POWER", "2026/11/30 09:21:40.123, 0, [N/A]", "", "timestamp, index, power.draw [W]"):
        assert power.parse_gpu_line(ignored) is None
    assert power.parse_watts("    Instantaneous power reading:                   412 Watts\n") == 412.0
    assert power.parse_watts("no number") is None


def test_sampler_with_the_stand_in_nvidia_smi_writes_the_mlperf_power_format(tmp_path):
    config = PowerConfig(enabled=True, interval_ms=100, gpu_command=STAND_IN, conversion_eff=0.92)
    stop = threading.Event()
    threading.Timer(1.2, stop.set).start()
    summary = power.sample(config, tmp_path / "power" / "result", 1, None, stop, host="node-a")
    path = tmp_path / "power" / "result" / "node_1.txt"
    assert summary.file == path and summary.readings >= 5 and summary.problems == []
    keys = keys_of(path)
    assert keys[:2] == ["power_measurement_start", "conversion_eff"] and keys[-1] == "power_measurement_stop"
    assert set(keys[2:-1]) == {"power_reading"} and len(keys) - 3 == summary.readings
    records = [json.loads(line.split(":::MLLOG ", 1)[1]) for line in path.read_text().splitlines()]
    readings = [r for r in records if r["key"] == "power_reading"]
    # each reading is the sum of the two stand-in GPUs at the stand-in's own timestamp
    assert all(r["value"] == pytest.approx(sum(r["metadata"]["gpus"].values())) and set(r["metadata"]["gpus"]) == {"0", "1"} for r in readings)
    assert all(60 * 2 <= r["value"] <= 300 * 2 for r in readings)
    times = [r["time_ms"] for r in readings]
    assert times == sorted(times) and records[-1]["time_ms"] >= times[-1]
    assert records[0]["metadata"]["host"] == "node-a" and records[0]["metadata"]["source"] == "gpus"


def test_a_node_power_command_is_the_nodes_reading(tmp_path):
    config = PowerConfig(enabled=True, interval_ms=50, node_command="echo '    Instantaneous power reading:   412 Watts'")
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    summary = power.sample(config, tmp_path, 0, None, stop)
    assert summary.readings >= 3 and summary.mean_watts == 412.0
    assert "conversion_eff" not in keys_of(tmp_path / "node_0.txt")


def test_the_gpu_reader_closes_the_command_s_pipe_once_it_stops():
    reader = power.GpuReader(STAND_IN, 50)
    reader.start()
    time.sleep(0.3)
    reader.stop()
    assert reader._proc.stdout.closed, "the pipe of the stopped command is left open (a ResourceWarning when collected)"


def test_a_gpu_command_that_ends_by_itself_is_reported(tmp_path):
    config = PowerConfig(enabled=True, interval_ms=50, gpu_command=STAND_IN.replace("--gpus 2", "--gpus 1 --rounds 2"))
    stop = threading.Event()
    threading.Timer(0.8, stop.set).start()
    summary = power.sample(config, tmp_path, 0, None, stop)
    assert summary.readings == 2 and summary.problems == [f"gpu_command {config.gpu_command.replace('{interval_ms}', '50')!r} ended by itself with status 0"]


def test_bad_power_config_is_one_line_naming_the_key():
    with pytest.raises(ConfigError, match=r"^config: power\.interval_ms: .*greater than or equal to 10 \(got 5\)$"):
        PowerConfig.from_config({"enabled": True, "interval_ms": 5})
    with pytest.raises(ConfigError, match=r"^config: power\.node_comand: Extra inputs are not permitted"):
        PowerConfig.from_config({"node_comand": "ipmitool"})
    assert PowerConfig.from_config({"enabled": "true", "interval_ms": "500"}).interval_ms == 500  # as --config passes them


def test_the_launch_line_samples_beside_the_command_stops_with_it_and_keeps_its_status(tmp_path):
    config = PowerConfig(enabled=True, interval_ms=100, gpu_command=STAND_IN)
    line = power.with_sampler("sleep 1; exit 3", config, Path("results/x/runs/0/result.txt"))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(ROOT / "src")}
    env.pop("SLURM_NODEID", None)
    proc = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 3, proc.stderr
    node = tmp_path / "results/x/runs/0/power/result/node_0.txt"
    keys = keys_of(node)
    assert keys[0] == "power_measurement_start" and keys[-1] == "power_measurement_stop" and keys.count("power_reading") >= 3


# ---- launch lines (golden) ----


def test_power_on_plans_match_their_golden_file_and_power_off_plans_have_no_sampler(workdir):  # noqa: F811
    name = "llama2_70b_lora"
    on = {"enabled": True, "interval_ms": 500, "node_command": "ipmitool dcmi power reading", "conversion_eff": 0.95}
    tiny = make_plan(workdir, power=on)
    out = {"tiny/run_3/local": tiny.of(name).train_job(3).as_dict()}
    specs = {"tiny/run_3/local": tiny.of(name).job_spec(3).model_dump(mode="json")}
    pinned = {name: {"image": f"registry.example:5000/mlperf/{name}:ref-1", "digest": "sha256:" + "ab" * 32}}
    for launcher in LAUNCHERS:
        for nodes in (1, 2):
            changes = {"scale": "full", "launcher": launcher, "full_geometry": {name: {"nodes": nodes}}, "full_container": pinned}
            with contextlib.suppress(ConfigError):  # docker, apptainer and local run on one node
                plan = make_plan(workdir, power=on, **changes)
                out[f"full/run_3/{launcher}/{nodes}_node"] = plan.of(name).train_job(3).as_dict()
                specs[f"full/run_3/{launcher}/{nodes}_node"] = plan.of(name).job_spec(3).model_dump(mode="json")
                off = make_plan(workdir, **changes).of(name).train_job(3)
                assert "power-sample" not in off.command
    got = matches_golden(portable(out, workdir), f"power_{name}", name)
    matches_golden(portable(specs, workdir), f"power_{name}", name, SPEC_GOLDEN)
    pyxis = got["full/run_3/pyxis/2_node"]["command"]
    assert "srun --nodes=2 --ntasks-per-node=1 --overlap mlperf-wf power-sample --out-dir results/llama2_70b_lora/runs/3/power/result" in pyxis
    assert pyxis.index("power-sample") < pyxis.index("--container-image") < pyxis.index("touch results/llama2_70b_lora/runs/3/power/result/.stop")
    assert got["full/run_3/docker/1_node"]["command"].startswith("mlperf-wf preflight")
    with pytest.raises(ConfigError, match=r"^config: power\.conversion_eff: "):
        make_plan(workdir, power={"conversion_eff": 2})


# ---- energy equals the official summarizer's ----


def _power_log(path: Path, start: int, stop: int | None, readings: list[tuple[int, float]], conversion_eff: float | None, host: str) -> None:
    lines = [_line(t, "POINT_IN_TIME", "power_reading", w, {"host": host}) for t, w in readings]
    lines.insert(len(lines) // 2, _line(start, "INTERVAL_START", "power_measurement_start", None, {"host": host}))
    if conversion_eff is not None:
        lines.insert(0, _line(start, "POINT_IN_TIME", "conversion_eff", conversion_eff, {"host": host}))
    if stop is not None:
        lines.append(_line(stop, "INTERVAL_END", "power_measurement_stop", None, {"host": host}))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def _benchmark_folder(root: Path) -> Path:
    """A submission folder of 5 llama2_70b_lora runs (one fails compliance: no global_batch_size), each with power logs of 3 nodes and a switch:
    readings before power_measurement_start and after power_measurement_stop, uneven intervals, conversion_eff on
    some nodes only, a node without power_measurement_stop, and a scaling.json."""
    folder = root / "org" / "results" / "sys" / "llama2_70b_lora"
    minutes = [20.0, 18.5, 22.25, 19.0, 21.0]
    for i, length in enumerate(minutes):
        start_ms = T0 + i * 10_000_000
        dropped = ("global_batch_size",) if i == 4 else ()
        write_lora_log(folder / f"result_{i}.txt", seed=100 + i, minutes=length, evals=[(384, 0.95), (768, 0.92)], drop_keys=dropped, start_ms=start_ms)
        begin, end = start_ms + 500, start_ms + 1000 + round(length * 60_000) + 800
        for node in range(3):
            step = 997 + 131 * node
            times = list(range(begin - 3 * step, end + 4 * step, step))  # some before the start, some after the stop
            readings = [(t, 650.0 + 40 * node + (t // step % 7) * 3.5 + i) for t in times]
            eff = {0: 0.93, 1: None, 2: 0.9}[node]
            _power_log(folder / "power" / f"result_{i}" / f"node_{node}.txt", begin, None if (node, i) == (2, 1) else end, readings, eff, f"host{node}")
        sw = [_line(begin, "POINT_IN_TIME", "conversion_eff", 0.97), _line(begin + 5, "POINT_IN_TIME", "interconnect_power_est", 180.0 + i)]
        (folder / "power" / f"result_{i}" / "sw_0.txt").write_text("\n".join(sw) + "\n")
    (folder / "scaling.json").write_text(json.dumps({"scaling_factor": 1.07}))
    return folder


def test_energy_per_run_and_olympic_energy_equal_the_official_summarizers(tmp_path):
    folder = _benchmark_folder(tmp_path)
    with contextlib.redirect_stdout(io.StringIO()):
        _times, energies, score, energy_score, factor = official._compute_strong_score_standalone(
            "llama2_70b_lora", "sys", True, str(folder), "training", "6.1.0", return_full_scores=True
        )
    assert len(energies) == 4 and factor == 1.07  # the run that fails compliance has no energy there either
    (ours,) = scoring.score_paths(folder, "6.1.0", verdict.judged_score, jobs=1)
    by_file = {run.file: run for run in ours.runs}
    for file, joules in energies.items():
        assert by_file[file].energy_joules == pytest.approx(joules, rel=1e-12)
    assert by_file[str(folder / "result_4.txt")].energy_joules is None
    assert ours.time_to_train == pytest.approx(score, rel=1e-12)
    assert ours.energy_joules == pytest.approx(energy_score, rel=1e-12) and ours.energy_reasons == []
    assert any("no power_measurement_stop" in problem for problem in by_file[str(folder / "result_1.txt")].power_problems)
    # the workflow's own layout (runs/<i>/result.txt with runs/<i>/power/result/) scores the same energy
    workflow = tmp_path / "results" / "llama2_70b_lora"
    for i in range(5):
        run = workflow / "runs" / str(i)
        run.mkdir(parents=True)
        shutil.copyfile(folder / f"result_{i}.txt", run / "result.txt")
        shutil.copytree(folder / "power" / f"result_{i}", run / "power" / "result")
    (wf,) = scoring.score_paths(workflow, "6.1.0", verdict.judged_score, jobs=1)
    assert sorted(r.energy_joules for r in wf.runs if r.energy_joules) == pytest.approx(sorted(energies.values()), rel=1e-12)
    assert wf.energy_joules * 1.07 / wf.scaling_factor == pytest.approx(energy_score, rel=1e-12)


def test_a_run_without_power_logs_gives_no_energy_score_and_says_why(tmp_path):
    folder = _benchmark_folder(tmp_path)
    shutil.rmtree(folder / "power" / "result_2")
    (folder / "power" / "result_3" / "node_1.txt").write_text(_line(T0, "POINT_IN_TIME", "power_reading", 1.0) + "\n")
    (ours,) = scoring.score_paths(folder, "6.1.0", verdict.judged_score, jobs=1)
    assert ours.energy_joules is None and ours.time_to_train is not None
    (reason,) = ours.energy_reasons
    assert "result_2.txt: no power logs" in reason and "result_3.txt: node_1.txt: no power_measurement_start" in reason
