"""A rehearsal campaign (tests only): full-scale train jobs of several benchmarks on the cluster in a box.

1. A workflow folder at full scale whose datasets are the published layout with tiny contents (each benchmark's
   ``published``), as the downloader leaves them (the files and the ``.md5`` list it fetched); the workflow's own
   ``verify`` and full-scale preparation rules run on them (locally: preparation is not what is rehearsed).
2. The rehearsal images (``tests/rehearsal/images.py``) under the names the plan pins.
3. ``snakemake --profile profiles/slurm`` (the official executor plugin) for each run's result, with the pyxis
   stand-in's ``srun`` first on the job's ``PATH``: the train job's command is the plan's,
   unchanged. An input a one-off job of the benchmark's image makes (``full.made_in_image``) is made there first, by
   the plan's ``make_in_image`` job, and verified by the workflow's ``verify`` job.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from mlperf_wf.acquire.verify import md5_file
from mlperf_wf.config import registry
from mlperf_wf.config.workflow_config import WorkflowConfig
from tests.rehearsal import enroot, images, probe
from tests.rehearsal.cluster import ClusterBox
from tests.rehearsal.spec import ROOT, Rehearsal, module

FAILING_RUN = 1
"""The run of each benchmark whose last rank fails on purpose in a campaign (:func:`failing_ranks`)."""
PLATFORM = "box-rehearsal"
ORG = "mlperf-workflow-rehearsal"
SEED_BASE = 1234


def made_in_image(benchmark: str) -> list[str]:
    """The datasets a one-off job of the benchmark's image makes on the box (``full.made_in_image``): nobody publishes them."""
    return list(registry.load_benchmark(benchmark).datasets_made_in_image())


def write_published(workdir: Path, rehearsal: Rehearsal) -> list[str]:
    """Every dataset the benchmark's preparation and runs read, in its published layout, as the downloader leaves it
    (not those its image makes: the campaign's workflow makes them on the box)."""
    bench = registry.load_benchmark(rehearsal.benchmark)
    dataset_ids = [dataset_id for dataset_id in bench.datasets_read() if dataset_id not in made_in_image(rehearsal.benchmark)]
    for dataset_id in dataset_ids:
        folder = workdir / "resources" / "full" / "datasets" / dataset_id
        if (folder / "manifest.md5").exists():
            continue  # a dataset two benchmarks share
        folder.mkdir(parents=True, exist_ok=True)
        module(rehearsal.benchmark).published(dataset_id, folder)
        check_catalog_names(dataset_id, folder)
        files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != "manifest.md5")
        (folder / "manifest.md5").write_text("".join(f"{md5_file(p)}  {p.relative_to(folder)}\n" for p in files))
    return dataset_ids


def check_catalog_names(dataset_id: str, folder: Path) -> None:
    """Where the catalog lists an R2 dataset's files (its published ``.md5`` list), ``published`` wrote exactly those
    names and nothing else. (Other protocols' lists name what a run requires of a folder made elsewhere, e.g. the
    files every Megatron conversion leaves beside its rank-dependent shards.)"""
    entry = registry.load_dataset(dataset_id)
    if entry.source.protocol != "r2":
        return
    listed = sorted(item.path for item in (entry.files or []))
    written = sorted(str(path.relative_to(folder)) for path in folder.rglob("*") if path.is_file())
    if listed and written != listed:
        raise AssertionError(f"{dataset_id}: the published layout lists {listed}, the rehearsal wrote {written}")


