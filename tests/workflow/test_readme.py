"""Every command the README gives, in the order it gives them, typed as a newcomer types them in a checkout.

The checkout is a copy of this working tree (its tracked and unignored files) with this machine's venv, in which
``make demo`` has run: the tiny llama2_70b_lora campaign (``tiny_project``, the same config with the campaign's run
count) is copied in, so that the README's ``make demo`` is its "running it again does nothing". ``HOME`` is the test's
own, so ``make profiles`` links the profiles there. The README and :data:`CHECKS` list the same commands in the same
order: a command added to the README without a check here fails the test.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mlperf_wf.results import units
from tests.conftest import TINY_CAMPAIGN_RUNS

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PLACEHOLDERS = {"<name>": "llama2_70b_lora"}
"""What the test types for the README's placeholders."""
COMMAND_WORDS = ("make ", "snakemake ", "mlperf-wf ", "source ", ".venv/bin/", "bash ")
BLOCK_OR_INLINE = re.compile(r"```bash\n(.*?)```|`([^`\n]+)`", re.DOTALL)


def readme_commands(text: str) -> list[str]:
    """The README's commands in order of first appearance: each line of a ``bash`` block (its ``#`` comment cut) and
    each inline code span that starts like a command."""
    commands: list[str] = []
    for match in BLOCK_OR_INLINE.finditer(text):
        if match.group(1) is not None:
            lines = [line.split(" #", 1)[0].strip() for line in match.group(1).splitlines() if not line.lstrip().startswith("#")]
        else:
            lines = [match.group(2).strip()] if match.group(2).startswith(COMMAND_WORDS) else []
        commands += [line for line in lines if line and line not in commands]
    return commands


def test_the_readme_s_commands_are_read_in_order_from_blocks_and_prose():
    text = "Run `make demo` first.\n```bash\nmake demo   # again\n# a comment line\nmlperf-wf status  # where\n```\n"
    text += "Then `results/x` and `make report BENCH=<name>`."
    assert readme_commands(text) == ["make demo", "mlperf-wf status", "make report BENCH=<name>"]


def checkout_copy(dest: Path) -> Path:
    """This working tree's files as a clone has them, with this machine's venvs (not rebuilt: make sees them as newer
    than the requirements they were built from)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, check=True)
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = ROOT / name
        if source.is_file() and not source.is_symlink():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
        elif source.is_symlink():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            (dest / name).symlink_to(os.readlink(source))
    for venv in (".venv", ".venv-reference", ".venv-tensorflow"):
        if (ROOT / venv / "bin" / "activate").exists():
            (dest / venv).symlink_to(ROOT / venv)
    built = (ROOT / ".venv" / "bin" / "activate").stat().st_mtime - 60
    for requirement in ("requirements.txt", "requirements-dev.txt", "pyproject.toml", "tests/reference-requirements.txt", "tests/tensorflow-requirements.txt"):
        os.utime(dest / requirement, (built, built))
    return dest


def after_make_demo(checkout: Path, campaign: Path) -> None:
    """What ``make demo`` leaves, from the session's tiny campaign (run with ``runs=TINY_CAMPAIGN_RUNS``)."""
    for folder in ("results", "resources", "logs", ".snakemake"):
        shutil.copytree(campaign / folder, checkout / folder, symlinks=True)
    config = checkout / "config" / "config.yaml"
    text, count = re.subn(r"(?m)^runs: \d+", f"runs: {TINY_CAMPAIGN_RUNS}", config.read_text())
    assert count == 1, "config/config.yaml has one top-level runs key"
    config.write_text(text)


def typed(checkout: Path, command: str, env: dict[str, str], activated: bool) -> subprocess.CompletedProcess:
    for placeholder, value in PLACEHOLDERS.items():
        command = command.replace(placeholder, value)
    line = f"source .venv/bin/activate && {command}" if activated and not command.startswith("source ") else command
    return subprocess.run(["bash", "-c", line], cwd=checkout, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False)


def said(proc: subprocess.CompletedProcess) -> str:
    return proc.stdout + proc.stderr


