"""Every benchmark's image definitions end with the same patch block: the hooks and the benchmark's patches
copied from the build context (containers/), first on PYTHONPATH, and the patch modules named in
MLPERF_WF_HOOKS; the Apptainer definition installs the same files with the same environment; the image
named in benchmark.yaml is built from a Dockerfile that exists."""

from __future__ import annotations

import ast
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from mlperf_wf.config import registry

ROOT = Path(__file__).resolve().parents[2]
CONTAINERS = ROOT / "containers"
HOOKS = CONTAINERS / "hooks"
PATCH_BLOCK_MARKER = "# --- mlperf-workflow patches"
BENCHMARKS = [name for name in registry.benchmark_names() if (CONTAINERS / name).is_dir()]


def patch_block(dockerfile: Path) -> list[str]:
    lines = dockerfile.read_text().splitlines()
    starts = [number for number, line in enumerate(lines) if line.startswith(PATCH_BLOCK_MARKER)]
    assert len(starts) == 1, f"{dockerfile}: expected one line starting {PATCH_BLOCK_MARKER!r}"
    return [line for line in lines[starts[0] :] if line.strip()]


def dockerfile_env(block: list[str]) -> dict[str, str]:
    pairs = [word for line in block if line.startswith("ENV ") for word in shlex.split(line[len("ENV ") :])]
    return dict(pair.split("=", 1) for pair in pairs)


def apptainer_sections(definition: Path) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    current = None
    for line in definition.read_text().splitlines():
        if line.startswith("%"):
            current = line.split()[0]
            sections[current] = []
        elif current and line.strip():
            sections[current].append(line.strip())
    return sections


def test_every_benchmark_has_its_container_folder():
    assert set(BENCHMARKS) == set(registry.benchmark_names())


@pytest.mark.parametrize("name", BENCHMARKS)
def test_the_patch_block_is_the_same_in_every_dockerfile_and_copies_files_that_exist(name):
    dockerfiles = sorted((CONTAINERS / name).glob("Dockerfile*"))
    assert CONTAINERS / name / "Dockerfile" in dockerfiles
    blocks = [patch_block(dockerfile) for dockerfile in dockerfiles]
    assert all(block == blocks[0] for block in blocks)
    copies = [line.split() for line in blocks[0] if line.startswith("COPY ")]
    assert [sources for _, *sources, _ in copies] == [["hooks/"], [f"{name}/patches/"]]
    for _, *sources, _destination in copies:
        for source in sources:
            assert (CONTAINERS / source).exists(), f"COPY {source}: not in the build context containers/"
    env = dockerfile_env(blocks[0])
    for module in env["MLPERF_WF_HOOKS"].split(","):
        assert (CONTAINERS / name / "patches" / f"{module}.py").is_file() or (HOOKS / f"{module}.py").is_file(), module
    # The folders it copies to lead PYTHONPATH (the hooks first: they hold sitecustomize).
    assert env["PYTHONPATH"].split("${")[0].split(":") == [destination.rstrip("/") for *_, destination in copies]


@pytest.mark.parametrize("name", BENCHMARKS)
def test_the_apptainer_definition_installs_the_same_patches(name):
    sections = apptainer_sections(CONTAINERS / name / "Apptainer.def")
    block = patch_block(CONTAINERS / name / "Dockerfile")
    docker_copies = {tuple(line.split()[1:]) for line in block if line.startswith("COPY ")}
    apptainer_files = {tuple(line.split()) for line in sections["%files"]}
    assert {destination.rstrip("/") for *_, destination in docker_copies} == {destination for _, destination in apptainer_files}
    for source, _ in apptainer_files:
        assert (CONTAINERS / source).exists(), f"%files {source}: not under containers/"
    exported = dict(line[len("export ") :].split("=", 1) for line in sections["%environment"] if line.startswith("export "))
    docker_env = dockerfile_env(block)
    for name_ in ("PYTHONPATH", "MLPERF_WF_HOOKS"):
        assert exported[name_] == docker_env[name_]


@pytest.mark.parametrize("name", BENCHMARKS)
def test_the_definition_names_a_dockerfile_of_its_own(name):
    bench = registry.load_benchmark(name)
    assert bench.full.container.dockerfile == f"containers/{name}/Dockerfile"
    assert (ROOT / bench.full.container.dockerfile).is_file()


OLDEST_IMAGE_PYTHON = (3, 6)
"""bert's tensorflow/tensorflow:2.4.0-gpu; the hooks run in every image."""
BUILTIN_GENERICS = {"dict", "list", "tuple", "set", "frozenset", "type"}


def annotations_needing_newer_python(tree: ast.AST) -> list[str]:
    """Annotations that Python 3.6 evaluates and cannot: ``X | Y`` and ``dict[...]``-style generics."""
    found = []
    annotations = [node.annotation for node in ast.walk(tree) if isinstance(node, (ast.arg, ast.AnnAssign)) and node.annotation is not None]
    annotations += [node.returns for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None]
    for annotation in annotations:
        for node in ast.walk(annotation):
            union = isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr)
            generic = isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in BUILTIN_GENERICS
            if union or generic:
                found.append(f"line {node.lineno}: {ast.unparse(annotation)}")
    return found


@pytest.mark.parametrize("source", [*sorted(HOOKS.glob("*.py")), CONTAINERS / "bert" / "patches" / "mlperf_wf_bert.py"], ids=lambda path: path.name)
def test_what_runs_in_the_oldest_image_is_python_3_6(source):
    """An error in sitecustomize does not stop Python: it prints a line and runs the reference unpatched."""
    text = source.read_text()
    tree = ast.parse(text, filename=str(source), feature_version=OLDEST_IMAGE_PYTHON)
    futures = [alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module == "__future__" for alias in node.names]
    assert "annotations" not in futures, f"{source.name}: `from __future__ import annotations` needs Python 3.7"
    assert not annotations_needing_newer_python(tree), annotations_needing_newer_python(tree)


def test_a_write_error_on_the_result_file_fails_the_reference_process(tmp_path):
    """mlperf-logging writes through a logging.FileHandler, whose errors logging prints and swallows: with the hooks
    on PYTHONPATH, a failed write to the run's result file (/dev/full: ENOSPC) ends the process instead; another
    file's handler keeps logging's own behaviour."""
    script = (
        "import logging, sys\n"
        "other = logging.FileHandler(sys.argv[1]); result = logging.FileHandler('/dev/full')\n"
        "log = logging.getLogger('mllog'); log.addHandler(other); log.addHandler(result)\n"
        'log.error(\':::MLLOG {"key": "run_stop"}\')\n'
        "print('went on after the failed write')\n"
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(HOOKS), "COMPLIANCE_FILE": "/dev/full"}
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path / "other.log")], capture_output=True, text=True, env=env, check=False)
    assert proc.returncode != 0 and "went on" not in proc.stdout
    assert "/dev/full: writing the run's log failed" in proc.stderr and "No space left on device" in proc.stderr
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path / "other.log")], capture_output=True, text=True, env={**env, "COMPLIANCE_FILE": ""})
    assert proc.returncode == 0 and "went on" in proc.stdout  # without a result file named, logging is as it was