def config(rehearsals: list[Rehearsal], launcher: str, runs: int, pinned: dict[str, tuple[str, str]], mounts: dict[str, list[str]]) -> dict:
    """The rehearsal's workflow config: full scale, the box's platform, small geometry, the images pinned."""
    return {
        "benchmarks": [r.benchmark for r in rehearsals],
        "scale": "full",
        "runs": runs,
        "seed_base": SEED_BASE,
        "launcher": launcher,
        "submission": {"org": ORG, "platform": PLATFORM, "status": "onprem"},
        # the box's nodes share no NVLink domain and its SLURM (22.05) has no topology/block plugin: no sbatch --segment;
        # a rehearsal geometry: two nodes are one of each role where the nodes split into roles (qwen35_397b_grpo)
        "full_geometry": {
            r.benchmark: {"nodes": r.nodes if launcher == "pyxis" else 1, "gpus_per_node": r.gpus_per_node, "nvlink_segments": False, "rehearsal": True}
            for r in rehearsals
        },
        "full_container": {r.benchmark: {"image": pinned[r.benchmark][0], "digest": pinned[r.benchmark][1]} for r in rehearsals},
        "full_arguments": {r.benchmark: dict(r.arguments) for r in rehearsals if r.arguments},
        "full_mounts": {name: list(items) for name, items in mounts.items() if items},
        # the box's tiny data needs little scratch: 50 MB per declared area, so the preflight's free-space check holds
        # on a machine whose disk is nearly full (the check itself is tested in tests/plan/test_preflight.py)
        "full_scratch": {r.benchmark: {area: 0.05 for area in _scratch_areas(r.benchmark)} for r in rehearsals if _scratch_areas(r.benchmark)},
    }


def _scratch_areas(benchmark: str) -> list[str]:
    full = registry.load_benchmark(benchmark).full
    return sorted(full.scratch) if full and full.scratch else []


@dataclass
class Campaign:
    """A rehearsal's workflow folder and what its Snakemake run printed."""

    workdir: Path
    launcher: str
    rehearsals: dict[str, Rehearsal]
    output: str = ""
    returncode: int = -1
    planned_run: int = 0
    """The run of each benchmark made as planned (a later campaign in the same folder makes later runs)."""
    failing_run: int = FAILING_RUN
    """The run whose last rank fails on purpose."""

    def records(self, benchmark: str, run: int) -> list[dict]:
        folder = self.workdir / "rehearsal" / benchmark / f"seed-{SEED_BASE + run}"
        return [json.loads(path.read_text()) for path in sorted(folder.glob("*.json"))] if folder.is_dir() else []

    def ranks(self, benchmark: str, run: int) -> list[dict]:
        return [record for record in self.records(benchmark, run) if "status" in record]

    def run_folder(self, benchmark: str, run: int) -> Path:
        return self.workdir / "results" / benchmark / "runs" / str(run)

    def train_log(self, benchmark: str, run: int) -> str:
        path = self.workdir / "logs" / "full" / "train" / benchmark / f"{run}.log"
        return path.read_text() if path.exists() else ""


