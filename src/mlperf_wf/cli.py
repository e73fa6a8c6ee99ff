"""mlperf-wf: check a config, size and preflight a full-scale plan, follow and score a campaign, and the steps the
workflow's rules run.

Each subcommand is a typed function of plain arguments, so tests call the same
code without Snakemake. Errors the user can act on print as one line
(``mlperf-wf: error: ...``) and exit 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import json
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mlperf_wf import __version__
from mlperf_wf.acquire.verify import STAMPS_NAME
from mlperf_wf.config.checkout import project_root
from mlperf_wf.errors import ConfigError, UserError
from mlperf_wf.kinds import DEFAULT_PREPARATION, Outcome, Scale, Verdict
from mlperf_wf.run import rehearse

if TYPE_CHECKING:
    from mlperf_wf.acquire.download import DownloadRecord
    from mlperf_wf.config.registry import DatasetDef
    from mlperf_wf.run.mllog_utils import Submission

# Subcommands import what they use when they run: `mlperf-wf verify` must not pay for
# torch, pandas or mlperf-logging at start-up (it is meant to return in milliseconds).

log = logging.getLogger("mlperf_wf")


def cmd_mirror(dataset: str, out: Path) -> None:
    """Generate the tiny stand-in of ``dataset`` as a mirror at ``out`` in its protocol's layout (R2 or hub)."""
    from mlperf_wf.acquire.mirror import generate_tiny_mirror
    from mlperf_wf.config.registry import load_dataset

    paths = generate_tiny_mirror(load_dataset(dataset), out)
    log.info("mirror of %s written: %s", dataset, paths.data)


@dataclass(frozen=True)
class HubOptions:
    """``mlperf-wf download``'s hub flags; None takes the catalog's value."""

    endpoint: str | None = None
    repository: str | None = None
    repository_type: str | None = None
    revision: str | None = None

    def given(self) -> bool:
        return any(value is not None for value in asdict(self).values())


def _download_from_hub(definition: DatasetDef | None, dest: Path, options: HubOptions, jobs: int) -> DownloadRecord:
    """A hub repository at a pinned commit; the catalog's pins apply when its own endpoint, repository and commit are used."""
    from mlperf_wf.acquire.hub import HubRepo, download_hub_dataset

    source = definition.source if definition else None
    repository = options.repository or (source and source.repository)
    revision = options.revision or (source and source.revision)
    if not repository or not revision:
        raise ConfigError("download: a hub repository needs --dataset (a catalog id) or --repository OWNER/NAME with --revision COMMIT")
    repo = HubRepo(
        endpoint=options.endpoint or (source.endpoint if source else "https://huggingface.co"),
        repository=repository,
        repository_type=options.repository_type or (source.repository_type if source else "dataset"),
        revision=revision,
    )
    catalog = source is not None and (repo.endpoint, repo.repository, repo.repository_type, repo.revision) == (
        source.endpoint,
        source.repository,
        source.repository_type,
        source.revision,
    )
    wanted = definition.wanted if definition else (lambda _path: True)
    return download_hub_dataset(
        repo, dest, wanted=wanted, pinned=definition.files if catalog else None, jobs=jobs, catalog_endpoint=source.endpoint if source else None
    )


def _receive_fiftyone(definition: DatasetDef | None, dest: Path, source: str | None, expect: str, jobs: int) -> DownloadRecord:
    """A FiftyOne fetch folder, checked against the catalog's counts and pins (``expect catalog``) or the tiny mirror's."""
    from mlperf_wf.acquire.fiftyone import ZooExpectations, receive_zoo_dataset

    if definition is None or definition.source.protocol != "fiftyone":
        raise ConfigError(
            f"download: --source is the fiftyone protocol's flag; give --dataset with a fiftyone catalog id (got {definition.id if definition else 'none'})"
        )
    if not source:
        raise ConfigError(f"download: {definition.id} is received from the folder its fetch wrote: give --source file:FOLDER. {definition.source.instructions}")
    where = f"config/datasets/{definition.id}.yaml"
    if expect == Scale.TINY:
        if definition.tiny is None or not definition.tiny.splits:
            raise ConfigError(f"{where}: --expect tiny needs tiny.splits (the tiny mirror's images per split)")
        expected = ZooExpectations(definition.tiny.splits, definition.source.labels_file, tuple(definition.tiny.files), f"{where} tiny.splits/tiny.files")
    elif expect == "catalog":
        expected = ZooExpectations(definition.source.splits, definition.source.labels_file, tuple(definition.files), f"{where} source.splits/files")
    else:
        raise ConfigError(f"download: --expect {expect!r}: allowed catalog (the published dataset) or tiny (its tiny mirror)")
    return receive_zoo_dataset(source, dest, expected, definition.source.instructions or "", jobs)


def cmd_download(
    dataset: str | None,
    dest: Path,
    uri: str | None,
    md5: str | None,
    url_list: Path | None,
    jobs: int,
    hub: HubOptions | None = None,
    source: str | None = None,
    expect: str = "catalog",
) -> None:
    """Download into ``dest``: a catalog dataset (R2 or hub; its source unless flags override it), any R2 ``--uri``,
    any hub ``--repository`` at a ``--revision``, or a ``--url-list``."""
    from mlperf_wf.acquire.download import ACCESS_REFUSED, download_dataset, download_url_list
    from mlperf_wf.config.registry import load_dataset
    from mlperf_wf.errors import DownloadError

    hub = hub or HubOptions()
    definition = load_dataset(dataset) if dataset else None
    protocol = definition.source.protocol if definition else None
    if protocol == "fiftyone" or source:
        record = _receive_fiftyone(definition, dest, source, expect, jobs)
    elif url_list:
        record = download_url_list(url_list, dest, jobs=jobs)
    elif protocol == "huggingface" or (protocol is None and hub.given()):
        if uri or md5:
            raise ConfigError(f"download: --uri/--md5 are R2 flags; {dataset or 'a hub repository'} is downloaded from the Hugging Face Hub (--endpoint)")
        record = _download_from_hub(definition, dest, hub, jobs)
    else:
        if hub.given():
            raise ConfigError(f"download: --endpoint/--repository/--repo-type/--revision are hub flags; {dataset} is protocol {protocol}")
        if protocol == "external" and not uri:
            raise UserError(f"{dataset} is not on MLCommons R2 and is not downloaded by the workflow: {definition.source.instructions}")
        if protocol == "made_in_image" and not uri:
            raise UserError(
                f"{dataset} is not published: a one-off job of {definition.source.made_by}'s image makes it at full scale "
                "(the workflow's make_in_image rule, before that benchmark's runs)"
            )
        if definition is None and not uri:
            raise ConfigError("download: give --dataset (a catalog id), --uri (an R2 .uri URL), --repository with --revision (hub) or --url-list FILE")
        uri_url = uri or definition.source.uri
        md5_url = md5 or (uri_url.removesuffix(".uri") + ".md5" if uri else definition.source.md5)
        # The catalog's md5 pins describe its own source: a mirror given with --uri publishes other files.
        catalog = definition is not None and uri_url == definition.source.uri
        pinned = {f.path: f.md5 for f in definition.files if f.md5} if catalog else None
        wanted = definition.wanted if definition else (lambda _path: True)
        try:
            # The credentials go to the catalog entry's hosts (and the allowlist), never to a host only --uri names.
            catalog_urls = tuple(u for u in (definition.source.uri, definition.source.md5) if u) if definition else ()
            record = download_dataset(uri_url, md5_url, dest, wanted=wanted, pinned_md5=pinned, jobs=jobs, catalog_urls=catalog_urls)
        except DownloadError as err:
            if definition is None or ACCESS_REFUSED not in str(err):
                raise
            raise DownloadError(f"{err}. {definition.id}'s access, as the catalog says: {definition.license}") from None
    log.info("%s: %d files, %d bytes transferred in %.1f s", dest.name, len(record.files), record.bytes_transferred, record.seconds)


def cmd_verify(folder: Path, manifest: Path | None, out: Path | None, stamps: Path | None, jobs: int) -> None:
    """Check every file of ``folder`` against its md5 list, re-hashing only changed files; write the record to ``out``."""
    from mlperf_wf.acquire.verify import verify_dataset, write_record

    record = verify_dataset(folder, manifest=manifest, jobs=jobs, stamps_file=stamps)
    if out:
        write_record(record, out)
    log.info("%s: %d files, %d bytes verified, %d bytes read", folder.name, len(record.files), record.total_bytes, record.bytes_hashed)


