"""The reference's launch environment is accounted for (issue 47): every environment variable, ``ulimit`` and launcher
flag that a benchmark's reference launch files set (``reference.launch`` in its benchmark.yaml, read at the pinned
commit from ``../shared/reference-src``) is either set by the plan or named in the benchmark README's
``### Launch environment`` section with why it is not needed here.

What counts as an item is the rule of ``tests/config/launch_scripts.py`` (exported or passed names, ``ulimit`` letters,
launcher flags; a script variable never exported is no item). What the plan sets is read from what it really renders,
the run's launch line (``tests.plan.launch_line.full_scale``) for the ``pyxis`` launcher at the definition's geometry and for
``docker`` on one node, parsed by the same rule, plus the job's scheduler request:

- an environment variable or a ``ulimit``: set in both launch lines (the run gets it whichever launcher starts it),
  or by the image (an ``ENV`` of ``<benchmark folder>/container/Dockerfile``, or every ``ENV`` of a reference Dockerfile that
  our Dockerfile's own build line names: the image is built from it);
- an ``srun``/``salloc`` flag, or a flag of the launcher in the command (``torchrun``, ``accelerate launch``,
  ``mpirun``): on the pyxis line, at the reference's own geometry (its multi-node flags only exist there); a
  ``docker run`` flag: on the docker line; an ``sbatch`` flag: in the job's scheduler request (``--nodes``,
  ``--time``, ``--gres``/``--gpus-per-node``, ``--ntasks[-per-node]``, ``--cpus-per-gpu``, ``--mem`` where the plan
  asks for memory);
- every item of a shell script that the plan's command runs itself (gpt_oss_20b's ``./run_and_time.sh``); a Python
  launcher the command runs (NeMo-Run's) is no such file: what its executor would set is checked item by item.

A README entry is a bullet ``- `ITEM`[, `ITEM` ...]: why`` in that section; an entry naming an item that no launch
file sets fails too, so the section cannot drift from the scripts.
"""

from __future__ import annotations

import itertools
import re
import shlex
from pathlib import Path

import pytest
import yaml

from mlperf_wf.config import registry
from mlperf_wf.config.workflow_config import WorkflowConfig
from mlperf_wf.plan import plan as planning
from tests.config import launch_scripts
from tests.plan.launch_line import full_scale
from tests.rehearsal.spec import REFERENCE_SOURCES, ROOT

SECTION = "### Launch environment"
DEFAULTS = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
PINNED = "registry.example:5000/mlperf/{name}:ref-1"
SBATCH_FROM_RESOURCES = {
    "--nodes": "nodes",
    "--time": "runtime",
    "--gres": "gres",
    "--gpus-per-node": "gres",
    "--ntasks": "tasks",
    "--ntasks-per-node": "tasks",
    "--cpus-per-gpu": "cpus_per_gpu",
    "--mem": "mem_mb",
}
"""sbatch flag -> the plan's scheduler resource that asks for the same (the SLURM executor turns it into the flag)."""


def tree_at(commit: str) -> Path | None:
    """The folder of ``../shared/reference-src`` holding a repository at ``commit`` (its name ends in ``-<prefix>``)."""
    if not REFERENCE_SOURCES.is_dir():
        return None
    found = [
        folder for folder in REFERENCE_SOURCES.iterdir() if folder.is_dir() and len(suffix := folder.name.rsplit("-", 1)[-1]) >= 7 and commit.startswith(suffix)
    ]
    return found[0] if found else None


def in_repository(bench: registry.BenchmarkDef, declared: str) -> tuple[str, str]:
    """(commit, path inside its repository) of a ``reference.launch`` entry."""
    submodule = bench.reference.submodule
    if submodule is not None and declared.startswith(f"{submodule.path}/"):
        return submodule.commit, declared[len(submodule.path) + 1 :]
    return bench.reference.commit, f"{bench.reference.path}/{declared}"


def launch_files(bench: registry.BenchmarkDef) -> dict[str, Path]:
    """Declared path -> the file in ``../shared/reference-src``; skips when a tree is not on this machine."""
    files = {}
    for declared in bench.reference.launch:
        commit, path = in_repository(bench, declared)
        tree = tree_at(commit)
        if tree is None:
            pytest.skip(f"{bench.name}: no reference tree at {commit[:8]} in {REFERENCE_SOURCES}")
        files[declared] = tree / path
    return files


def make_plan(workdir: Path, name: str, launcher: str, nodes: int | None = None) -> planning.Plan:
    config = {**DEFAULTS, "scale": "full", "launcher": launcher, "full_container": {name: {"image": PINNED.format(name=name), "digest": "sha256:" + "ab" * 32}}}
    if nodes is not None:
        config["full_geometry"] = {name: {"nodes": nodes}}
    return planning.Plan(WorkflowConfig.parse(config), project_root=Path("/project"), workdir=workdir)


