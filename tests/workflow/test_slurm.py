"""The tiny DAG through a real one-node SLURM on localhost, with `--profile slurm` and the executor plugin.

The test starts munge, slurmctld and slurmd itself and stops them by PID. It needs
root and Debian's `slurmctld slurmd slurm-client munge` (`.ci/run` installs them);
slurm.conf must be at /etc/slurm/slurm.conf, because the SLURM jobstep strips
SLURM_CONF before its nested srun. A file already there is put back afterwards (and at the next
session's start when a killed session could not: see conftest).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mlperf_wf.config.workflow_config import WorkflowConfig
from tests.conftest import CONF_BACKUP, CONF_MARKER, SYSTEM_CONF, remove_stale_test_conf
from tests.results.test_status import check_watched, run_watched

ROOT = Path(__file__).resolve().parents[2]
DAEMONS = ("/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/bin/sbatch")
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not all(Path(p).exists() for p in DAEMONS),
    reason="needs root and Debian's slurmctld slurmd slurm-client munge (bash .ci/run installs them)",
)


def slurm_conf(state: Path) -> str:
    # More CPUs and memory than this VM has (config_overrides keeps slurmd from draining the node),
    # so that the profile's real-cluster requests (4-8 cores a job) still schedule here.
    cpus = 16
    return "\n".join(
        [
            CONF_MARKER,
            "ClusterName=mlperfwf",
            "SlurmctldHost=localhost",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            "SlurmctldPort=6817",
            "SlurmdPort=6818",
            f"StateSaveLocation={state}/state",
            f"SlurmdSpoolDir={state}/spool",
            f"SlurmctldPidFile={state}/slurmctld.pid",
            f"SlurmdPidFile={state}/slurmd.pid",
            f"SlurmctldLogFile={state}/slurmctld.log",
            f"SlurmdLogFile={state}/slurmd.log",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "MpiDefault=none",
            "SchedulerType=sched/backfill",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            "ReturnToService=2",
            "MinJobAge=600",
            "SlurmdParameters=config_overrides",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            f"NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=32000 State=UNKNOWN",
            "PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP",
            "",
        ]
    )


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    state = tmp_path_factory.mktemp("slurm")
    for sub in ("state", "spool"):
        (state / sub).mkdir()
    remove_stale_test_conf()
    if SYSTEM_CONF.exists():
        shutil.copy2(SYSTEM_CONF, CONF_BACKUP)
    SYSTEM_CONF.parent.mkdir(parents=True, exist_ok=True)
    SYSTEM_CONF.write_text(slurm_conf(state))
    Path("/run/munge").mkdir(parents=True, exist_ok=True)
    shutil.chown("/run/munge", "munge", "munge")
    daemons = []
    try:
        daemons.append(subprocess.Popen(["runuser", "-u", "munge", "--", "/usr/sbin/munged", "-F"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(1)
        daemons.append(subprocess.Popen(["/usr/sbin/slurmctld", "-D", "-i"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        daemons.append(subprocess.Popen(["/usr/sbin/slurmd", "-D", "-N", "localhost"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        deadline = time.time() + 60
        while time.time() < deadline:
            states = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True).stdout.split()
            if states and all(s in ("idle", "mixed") for s in states):
                break
            time.sleep(1)
        else:
            pytest.fail(f"SLURM did not come up: {(state / 'slurmctld.log').read_text()[-2000:] if (state / 'slurmctld.log').exists() else ''}")
        yield state
    finally:
        for proc in reversed(daemons):
            proc.send_signal(signal.SIGTERM)
        for proc in reversed(daemons):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        if CONF_BACKUP.exists():
            CONF_BACKUP.replace(SYSTEM_CONF)
        else:
            SYSTEM_CONF.unlink(missing_ok=True)


def test_tiny_dag_runs_through_sbatch_with_the_slurm_profile(slurm, tmp_path, tiny_mirrors):
    workdir = tmp_path / "cluster_checkout"
    workdir.mkdir()
    shutil.copytree(ROOT / "config", workdir / "config")
    tiny_mirrors.seed(workdir, "llama2_70b_lora")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    argv = [
        sys.executable, "-m", "snakemake", "-s", str(ROOT / "workflow/Snakefile"), "-d", str(workdir),
        "--profile", str(ROOT / "profiles/slurm"),
        # this one-node cluster has no slurmdbd: poll with squeue, soon
        "--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "5",
        "--slurm-keep-successful-logs",
        # the profile's site values are for real nodes; this one declares 32 GB
        "--set-resources", "preprocess_shard:mem_mb=16000",
        "--config", "runs=2",
    ]  # fmt: skip
    # Detached from the terminal and the test's process group, as SLURM runs want (see machine notes).
    # `mlperf-wf status` watches the campaign while it is in flight (tests/results/test_status.py).
    seen = run_watched(argv, workdir, ["runs=2"], env, tmp_path / "snakemake.log", timeout=600, stdin=subprocess.DEVNULL, start_new_session=True)
    output = seen["output"]
    check_watched(seen, workdir, ["runs=2"])
    assert seen["scheduler"] & {"RUNNING", "PENDING"}, f"squeue never named a train job: {seen['scheduler']}"
    train_logs = sorted((workdir / ".snakemake/slurm_logs/rule_train").rglob("*.log"))
    assert len(train_logs) == 2, f"each train job went through sbatch: {train_logs}"
    assert output.count("with SLURM jobid") >= 2 or output.count("SLURM jobid") >= 2
    report = json.loads((workdir / "results/tiny/llama2_70b_lora/report.json").read_text())
    assert [r["compliance"] for r in report["runs"]] == ["passed", "passed"]
    assert {r["made_with"]["launcher"] for r in report["runs"]} == {"local"}


def test_a_doomed_campaign_cancels_its_pending_train_job_through_slurm(slurm, tmp_path, tiny_mirrors):
    """Four runs that cannot converge (two steps at a learning rate that wrecks the model) with stop_when_doomed, through
    --profile slurm: each train job takes the node whole (--exclusive), so one runs while the others pend. Once two have not converged, the next job's
    gate ends it, not started, and cancels the one still pending (no retry here: a retry's gate would only stop it
    again). The finished runs' compliance jobs still run (the profile keeps going), and the workflow ends."""
    from mlperf_wf.results import doom
    from tests.workflow.test_doomed import DOOMED, LORA, RUNS, status_text, stopped_and_finished

    workdir = tmp_path / "doomed_checkout"
    workdir.mkdir()
    shutil.copytree(ROOT / "config", workdir / "config")
    tiny_mirrors.seed(workdir, LORA)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    config = ["runs=4", *DOOMED]
    argv = [
        sys.executable, "-m", "snakemake", "-s", str(ROOT / "workflow/Snakefile"), "-d", str(workdir),
        "--profile", str(ROOT / "profiles/slurm"),
        "--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "5",
        "--latency-wait", "5", "--retries", "0",
        "--set-resources", "preprocess_shard:mem_mb=16000",
        "--config", *config,
    ]  # fmt: skip
    proc = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=900, start_new_session=True, check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output[-4000:]
    stopped, finished = stopped_and_finished(workdir, 4)
    assert len(stopped) == 2 and len(finished) == 2, f"stopped {stopped}, finished {finished}\n{output[-4000:]}"
    lines = {run: doom.stopped_line(workdir / f"logs/tiny/train/{LORA}/{run}.log") for run in stopped}
    (cancelled,) = [run for run, line in lines.items() if "cancelled while pending by run" in line]
    (gate,) = set(stopped) - {cancelled}
    assert "; cancelled pending SLURM jobs " in lines[gate] and f"(run {cancelled})" in lines[gate], lines
    assert f"cancelled while pending by run {gate}'s train job" in lines[cancelled], lines
    assert (workdir / f"logs/tiny/train/{LORA}/{cancelled}.log").read_text().count("\n") == 1, "the cancelled job never started"
    for run in finished:
        assert (workdir / RUNS / str(run) / "compliance.json").is_file(), "the finished runs were checked"
    text = status_text(workdir, *config)
    not_started = ", ".join(str(i) for i in sorted(stopped))
    assert text.splitlines()[1].startswith(f"DOOMED {LORA}: can no longer pass: the olympic rule's allowance is used up"), text
    assert f"stop_when_doomed: 2 runs ({not_started}) not started, 0 GPU-hours not spent" in text, text
    # the invocation named the command that writes the report (itself again); that one submits no train job
    command = shlex.join(["snakemake", *argv[3:]])
    said = f"Its report (results/tiny/{LORA}/report.json) is written from the finished runs by the next invocation"
    assert f"{said}, which starts none of the runs not started: {command}" in output, output[-4000:]
    logs = {run: (workdir / f"logs/tiny/train/{LORA}/{run}.log").read_bytes() for run in stopped}
    proc = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=900, start_new_session=True, check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    assert stopped_and_finished(workdir, 4) == (stopped, finished)
    assert {run: (workdir / f"logs/tiny/train/{LORA}/{run}.log").read_bytes() for run in stopped} == logs, "no train job ran again"
    report = json.loads((workdir / f"results/tiny/{LORA}/report.json").read_text())
    assert [run["index"] for run in report["runs"]] == finished and report["doomed"]["runs_not_started"] == sorted(stopped)
    assert report["score"]["time_to_train_minutes"] is None
    assert report["valid_submission_reasons"][0].startswith("the required set can no longer pass: "), report["valid_submission_reasons"]
    assert f"2 of them not started, not a valid submission: {report['valid_submission_reasons'][0]}" in status_text(workdir, *config)