def cmd_seal(dataset: str, folder: Path, jobs: int) -> None:
    """Seal a dataset a one-off job of a benchmark's image made: its catalog files checked, its md5 list written."""
    from mlperf_wf.acquire.made_in_image import seal

    digests = seal(dataset, folder, jobs)
    log.info("%s: %d files sealed in its md5 list", folder, len(digests))


def _role_folders(items: list[str], allowed: dict[str, str], flag: str = "--input") -> dict[str, Path]:
    """``ROLE=FOLDER`` arguments as a mapping; each role must be one the stage reads."""
    named = {}
    for item in items:
        role, sep, folder = item.partition("=")
        if not sep or role not in allowed:
            raise ConfigError(f"{flag} {item!r}: expected ROLE=FOLDER with ROLE one of {sorted(allowed)}")
        named[role] = Path(folder)
    return named


def cmd_preprocess(
    benchmark: str, scale: str, shard: str, inputs: list[str], out: Path, preparation: str = DEFAULT_PREPARATION, verified: list[str] | None = None
) -> None:
    """Write one shard of the benchmark's prepared data (by the named preparation) from ``role=folder`` inputs, each
    ``role=stamps`` of ``verified`` first checked against what its verification read."""
    from mlperf_wf.acquire import prepare
    from mlperf_wf.acquire.verify import check_unchanged
    from mlperf_wf.config.registry import SHARDS_ROLE, load_benchmark

    bench = load_benchmark(benchmark)
    prepare.check_preparation(bench, preparation, key="--preparation")
    known = prepare.shard_names(bench, scale, preparation)
    if shard not in known:
        raise ConfigError(f"--shard {shard!r}: {benchmark} at scale {scale} (preparation {preparation}) has shards {', '.join(known)}")
    allowed = bench.roles_for("prepare", preparation)
    if prepare.shard_inputs(bench, shard, scale, preparation):
        allowed = {**allowed, SHARDS_ROLE: ""}
    named = _role_folders(inputs, allowed)
    for role, stamps in _role_folders(verified or [], {role: "" for role in named if role != SHARDS_ROLE}, "--verified").items():
        if check_unchanged(named[role], stamps):
            log.info("%s: files written since its verification were read again and match their md5", named[role])
    try:
        summary = prepare.make_shard(bench, preparation, shard, named, out, scale)
    except OSError as err:
        if err.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        raise UserError(prepare.full_disk_message(err, benchmark, shard, out)) from None
    log.info("%s shard %s prepared: %s", benchmark, shard, json.dumps(summary))


def cmd_assemble(benchmark: str, scale: str, shards: Path, out: Path, preparation: str = DEFAULT_PREPARATION) -> None:
    """Link the benchmark's shards into the tree its trainer (or reference container) reads."""
    from mlperf_wf.acquire import prepare
    from mlperf_wf.config.registry import load_benchmark

    bench = load_benchmark(benchmark)
    prepare.check_preparation(bench, preparation, key="--preparation")
    links = prepare.assemble(prepare.module(bench, preparation).layout(scale), shards, out)
    log.info("%s: %d files linked into %s", benchmark, links, out)


def cmd_check_prepared(prepared: Path) -> None:
    """Refuse (one line) a prepared tree that changed since it was assembled; a train job runs this first."""
    from mlperf_wf.acquire import prepare

    if not prepared.is_dir():
        raise UserError(f"{prepared}: no prepared tree here")
    if not prepare.stamps_file(prepared).is_file():  # assembled by an earlier version: recorded as it is now
        prepare.write_stamps(prepared)
        log.info("%s: no stamps yet; recorded as it is now", prepared)
        return
    changed, moved = prepare.changed_since_prepared(prepared)
    if moved:  # copied or moved whole (rsync -a, a restore), or its files linked again elsewhere: recorded as it is now
        prepare.write_stamps(prepared)
        log.info("%s: copied, moved or linked again elsewhere since it was prepared, its bytes untouched; stamps renewed", prepared)
    if changed:
        first = prepared / changed[0].rsplit(": ", 1)[0]
        linked = first.exists() and first.stat().st_nlink > 1
        also = (
            "; it is also a hard link of another file (a downloaded one: to re-check that dataset too, delete its "
            "resources/<scale>/verified/<dataset>.json before rerunning)"
            if linked
            else ""
        )
        raise UserError(
            f"{prepared}/{changed[0]} since it was prepared ({len(changed)} files in all); nothing was run: delete {prepared} "
            "and rerun snakemake: assembling it again checks every shard against the md5s recorded when it was made, and a "
            f"changed shard is set aside and made again{also}"
        )


def cmd_train(
    benchmark: str,
    run: int,
    seed: int,
    data: Path,
    inputs: list[str],
    result: Path,
    ruleset: str,
    submission: Submission,
    threads: int,
    overrides: str | None,
) -> None:
    """One tiny-scale training run of ``benchmark``, logging to ``result``."""
    import platform

    from mlperf_wf.config import hyperparameters, mlperf_rules
    from mlperf_wf.config.registry import benchmark_module, load_benchmark
    from mlperf_wf.run.harness import RunSpec, TinyRun

    bench = load_benchmark(benchmark)
    try:
        changes = json.loads(overrides) if overrides else {}
    except json.JSONDecodeError as err:
        raise ConfigError(f"--hyperparameters {overrides!r}: not JSON ({err.msg})") from None
    hp = hyperparameters.resolve(bench, changes, source="--hyperparameters")
    targets = mlperf_rules.run_targets(bench, ruleset, submission.division, Scale.TINY)
    target = targets[0]
    spec = RunSpec(
        benchmark=benchmark,
        submission_benchmark=bench.submission_benchmark,
        data_dir=data,
        result_file=result,
        seed=seed,
        target=target.value,
        target_comparison=target.comparison,
        metric_targets=tuple(targets) if target.metric else (),
        ruleset=ruleset,
        submission=submission,
        config_filename=f"mlperf_wf/benchmarks/{benchmark}/hyperparameters.py",
        inputs=_role_folders(inputs, bench.roles_for("train")),
        threads=threads,
    )
    log.info("run %d on host %s", run, platform.node())
    with TinyRun(spec, hp) as tiny_run:
        summary = benchmark_module(bench, "trainer").train(tiny_run, hp)
    log.info("run %d (seed %d): %s", run, seed, json.dumps({k: v for k, v in summary.items() if k != "history"}))


def cmd_check(import_modules: bool, configfiles: list[Path] | None = None, profile: str | None = None) -> int:
    """Validate every benchmark and dataset definition; print each problem on one line. With ``configfiles`` or
    ``profile``, check those instead: what Snakemake reads before the workflow's code runs (the pre-check)."""
    if configfiles or profile:
        from mlperf_wf.config import config_check
        from mlperf_wf.config.workflow_config import CONFIG_FILE

        for configfile in configfiles or []:
            config_check.check_configfile(configfile, CONFIG_FILE)
            print(f"{configfile}: valid (merged over {CONFIG_FILE})")
        if profile:
            print(f"{config_check.check_profile(profile)}: valid")
        return 0
    from mlperf_wf.config import registry

    problems = registry.check_all(import_modules=import_modules)
    for problem in problems:
        print(f"mlperf-wf: error: {problem}", file=sys.stderr)
    if not problems:
        print(f"{len(registry.benchmark_names())} benchmarks and {len(registry.dataset_ids())} datasets: definitions valid")
    return 2 if problems else 0


def cmd_config_files(check_only: bool) -> int:
    """Write (or with ``check_only`` compare) every file generated from the typed config model."""
    from mlperf_wf.config import workflow_config

    root = project_root()
    stale = workflow_config.stale_files(root)
    if check_only:
        for path in stale:
            print(f"mlperf-wf: error: {path}: differs from src/mlperf_wf/config/workflow_config.py; run mlperf-wf config-files", file=sys.stderr)
        return 1 if stale else 0
    for path, text in workflow_config.generated_files(root).items():
        if path in stale:
            path.write_text(text)
            print(f"wrote {path}")
    return 0


