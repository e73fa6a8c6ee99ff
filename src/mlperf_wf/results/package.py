"""Builds an MLPerf Training submission package and runs the official checkers on it.

Layout (as mlperf-logging's package checker and result summarizer expect)::

    <root>/<org>/systems/<system>.json
    <root>/<org>/results/<system>/<benchmark>/result_<i>.txt     # the N scored runs
    <root>/<org>/results/<system>/<benchmark>/power/result_<i>/node_<k>.txt   # their power logs, when sampled
    <root>/<org>/benchmarks/<benchmark>/implementations/<impl>/...   # what made them

``<impl>`` names what really made the runs: at full scale the reference repository at its
commit (``implementation.json``: repository, commit, folder, container image and digest, the
exact launch commands, from the runs' provenance); at tiny scale this project's trainer
(its source files, and the same record).

``systems/<system>.json`` is filled from ``config/systems/<system>.yaml`` (``mlperf_wf.config.system``; its probed
``hardware`` section stays out) and
checked with ``mlperf_logging.system_desc_checker``; the whole folder is then
checked with ``mlperf_logging.package_checker``. Both verdicts are recorded.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from mlperf_wf.acquire.manifest import first_change
from mlperf_wf.config.system import AVAILABILITY, SystemDescription, load_system
from mlperf_wf.kinds import Scale

__all__ = ["AVAILABILITY", "SystemDescription", "build", "check", "implementation_of", "load_system"]


class Implementation(BaseModel):
    """What made one benchmark's runs, as the package records it."""

    model_config = ConfigDict(frozen=True)

    name: str
    """Folder under ``benchmarks/<benchmark>/implementations/``."""
    record: dict
    """``implementation.json``: who wrote the code, where it is, the images and commands that ran it."""
    source_files: tuple[Path, ...] = ()
    """Files copied beside the record (the tiny trainer's code; nothing at full scale, the reference is named)."""


def _distinct(report: dict, key: str) -> list:
    return sorted({run["made_with"][key] for run in report["runs"] if run["in_scored_window"] and (run.get("made_with") or {}).get(key)})


def implementation_of(report: dict) -> Implementation:
    """The implementation behind a report's scored runs: the reference at full scale, the project's trainer at tiny scale."""
    from mlperf_wf.config import registry

    bench = registry.load_benchmark(report["benchmark"])
    ran = {"launchers": _distinct(report, "launcher"), "images": _distinct(report, "image"), "commands": _distinct(report, "command")}
    commits = sorted({(run.get("made_with") or {}).get("workflow_git", {}).get("commit") or "" for run in report["runs"]} - {""})
    if report["scale"] == Scale.FULL:
        reference = bench.reference
        record = {
            "made_by": "the reference implementation, launched by mlperf-workflow",
            "reference": {"repository": reference.repository, "commit": reference.commit, "path": reference.path, "url": reference.url},
            "container": {"dockerfile": bench.full.container.dockerfile, "images": ran["images"]},
            **ran,
            "workflow_commits": commits,
        }
        return Implementation(name=f"{Path(reference.repository).name}-{reference.commit[:12]}", record=record)
    from mlperf_wf.run import harness, mllog_utils

    files = (*(bench.folder / f"{module}.py" for module in registry.BENCHMARK_MODULES), Path(harness.__file__), Path(mllog_utils.__file__))
    record = {
        "made_by": "mlperf-workflow's tiny-tier CPU trainer (generated data, a tiny model): not the benchmark's reference",
        "benchmark_folder": f"src/mlperf_wf/benchmarks/{bench.name}",
        **ran,
        "workflow_commits": commits,
    }
    return Implementation(name="mlperf-workflow-tiny", record=record, source_files=files)


def build(
    out: Path,
    org: str,
    division: str,
    system: str,
    description: SystemDescription,
    runs: dict[str, list[Path]],
    implementations: dict[str, Implementation],
    leave_power_out: set[Path] | None = None,
) -> Path:
    """Write ``out/<org>/`` with the scored runs of each benchmark; return the org folder. ``leave_power_out``: result
    files whose power logs are refused (not this run's measurement): the package does not carry them."""
    org_dir = out / org
    if org_dir.exists():
        shutil.rmtree(org_dir)
    (org_dir / "systems").mkdir(parents=True)
    desc = description.system_json(org, division)
    (org_dir / "systems" / f"{system}.json").write_text(json.dumps(desc, indent=2) + "\n")
    for benchmark, files in runs.items():
        target = org_dir / "results" / system / benchmark
        target.mkdir(parents=True)
        for i, source in enumerate(files):
            if not Path(source).is_file():  # a run whose log is gone: its verdict (missing) says so
                continue
            shutil.copyfile(source, target / f"result_{i}.txt")
            power = Path(source).parent / "power" / Path(source).name.split(".")[0]
            # power/result_<i>/node_<k>.txt, as the package checker and summarizer read them
            if power.is_dir() and Path(source) not in (leave_power_out or set()):
                shutil.copytree(power, target / "power" / f"result_{i}", ignore=shutil.ignore_patterns(".*"))
        made_by = implementations[benchmark]
        implementation = org_dir / "benchmarks" / benchmark / "implementations" / made_by.name
        implementation.mkdir(parents=True)
        (implementation / "implementation.json").write_text(json.dumps(made_by.record, indent=2) + "\n")
        for source_file in made_by.source_files:
            shutil.copyfile(source_file, implementation / source_file.name)
    return org_dir


