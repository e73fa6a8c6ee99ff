"""Every benchmark's image definitions (its folder's ``container/``) end with the same patch block: the hooks
(``containers/hooks``, shared) and the benchmark's patches copied from the build context (the repository root),
first on PYTHONPATH, and the patch modules named in MLPERF_WF_HOOKS; the Apptainer definition installs the same files
with the same environment; the image named in benchmark.yaml is built from a Dockerfile of the benchmark's folder."""

from __future__ import annotations

import ast
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from mlperf_wf.config import registry

ROOT = Path(__file__).resolve().parents[2]
HOOKS = ROOT / "containers" / "hooks"
PATCH_BLOCK_MARKER = "# --- mlperf-workflow patches"
BENCHMARKS = registry.benchmark_names()


def container(name: str) -> Path:
    """A benchmark's image definitions: ``<its folder>/container/`` (``registry.container_folder``)."""
    return registry.container_folder(name)


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


def test_no_image_definitions_are_left_outside_a_benchmark_folder():
    """``containers/`` holds the shared hooks and the README; a benchmark's Dockerfile is in its own folder."""
    assert sorted(path.name for path in (ROOT / "containers").iterdir() if path.name != "__pycache__") == ["README.md", "hooks"]


@pytest.mark.parametrize("name", BENCHMARKS)
def test_the_patch_block_is_the_same_in_every_dockerfile_and_copies_files_that_exist(name):
    dockerfiles = sorted(container(name).glob("Dockerfile*"))
    assert container(name) / "Dockerfile" in dockerfiles
    blocks = [patch_block(dockerfile) for dockerfile in dockerfiles]
    assert all(block == blocks[0] for block in blocks)
    copies = [line.split() for line in blocks[0] if line.startswith("COPY ")]
    own_patches = f"{container(name).relative_to(ROOT)}/patches/"
    assert [sources for _, *sources, _ in copies] == [["containers/hooks/"], [own_patches]]
    for _, *sources, _destination in copies:
        for source in sources:
            assert (ROOT / source).exists(), f"COPY {source}: not in the build context (the repository root)"
    env = dockerfile_env(blocks[0])
    for module in env["MLPERF_WF_HOOKS"].split(","):
        assert (container(name) / "patches" / f"{module}.py").is_file() or (HOOKS / f"{module}.py").is_file(), module
    # The folders it copies to lead PYTHONPATH (the hooks first: they hold sitecustomize).
    assert env["PYTHONPATH"].split("${")[0].split(":") == [destination.rstrip("/") for *_, destination in copies]


def test_the_build_context_sends_only_the_hooks_and_the_patches():
    """The context is the repository root: .dockerignore keeps out all but what the patch blocks copy (a virtual
    environment or a campaign's results there would be sent to the daemon with every build)."""
    patterns = [line for line in (ROOT / ".dockerignore").read_text().splitlines() if line and not line.startswith("#")]
    assert patterns == ["*", "!containers/hooks", f"!{registry.BENCHMARKS_DIR.relative_to(ROOT)}/*/{registry.CONTAINER_FOLDER}/patches"]


@pytest.mark.parametrize("name", BENCHMARKS)
def test_the_apptainer_definition_installs_the_same_patches(name):
    sections = apptainer_sections(container(name) / "Apptainer.def")
    block = patch_block(container(name) / "Dockerfile")
    docker_copies = {tuple(line.split()[1:]) for line in block if line.startswith("COPY ")}
    apptainer_files = {tuple(line.split()) for line in sections["%files"]}
    assert {destination.rstrip("/") for *_, destination in docker_copies} == {destination for _, destination in apptainer_files}
    assert {source.rstrip("/") for source, *_ in docker_copies} == {source for source, _ in apptainer_files}
    for source, _ in apptainer_files:
        assert (ROOT / source).exists(), f"%files {source}: not under the repository root"
    exported = dict(line[len("export ") :].split("=", 1) for line in sections["%environment"] if line.startswith("export "))
    docker_env = dockerfile_env(block)
    for name_ in ("PYTHONPATH", "MLPERF_WF_HOOKS"):
        assert exported[name_] == docker_env[name_]


@pytest.mark.parametrize("name", BENCHMARKS)
def test_the_definition_names_a_dockerfile_of_its_own(name):
    bench = registry.load_benchmark(name)
    assert ROOT / bench.full.container.dockerfile == container(name) / "Dockerfile"
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


@pytest.mark.parametrize("source", [*sorted(HOOKS.glob("*.py")), container("bert") / "patches" / "mlperf_wf_bert.py"], ids=lambda path: path.name)
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


@pytest.mark.parametrize("name", BENCHMARKS)
def test_the_local_launcher_puts_the_benchmark_s_own_patch_folder_on_pythonpath(tmp_path, monkeypatch, name):
    """The ``local`` launcher runs the reference on the host with the same hooks and round patches as the image."""
    import yaml

    from mlperf_wf.config.workflow_config import WorkflowConfig
    from mlperf_wf.plan import plan as planning

    (tmp_path / "config").symlink_to(ROOT / "config")
    monkeypatch.chdir(tmp_path)
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    hooks = planning.Plan(WorkflowConfig.parse(config), project_root=ROOT, workdir=tmp_path).of(name).host_hooks()
    patches = container(name) / "patches"
    modules = sorted(path.stem for path in patches.glob("*.py"))
    if not modules:
        assert hooks is None
        return
    assert hooks is not None and hooks.folders == (str(HOOKS), str(patches)) and list(hooks.modules) == modules