def cmd_compliance(
    result: Path | str | None,
    ruleset: str,
    out: Path,
    benchmark: str | None = None,
    scale: str | None = None,
    seed: int | None = None,
    division: str | None = None,
    provenance: Path | None = None,
) -> None:
    """Run the official compliance checker on ``result``; fail unless it passed (or only missed the target, or
    failed only on the open rules the benchmark's tiny tier declares it does not meet: ``passed_except_declared``).

    The verdict is written to ``out`` whatever happens, also when the checker itself crashed on the log.
    """
    from mlperf_wf.config import registry
    from mlperf_wf.results import compliance as compliance_mod

    if result is None:
        raise UserError("compliance: give the result file (RESULT or --result RESULT)")
    result = Path(result)
    identity = None
    if seed is not None or division is not None or provenance is not None:
        if benchmark is None:
            raise UserError("compliance: --seed, --division and --provenance need --benchmark")
        written = json.loads(provenance.read_text()).get("result_sha256") if provenance is not None else None
        identity = compliance_mod.RunIdentity(registry.load_benchmark(benchmark).submission_benchmark, division, seed, written)
    verdict = compliance_mod.check(result, ruleset, declared=registry.declared_open_rules(benchmark, scale), identity=identity)
    compliance_mod.write(verdict, out)
    if verdict.verdict == Verdict.FAILED:
        detail = "; ".join(verdict.problems or verdict.messages[:3]) or f"checker exit code {verdict.returncode}"
        raise UserError(f"{result}: compliance check ({ruleset}) FAILED: {detail}")
    log.info("%s: %s", result, verdict.verdict)


def cmd_report(
    benchmark: str,
    ruleset: str,
    division: str,
    scale: str,
    platform: str,
    results: list[Path],
    verdicts: list[Path],
    provenance: list[Path],
    out: Path,
    expected_identity: Path | None = None,
) -> None:
    """Write the time-to-train report of ``benchmark`` from its runs (``--result`` i is run i); with
    ``expected_identity`` (``identity.json``), a run made with another campaign identity is refused by name."""
    from mlperf_wf.config import mlperf_rules as rules
    from mlperf_wf.config.registry import declared_open_rules, load_benchmark
    from mlperf_wf.results import compliance as compliance_mod
    from mlperf_wf.results import report as report_mod
    from mlperf_wf.run import identity

    if len(results) != len(verdicts):
        raise ConfigError(f"--result given {len(results)} times but --compliance {len(verdicts)} times")
    checked = [compliance_mod.read(v) for v in verdicts]
    for result, verdict_file, verdict in zip(results, verdicts, checked, strict=True):
        now = compliance_mod.file_sha256(result)
        if now != verdict.sha256:
            then = f"sha256 {verdict.sha256[:12]} was checked" if verdict.sha256 else "its verdict records no digest"
            raise UserError(
                f"{result}: not the log its compliance check read (sha256 {now[:12]} now, {then}); nothing is scored: "
                f"delete {verdict_file} and rerun to check it again, or delete the run's folder to redo the run"
            )
    bench = load_benchmark(benchmark)
    report = report_mod.build(
        benchmark=benchmark,
        submission_benchmark=bench.submission_benchmark,
        ruleset=ruleset,
        division=division,
        scale=scale,
        platform=platform,
        quality_target=rules.report_target(rules.run_targets(bench, ruleset, division, scale)),
        required=rules.required_runs(bench.submission_benchmark),
        results=results,
        verdicts=[v.verdict for v in checked],
        declared=declared_open_rules(benchmark, scale),
        provenance=[identity.read_provenance(p) or {} for p in provenance] if provenance else None,
        provenance_files=provenance or None,
        expected_identity=identity.read_expected(expected_identity) if expected_identity is not None else None,
        identity_source=str(expected_identity or identity.IDENTITY_FILE),
    )
    report_mod.write(report, out)
    log.info("%s: time to train %s min over runs %s", benchmark, report.score["time_to_train_minutes"], report.score["counted_runs"])


def cmd_plot(report: Path, out_dir: Path, reference_logs: Path | None = None) -> None:
    """Per-benchmark figures (time to train per run, convergence curves) as PNG and SVG."""
    from mlperf_wf.results import plots

    if reference_logs is not None and not reference_logs.is_dir():
        raise ConfigError(f"--reference-logs: {reference_logs} is not a folder; give a folder of :::MLLOG logs (searched recursively)")
    for path in plots.benchmark_figures(report, out_dir, reference_logs):
        log.info("wrote %s", path)


def cmd_overview(report: Path, figures: list[Path], out: Path) -> None:
    """The benchmark's page of the HTML report (``results/overview.py``)."""
    from mlperf_wf.results import overview

    log.info("wrote %s", overview.write(report, figures, out))


def cmd_summary(reports: list[Path], package_checks: list[Path], csv_out: Path, figure: Path) -> None:
    """``summary.csv`` and the cross-benchmark figure."""
    from mlperf_wf.results import plots

    frame = plots.summary(reports, csv_out, figure, package_checks)
    log.info("summary of %d benchmarks written to %s", len(frame), csv_out)


def cmd_package(reports: list[Path], org: str, system: str, ruleset: str, division: str, out: Path, check_out: Path) -> int:
    """Build the submission package from the reports' scored runs and run the official checkers on it."""
    from mlperf_wf.results import package
    from mlperf_wf.results import verdict as run_verdicts

    description = package.load_system(system)
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
    made_by = {r["submission_benchmark"]: package.implementation_of(r) for r in loaded}
    # every run judged again from its files, as the report, score and status judge them
    judged = {r["benchmark"]: run_verdicts.report_verdicts(r) for r in loaded}
    scored = [(r, run, v) for r in loaded for run, v in zip(r["runs"], judged[r["benchmark"]], strict=True) if run["in_scored_window"]]
    power_refused = {Path(v.result_file): "; ".join(v.power_problems) for _, _, v in scored if v.power_refused}
    org_dir = package.build(out, org, division, system, description, runs, made_by, leave_power_out=set(power_refused))
    verdict = package.check(org_dir, ruleset, out / "checker_logs")
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
    verdict["files"] = package.manifest(org_dir, check_out.parent)  # what was checked: a later change makes the workflow package again
    label = out / "NOT_FOR_SUBMISSION.txt"
    if not_valid:
        label.write_text("This package is not valid for submission:\n" + "\n".join(f"- {reason}" for reason in not_valid) + "\n")
    else:
        label.unlink(missing_ok=True)
    check_out.write_text(json.dumps(verdict, indent=2) + "\n")
    log.info("package %s: package checker %s", org_dir, "passed" if verdict["package_checker"]["passed"] else "found errors")
    return 0


def cmd_extract(archive: Path, dest: Path) -> None:
    """Extract a tar archive into ``dest``, refusing members that would escape it."""
    from mlperf_wf.acquire.archive import safe_extract

    names = safe_extract(archive, dest)
    log.info("%s: %d members extracted into %s", archive.name, len(names), dest)


def cmd_bundle_export(names: list[str], scale: str, out: Path, configfiles: list[Path], wheels_from: list[Path], squashfs: bool | None) -> None:
    """Write the offline bundle of ``names`` (``mlperf_wf.plan.bundle``) and print what the other side types."""
    from mlperf_wf.config.workflow_config import merge_config
    from mlperf_wf.plan import bundle
    from mlperf_wf.results import status

    config = status.load_config(Path.cwd(), [])
    for configfile in configfiles:
        merge_config(config, _read_configfile(configfile))
    merge_config(config, {"benchmarks": names, "scale": scale})
    digest = bundle.export(Path.cwd(), project_root(), out, config, wheels_from, squashfs)
    print(f"bundle: {out} ({bundle.BUNDLE_FILE} {digest})")
    print(f"on the site: mlperf-wf --root WORKFLOW_FOLDER bundle import {out} --expect {digest}")


def cmd_bundle_import(source: Path, images: Path | None, docker: bool, expect: str | None, sif: bool | None) -> None:
    """Check an offline bundle, place its images and datasets and write ``config/site.yaml``."""
    from mlperf_wf.plan import bundle

    site = bundle.import_bundle(source, Path.cwd(), images or Path.cwd() / "resources" / "images", docker, expect, sif)
    if site is None:
        print(f"bundle: every file of {source} matches {bundle.BUNDLE_FILE}; its datasets are placed (it carries no image)")
    else:
        print(f"bundle: every file of {source} matches {bundle.BUNDLE_FILE}; the plan now starts the local images ({site})")


def _role_paths(items: list[str]) -> dict[str, tuple[Path, Path]]:
    found = {}
    for item in items:
        role, sep, paths = item.partition("=")
        folder, colon, record = paths.partition(":")
        if not (sep and colon and role and folder and record):
            raise UserError(f"--input {item!r}: expected ROLE=FOLDER:VERIFICATION_RECORD")
        found[role] = (Path(folder), Path(record))
    return found


