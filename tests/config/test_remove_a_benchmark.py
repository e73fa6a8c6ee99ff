"""A benchmark is its folder and the folder of its tests: removed from a copy of the repository (what git tracks),
nothing else names it and everything still checks, plans and collects.

Its folder (``src/mlperf_wf/benchmarks/<name>/``) holds its definition, catalog entries, image definitions and round
patches; ``tests/benchmarks/<name>/`` its tests, rehearsal and golden plans. Each is found by looking in those
folders, so removing the two removes the benchmark: `mlperf-wf check` passes, the golden plans of the others still
match, and the suite collects without an error or a test of the removed benchmark."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mlperf_wf.config import registry

ROOT = Path(__file__).resolve().parents[2]

REMOVED = [name for name in ("rgat", "llama2_70b_lora") if name in registry.benchmark_names()]
"""rgat, which adding-a-benchmark.md names as exactly its files, and llama2_70b_lora, the one the core's tests and the
tiny demo campaign use most as their example (in a copy without one of them, the other)."""


def repository_copy(folder: Path) -> Path:
    """Every file git tracks or would track (this checkout's state, committed or not), copied into ``folder``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file() and not source.is_symlink():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, folder / name)
    return folder


def environment(project: Path) -> dict[str, str]:
    """This interpreter's packages, with the package and the tests imported from the copy."""
    return {"PYTHONPATH": f"{project / 'src'}:{project}", "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(project)}


def run(project: Path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], cwd=project, env=environment(project), capture_output=True, text=True, check=False)


def naming(project: Path, name: str) -> list[str]:
    """Files of the copy whose path names ``name``, and catalog entries, image definitions and the plan's tables whose
    content names its package, its folder or it as a key: what removing the benchmark would leave behind."""
    files = [path for path in project.rglob("*") if path.is_file() and "__pycache__" not in path.parts]
    by_path = [str(path.relative_to(project)) for path in files if re.search(rf"(^|[/_.]){re.escape(name)}([/_.]|$)", str(path.relative_to(project)))]
    tables = [*(project / "src" / "mlperf_wf" / "plan").glob("*.yaml")]  # the shared tables: accelerators' peaks
    text_files = [*(project / "config").rglob("*.yaml"), *(project / "containers").rglob("*"), *tables]
    by_content = [
        str(path.relative_to(project))
        for path in text_files
        if path.is_file()
        and (f"{registry.BENCHMARKS_PACKAGE}.{name}." in path.read_text() or f"benchmarks/{name}/" in path.read_text() or f"\n  {name}:" in path.read_text())
    ]
    return sorted(set(by_path + by_content))


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """The copy with nothing removed: what each removal is compared with."""
    return repository_copy(tmp_path_factory.mktemp("pristine"))


def test_the_copy_imports_the_copy_s_package(pristine):
    """The commands below run the copy's package, not this checkout's (so removing a folder there is seen)."""
    done = run(pristine, "-c", "import mlperf_wf; print(mlperf_wf.__file__)")
    assert done.returncode == 0 and done.stdout.strip() == str(pristine / "src" / "mlperf_wf" / "__init__.py"), done.stderr


@pytest.mark.parametrize("name", REMOVED)
def test_removing_a_benchmark_s_two_folders_leaves_nothing_naming_it_and_everything_green(pristine, tmp_path, name):
    project = tmp_path / "project"
    shutil.copytree(pristine, project, symlinks=True)
    assert naming(project, name), f"the copy holds no file of {name}: the check below would prove nothing"
    shutil.rmtree(project / "src" / "mlperf_wf" / "benchmarks" / name)
    shutil.rmtree(project / "tests" / "benchmarks" / name)
    config = project / "config" / "config.yaml"
    chosen = f"benchmarks: [{name}]\n"
    if chosen in config.read_text():  # the default campaign's choice is the config's, not the benchmark's: choose another
        other = next(other for other in registry.benchmark_names() if other != name)
        config.write_text(config.read_text().replace(chosen, f"benchmarks: [{other}]\n"))
    assert naming(project, name) == []  # no catalog entry, container folder, rehearsal or golden plan left

    check = run(project, "-m", "mlperf_wf", "check")
    assert check.returncode == 0, check.stderr
    assert f"{len(registry.benchmark_names()) - 1} benchmarks and" in check.stdout, check.stdout

    # the golden plans of every other benchmark, collected and run in the copy
    golden = run(project, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/plan/test_plan.py", "-k", "golden")
    assert golden.returncode == 0 and " passed" in golden.stdout, golden.stdout[-3000:] + golden.stderr[-2000:]
    assert name not in golden.stdout

    collected = run(project, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider")
    assert collected.returncode == 0, collected.stdout[-3000:] + collected.stderr[-2000:]
    test_ids = [line for line in collected.stdout.splitlines() if "::" in line]
    assert test_ids and not [test_id for test_id in test_ids if f"[{name}" in test_id or f"-{name}]" in test_id or f"/{name}/" in test_id]