# Stand-in for the pyxis SPANK plugin (tests only): this SLURM has no enroot, so the container options are
# dropped and the rest of the line goes to the real srun, from the same place in the job a pyxis srun runs.
PYXIS_STAND_IN = """#!/bin/sh
for word do
  shift
  case "$word" in --container-*|--no-container-*) ;; *) set -- "$@" "$word" ;; esac
done
exec /usr/bin/srun "$@"
"""


def test_a_pyxis_job_starts_its_own_srun_in_the_allocation(slurm, tmp_path):
    """The plan's one-node pyxis line, submitted with the plan's resources through the SLURM executor: the jobstep
    wraps the job in `srun -n1`, and the job's own srun must still get its step (--overlap; without it, it waits
    for what that step holds, "step creation temporarily disabled", until the 2-minute walltime) and a MASTER_ADDR
    (the jobstep clears SLURM_JOB_NODELIST)."""
    from mlperf_wf.plan import plan as planning
    from mlperf_wf.run import job_spec, launchers

    config = {**__import__("yaml").safe_load((ROOT / "config/config.yaml").read_text()), "scale": "full", "launcher": "pyxis"}
    plan = planning.Plan(WorkflowConfig.parse(config), ROOT, workdir=tmp_path)
    job = plan.of("llama2_70b_lora").train_job(0)
    # the plan's own spec on one node and one GPU, its command the MASTER_ADDR the job's srun sees
    spec = plan.of("llama2_70b_lora").train_spec(0)
    spec = spec.model_copy(
        update={
            "image": job_spec.Image(reference="registry#image:tag", launched="registry#image:tag"),
            "mounts": (job_spec.Mount(host=str(tmp_path), container="/results", mode="rw"),),
            "process": spec.process.model_copy(update={"command": ("printenv", "MASTER_ADDR"), "workdir": "/", "env": {}, "passthrough": ()}),
            "geometry": spec.geometry.model_copy(update={"nodes": 1, "gpus_per_node": 1}),
            "resources": spec.resources.model_copy(update={"nodes": 1, "tasks": 1}),
        }
    )
    script = launchers.Pyxis().command(spec)
    stand_in = tmp_path / "bin"
    stand_in.mkdir()
    (stand_in / "srun").write_text(PYXIS_STAND_IN)
    (stand_in / "srun").chmod(0o755)
    mpi = f'mpi="{job.resources.mpi}",' if job.resources.mpi else ""
    (tmp_path / "Snakefile").write_text(
        "rule pyxis_job:\n"
        "    output: 'ran_on.txt'\n"
        f"    resources: runtime=2, nodes={job.resources.nodes}, tasks={job.resources.tasks}, {mpi}\n"
        f"    params: command={json.dumps(script)}\n"  # as the train rule passes its command
        "    shell: '({params.command}) > {output}'\n"
    )
    env = {**os.environ, "PATH": f"{stand_in}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    argv = [
        sys.executable, "-m", "snakemake", "-s", str(tmp_path / "Snakefile"), "-d", str(tmp_path), "--executor", "slurm", "--jobs", "1",
        "--default-resources", "slurm_partition=debug", "mem_mb=1000",
        "--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "5",
    ]  # fmt: skip
    proc = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=400, start_new_session=True, check=False)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert (tmp_path / "ran_on.txt").read_text().split() == ["localhost"], "the job's own srun ran its task, with the master address"