def cmd_node_check(args: argparse.Namespace) -> int:
    """``probe``: check this node into ``--out``; ``verdict``: read every node's record, fail naming the bad ones."""
    from mlperf_wf.run import node_check

    if args.node_check_command == "probe":
        record = node_check.probe(
            args.out,
            args.nodes,
            node_check.environment_rank(),
            args.master_addr,
            args.port,
            args.prepared,
            _role_paths(args.input),
            args.matrix_size,
            args.matmul_tflops,
            args.allreduce_gbps,
            args.timeout,
            args.gpu_matmul_tflops,
        )
        print(f"node check of {record['host']}: {record['problem'] or 'passed'}", file=sys.stderr)
        return 1 if record["problem"] else 0
    passed, message, _ = node_check.verdict(args.out, [host for host in args.hosts.split(",") if host], args.excluded)
    print(f"mlperf-wf: {message}", file=sys.stderr)
    return 0 if passed else 1


def cmd_provenance(
    out: Path,
    scale: str,
    launcher: str,
    image: str | None,
    command: str,
    result: Path | None = None,
    consumed: list[Path] | None = None,
    node_checks: Path | None = None,
    config: str = "",
) -> None:
    """Write what a run was made with next to its log (and the digest of the log, which compliance and report check),
    with every attempt's node check where the run had one; ``config``: the benchmark's resolved config (JSON), as the
    plan gave it to the job (part of the run's campaign identity)."""
    from mlperf_wf.run import node_check, provenance

    try:
        resolved = json.loads(config) if config else None
    except ValueError as err:
        raise UserError(f"provenance: --config {config[:80]!r}: not JSON ({err}); give the object the plan makes") from None
    if resolved is not None and not isinstance(resolved, dict):
        raise UserError(f"provenance: --config {config[:80]!r}: a JSON object is expected")

    if result is not None and not result.is_file():
        raise UserError(f"provenance: --result {result}: no such file (the run wrote no log)")
    try:
        checkout = project_root()
    except ConfigError:
        checkout = None  # recorded as an unknown commit: a run is not failed for where the workflow was installed
    record = provenance.collect(scale, launcher, image or None, command, checkout, result, consumed, resolved)
    if node_checks is not None and str(node_checks) not in ("", "."):
        record["node_checks"] = node_check.attempts(node_checks)
    provenance.write(out, record)


def cmd_identity(identity_json: str, out: Path) -> None:
    """Write the campaign identity of a benchmark's set (``identity.json``), checked against its model."""
    from pydantic import ValidationError

    from mlperf_wf.run import identity

    try:
        made = identity.CampaignIdentity.model_validate_json(identity_json)
    except ValidationError as err:
        raise UserError(f"identity: --json: not a campaign identity ({err.errors()[0]['loc']}: {err.errors()[0]['msg']})") from None
    identity.write_expected(made, out)


def cmd_size(
    benchmark: str,
    nodes: int,
    gpus_per_node: int,
    ruleset: str,
    gbs: int | None,
    throughput: float | None,
    throughput_from: Path | None = None,
    accelerator: str | None = None,
    gpu_memory_gib: float | None = None,
) -> int:
    """The global batch sizes a system can run, their RCP coverage and, for the chosen one, the RCP's hyperparameters,
    the split and a walltime (``mlperf_wf.plan.sizing.size_report``); the throughput given, or measured on a finished run's
    log made on this system (``--throughput-from``)."""
    from mlperf_wf.config import mlperf_rules, registry
    from mlperf_wf.plan import sizing

    if benchmark not in registry.benchmark_names():
        raise ConfigError(f"size: --benchmark {benchmark!r} is not a benchmark; known: {', '.join(registry.benchmark_names())}")
    for flag, value in (("--nodes", nodes), ("--gpus-per-node", gpus_per_node), ("--gbs", gbs or 1), ("--throughput", throughput or 1)):
        if value <= 0:
            raise ConfigError(f"size: {flag} {value} must be positive")
    bench = registry.load_benchmark(benchmark)
    resolved = mlperf_rules.resolve_ruleset(bench.submission_benchmark, ruleset)
    if throughput_from is not None:
        from mlperf_wf.results.status import measured_throughput

        throughput = measured_throughput(throughput_from, bench, nodes * gpus_per_node)
        print(f"measured on {throughput_from}: {throughput:.4g} samples/s per GPU (run_start to its last evaluation)")
    print("\n".join(sizing.size_report(bench, resolved, nodes, gpus_per_node, gbs, throughput, accelerator, gpu_memory_gib)))
    return 0


def cmd_system_probe(name: str, nodes: int, out: Path | None, nvlink_domain_nodes: int = 1) -> int:
    """Read this node's hardware (``mlperf_wf.config.system.probe``) into ``config/systems/<name>.yaml``: a new file
    gets every field a probe can fill, an existing one only its ``hardware`` section (what the submitter wrote stays)."""
    from mlperf_wf.config import system

    target = out or Path("config") / "systems" / f"{name}.yaml"
    hardware = system.probe(nodes, nvlink_domain_nodes=nvlink_domain_nodes)
    if target.is_file():
        description = system.read_system(target).model_copy(update={"hardware": hardware})
        what = "its hardware section replaced"
    else:
        description = system.describe(hardware, name, system.operating_system())
        what = "written; set status, networking, storage, framework and the software stack before packaging"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(system.description_text(description))
    print(f"{target}: {hardware.in_words()} ({what})")
    return 0


def cmd_preflight(benchmarks: list[str], image: str | None, platform: str | None, config_overrides: list[str], configfiles: list[Path]) -> int:
    """Every problem of a full-scale plan at once (``mlperf_wf.plan.preflight``), one line each; 2 when there is any.

    With ``--image`` or ``--platform``: the checks of one train job on its node (the plan's own job line runs them), for
    its one ``--benchmark``. Otherwise the full-scale plan of the config (``config/config.yaml``, each ``--configfile``,
    then ``--config`` values, as Snakemake merges them) for the ``--benchmark`` given, or the config's benchmarks.
    """
    from mlperf_wf.config.workflow_config import merge_config
    from mlperf_wf.plan import preflight
    from mlperf_wf.results import status

    if image is not None or platform is not None:
        if len(benchmarks) != 1:
            raise ConfigError("preflight: --image/--platform check one train job: give exactly one --benchmark")
        problems = preflight.run_problems(benchmarks[0], image, platform)
        what = f"the train job of {benchmarks[0]}"
    else:
        logging.getLogger().setLevel(logging.WARNING)
        config = status.load_config(Path.cwd(), [])
        for configfile in configfiles:
            merge_config(config, _read_configfile(configfile))
        merge_config(config, _overrides(config_overrides))
        names = benchmarks or list(config["benchmarks"])
        problems = preflight.config_problems(config, project_root(), Path.cwd(), names)
        what = f"the full-scale plan of {', '.join(names)}"
    if problems:
        print(f"mlperf-wf: error: {preflight.describe(problems, what)}", file=sys.stderr)
        return 2
    print(f"preflight: no problem in {what}")
    return 0


def _read_configfile(path: Path) -> dict:
    from mlperf_wf.config.registry import read_yaml

    if not path.is_file():
        raise ConfigError(f"--configfile {path}: no such file")
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(f"--configfile {path}: expected a mapping of config keys")
    return data


def _overrides(items: list[str]) -> dict:
    """``KEY=VALUE`` words as Snakemake's ``--config`` reads them (values as YAML)."""
    import yaml

    values = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--config {item!r}: expected KEY=VALUE, as given to snakemake --config")
        values[key] = yaml.safe_load(value)
    return values


def _recorded_ruleset(path: Path) -> str:
    """The ruleset the workflow's ``report.json`` in ``path`` (or in its benchmark folders) records; one line when
    none does or they differ."""
    rulesets: dict[str, list[Path]] = {}
    for report in [path / "report.json", *sorted(path.glob("*/report.json"))]:
        try:
            recorded = json.loads(report.read_text()).get("ruleset")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(recorded, str) and recorded:
            rulesets.setdefault(recorded, []).append(report)
    if not rulesets:
        raise UserError(f"score: no report.json under {path} records the ruleset; give --ruleset (e.g. 6.1.0)")
    if len(rulesets) > 1:
        raise UserError(f"score: the reports under {path} record rulesets {', '.join(sorted(rulesets))}; give --ruleset, or score each benchmark's folder")
    ((ruleset, reports),) = rulesets.items()
    print(f"mlperf-wf: score: ruleset {ruleset} (from {reports[0]})", file=sys.stderr)
    return ruleset