def launch_line(plan: planning.Plan, name: str) -> str:
    """The run's launch line as the plan renders it (run 1)."""
    return full_scale(plan.bench(name), 1, plan.seed(1), plan.of(name).run_paths(1), plan.of(name).launch_settings(), image=plan.of(name).container())


def built_from(bench: registry.BenchmarkDef, declared: str) -> bool:
    """Whether our Dockerfile's build instructions build the reference image from this reference Dockerfile."""
    ours = ROOT / "src/mlperf_wf/benchmarks" / bench.name / "container" / "Dockerfile"
    if not ours.is_file():
        return False
    _, wanted = in_repository(bench, declared)
    for _, line in launch_scripts._logical_lines("\n".join(line.lstrip("# ") for line in ours.read_text().splitlines())):
        words = shlex.split(line) if re.search(r"\bdocker (buildx )?build\b", line) else []
        if not words:
            continue
        flags = dict(itertools.pairwise(words))
        file = flags.get("-f") or f"{words[-1]}/Dockerfile"
        if file.split("/", 1)[-1] == wanted:  # the first folder is the clone's (training/, nemo-rl/, torchtitan/)
            return True
    return False


def set_by_plan(bench: registry.BenchmarkDef, files: dict[str, Path], workdir: Path) -> set[str]:
    """Every item the plan sets for ``bench`` (see the module docstring)."""
    name = bench.name
    pyxis_plan = make_plan(workdir, name, "pyxis")
    pyxis = launch_scripts.shell_items(launch_line(pyxis_plan, name)).items
    # a benchmark whose nodes split into roles (qwen35_397b_grpo: training and generation) never runs on one node,
    # so never under docker: its pyxis line stands for both
    one_node = pyxis_plan if bench.full.geometry.node_split else make_plan(workdir, name, "docker", nodes=1)
    docker = launch_scripts.shell_items(launch_line(one_node, name)).items
    launchers = ("srun ", "salloc ", "torchrun ", "accelerate launch ", "mpirun ", "docker run ", "sbatch ")
    both = {item for item in pyxis if item in docker and not item.startswith(launchers)}
    found = both | {item for item in pyxis if item.startswith(launchers[:5])} | {item for item in docker if item.startswith("docker run ")}
    resources = pyxis_plan.of(name).train_job(1).resources
    found |= {f"sbatch {flag}" for flag, resource in SBATCH_FROM_RESOURCES.items() if getattr(resources, resource)}
    ours = ROOT / "src/mlperf_wf/benchmarks" / name / "container" / "Dockerfile"
    if ours.is_file():
        found |= set(launch_scripts.dockerfile_items(ours.read_text()).items)
    command = [word.removeprefix("./") for word in bench.full.command]
    for declared, path in files.items():
        # a shell script the command runs sets its own lines; a Python launcher's executor settings are not used there
        runs_it = path.suffix != ".py" and declared.removeprefix("./") in command
        if (launch_scripts.is_dockerfile(path) and built_from(bench, declared)) or runs_it:
            found |= set(launch_scripts.items(path).items)
    return found


ENTRY = re.compile(r"^- ((?:`[^`]+`(?:,\s*|\s+and\s+)?)+):\s*(.*)$", re.S)


def readme_entries(readme: Path) -> dict[str, str]:
    """Item -> why, from the README's launch-environment section (a bullet per entry, continued on indented lines)."""
    text = readme.read_text()
    if SECTION not in text:
        return {}
    section = text.split(SECTION, 1)[1]
    section = re.split(r"^#{1,3} ", section, maxsplit=1, flags=re.M)[0]
    bullets: list[str] = []
    for line in section.splitlines():
        if line.startswith("- "):
            bullets.append(line)
        elif bullets and line.startswith("  ") and line.strip():
            bullets[-1] += " " + line.strip()  # a bullet continued on indented lines
    entries = {}
    for bullet in bullets:
        match = ENTRY.match(bullet)
        if match:
            for item in re.findall(r"`([^`]+)`", match.group(1)):
                entries[item] = match.group(2).strip()
    return entries


@pytest.fixture
def workdir(tmp_path, monkeypatch) -> Path:
    (tmp_path / "config").symlink_to(ROOT / "config")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("name", registry.benchmark_names())