def demo(checkout: Path, proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, said(proc)[-3000:]
    assert "Nothing to be done" in said(proc), f"make demo after make demo redid work:\n{said(proc)[-3000:]}"
    report = json.loads((checkout / "results/tiny/llama2_70b_lora/report.json").read_text())
    score = units.duration(report["score"]["time_to_train_minutes"])  # a tiny campaign's second or two, in seconds
    line = f"report: results/tiny/llama2_70b_lora/report.json | olympic score: {score} | runs: {TINY_CAMPAIGN_RUNS} | compliance: ['passed']"
    assert line in proc.stdout, proc.stdout[-2000:]


def make_test_recipe(checkout: Path, proc: subprocess.CompletedProcess) -> None:
    """``make test`` is this suite: what its recipe runs (``make -n``) is pytest with the workers and the reference."""
    dry = subprocess.run(["make", "-n", "test"], cwd=checkout, capture_output=True, text=True, check=False)
    assert dry.returncode == 0 and "MLPERF_WF_REQUIRE_REFERENCE=1 .venv/bin/python -m pytest" in dry.stdout, said(dry)


def report(checkout: Path, proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, said(proc)[-3000:]
    html = checkout / "report.html"
    assert html.stat().st_size > 100_000 and "report.html: the figures, captions and results" in proc.stdout
    text = html.read_text()
    for caption in ("Time to train of every run", "Convergence of every run", "olympic mean times the RCP scaling factor", "at a glance"):
        assert caption in text
    for item in ("time_to_train.png", "convergence.png", "overview.html", "summary.png", "summary.csv"):
        assert item in text
    # the front page names the round and division the runs were checked against, not the config's "latest"
    assert "llama2_70b_lora: ruleset 6.1.0, closed division" in text and "ruleset latest" not in text
    if CHROMIUM.exists():
        opened_in_chromium(checkout, html)


CHROMIUM = Path("/usr/bin/chromium")
"""Debian's chromium (.ci/run installs it); Playwright drives it."""


def opened_in_chromium(checkout: Path, html: Path, benchmark: str = "llama2_70b_lora") -> None:
    """As a reader opens it: the front page leads with the result (the score in a unit that fits, valid or not and why,
    the RCP check that does not apply at tiny scale, each run's verdict and why, the provenance); then the benchmark in
    the report's menu and its overview page, whose frame shows the same and both figures, the convergence figure naming
    the benchmark's metric and marking each run's crossing of the target."""
    from playwright.sync_api import sync_playwright

    report = json.loads((checkout / f"results/tiny/{benchmark}/report.json").read_text())
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(html.as_uri())
            front = page.inner_text("body")
            # in view as the page opens: Snakemake centres its pane, which cut off the top of a tall front page
            description_top = page.locator(".prose").first.bounding_box()["y"]
            score_top = page.get_by_text("Score:").first.bounding_box()["y"]
            page.screenshot(path=str(checkout / "report-front.png"))
            page.get_by_text(benchmark, exact=True).first.click()
            page.locator("tr", has_text="overview: score, runs, RCP").locator("a[iconname=eye]").click()
            frame = next(frame for frame in page.frames if "filename=overview.html" in frame.url)
            frame.wait_for_selector("table")
            shown = frame.inner_text("body")
            crossings = frame.locator('svg [id^="crossing-run-"]').count()
            metric_on_axis = frame.locator("svg text", has_text=units.metric_of(benchmark)).count()
            page.screenshot(path=str(checkout / "report-overview.png"))
        finally:
            browser.close()
    score = units.duration(report["score"]["time_to_train_minutes"])
    assert float(score.split()[0]) >= 1 or score.endswith("seconds"), f"a unit that fits: {score}"
    assert front.index(f"Score: {score}") < front.index("How they were made"), front[:3000]
    assert 0 <= description_top and 0 <= score_top < 1000, (description_top, score_top)
    assert "Valid submission: no: scale is 'tiny'" in front and "RCP check: does not apply at tiny scale" in front
    assert f"{benchmark}: tiny scale, ruleset {report['ruleset']}, {report['division']} division" in front
    for run in report["runs"]:
        assert f"run {run['index']} (seed {run['seed']}): passed" in front, front[:3000]
    assert f"Provenance ({len(report['runs'])} runs' provenance.json): launcher local" in front
    assert f"Score: {score}" in shown and f"{units.runs_in_words(report['score']['counted_runs'])} counted" in shown, shown[:2000]
    assert f"checked under ruleset {report['ruleset']}, {report['division']} division" in shown and "Valid submission: no" in shown
    assert "RCP check: does not apply at tiny scale" in shown and "Fail" not in shown and "Fail" not in front
    for run in report["runs"]:
        assert f"run {run['index']} (results/tiny/{benchmark}/runs/{run['index']})\t{run['seed']}\tsuccess\tpassed\treached the target at" in shown, shown
    assert "Provenance" in shown and "time to train" in shown and "convergence" in shown
    assert crossings == len(report["runs"]) and metric_on_axis == 1, (crossings, metric_on_axis)
    assert (checkout / "report-overview.png").stat().st_size > 50_000, "the screenshot shows the page"


def activate(checkout: Path, proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, said(proc)
    found = subprocess.run(["bash", "-c", "source .venv/bin/activate && command -v mlperf-wf"], cwd=checkout, capture_output=True, text=True, check=True)
    # this machine's venv stands in for the checkout's own (a link to it): the same file
    assert Path(found.stdout.strip()).resolve() == (checkout / ".venv" / "bin" / "mlperf-wf").resolve()


def profiles(home: Path):
    def linked(checkout: Path, proc: subprocess.CompletedProcess) -> None:
        assert proc.returncode == 0, said(proc)
        for name in ("slurm", "local"):
            assert (home / ".config" / "snakemake" / name).resolve() == (checkout / "profiles" / name).resolve()

    return linked


def precheck(checkout: Path, proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, said(proc)[-3000:]
    assert "config/config.yaml: valid" in proc.stdout and "slurm/config.yaml: valid" in proc.stdout, said(proc)


def full_dry_run(checkout: Path, proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, said(proc)[-3000:]
    # one job per run of the checkout's config (the demo's run count, see after_make_demo), on a whole GPU node
    assert proc.stdout.count("rule train:") == TINY_CAMPAIGN_RUNS and "slurm_extra=--exclusive" in proc.stdout
    assert "A run without -n refuses to start until they are fixed." in proc.stderr
    assert not (checkout / "results/llama2_70b_lora").exists(), "a dry run makes nothing"


def size(checkout: Path, proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, said(proc)[-3000:]
    assert "llama2_70b_lora" in proc.stdout and "walltime" in proc.stdout.lower()


def refused_full_run(checkout: Path, proc: subprocess.CompletedProcess) -> None:
    """With the default config (the tiny platform, unpinned images, no credentials) the real run refuses at once."""
    assert proc.returncode != 0 and "No job was submitted" in said(proc), said(proc)[-3000:]
    assert "preflight:" in said(proc) and not (checkout / "results/llama2_70b_lora").exists()


def status(checkout: Path, proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, said(proc)[-3000:]
    assert "llama2_70b_lora" in proc.stdout


def lint(checkout: Path, proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, said(proc)[-3000:]


def definitions_check(checkout: Path, proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0 and "definitions valid" in said(proc), said(proc)[-2000:]


@pytest.mark.slow
def test_every_readme_command_works_in_the_order_the_readme_gives_it(tiny_project, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    checks = {
        "make demo": demo,
        "make test": make_test_recipe,
        "make demo BENCH=<name>": demo,
        "make report BENCH=<name>": report,
        "source .venv/bin/activate": activate,
        "make profiles": profiles(home),
        "mlperf-wf check --profile slurm --configfile config/config.yaml": precheck,
        "snakemake --profile slurm -n results/llama2_70b_lora/report.json --config scale=full": full_dry_run,
        "mlperf-wf size --benchmark llama2_70b_lora --nodes 1 --gpus-per-node 8": size,
        "snakemake --profile slurm results/llama2_70b_lora/report.json --config scale=full launcher=pyxis": refused_full_run,
        "mlperf-wf status": status,
        "make lint": lint,
        ".venv/bin/mlperf-wf check": definitions_check,
    }
    assert readme_commands(README.read_text()) == list(checks), "README.md's commands, each with its check here, in its order"
    checkout = checkout_copy(tmp_path / "mlperf-workflow")
    after_make_demo(checkout, tiny_project)
    # a newcomer's shell: no venv on PATH until the README says to activate it, no proxy, no credentials
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if Path(p) != Path(sys.executable).parent)
    env = {"HOME": str(home), "PATH": path, "LANG": "C.UTF-8", "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9"}
    activated = False
    for command, checked in checks.items():  # in the README's order
        if command == "make test":
            proc = subprocess.CompletedProcess(command, 0, "", "")  # this suite itself: its recipe is checked
        else:
            proc = typed(checkout, command, env, activated)
        activated = activated or command.startswith("source ")
        checked(checkout, proc)
    if not CHROMIUM.exists():
        pytest.skip(f"every README command works; the report was not opened in a browser: no {CHROMIUM} (apt-get install chromium)")