def _run_checker(argv: list[str], log_output: Path) -> dict:
    proc = subprocess.run([sys.executable, "-m", *argv, "--log_output", str(log_output)], capture_output=True, text=True, check=False)
    text = proc.stdout + proc.stderr
    errors = [line.strip() for line in text.splitlines() if line.startswith("ERROR")]
    return {"command": " ".join(["python", "-m", *argv]), "returncode": proc.returncode, "errors": errors, "log": str(log_output)}


def check(org_dir: Path, ruleset: str, logs: Path) -> dict:
    """Run system_desc_checker on every system file and package_checker on the folder."""
    logs.mkdir(parents=True, exist_ok=True)
    systems = {}
    for path in sorted((org_dir / "systems").glob("*.json")):
        systems[path.stem] = _run_checker(["mlperf_logging.system_desc_checker", str(path), "training", ruleset], logs / f"system_desc_{path.stem}.log")
    package = _run_checker(["mlperf_logging.package_checker", str(org_dir), "training", ruleset], logs / "package_checker.log")
    log_text = Path(package["log"]).read_text() if Path(package["log"]).is_file() else ""
    package["passed"] = "PACKAGE CHECKER FOUND NO ERRORS" in log_text
    package["errors"] = sorted({line.strip() for line in log_text.splitlines() if line.startswith("ERROR")} | set(package["errors"]))
    return {
        "package": str(org_dir),
        "ruleset": ruleset,
        "system_descriptions": {name: {**result, "passed": result["returncode"] == 0 and not result["errors"]} for name, result in systems.items()},
        "package_checker": package,
        "passed": package["passed"] and all(r["returncode"] == 0 and not r["errors"] for r in systems.values()),
    }


def manifest(org_dir: Path, base: Path) -> dict[str, str]:
    """Each file of the package's org folder, named relative to ``base`` (the check file's folder), and its sha256:
    what the check was run on."""
    base = base.resolve()
    return {str(path.resolve().relative_to(base)): hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted(org_dir.rglob("*")) if path.is_file()}


CHANGE_RECORD = "package_changes.json"
"""Beside a package check: what changed in the package since it was checked, written by the workflow when it finds a
change (:func:`record_change`); an input of the package rule, so that Snakemake makes and checks the package again."""


def record_change(check_file: Path) -> str | None:
    """Where the package that ``check_file`` describes changed since its check (:func:`changed_since_checked`): write
    the change and the package's files as they are now to :data:`CHANGE_RECORD` beside it, and say the change in one
    line; None (nothing written) when it is the package it checked."""
    changed, now = _package_change(check_file)
    if changed is not None:
        record = {"change": changed, "files": now}
        (check_file.parent / CHANGE_RECORD).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return changed


def changed_since_checked(check_file: Path) -> str | None:
    """Why the package that ``check_file`` (``package_check.json``) describes is no longer the one it checked: the first
    file edited, removed or added since, in one line; None when it is the same (or there is no check yet)."""
    return _package_change(check_file)[0]


def _package_change(check_file: Path) -> tuple[str | None, dict[str, str]]:
    """(what changed in the package since its check, or None; its files' digests now), every file hashed once. A check
    that cannot be read, or records no digests, is a change: the package is made and checked again."""
    base = check_file.parent
    if not check_file.is_file():
        return None, {}
    try:
        recorded = json.loads(check_file.read_text()).get("files")
    except (OSError, ValueError, AttributeError):
        return f"{check_file}: not readable as the package check's JSON", _files_now(base, None)
    if not isinstance(recorded, dict) or not recorded:
        return f"{check_file}: records no digest of the package's files (made by an older version)", _files_now(base, None)
    now = _files_now(base, recorded)
    changed = first_change(recorded, now, f"the package check ({check_file.name}) was made")
    return (f"{base}/{changed}" if changed else None), now