def cmd_score(path: Path, ruleset: str | None, json_out: Path | None, csv_out: Path | None, jobs: int | None, rcp_bypass: bool) -> int:
    """Score every (system, benchmark) under ``path`` under ``ruleset`` (default: the one its ``report.json``
    records); exit 1 when any result is invalid.

    Below each benchmark's line, every run that did not pass gets its own: its verdict and what is missing or wrong.
    """
    import pandas as pd

    from mlperf_wf.config import mlperf_rules as rules
    from mlperf_wf.results import scoring, verdict

    ruleset = ruleset or _recorded_ruleset(path)
    allowed = rules.allowed_benchmarks(ruleset)
    for folder in scoring.discover(path):  # a benchmark of another round: one line, not a failed check per run
        if folder.benchmark not in allowed:
            try:
                rounds = ", ".join(rules.rulesets_of(folder.benchmark))
            except ConfigError:
                continue  # a name mlperf-logging does not know: the checker says so for each run
            raise UserError(f"--ruleset {ruleset}: {folder.benchmark} ({folder.folder}) is not part of that round; its rounds: {rounds}")
    scores = scoring.score_paths(path, ruleset, verdict.judged_score, jobs=jobs, rcp_bypass=rcp_bypass)
    rows = scoring.to_rows(scores)
    if json_out:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(scoring.to_json(scores), indent=2) + "\n")
    if csv_out:
        csv_out.parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(rows).to_csv(csv_out, index=False)
    for score in scores:
        ttt = f"{score.time_to_train:.4f} min" if score.time_to_train is not None else "no score"
        rcp = f", RCP {score.rcp.verdict}" if score.rcp else ""
        factor = f", x{score.scaling_factor:.6g} ({score.scaling_source})" if score.scaling_factor != 1.0 else ""
        energy = f", energy {score.energy_joules:.6g} J" if score.energy_joules is not None else ""
        energy += f" (no energy score: {'; '.join(score.energy_reasons)})" if score.energy_reasons else ""
        print(
            f"{score.system}/{score.benchmark}: {ttt}{factor}{rcp}{energy}, {len(score.runs)} runs"
            + ("" if score.valid else f" INVALID: {'; '.join(score.reasons)}")
        )
        if any(run.power_folder for run in score.runs):
            label = {run.file: f"run {Path(run.file).parent.name}" if Path(run.file).name == "result.txt" else Path(run.file).name for run in score.runs}
            joules = [f"{label[run.file]} {run.energy_joules:.6g} J" if run.energy_joules is not None else f"{label[run.file]} none" for run in score.runs]
            print(f"  energy to train per run: {', '.join(joules)}")
        for run in score.runs:
            if run.outcome != Outcome.PASSED or run.verdict != Verdict.PASSED or run.minutes is None:
                why = run.problems or [m.splitlines()[0] for m in run.messages[:3] if m.strip()]
                said = run.verdict if run.outcome == Outcome.PASSED else run.outcome or run.verdict or "failed"
                print(f"  {_run_name(run.file, score.folder)}: {said}" + (f": {'; '.join(why)}" if why else ""))
            if run.power_problems and run.energy_joules is None and run.outcome == Outcome.PASSED:
                print(f"  {_run_name(run.file, score.folder)}: power logs refused (no energy from them): {'; '.join(run.power_problems)}")
    return 0 if all(s.valid for s in scores) else 1


def _run_name(file: str, folder: str) -> str:
    """A run as its folder names it: ``run 3 (runs/3/result.txt)`` for a workflow's run, else the file's path under
    the scored folder (``result_2.txt``)."""
    relative = Path(file).relative_to(folder) if Path(file).is_relative_to(folder) else Path(file)
    parts = relative.parts
    return f"run {parts[1]} ({relative})" if len(parts) == 3 and parts[0] == "runs" and parts[2] == "result.txt" else str(relative)


def cmd_power_sample(
    out_dir: Path,
    node_index: int | None,
    interval_ms: int,
    gpu_command: str | None,
    node_command: str | None,
    conversion_eff: float | None,
    stop_file: Path | None,
) -> None:
    """Sample this node's power into ``out_dir/node_<k>.txt`` (``k``: ``--node-index``, else ``$SLURM_NODEID``, else 0)
    until ``stop_file`` appears or SIGTERM."""
    from mlperf_wf.config.workflow_config import PowerConfig
    from mlperf_wf.run import power

    raw = {"enabled": True, "interval_ms": interval_ms, "node_command": node_command or "", "conversion_eff": conversion_eff}
    config = PowerConfig.from_config({**raw, **({"gpu_command": gpu_command} if gpu_command else {})})
    index = node_index if node_index is not None else int(os.environ.get("SLURM_NODEID", "0"))
    summary = power.run_sampler(config, out_dir, index, stop_file)
    mean = f"{summary.mean_watts:.1f} W mean" if summary.mean_watts is not None else "no reading"
    log.info("%s: %d readings, %s%s", summary.file, summary.readings, mean, f"; {'; '.join(summary.problems)}" if summary.problems else "")


def cmd_status(config_overrides: list[str], benchmarks: list[str], as_json: bool, watch: float | None, squeue: str) -> int:
    """Print where the campaign in the current folder stands; with ``watch``, again every ``watch`` seconds. Reads only."""
    import time

    from mlperf_wf.plan import plan as planning
    from mlperf_wf.results import status

    logging.getLogger().setLevel(logging.WARNING)  # mlperf-logging's checker reports every file at INFO
    from mlperf_wf.config import registry
    from mlperf_wf.results import invocation

    # no arguments: what the running (or the last) Snakemake invocation targets, not the config file's benchmarks
    followed = None if config_overrides or benchmarks else invocation.current(Path.cwd(), registry.benchmark_names())
    if followed is not None:
        config_overrides, benchmarks = followed.config_items(), followed.benchmarks
    config = status.load_config(Path.cwd(), config_overrides)
    plan = planning.load(config, project_root=project_root(), workdir=Path.cwd())
    runs_given = any(item.partition("=")[0] == "runs" for item in config_overrides)
    try:
        while True:
            now = status.campaign_status(Path.cwd(), config, benchmarks or None, runs_given, squeue, plan)
            if as_json:
                text = json.dumps({**status.to_json(now), "follows": dataclasses.asdict(followed) if followed else None}, indent=2)
            else:
                text = (f"{followed.describe()}\n" if followed else "") + status.render(now)
            if watch is None:
                print(text)
                return 0
            print("\033[H\033[2J" + text if sys.stdout.isatty() else text + "\n", flush=True)
            time.sleep(watch)
    except KeyboardInterrupt:  # how --watch ends, between refreshes or during one
        return 0


def cmd_campaign_gate(benchmark: str, run: int, config_file: Path) -> int:
    """Before a train job starts, with ``stop_when_doomed``: end it, not started, when its benchmark can no longer pass."""
    from mlperf_wf.results import campaign_gate

    logging.getLogger().setLevel(logging.WARNING)  # mlperf-logging's checker reports every file at INFO
    code, line = campaign_gate.gate(Path.cwd(), benchmark, run, config_file)
    print(line, flush=True)
    return code


