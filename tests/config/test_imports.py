"""The import graph, read from the sources: the core modules import each other without a cycle (top-level imports;
an import inside a function is a deliberate late one), the core and the shared modules name no benchmark, and no
benchmark imports another."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from mlperf_wf.config import registry

PACKAGE = Path(registry.__file__).parent
CORE = sorted(path for path in PACKAGE.rglob("*.py") if "benchmarks" not in path.relative_to(PACKAGE).parts)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def top_level_imports(path: Path) -> set[str]:
    """The package's modules a file imports at its top level (``from pkg import mod`` counts as ``pkg.mod``)."""
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return {name for name in found if name.startswith(f"{registry.PACKAGE}.")}


def test_the_core_modules_import_each_other_without_a_cycle():
    modules = {module_name(path): path for path in CORE}
    graph = {name: {dep for dep in top_level_imports(path) if dep in modules and dep != name} for name, path in modules.items()}
    visiting: list[str] = []
    done: set[str] = set()

    def visit(name: str) -> None:
        visiting.append(name)
        for dep in sorted(graph[name]):
            assert dep not in visiting, f"import cycle: {' -> '.join([*visiting[visiting.index(dep) :], dep])}"
            if dep not in done:
                visit(dep)
        visiting.pop()
        done.add(name)

    for name in sorted(graph):
        if name not in done:
            visit(name)


@pytest.mark.parametrize("path", CORE, ids=lambda path: str(path.relative_to(PACKAGE)))
def test_the_core_names_no_benchmark(path):
    """Benchmarks are found by their folders; a core or shared module that imported one would break when it is
    removed (every import, also inside functions)."""
    named = [module for _, module, name in registry.imported_names(path) if f"{module}.{name}".startswith(f"{registry.BENCHMARKS_PACKAGE}.")]
    named += [module for _, module, _ in registry.imported_names(path) if module.startswith(f"{registry.BENCHMARKS_PACKAGE}.")]
    assert named == []


@pytest.mark.parametrize("name", registry.benchmark_names())
def test_no_benchmark_imports_another(name):
    bench = registry.load_benchmark(name)
    for source in sorted(bench.folder.rglob("*.py")):
        for line, module, imported in registry.imported_names(source):
            target = f"{module}.{imported}" if module == registry.BENCHMARKS_PACKAGE else module
            if target.startswith(f"{registry.BENCHMARKS_PACKAGE}."):
                assert f"{target}.".startswith(f"{bench.module_prefix}."), f"{source}:{line} imports {target}"