def _files_now(base: Path, recorded: dict[str, str] | None) -> dict[str, str]:
    """The package's files under ``base`` (a check's folder) and their sha256 now: those of the org folders the check
    recorded, else of every org folder in ``package/``."""
    if recorded:
        org_dirs = {base / Path(*Path(name).parts[:2]) for name in recorded}  # package/<org>
    else:
        org_dirs = {path for path in (base / "package").iterdir() if path.is_dir()} if (base / "package").is_dir() else set()
    return {name: digest for org_dir in sorted(org_dirs) if org_dir.is_dir() for name, digest in manifest(org_dir, base).items()}


def package_reports(reports: list[Path], org: str, system: str, ruleset: str, division: str, out: Path, check_out: Path) -> tuple[Path, dict]:
    """Build the submission package from the reports' scored runs, run the official checkers on it and write their
    verdict, with every reason the package is not valid for submission, to ``check_out`` (and, when there is any,
    ``out/NOT_FOR_SUBMISSION.txt``); returns the organisation's folder of the package and that verdict."""
    from mlperf_wf.errors import ConfigError
    from mlperf_wf.results import verdict as run_verdicts

    description = load_system(system)
    everything = [json.loads(path.read_text()) for path in reports]
    # A package belongs to one round and one division: benchmarks checked under another ruleset (rgat, retired
    # after 5.1.0) or run in the other division (a tiny tier that is open) stay out, each with its reason.
    loaded = [r for r in everything if r["ruleset"] == ruleset and r["division"] == division]
    left_out = {r["benchmark"]: f"checked under ruleset {r['ruleset']}, not {ruleset}" for r in everything if r["ruleset"] != ruleset}
    other_division = [r for r in everything if r["ruleset"] == ruleset and r["division"] != division]
    left_out.update({r["benchmark"]: f"{r['division']} division, the package is {division}" for r in other_division})
    if not loaded:
        found = sorted({(r["ruleset"], r["division"]) for r in everything})
        raise ConfigError(f"package: no report was checked under ruleset {ruleset} in the {division} division; the reports have {found}")
    # a run made with another campaign identity than its set's is no part of it: its log stays out (the reasons say why)
    runs = {
        r["submission_benchmark"]: [Path(run["result_file"]) for run in r["runs"] if run["in_scored_window"] and not run.get("identity_problems")]
        for r in loaded
    }
    made_by = {r["submission_benchmark"]: implementation_of(r) for r in loaded}
    # every run judged again from its files, as the report, score and status judge them
    judged = {r["benchmark"]: run_verdicts.report_verdicts(r) for r in loaded}
    scored = [(r, run, v) for r in loaded for run, v in zip(r["runs"], judged[r["benchmark"]], strict=True) if run["in_scored_window"]]
    power_refused = {Path(v.result_file): "; ".join(v.power_problems) for _, _, v in scored if v.power_refused}
    org_dir = build(out, org, division, system, description, runs, made_by, leave_power_out=set(power_refused))
    verdict = check(org_dir, ruleset, out / "checker_logs")
    not_valid = [f"{r['benchmark']}: {reason}" for r in loaded for reason in r["valid_submission_reasons"]]
    not_valid += [f"{r['benchmark']}: {line}" for r in loaded for line in run_verdicts.disagreements(r, judged[r["benchmark"]])]
    left = [(r["benchmark"], run["index"], power_refused.get(Path(v.result_file))) for r, run, v in scored]
    not_valid += [f"{name}: run {index}'s power logs left out: {why}" for name, index, why in left if why]
    not_valid = list(dict.fromkeys(not_valid))
    verdict["runs"] = {
        r["benchmark"]: [
            {"index": run["index"], "verdict": v.outcome, "reason": v.reason, "power_problems": v.power_problems}
            for run, v in zip(r["runs"], judged[r["benchmark"]], strict=True)
        ]
        for r in loaded
    }
    verdict["valid_for_submission"] = verdict["passed"] and not not_valid
    verdict["not_valid_because"] = not_valid
    verdict["division"] = division
    verdict["left_out"] = left_out
    verdict["files"] = manifest(org_dir, check_out.parent)  # what was checked: a later change makes the workflow package again
    label = out / "NOT_FOR_SUBMISSION.txt"
    if not_valid:
        label.write_text("This package is not valid for submission:\n" + "\n".join(f"- {reason}" for reason in not_valid) + "\n")
    else:
        label.unlink(missing_ok=True)
    check_out.write_text(json.dumps(verdict, indent=2) + "\n")
    return org_dir, verdict