def _positive_seconds(text: str) -> float:
    """argparse type: a number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of seconds above 0")
    return value


PEOPLE_COMMANDS = (
    "rehearse",
    "check",
    "preflight",
    "size",
    "system",
    "status",
    "score",
    "compliance",
    "download",
    "verify",
    "bundle",
    "mirror",
    "config-files",
)
"""The commands people type, listed by ``mlperf-wf --help``; the others are steps the workflow's rules run (each has
its own ``-h``), named apart at the end of the top help."""


class _PeopleFirstHelp(argparse.HelpFormatter):
    """The top help lists :data:`PEOPLE_COMMANDS` only (argparse 3.11 cannot hide a subcommand from the list)."""

    def _fill_text(self, text, width, indent):
        import textwrap

        words = " ".join(text.split())  # a command's name is never cut at its hyphen
        return textwrap.fill(words, width, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False)

    def _iter_indented_subactions(self, action):
        for subaction in super()._iter_indented_subactions(action):
            if getattr(subaction, "dest", None) in PEOPLE_COMMANDS or not isinstance(action, argparse._SubParsersAction):
                yield subaction


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mlperf-wf", description=" ".join(__doc__.split("\n\n")[0].split()), formatter_class=_PeopleFirstHelp)
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="project root holding config/ (default: current folder)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "--progress-fd",
        type=int,
        metavar="FD",
        help="also write a long step's progress lines (steps, loss) to this open file descriptor, e.g. the terminal's "
        "stderr while the log takes the rest: mlperf-wf --progress-fd 3 mirror ... 3>&2 > LOG 2>&1",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")

    p = sub.add_parser("mirror", help="generate a tiny dataset as a local mirror in its protocol's layout (R2 or Hugging Face Hub)")
    p.add_argument("--dataset", required=True)
    p.add_argument("--out", type=Path, required=True)

    p = sub.add_parser(
        "download",
        help="download a dataset: MLCommons R2 or the Hugging Face Hub at a pinned commit (parallel, resumable, checked while streaming, staged)",
        description="Download a catalog dataset with its protocol, or any R2 dataset (--uri), hub repository (--repository/--revision) or URL list. "
        "R2: every file against the published md5 list. Hugging Face Hub: the listing and every file must come from the pinned commit "
        "(X-Repo-Commit); every file against the hub's size and sha256 (LFS) or git blob id, and the catalog's sha256/size/rows pins. "
        "A file failing its checks twice is moved to <dest>/../.quarantine/; the folder is placed only when complete. "
        "Auth from the environment: MLPERF_WF_CF_ACCESS_* (R2), HF_TOKEN (hub).",
    )
    p.add_argument("--dataset", help="catalog id (config/datasets/<id>.yaml): its source, pins and excludes")
    p.add_argument("--dest", type=Path, required=True, help="the dataset folder (staged beside it, placed only when complete)")
    p.add_argument("--uri", help="R2: the .uri URL (https:// or file://); overrides the catalog's (its md5 pins then do not apply)")
    p.add_argument("--md5", help="R2: the .md5 list URL (default: beside --uri)")
    p.add_argument("--endpoint", help="hub: base URL (https://huggingface.co, a mirror, or file:ROOT of a local copy); default the catalog's")
    p.add_argument("--repository", help="hub: OWNER/NAME (default the catalog's)")
    p.add_argument("--repo-type", choices=["dataset", "model"], help="hub: repository type (default the catalog's, else dataset)")
    p.add_argument("--revision", help="hub: the 40-hex commit (default the catalog's); the catalog's pins apply only to its own endpoint and commit")
    p.add_argument("--url-list", type=Path, help="a plain list of URLs ('URL' or 'md5  URL' per line)")
    p.add_argument("--source", help="fiftyone: file:FOLDER, the folder the reference's FiftyOne fetch wrote (or the tiny mirror)")
    p.add_argument("--expect", default="catalog", help="fiftyone: whose image counts and checksums apply: catalog (default) or tiny")
    p.add_argument("--jobs", type=int, default=4, help="files downloaded at once (default 4)")

    p = sub.add_parser("bundle", help="an offline bundle for a site without network: export it here, import it there")
    bundle_sub = p.add_subparsers(dest="bundle_command", required=True)
    q = bundle_sub.add_parser(
        "export", help="pinned images (OCI archive, enroot squashfs; none needed at tiny scale), verified datasets and wheels, with sha256s"
    )
    q.add_argument("--benchmark", action="append", required=True, help="a benchmark to carry (repeatable)")
    q.add_argument("--scale", choices=("tiny", "full"), default="full")
    q.add_argument("--out", type=Path, required=True, help="a new or empty folder for the bundle (or one whose export did not finish: made again)")
    q.add_argument("--configfile", type=Path, action="append", default=[], help="a config file the campaign runs with (as snakemake's)")
    q.add_argument("--wheels-from", type=Path, action="append", default=[], help="a folder of more wheels to carry (pip download -d)")
    q.add_argument("--squashfs", action=argparse.BooleanOptionalAction, default=None, help="enroot images (default: where mksquashfs exists)")
    q = bundle_sub.add_parser("import", help="check every file of a bundle, then place its images and datasets and write config/site.yaml")
    q.add_argument("bundle", type=Path)
    q.add_argument("--images", type=Path, help="the site's image folder, on the filesystem the compute nodes share (default: resources/images)")
    q.add_argument("--docker", action="store_true", help="also load the images into this node's Docker engine (DOCKER_HOST)")
    q.add_argument("--expect", help="the sha256 of bundle.json that export printed")
    q.add_argument("--sif", action=argparse.BooleanOptionalAction, default=None, help="Apptainer SIF images (default: where apptainer exists)")

    p = sub.add_parser("node-check", help="readiness of every node of a full-scale run before it starts (a train job runs it)")
    check_sub = p.add_subparsers(dest="node_check_command", required=True)
    q = check_sub.add_parser("probe", help="check this node: all-reduce with the others, matrix multiply, the data's names and sizes, GPUs")
    q.add_argument("--out", type=Path, required=True, help="the attempt's folder (this node writes <hostname>.json)")
    q.add_argument("--nodes", type=int, required=True)
    q.add_argument("--master-addr", required=True, help="the first node of the job")
    q.add_argument("--port", type=int, required=True)
    q.add_argument("--prepared", type=Path, help="the prepared tree the run reads (checked against its stamps)")
    q.add_argument("--input", action="append", default=[], help="ROLE=FOLDER:VERIFICATION_RECORD of a dataset the run reads (repeatable)")
    q.add_argument("--matrix-size", type=int, default=8192)
    q.add_argument("--matmul-tflops", type=float, help="least TFLOPS per device measured")
    q.add_argument("--gpu-matmul-tflops", type=float, help="least TFLOPS per GPU (not applied to a CPU measurement)")
    q.add_argument("--allreduce-gbps", type=float, help="least all-reduce bus bandwidth (GB/s)")
    q.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the other nodes")
    q = check_sub.add_parser("verdict", help="every node's record of an attempt: fail naming the bad nodes, and exclude them")
    q.add_argument("--out", type=Path, required=True)
    q.add_argument("--hosts", required=True, help="comma-separated nodes of the job")
    q.add_argument("--excluded", type=Path, required=True, help="the file of excluded nodes the train rule reads")

    p = sub.add_parser("verify", help="check a dataset folder against its md5 list (only changed files are re-read)")
    p.add_argument("folder", type=Path)
    p.add_argument("--manifest", type=Path, help="md5 list ('md5  path' lines; default: FOLDER/manifest.md5)")
    p.add_argument("--out", type=Path, help="write the verification record (JSON) here")
    p.add_argument("--stamps", type=Path, help=f"stamps file (default: FOLDER/{STAMPS_NAME})")
    p.add_argument("--jobs", type=int, default=4, help="files hashed at once")

    p = sub.add_parser("preprocess", help="prepare one shard of a benchmark's data")
    p.add_argument("--benchmark", required=True)
    p.add_argument("--scale", choices=list(Scale), required=True)
    p.add_argument("--shard", required=True, help="shard name (the preprocessing module's shards(scale))")
    p.add_argument("--input", action="append", default=[], help="ROLE=FOLDER, one per dataset role (shards=FOLDER for a shard that reads earlier shards)")
    p.add_argument(
        "--verified",
        action="append",
        default=[],
        help="ROLE=STAMPS: the stamps verify wrote for that role's dataset; a file written since is read again and refused on an md5 mismatch",
    )
    p.add_argument("--preparation", default=DEFAULT_PREPARATION, help="the benchmark's preparation (benchmark.yaml preparations; default: its prepare.py)")
    p.add_argument("--out", type=Path, required=True)

    p = sub.add_parser("assemble", help="link a benchmark's prepared shards into the tree its trainer reads")
    p.add_argument("--benchmark", required=True)
    p.add_argument("--scale", choices=list(Scale), required=True)
    p.add_argument("--shards", type=Path, required=True, help="folder holding the shard folders")
    p.add_argument("--preparation", default=DEFAULT_PREPARATION, help="the benchmark's preparation the shards come from")
    p.add_argument("--out", type=Path, required=True)

    p = sub.add_parser("train", help="one tiny-scale training run")
    p.add_argument("--benchmark", required=True)
    p.add_argument("--run-index", type=int, required=True, dest="run", help="index of the run (its seed is chosen by the caller)")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--data", type=Path, required=True, help="the prepared dataset tree")
    p.add_argument("--input", action="append", default=[], help="ROLE=FOLDER, one per input role the runs read (e.g. checkpoint)")
    p.add_argument("--result", type=Path, required=True)
    p.add_argument("--ruleset", required=True)
    p.add_argument("--org", required=True)
    p.add_argument("--platform", required=True)
    p.add_argument("--division", choices=["closed", "open"], required=True)
    p.add_argument("--status", required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--hyperparameters", help="JSON object of overrides of the benchmark's tiny hyperparameters")

    p = sub.add_parser("check", help="validate every benchmark and dataset definition (one line per problem)")
    p.add_argument("--import-modules", action="store_true", help="also import every benchmark and generator module (slow: torch)")
    p.add_argument("--configfile", type=Path, action="append", help="instead, pre-check a config file given to snakemake --configfile (repeatable)")
    p.add_argument("--profile", help="instead, pre-check a snakemake --profile (its name or folder)")

    p = sub.add_parser(
        "config-files",
        help="write the config schema, config/config.yaml and config/README.md's table from the typed config model "
        "(src/mlperf_wf/config/workflow_config.py); --check only says which differ",
    )
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 naming each file that differs from the model")

    p = sub.add_parser("plot", help="figures of one benchmark's report")
    p.add_argument("report", type=Path)
    p.add_argument("--out-dir", type=Path, required=True)
    p.add_argument(
        "--reference-logs",
        type=Path,
        help="folder of reference convergence logs (e.g. the reference's RCP runs; compliance not needed) drawn beside the runs",
    )

    p = sub.add_parser("overview", help="one benchmark's page of the HTML report: score, ruleset, runs with verdicts, RCP, figures")
    p.add_argument("report", type=Path)
    p.add_argument("--figure", type=Path, action="append", default=[], help="an SVG figure shown inline (repeatable)")
    p.add_argument("--out", type=Path, required=True)

    p = sub.add_parser("summary", help="summary.csv and figure across benchmarks")
    p.add_argument("reports", type=Path, nargs="+")
    p.add_argument(
        "--package-check", type=Path, action="append", default=[], help="package_check.json of a submission package (repeatable: one per round and division)"
    )
    p.add_argument("--csv", type=Path, required=True, dest="csv_out")
    p.add_argument("--figure", type=Path, required=True, help="output stem; .png and .svg are written")

    p = sub.add_parser("package", help="submission package of the scored runs, checked by the official checkers")
    p.add_argument("reports", type=Path, nargs="+")
    p.add_argument("--org", required=True)
    p.add_argument("--system", required=True, help="system name; its description is config/systems/<system>.yaml")
    p.add_argument("--ruleset", required=True)
    p.add_argument("--division", choices=["closed", "open"], default="closed", help="the package's division; reports of the other stay out")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--check-out", type=Path, required=True)

    p = sub.add_parser("extract", help="extract a tar archive safely (no traversal, absolute paths, outward links or device files)")
    p.add_argument("archive", type=Path)
    p.add_argument("--dest", type=Path, required=True)

    p = sub.add_parser(
        "seal",
        help="check a dataset a one-off job of a benchmark's image made (the catalog's files are there) and write its md5 list for the verify stage",
    )
    p.add_argument("folder", type=Path)
    p.add_argument("--dataset", required=True, help="its catalog id (protocol made_in_image)")
    p.add_argument("--jobs", type=int, default=4, help="files hashed at once")

    p = sub.add_parser("fresh-run-folder", help="empty a run's folder before an attempt (nothing of an earlier attempt is resumed)")
    p.add_argument("folder", type=Path)
    p = sub.add_parser("merge-mllog", help="after a run: its processes' MLLOG files (mllog-parts/) into its result file, in time order")
    p.add_argument("result", type=Path)
    p = sub.add_parser("check-prepared", help="refuse a prepared tree that changed since it was assembled (stat only)")
    p.add_argument("prepared", type=Path)
    p = sub.add_parser("provenance", help="record what a run was made with (backend, image, host, GPUs, git commit, versions)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--scale", choices=list(Scale), required=True)
    p.add_argument("--launcher", required=True)
    p.add_argument("--image", default="")
    p.add_argument("--command", default="", dest="command_line", help="the run's command line")
    p.add_argument("--result", type=Path, help="the run log the job wrote: its sha256 is recorded")
    p.add_argument("--consumed", type=Path, nargs="*", default=[], help="what the run read (its inputs): their digests are recorded")
    p.add_argument("--node-checks", type=Path, help="the run's node-check folder: every attempt's verdict is recorded")
    p.add_argument("--config", default="", dest="config_json", help="the benchmark's resolved config (JSON, from the plan)")

    p = sub.add_parser("identity", help="write the campaign identity a benchmark's runs must share (results/<scale>/<benchmark>/identity.json)")
    p.add_argument("--json", required=True, dest="identity_json", help="the identity, as the plan makes it")
    p.add_argument("--out", type=Path, required=True)

    p = sub.add_parser(
        "preflight",
        help="every problem of a full-scale plan before anything is queued (one line each; exit 2 if any)",
        description="Checks the full-scale plan of the config for every benchmark given (default: the config's): the ruleset "
        "holds it, images pinned by digest, a real platform with its system description, credentials for data still to "
        "download, data the workflow does not fetch in place, free space for the runs' scratch areas. With --image or "
        "--platform: the checks of one train job (its job line runs them on the node).",
    )
    p.add_argument("--benchmark", action="append", default=[], help="a benchmark to check (repeatable; default: the config's benchmarks)")
    p.add_argument("--config", nargs="*", default=[], metavar="KEY=VALUE", help="the --config values Snakemake is given (e.g. launcher=pyxis)")
    p.add_argument("--configfile", type=Path, action="append", default=[], help="a config file Snakemake is given (--configfile), merged in order")
    p.add_argument("--image", help="one train job: the image reference it uses (name@sha256:...); none with the local launcher")
    p.add_argument("--platform", help="one train job: its submission.platform (the tiny tier's is refused)")

    p = sub.add_parser("system", help="the system under test: what its nodes have, for the plan and the submission's system JSON")
    system_sub = p.add_subparsers(dest="system_command", required=True)
    q = system_sub.add_parser("probe", help="read this node (lscpu, /proc/meminfo, nvidia-smi or rocm-smi) into config/systems/<name>.yaml")
    q.add_argument("--name", required=True, help="the system's name (submission.platform)")
    q.add_argument("--nodes", type=int, default=1, help="nodes of the system a run may span (every node like this one)")
    q.add_argument(
        "--nvlink-domain-nodes", type=int, default=1, help="nodes whose GPUs share one NVLink domain (18 on a GB200/GB300 NVL72 rack of 4-GPU nodes; default 1)"
    )
    q.add_argument("--out", type=Path, help="where to write it (default: config/systems/<name>.yaml)")
    p = sub.add_parser("size", help="global batch sizes a system can run, their RCPs, hyperparameters and walltime")
    p.add_argument("--benchmark", required=True)
    p.add_argument("--nodes", type=int, required=True)
    p.add_argument("--gpus-per-node", type=int, required=True)
    p.add_argument("--ruleset", default="latest", help="a training round (default: the benchmark's newest)")
    p.add_argument("--gbs", type=int, help="the global batch size to detail (default: the plan's, else the smallest RCP the system can make)")
    p.add_argument("--throughput", type=float, help="training samples per second per GPU (a measured first run), for the walltime")
    p.add_argument("--throughput-from", type=Path, metavar="RESULT", help="measure the throughput on a finished run's log made on this system")
    p.add_argument("--accelerator", help="the system's accelerator (H100, B200, MI300X or a model name), for the expected time to train from published results")
    p.add_argument("--gpu-memory-gib", type=float, help="memory of one GPU (GiB): a micro batch the GPU holds, where less than the reference's")
    p = sub.add_parser("compliance", help="official compliance check of one result file")
    # No type= on the positional: argparse would turn its SUPPRESS default into a path and hide --result.
    p.add_argument("result", nargs="?", default=argparse.SUPPRESS, help="the result file (or --result)")
    p.add_argument("--result", type=Path, dest="result", default=None, help="the result file (instead of the positional RESULT)")
    p.add_argument("--ruleset", required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--benchmark", help="workflow benchmark name: with --scale tiny, its tiny tier's declared open rules apply")
    p.add_argument("--scale", choices=list(Scale))
    p.add_argument("--seed", type=int, help="the run's seed: the log must be this run's (with --benchmark and --division)")
    p.add_argument("--division", choices=["closed", "open"], help="the run's division, which the log must name")
    p.add_argument("--provenance", type=Path, help="the run's provenance.json: the log must be the bytes its train job wrote")

    p = sub.add_parser("score", help="official time-to-train scores of any log folder")
    p.add_argument(
        "path",
        type=Path,
        help=(
            "a round's folder of organisations, an organisation folder, a benchmark folder of result_*.txt, workflow results/<benchmark>/,"
            " or a folder of logs (*.out, *.log, *.txt with :::MLLOG)"
        ),
    )
    p.add_argument("--ruleset", help="the round to score under (default: the one the folder's report.json records)")
    p.add_argument("--json", type=Path, dest="json_out")
    p.add_argument("--csv", type=Path, dest="csv_out")
    p.add_argument("--jobs", type=int, help="worker processes (default: all cores)")
    p.add_argument("--rcp-bypass", action="store_true", help="as the package checker's --rcp-bypass")

    p = sub.add_parser("power-sample", help="power logs of this node in the MLPerf Power format, beside a run, until --stop-file appears")
    p.add_argument("--out-dir", type=Path, required=True, help="the run's power/<result name>/ folder")
    p.add_argument("--node-index", type=int, help="k of node_<k>.txt (default: $SLURM_NODEID, else 0)")
    p.add_argument("--interval-ms", type=int, default=1000)
    p.add_argument("--gpu-command", help="command printing '[timestamp,] index, watts' per GPU ({interval_ms} is replaced); default nvidia-smi")
    p.add_argument("--node-command", help="command printing the node's watts, run every interval (instead of the GPUs' sum)")
    p.add_argument("--conversion-eff", type=float, help="logged as conversion_eff")
    p.add_argument("--stop-file", type=Path, help="stop when this file exists")

    p = sub.add_parser(
        "status",
        help="where a campaign stands: runs done/running/queued/failed, last eval, time left, shards, verdicts (reads only)",
        description="Read the campaign in --root (default: here) while or after Snakemake runs it, locally or under --profile slurm "
        "(squeue gives pending/running of the jobs Snakemake handed to SLURM). Writes nothing and takes no lock.",
    )
    p.add_argument("--config", nargs="*", default=[], metavar="KEY=VALUE", help="the --config values Snakemake was given (e.g. runs=3)")
    p.add_argument("--benchmark", action="append", default=[], help="show only this benchmark (repeatable; default: the config's benchmarks)")
    p.add_argument("--json", action="store_true", dest="as_json", help="JSON for scripts")
    p.add_argument("--watch", type=_positive_seconds, nargs="?", const=30.0, metavar="SECONDS", help="refresh every SECONDS (default 30) until interrupted")
    p.add_argument("--squeue", default="squeue", help="the squeue command to ask (default: squeue on PATH)")

    p = sub.add_parser(
        "campaign-gate",
        help="before a train job: end it, not started (exit 3), when its benchmark's set can no longer be valid (stop_when_doomed)",
    )
    p.add_argument("--benchmark", required=True)
    p.add_argument("--run", type=int, required=True, help="the run index of this job")
    p.add_argument("--config-file", type=Path, required=True, help="the running Snakemake's config (logs/<scale>/campaign_config.json)")

    p = sub.add_parser("report", help="time-to-train report of a benchmark's runs")
    p.add_argument("--benchmark", required=True)
    p.add_argument("--ruleset", required=True)
    p.add_argument("--division", choices=["closed", "open"], required=True)
    p.add_argument("--scale", choices=list(Scale), required=True)
    p.add_argument("--platform", required=True, help="system name the runs were made on")
    p.add_argument("--result", type=Path, action="append", default=[])
    p.add_argument("--compliance", type=Path, action="append", default=[])
    p.add_argument("--provenance", type=Path, action="append", default=[], help="provenance.json of each run (optional)")
    p.add_argument("--identity", type=Path, help="the campaign identity the runs must share (identity.json, written by the workflow)")
    p.add_argument("--out", type=Path, required=True)
    rehearse.add_parser(sub)
    steps = sorted(name for name in sub.choices if name not in PEOPLE_COMMANDS)
    parser.epilog = f"Also run by the workflow's rules (mlperf-wf COMMAND -h for each): {', '.join(steps)}."
    return parser


def _train(args: argparse.Namespace) -> None:
    from mlperf_wf.run.mllog_utils import Submission

    submission = Submission(org=args.org, platform=args.platform, division=args.division, status=args.status)
    cmd_train(args.benchmark, args.run, args.seed, args.data, args.input, args.result, args.ruleset, submission, args.threads, args.hyperparameters)


def _fresh_run_folder(args: argparse.Namespace) -> None:
    from mlperf_wf.run.run_folder import clear_for_new_attempt

    removed = clear_for_new_attempt(args.folder)
    print(f"{args.folder}: removed what an earlier attempt left: {', '.join(removed)}" if removed else f"{args.folder}: empty")


def _merge_mllog(args: argparse.Namespace) -> None:
    from mlperf_wf.run.mllog_parts import merge

    print(f"{args.result}: {merge(args.result)} lines, every writer's in time order")


COMMANDS: dict[str, Callable[[argparse.Namespace], int | None]] = {
    "mirror": lambda a: cmd_mirror(a.dataset, a.out),
    "download": lambda a: cmd_download(
        a.dataset, a.dest, a.uri, a.md5, a.url_list, a.jobs, HubOptions(a.endpoint, a.repository, a.repo_type, a.revision), a.source, a.expect
    ),
    "verify": lambda a: cmd_verify(a.folder, a.manifest, a.out, a.stamps, a.jobs),
    "preprocess": lambda a: cmd_preprocess(a.benchmark, a.scale, a.shard, a.input, a.out, a.preparation, a.verified),
    "assemble": lambda a: cmd_assemble(a.benchmark, a.scale, a.shards, a.out, a.preparation),
    "train": _train,
    "node-check": cmd_node_check,
    "bundle": lambda a: (
        cmd_bundle_export(a.benchmark, a.scale, a.out, a.configfile, a.wheels_from, a.squashfs)
        if a.bundle_command == "export"
        else cmd_bundle_import(a.bundle, a.images, a.docker, a.expect, a.sif)
    ),
    "check": lambda a: cmd_check(a.import_modules, a.configfile, a.profile),
    "config-files": lambda a: cmd_config_files(a.check),
    "plot": lambda a: cmd_plot(a.report, a.out_dir, a.reference_logs),
    "overview": lambda a: cmd_overview(a.report, a.figure, a.out),
    "summary": lambda a: cmd_summary(a.reports, a.package_check, a.csv_out, a.figure),
    "package": lambda a: cmd_package(a.reports, a.org, a.system, a.ruleset, a.division, a.out, a.check_out),
    "extract": lambda a: cmd_extract(a.archive, a.dest),
    "seal": lambda a: cmd_seal(a.dataset, a.folder, a.jobs),
    "fresh-run-folder": _fresh_run_folder,
    "merge-mllog": _merge_mllog,
    "check-prepared": lambda a: cmd_check_prepared(a.prepared),
    "provenance": lambda a: cmd_provenance(a.out, a.scale, a.launcher, a.image, a.command_line, a.result, a.consumed, a.node_checks, a.config_json),
    "identity": lambda a: cmd_identity(a.identity_json, a.out),
    "preflight": lambda a: cmd_preflight(a.benchmark, a.image, a.platform, a.config, a.configfile),
    "system": lambda a: cmd_system_probe(a.name, a.nodes, a.out, a.nvlink_domain_nodes),
    "size": lambda a: cmd_size(a.benchmark, a.nodes, a.gpus_per_node, a.ruleset, a.gbs, a.throughput, a.throughput_from, a.accelerator, a.gpu_memory_gib),
    "compliance": lambda a: cmd_compliance(a.result, a.ruleset, a.out, a.benchmark, a.scale, a.seed, a.division, a.provenance),
    "score": lambda a: cmd_score(a.path, a.ruleset, a.json_out, a.csv_out, a.jobs, a.rcp_bypass),
    "power-sample": lambda a: cmd_power_sample(a.out_dir, a.node_index, a.interval_ms, a.gpu_command, a.node_command, a.conversion_eff, a.stop_file),
    "status": lambda a: cmd_status(a.config, a.benchmark, a.as_json, a.watch, a.squeue),
    "campaign-gate": lambda a: cmd_campaign_gate(a.benchmark, a.run, a.config_file),
    "rehearse": rehearse.run,
    "report": lambda a: cmd_report(a.benchmark, a.ruleset, a.division, a.scale, a.platform, a.result, a.compliance, a.provenance, a.out, a.identity),
}
"""Each subcommand of ``build_parser`` and the function that runs it (its return value, if any, is the exit status)."""


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not Path(args.root).is_dir():
        print(f"mlperf-wf: error: --root {args.root}: no such folder (give the workflow folder)", file=sys.stderr)
        return 2
    caller_folder = os.getcwd()
    os.chdir(args.root)
    try:
        return _run_command(args)
    finally:
        os.chdir(caller_folder)  # main also runs in process (a rule's run: block, the tests): leave the caller where it was


def _run_command(args: argparse.Namespace) -> int:
    """Run the parsed subcommand; a user's mistake or a full disk is one line and an exit status, not a traceback."""
    try:
        if args.progress_fd is not None:
            from mlperf_wf import progress

            progress.to_fd(args.progress_fd)
        return COMMANDS[args.command](args) or 0
    except UserError as err:
        print(f"mlperf-wf: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `mlperf-wf status | head`: the reader left, which is not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as err:
        if err.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EIO):
            raise
        where = err.filename or "a file"
        print(f"mlperf-wf: error: {where}: {err.strerror}; nothing written so far is removed: free space (or fix the mount) and rerun", file=sys.stderr)
        return 1