def test_every_variable_limit_and_launcher_flag_of_the_reference_launch_is_set_by_the_plan_or_explained(name, workdir):
    bench = registry.load_benchmark(name)
    files = launch_files(bench)
    readme = bench.folder / "README.md"
    assert SECTION in readme.read_text(), f"{readme}: no {SECTION!r} section (what the reference's launch sets, and what the plan does instead)"
    where: dict[str, list[str]] = {}
    for declared, path in files.items():
        assert path.is_file(), f"{bench.definition_file}: reference.launch: {declared!r} is not a file at the pin ({path})"
        for item, lines in launch_scripts.items(path).items.items():
            where.setdefault(item, []).extend(f"{declared}:{line}" for line in lines)
    entries = readme_entries(readme)
    planned = set_by_plan(bench, files, workdir)
    missing = [f"`{item}` ({', '.join(where[item])})" for item in sorted(where) if item not in planned and item not in entries]
    assert not missing, f"{readme}: {SECTION}: neither set by the plan nor listed with why: {'; '.join(missing)}"
    unknown = sorted(item for item in entries if item not in where)
    assert not unknown, f"{readme}: {SECTION}: lists {unknown}, which no file of reference.launch sets"
    empty = sorted(item for item, why in entries.items() if not why)
    assert not empty, f"{readme}: {SECTION}: no reason given for {empty}"


# ---- the rule itself, on scripts written here ----


def test_exported_passed_and_prefixed_names_are_items_and_script_variables_are_not():
    found = launch_scripts.shell_items(
        "\n".join(
            [
                ': "${NEXP:=1}"',
                "LOGDIR=./results",
                "export NCCL_IB_TIMEOUT=22 CUDA_DEVICE_MAX_CONNECTIONS",
                "TORCH_SHOW_CPP_STACKTRACES=1 python train.py",
                "env A_FLAG=1 python train.py",
                "declare -x DECLARED=1",
                "srun --container-env=MASTER_PORT,MASTER_ADDR true",
            ]
        )
    ).items
    assert set(found) == {
        "NCCL_IB_TIMEOUT",
        "CUDA_DEVICE_MAX_CONNECTIONS",
        "TORCH_SHOW_CPP_STACKTRACES",
        "A_FLAG",
        "DECLARED",
        "MASTER_PORT",
        "MASTER_ADDR",
        "srun --container-env",
    }
    assert found["NCCL_IB_TIMEOUT"] == [3]


def test_launcher_flags_are_read_through_arrays_continuations_and_short_spellings():
    script = """#SBATCH --exclusive
#SBATCH -N4
IFS=',' read -ra PARTS <<< "$LIST"
PYXIS_DEFAULTS=( '--no-container-mount-home' '--container-remap-root' )
ulimit -Sn 65535
srun -l --mpi="${SLURM_MPI_TYPE:-pmix}" \\
     --ntasks-per-node=8 "${PYXIS_DEFAULTS[@]}" \\
     slurm2pytorch ./run_and_time.sh --not-a-launcher-flag
docker run --rm --gpus=all -e PYTHONPYCACHEPREFIX=/tmp/.pycache --ulimit memlock=-1 -v /a:/b image python -m torch.distributed.run --nproc_per_node 8 train.py
"""
    found = launch_scripts.shell_items(script).items
    assert {"sbatch --exclusive", "ulimit -n", "srun --label", "srun --mpi", "srun --ntasks-per-node", "srun --no-container-mount-home"} <= set(found)
    assert found["srun --mpi"] == [6]
    assert "sbatch --nodes" in found and "IFS" not in found
    assert {"docker run --gpus", "docker run --env", "PYTHONPYCACHEPREFIX", "docker run --ulimit", "ulimit -l", "docker run --volume"} <= set(found)
    assert "torchrun --nproc-per-node" in found
    assert not [item for item in found if "not-a-launcher-flag" in item]


def test_dockerfile_env_names_are_items():
    found = launch_scripts.dockerfile_items("FROM x\nENV A=1 B='two words'\nENV OLD value\nRUN export NOT_AN_ITEM=1\n").items
    assert set(found) == {"A", "B", "OLD"}


def test_python_launchers_name_their_executor_environment_and_sbatch_keywords():
    source = """
import os
env_vars = {"TRANSFORMERS_OFFLINE": "1", "NCCL_NVLS_ENABLE": "0"}
other = {"NOT_ENV": "1"}
os.environ["SET_HERE"] = "1"
executor = run.SlurmExecutor(account=account, exclusive=True, mem="0", tunnel=tunnel)
"""
    found = launch_scripts.python_items(source).items
    assert set(found) == {"TRANSFORMERS_OFFLINE", "NCCL_NVLS_ENABLE", "SET_HERE", "sbatch --account", "sbatch --exclusive", "sbatch --mem"}


def test_readme_entries_are_bullets_of_the_section_only(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n- `ELSEWHERE`: not in the section\n{SECTION}\n\n- `A`, `B` and\n  `ulimit -n`: why\n- `srun --mpi`:\n\n## Next\n- `AFTER`: no\n")
    assert readme_entries(readme) == {"A": "why", "B": "why", "ulimit -n": "why", "srun --mpi": ""}
