"""The README is a landing page and every page it sends a reader to exists: at most 150 lines, every relative link of
the README, docs/, config/ and containers/ pages resolves, every docs page is reachable from the README, and no
stray notes file sits at the root."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "config/README.md", ROOT / "containers/README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def relative_links(page: Path) -> list[str]:
    return [target for target in LINK.findall(page.read_text()) if "://" not in target and not target.startswith("mailto:")]


def test_the_readme_is_a_landing_page():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; move details into docs/"
    linked = {(ROOT / target).resolve() for target in relative_links(ROOT / "README.md")}
    unlinked = [page.name for page in sorted((ROOT / "docs").glob("*.md")) if page.resolve() not in linked]
    assert unlinked == [], f"docs pages the README does not link: {unlinked}"


def test_every_relative_link_resolves():
    broken = [f"{page.relative_to(ROOT)}: {target}" for page in PAGES for target in relative_links(page) if not (page.parent / target).exists()]
    assert broken == []


def test_no_notes_files_anywhere():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    assert [path for path in tracked if Path(path).name.upper().startswith("NOTES")] == []


DEVELOPMENT_TALK = re.compile(
    r"this machine|\b(this|that|earlier|other|another|six|seven|three) sessions?\b|device machine|was lent|by hand in an", re.IGNORECASE
)
"""Words about how the project was developed rather than what it is: a measured figure names its hardware instead."""


def test_the_docs_speak_of_the_project_not_of_how_it_was_made():
    tracked = subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    lines = ((path, number, line) for path in tracked for number, line in enumerate((ROOT / path).read_text().splitlines(), 1))
    found = [f"{path}:{number}: {match.group(0)}" for path, number, line in lines if (match := DEVELOPMENT_TALK.search(line))]
    assert found == []


BENCHMARK_SECTIONS = ("What the reference does", "Full scale in this workflow", "Rehearsal", "Tiny tier", "Deviations", "Tests", "Status")
"""The benchmark README template (docs/adding-a-benchmark.md): these second-level sections in this order, the first
four in every README; anything else is a third-level section inside one of them."""
OUTSIDE_REFERENCES = re.compile(r"definition of done|done-definition|benchmark-done|\b(item|point) [0-9]\b|\bissue [0-9]+", re.IGNORECASE)


def test_every_benchmark_readme_follows_the_template_and_stands_alone():
    for readme in sorted((ROOT / "src/mlperf_wf/benchmarks").glob("*/README.md")):
        text = readme.read_text()
        outside_fences = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
        sections = re.findall(r"^## (.+)$", outside_fences, flags=re.MULTILINE)
        assert all(section in BENCHMARK_SECTIONS for section in sections), f"{readme}: sections {sections}"
        assert sections == sorted(sections, key=BENCHMARK_SECTIONS.index), f"{readme}: sections out of order: {sections}"
        assert set(BENCHMARK_SECTIONS[:4]) <= set(sections), f"{readme}: missing {set(BENCHMARK_SECTIONS[:4]) - set(sections)}"
        assert not OUTSIDE_REFERENCES.search(text), f"{readme}: {OUTSIDE_REFERENCES.search(text).group(0)!r} refers to a text outside the project"


def test_every_library_the_package_imports_is_a_declared_dependency():
    """``pip install .`` gives a working CLI: each third-party module imported anywhere in ``src/mlperf_wf`` belongs to
    a distribution that ``pyproject.toml`` declares (as installed here: the module's distribution by metadata)."""
    import ast
    import importlib.metadata
    import sys
    import tomllib

    from packaging.requirements import Requirement

    declared = {Requirement(line).name.lower().replace("_", "-") for line in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]}
    imported = set()
    for path in (ROOT / "src" / "mlperf_wf").rglob("*.py"):
        if "container" in path.relative_to(ROOT / "src").parts:  # round patches: they run in the reference's image
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    distributions = importlib.metadata.packages_distributions()
    third_party = sorted(name for name in imported if name not in sys.stdlib_module_names and name != "mlperf_wf")
    undeclared = [
        f"{name} ({', '.join(distributions.get(name, ['not installed']))})"
        for name in third_party
        if not {d.lower().replace("_", "-") for d in distributions.get(name, [])} & declared
    ]
    assert undeclared == []