def snakemake_env(extra: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env.update({"HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "NO_PROXY": ""})
    env.update(extra)
    return env


@dataclass(frozen=True)
class DockerRegistry:
    """The Docker engine (``DOCKER_HOST``) and the loopback registry (``host:port``) a docker rehearsal pushes to."""

    env: dict[str, str]
    host: str


def prepare(
    workdir: Path,
    rehearsals: list[Rehearsal],
    launcher: str,
    runs: int,
    fail: dict[str, str] | None = None,
    docker: DockerRegistry | None = None,
    prepared: bool = False,
    site: dict[str, tuple[str, str]] | None = None,
) -> Path:
    """The workflow folder, its datasets verified and prepared by the workflow's own rules, and the images; returns
    the config file. With ``docker``, each image is built on the Debian userland, pushed and pinned by its digest,
    and this machine's Python and the project (the venv, the probe) are site mounts (``full_mounts``) of the runs.
    With ``prepared``, ``workdir`` is an earlier campaign's folder whose datasets it verified and prepared (the same
    published layout, the same rules): only the images and this launcher's config are made, for later runs. With
    ``site`` (benchmark -> the image and digest a bundle pinned), ``workdir`` is a site's folder where ``mlperf-wf bundle
    import`` placed the datasets and wrote ``config/site.yaml``: the runs start its image files."""
    from tests.workflow.test_workflow import new_workdir

    if not prepared:
        if site is None:
            new_workdir(workdir)
        system = yaml.safe_load((ROOT / "config" / "systems" / "cpu-tiny.yaml").read_text())
        system.update({"system_name": "mlperf-workflow's cluster in a box (rehearsal)", "number_of_nodes": 2})
        (workdir / "config" / "systems" / f"{PLATFORM}.yaml").write_text(yaml.safe_dump(system))
    pinned = site or {r.benchmark: (f"box.registry/mlperf-workflow/{r.benchmark}", images.layer_digest(r)) for r in rehearsals}
    mounts: dict[str, list[str]] = {}
    if launcher == "docker":
        if docker is None:
            raise ValueError("a docker rehearsal needs the Docker engine and a registry")
        for rehearsal in rehearsals:
            records = workdir / "rehearsal" / rehearsal.benchmark
            folder = images.build_image(rehearsal, f"docker-{rehearsal.benchmark}", workdir / "box-images", records, (fail or {}).get(rehearsal.benchmark, ""))
            pinned[rehearsal.benchmark] = images.push_docker_image(folder, f"{docker.host}/mlperf-workflow/{rehearsal.benchmark}", docker.env)
            software = sorted({str(Path(sys.base_prefix).resolve()), str(ROOT)})
            mounts[rehearsal.benchmark] = [*(f"{path}:{path}:ro" for path in software), f"{records}:{records}:rw"]
    configfile = workdir / f"rehearsal-{launcher}.yaml"
    configfile.write_text(yaml.safe_dump(config(rehearsals, launcher, runs, pinned, mounts)))
    from mlperf_wf.plan import plan as planning

    plan = planning.Plan(WorkflowConfig.parse(_full_config(configfile)), ROOT, workdir=workdir)
    for rehearsal in rehearsals:
        records = workdir / "rehearsal" / rehearsal.benchmark
        records.mkdir(parents=True, exist_ok=True)
        (records / probe.PLAN_FILE).write_text(json.dumps(plan_facts(plan.of(rehearsal.benchmark).train_job(0).command), indent=1))
    if prepared:
        return configfile
    for rehearsal in rehearsals:
        write_published(workdir, rehearsal)
        make_shards = getattr(module(rehearsal.benchmark), "make_shards", None)
        if make_shards:  # hundreds of shards, made in one process by the rules' own function (bert)
            make_shards(workdir)
    targets = []
    for rehearsal in rehearsals:
        written_by_rehearsal = getattr(module(rehearsal.benchmark), "prepared", None)
        if written_by_rehearsal:  # a full preparation that verifies the real content by hash (qwen35_397b_grpo)
            written_by_rehearsal(workdir / plan.of(rehearsal.benchmark).prepared_dir())
        else:
            targets.append(plan.of(rehearsal.benchmark).prepared_dataset())
        bench = plan.bench(rehearsal.benchmark)
        made = made_in_image(rehearsal.benchmark)
        targets += [plan.verified_record(dataset_id) for dataset_id in bench.roles_for("train").values() if dataset_id not in made]
        if launcher == "pyxis" and site is None:
            records = workdir / "rehearsal" / rehearsal.benchmark
            reference = plan.of(rehearsal.benchmark).container().enroot_reference
            images.build_image(rehearsal, reference, workdir / "box-images", records, (fail or {}).get(rehearsal.benchmark, ""))
    (workdir / "box-images" / "mnt").mkdir(parents=True, exist_ok=True)
    # targets before --allowed-rules, which takes every word after it
    argv = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "workflow" / "Snakefile"), "-d", str(workdir), *targets, "--cores", "2"]
    argv += ["--configfile", str(configfile), "--rerun-triggers", "mtime", "--allowed-rules", "verify", "preprocess_shard", "assemble_prepared"]
    proc = subprocess.run(argv, capture_output=True, text=True, env=snakemake_env({}), check=False)
    if proc.returncode != 0:
        logs = "\n".join(f"--- {log}\n{log.read_text()[-2000:]}" for log in sorted((workdir / "logs").rglob("*.log")))
        raise AssertionError(f"the rehearsal's preparation failed:\n{proc.stderr[-4000:]}\n{logs}")
    return configfile


def plan_facts(command: str) -> dict:
    """What a run's job line declares of its container, for the probe (``probe.PLAN_FILE``): every mount's container
    path and mode (pyxis's ``--container-mounts``, docker's ``-v``; read-write where the item names no mode), and
    whether the container's own filesystem is writable (pyxis's ``--container-writable``, docker without
    ``--read-only``). Read from the line itself: what the job does is what the plan wrote."""
    words = shlex.split(command.replace(";", " ; "))
    items = [item for word in words if word.startswith("--container-mounts=") for item in word.split("=", 1)[1].split(",") if item]
    items += [words[index + 1] for index, word in enumerate(words[:-1]) if word == "-v"]
    mounts = []
    for item in items:
        parts = item.split(":")
        mounts.append([parts[1] if len(parts) > 1 else parts[0], parts[2] if len(parts) > 2 else "rw"])
    if any(word.startswith("--container-image=") for word in words):
        writable = "--container-writable" in words
    else:
        writable = "--read-only" not in words
    return {"mounts": mounts, "container_writable": writable}


def _full_config(configfile: Path) -> dict:
    defaults = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    return {**defaults, **yaml.safe_load(configfile.read_text())}


def run_on_box(
    box: ClusterBox,
    workdir: Path,
    configfile: Path,
    rehearsals: list[Rehearsal],
    launcher: str,
    runs: int,
    retries: int | None = None,
    docker_env: dict[str, str] | None = None,
    runs_of: dict[str, list[int]] | None = None,
    timeout: float = 2400,
    planned_run: int = 0,
    failing_run: int = FAILING_RUN,
) -> Campaign:
    """Every run's result (``runs_of``: only these runs of a benchmark) through ``--profile slurm`` on the box (the
    test checks it with the compliance checker: the log ends where the probe took over, so the workflow's compliance
    rule would stop at the missing run_stop)."""
    stand_ins = workdir / "box-bin"
    enroot.write_srun_stand_in(stand_ins)
    chosen = {r.benchmark: (runs_of or {}).get(r.benchmark, range(runs)) for r in rehearsals}
    targets = [f"results/{name}/runs/{run}/result.txt" for name, picked in chosen.items() for run in picked]
    argv = [
        sys.executable, "-m", "snakemake", "-s", str(ROOT / "workflow" / "Snakefile"), "-d", str(workdir), *targets,
        "--profile", str(ROOT / "profiles" / "slurm"), "--configfile", str(configfile),
        # no slurmdbd in the box: poll with squeue, soon
        "--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "3",
        # the runs, and the one-off jobs of an image that make an input, with its verification (make_in_image, verify)
        "--latency-wait", "5", "--allowed-rules", "train", "make_in_image", "verify",
    ]  # fmt: skip
    if retries is not None:
        argv += ["--retries", str(retries)]
    if launcher == "docker":
        # the node the Docker engine runs on
        argv += ["--set-resources", "train:constraint=docker", "make_in_image:constraint=docker"]
    env = snakemake_env({**box.env, enroot.IMAGES_VARIABLE: str(workdir / "box-images"), **(docker_env or {})})
    env["PATH"] = f"{stand_ins}{os.pathsep}{env['PATH']}"
    # Detached from the test's terminal and process group, as SLURM runs want (see the machine notes).
    proc = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout, start_new_session=True, check=False)
    return Campaign(workdir, launcher, {r.benchmark: r for r in rehearsals}, proc.stdout + proc.stderr, proc.returncode, planned_run, failing_run)


def failing_ranks(rehearsals: list[Rehearsal], nodes: int | None = None, run: int = FAILING_RUN) -> dict[str, str]:
    """``fail`` for :func:`prepare`: run ``run``'s last rank of each benchmark (``nodes``: the run's, when the launcher
    runs on fewer nodes than the rehearsal's)."""
    return {r.benchmark: f"{SEED_BASE + run}:{(nodes or r.nodes) * r.gpus_per_node - 1}" for r in rehearsals}
